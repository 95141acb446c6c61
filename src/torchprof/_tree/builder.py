"""The layer tree: plain events in, one aggregated tree of modules, regions, ops and kernels out.

Pure Python on purpose (no torch, pandas or IPython): it is the part that has to be fast and
exactly right, and it is fed identically by a live capture and by a trace file.
"""

from __future__ import annotations

from typing import Any

from .._records import EventColumns, ModuleInfo, parse_module_range
from .._vocab import (
    BACKWARD_PREFIX,
    DEVICE_WITHOUT_OP,
    HOST_RANGE_KINDS,
    LAUNCHED_BEFORE,
    STEP_PREFIX,
    UNATTRIBUTED_BACKWARD,
    EventKind,
)
from . import flops as _flops
from .backward import ForwardIndex
from .finish import finish_tree
from .nesting import nest
from .nodes import KEY_DEVICE_WITHOUT_OP, KEY_LAUNCHED_BEFORE, KEY_UNATTRIBUTED, TAG_KERNEL, TAG_MODULE, TAG_REGION, Nodes
from .tree import Tree

OP, REGION, MODULE, RUNTIME, DEVICE, MEMORY = map(int, (
    EventKind.OP, EventKind.REGION, EventKind.MODULE, EventKind.RUNTIME, EventKind.DEVICE, EventKind.MEMORY))  # fmt: skip
_HOST = frozenset(int(k) for k in HOST_RANGE_KINDS)
_UNLAUNCHED_KEYS = {LAUNCHED_BEFORE: KEY_LAUNCHED_BEFORE, DEVICE_WITHOUT_OP: KEY_DEVICE_WITHOUT_OP}


class TreeBuilder:
    """Aggregates the events of one or more profiling cycles into one tree.

    Call :meth:`add` once per cycle (a schedule yields several), then :meth:`finish`. Raw events
    are not kept: memory grows with the number of distinct tree nodes, not with run length.
    """

    def __init__(
        self,
        label: str = "profile",
        modules: dict[str, ModuleInfo] | None = None,
        flops: bool = True,
        shapes: bool = True,
        memory: bool = False,
        cuda: bool = False,
    ) -> None:
        self.nodes = Nodes()
        self.root: int = self.nodes.add(-1, REGION, label, None, False, "")
        self.modules = modules if modules is not None else {}
        self.want_flops = flops
        self.want_shapes = shapes
        self.memory = memory
        self.cuda = cuda
        self.saw_shapes = False
        self.formula_errors: dict[str, int] = {}  # ops whose formula failed on their arguments
        self.steps: list[dict[str, Any]] = []
        self.peak = [0, 0]  # running peak of bytes allocated during the run, per (cpu, cuda)
        self._live = [0, 0]
        self.event_count = 0
        self.device_busy_ns = 0  # union of device intervals, summed over cycles
        self.device_window_ns = 0  # first device start to last device end, summed over cycles
        # Per distinct event name: (node key, module path or None, module type, starts backward).
        self._name_info: dict[str, tuple[str, str | None, str | None, bool]] = {}

    # -- per-name facts, computed once ------------------------------------------------------
    def _info(self, name: str, kind: int) -> tuple[str, str | None, str | None, bool]:
        info = self._name_info.get(name)
        if info is None:
            mod = parse_module_range(name) if kind == MODULE else None
            if mod is not None:
                info = (TAG_MODULE + mod[0], mod[0], mod[1], False)
            elif kind == REGION:
                info = (TAG_REGION + name, None, None, False)
            else:
                info = (name, None, None, name.startswith(BACKWARD_PREFIX))
            self._name_info[name] = info
        return info

    # -- one cycle ------------------------------------------------------------------------------
    def add(self, ev: EventColumns) -> None:
        """Fold one cycle of events into the tree, in four stages:

        1. nesting: which range each event sits in (given by the live profiler's own tree, else
           found by time per thread, :func:`~torchprof._tree.nesting.nest`);
        2. placement (:meth:`_place`): each range lands in a node, with backward work moved to
           the layer that ran its forward op;
        3. FLOP counting (:meth:`_count_flops`) of the ops placed;
        4. memory (:meth:`_add_memory`) and device correlation (:meth:`_add_device`): allocations
           and kernels go to the node of the range they belong to.

        Cost: O(1) amortised work per event after at most one sort (near linear: profilers emit
        events almost in order); arguments are read only for ops that have a FLOP formula and for
        the first call of a node when shapes are kept.
        """
        n = len(ev)
        self.event_count += n
        if n == 0:
            return
        kinds = ev.kind
        if ev.parent is not None:
            parent_ev = ev.parent
            order: Any = range(n) if DEVICE not in kinds else [i for i, k in enumerate(kinds) if k != DEVICE]
        else:
            order, parent_ev = nest(ev)
        node_of, runtime_by_corr, flop_ops, mem_events = self._place(ev, order, parent_ev)
        self._count_flops(ev, flop_ops, node_of)
        self._add_memory(ev, mem_events, node_of)
        self._add_device(ev, node_of, runtime_by_corr)

    def _place(self, ev: EventColumns, order: Any, parent_ev: list[int]) -> tuple[list[int], dict[int, int], list[int], list[int]]:
        """Stage 2: put every range in its node; returns the node of each event, the runtime
        call of each device correlation id, the ops to count FLOPs of, and the memory events.

        Invariants. Events arrive after the range around them and every backward op after the
        forward op that created it. Each range lands in the node ``(parent's node, name)``, so
        repeated calls aggregate and the number of nodes stays small. A range that starts backward
        work (``evaluate_function: XBackward0``, or an op carrying a forward-thread id) lands under
        the layer that ran its forward op (:class:`~torchprof._tree.backward.ForwardIndex`)
        instead of where the autograd engine ran it; unmatched backward work goes to an
        "(backward, no module)" node at its own place. Self time of a range is its duration minus
        the parts of its direct children that lie inside it, so self times partition the covered
        time and ``total = self + children``.
        """
        nodes = self.nodes
        n = len(ev)
        names, kinds, starts, ends, tids = ev.name, ev.kind, ev.start, ev.end, ev.tid
        seq_of = ev.seq.__getitem__ if ev.seq is not None else ev.seq_of
        assert seq_of is not None
        fwd_tids = ev.fwd_tid
        fwd_tid_known = any(fwd_tids)  # traces carry it; the live tree marks backward by name only
        node_of = [-1] * n
        child_ns = [0] * n
        forward = ForwardIndex()
        runtime_by_corr: dict[int, int] = {}
        flop_ops: list[int] = []
        mem_events: list[int] = []
        unattributed: dict[int, int] = {}
        root = self.root
        n_kind, n_bwd, n_owner, n_children, n_covered = nodes.kind, nodes.bwd, nodes.owner, nodes.children, nodes.covered
        n_calls, n_cpu = nodes.calls, nodes.cpu_ns
        formulas = _flops.FORMULAS if self.want_flops else {}
        name_info = self._name_info
        info_of = self._info

        for i in order:
            p = parent_ev[i]
            k = kinds[i]
            if k == MEMORY:
                mem_events.append(i)
                node_of[i] = node_of[p] if p >= 0 else root
                continue
            s = starts[i]
            e = ends[i]
            if p >= 0:
                pe = ends[p]
                child_ns[p] += (e if e < pe else pe) - s
                pnode = node_of[p]
            else:
                pnode = root
            name = names[i]
            info = name_info.get(name)
            if info is None:
                info = info_of(name, k)
            key, mpath, mtype, bwd_name = info
            bwd_root = (bwd_name or (fwd_tid_known and k == OP and fwd_tids[i] > 0)) and not n_bwd[pnode]
            if bwd_root:
                pnode = self._backward_target(pnode, forward.owner(seq_of(i), fwd_tids[i], tids[i]), unattributed)
            node = n_children[pnode].get(key, -1)
            if node < 0:
                node = self._new_node(ev, i, pnode, k, mpath, mtype, bwd_root, key)
            node_of[i] = node
            n_calls[node] += 1
            n_cpu[node] += e - s  # child time is subtracted below, once all children are known
            if k == OP:
                if n_kind[pnode] != OP and not n_bwd[node] and not (fwd_tid_known and fwd_tids[i]):
                    seq = seq_of(i)
                    if seq >= 0:
                        forward.add(tids[i], seq, n_owner[node])
                if name in formulas and not n_covered[pnode]:
                    flop_ops.append(i)
            elif k == RUNTIME:
                c = ev.corr[i]
                if c:
                    runtime_by_corr[c] = p
            elif k == REGION and name.startswith(STEP_PREFIX):
                self.steps.append({"step": _step_number(name[len(STEP_PREFIX):]), "start_ns": s, "wall_us": (e - s) / 1000.0, "node": node})

        # Child time comes off each parent's self time (a second pass: only now are all known).
        for i, c in enumerate(child_ns):
            if c:
                n_cpu[node_of[i]] -= c
        return node_of, runtime_by_corr, flop_ops, mem_events

    def _backward_target(self, pnode: int, owner: int, unattributed: dict[int, int]) -> int:
        """Where a backward root goes: its forward layer, else an "(backward, no module)" node."""
        if owner >= 0:
            return owner
        nodes = self.nodes
        target = unattributed.get(pnode, -1)
        if target < 0:
            target = nodes.children[pnode].get(KEY_UNATTRIBUTED, -1)
            if target < 0:
                target = nodes.add(pnode, REGION, UNATTRIBUTED_BACKWARD, None, True, KEY_UNATTRIBUTED)
            unattributed[pnode] = target
        nodes.calls[target] += 1
        return target

    def _new_node(self, ev: EventColumns, i: int, pnode: int, k: int, mpath: str | None, mtype: str | None,
                  bwd_root: bool, key: str) -> int:  # fmt: skip
        nodes = self.nodes
        if mpath is not None:
            # A module can run inside backward (activation checkpointing recomputes it).
            node = nodes.add(pnode, MODULE, mpath, mtype, nodes.bwd[pnode], key)
        else:
            node = nodes.add(pnode, k, ev.name[i], None, bwd_root or nodes.bwd[pnode], key)
        if self.want_shapes and k != RUNTIME:
            args = ev.inputs(i)
            nodes.shapes[node] = args[0] if args else None
        if ev.frame is not None:
            nodes.source[node] = ev.frame[i]
        return node

    def _count_flops(self, ev: EventColumns, ops: list[int], node_of: list[int]) -> None:
        """Stage 3: FLOPs and MACs of the outermost ops that have a formula (the ops they call
        are covered by them), from their recorded shapes; a formula that cannot read its
        arguments makes the op's FLOPs unknown (listed), never zero."""
        if not self.want_flops:
            return
        nodes = self.nodes
        formulas = _flops.FORMULAS
        for i in ops:
            args = ev.inputs(i)
            if args is None or args[0] is None:
                continue
            self.saw_shapes = True
            name = ev.name[i]
            node = node_of[i]
            concrete = args[1]
            if name in _flops.LIST_ARGS and _flops.lacks_list_args(name, concrete):
                concrete = self._complete_args(ev, i, name, node, concrete)
            try:
                macs, fl = formulas[name](args[0], concrete)
            except Exception:  # noqa: BLE001 - a formula that cannot read these args: unknown, not zero
                self.formula_errors[name] = self.formula_errors.get(name, 0) + 1
                macs = fl = 0
            nodes.macs[node] += macs
            nodes.flops[node] += fl
        if not self.saw_shapes:
            # Shapes were recorded even if no op here has a formula: FLOPs are then known zero.
            kinds = ev.kind
            self.saw_shapes = any(kinds[i] == OP and ev.inputs(i) is not None for i in range(min(len(ev), 64)))

    def _complete_args(self, ev: EventColumns, i: int, name: str, node: int, concrete: Any) -> Any:
        """Arguments the live profiler did not keep: from the layer that ran the op if it is a
        convolution or pooling module and knows them all (a convolution run without grad mode
        cannot tell which gradients its backward computes), else from the slow complete record."""
        nodes = self.nodes
        m = nodes.nearest_module(nodes.parent[node])
        if m >= 0:
            info = self.modules.get(nodes.label[m])
            if info is not None and info.op_args:
                filled = _flops.args_from_layer(name, concrete, info.op_args)
                if filled is not None:
                    if not _flops.lacks_list_args(name, filled) or ev.full_concrete is None:
                        return filled
                    concrete = filled
        if ev.full_concrete is not None:
            full = ev.full_concrete(i)
            if full is not None:
                return full
        return concrete

    def _add_memory(self, ev: EventColumns, mem_events: list[int], node_of: list[int]) -> None:
        """Stage 4a: each allocation or free counts in the node of the range it happened in."""
        if not mem_events:
            return
        self.memory = True
        cpu_mem, cuda_mem = self.nodes.cpu_mem, self.nodes.cuda_mem
        nbytes, on_cuda = ev.nbytes, ev.on_cuda
        totals = ev.mem_total if len(ev.mem_total) == len(ev) else None
        peak = self.peak
        for i in mem_events:
            b = nbytes[i]
            dev = 1 if on_cuda[i] else 0
            if dev:
                cuda_mem[node_of[i]] += b
            else:
                cpu_mem[node_of[i]] += b
            # The peak is the allocator's own running total where the source records it;
            # otherwise the running sum of what this profile saw allocated.
            if totals is not None:
                live = totals[i]
            else:
                self._live[dev] += b
                live = self._live[dev]
            if live > peak[dev]:
                peak[dev] = live

    def _add_device(self, ev: EventColumns, node_of: list[int], runtime_by_corr: dict[int, int]) -> None:
        """Stage 4b: kernels, memcpys and memsets go under the op that launched them: the op
        around the runtime call with the same correlation id, else the op whose id the kernel
        carries (External id). Work no op of the window launched goes to a labelled row under
        the root (:meth:`_unlaunched_row`): launched before the window when its correlation id
        is older than every launch recorded or it ran before the first host event, else "no
        launching op". Also adds the cycle's device busy time."""
        device = [i for i, k in enumerate(ev.kind) if k == DEVICE]
        if not device:
            return
        self.cuda = True
        nodes = self.nodes
        corrs, links = ev.corr, ev.link
        op_by_ext: dict[int, int] | None = None
        first_launch = min(runtime_by_corr) if runtime_by_corr else None
        host_start = min((s for s, k in zip(ev.start, ev.kind) if k in _HOST), default=None)
        for i in device:
            c = corrs[i]
            launcher = runtime_by_corr.get(c, -2) if c else -2
            if launcher >= 0:
                pnode = node_of[launcher]
            else:
                if op_by_ext is None:
                    op_by_ext = {x: j for j, x in enumerate(ev.ext_id) if x and ev.kind[j] in (OP, REGION, MODULE) and node_of[j] >= 0}
                j = op_by_ext.get(links[i], -1) if links[i] else -1
                if j >= 0:
                    pnode = node_of[j]
                elif launcher == -1:  # a runtime call outside every range
                    pnode = self._unlaunched_row(DEVICE_WITHOUT_OP)
                elif (host_start is not None and ev.start[i] < host_start) or (
                        c and first_launch is not None and c < first_launch):  # fmt: skip
                    # Correlation ids grow with every launch: one older than every launch seen
                    # was issued before the window opened.
                    pnode = self._unlaunched_row(LAUNCHED_BEFORE)
                else:
                    pnode = self._unlaunched_row(DEVICE_WITHOUT_OP)
            name = ev.name[i]
            key = TAG_KERNEL + name
            node = nodes.children[pnode].get(key, -1)
            if node < 0:
                node = nodes.add(pnode, DEVICE, name, None, nodes.bwd[pnode], key)
            nodes.calls[node] += 1
            nodes.cuda_ns[node] += ev.end[i] - ev.start[i]
        self._add_busy(ev, device)

    def _unlaunched_row(self, label: str) -> int:
        """The region row under the root that holds device work of no op (one per label)."""
        nodes = self.nodes
        key = _UNLAUNCHED_KEYS[label]
        node = nodes.children[self.root].get(key, -1)
        if node < 0:
            node = nodes.add(self.root, REGION, label, None, False, key)
        nodes.calls[node] += 1
        return node

    def _add_busy(self, ev: EventColumns, device: list[int]) -> None:
        """The cycle's device busy time (the union of its device intervals over every stream and
        device) and its window (first device start to last device end), both clipped to the
        profiled span where the source records one. Sorting the cycle's intervals costs
        O(k log k) for k device events; nothing is kept but two sums, so the gaps between the
        cycles of a schedule are not counted as idle."""
        starts, ends = ev.start, ev.end
        spans = sorted((starts[i], ends[i]) for i in device)
        if ev.span is not None:
            lo, hi = ev.span
            spans = [(max(s, lo), min(e, hi)) for s, e in spans if min(e, hi) > max(s, lo)]
        if not spans:
            return
        busy = 0
        cur_s, cur_e = spans[0]
        last = cur_e
        for s, e in spans:
            if s > cur_e:  # a gap: every stream was idle
                busy += cur_e - cur_s
                cur_s, cur_e = s, e
            elif e > cur_e:
                cur_e = e
            if e > last:
                last = e
        busy += cur_e - cur_s
        self.device_busy_ns += busy
        self.device_window_ns += last - spans[0][0]

    # -- the finished tree ----------------------------------------------------------------------
    def finish(self) -> Tree:
        """The tree as columns in pre-order (see :func:`~torchprof._tree.finish.finish_tree`)."""
        return finish_tree(self)


def _step_number(text: str) -> int | str:
    """``ProfilerStep#12`` -> 12 (so steps sort numerically); anything else stays text."""
    return int(text) if text.isdigit() else text
