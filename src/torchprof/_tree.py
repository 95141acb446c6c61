"""The layer tree: plain events in, one aggregated tree of modules, regions, ops and kernels out.

Pure Python on purpose (no torch, pandas or IPython): it is the part that has to be fast and
exactly right, and it is fed identically by a live capture and by a trace file.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any

from . import _flops
from ._records import (
    BACKWARD_PREFIX,
    DEVICE,
    MEMORY,
    MODULE,
    OP,
    PYFRAME,
    REGION,
    RUNTIME,
    EventColumns,
    ModuleInfo,
    is_user_frame,
    parse_module_range,
)

KIND_NAMES = ("op", "region", "module", "op", "kernel")
UNATTRIBUTED_BACKWARD = "(backward, no module)"
STEP_PREFIX = "ProfilerStep#"

# Keys of a node's children. Ops are keyed by their bare name (the common case, no string work);
# other kinds get a one-character tag so a region, a module and an op of the same name stay apart.
_TAG_MODULE = "\x01"
_TAG_REGION = "\x02"
_TAG_KERNEL = "\x03"
_KEY_UNATTRIBUTED = "\x04"

#: Columns of the finished tree, in DataFrame order. Units are in the names (_us, _mem = bytes).
COLUMNS = (
    "path", "name", "kind", "type", "parent", "depth", "calls",
    "self_cpu_us", "cpu_us", "self_cuda_us", "cuda_us",
    "bwd_self_cpu_us", "bwd_cpu_us", "bwd_self_cuda_us", "bwd_cuda_us",
    "self_cpu_mem", "cpu_mem", "self_cuda_mem", "cuda_mem",
    "params", "macs", "flops", "input_shapes", "source",
    "layer_self_cpu_us", "layer_self_cuda_us", "layer_bwd_self_cpu_us", "layer_bwd_self_cuda_us",
    "is_backward",
)  # fmt: skip


@dataclass
class Tree:
    """A finished profile tree, column-wise, in pre-order (parent before children, siblings by
    descending ``cpu_us``). Row 0 is the root; ``parent_index[i]`` is -1 for it."""

    columns: dict[str, list[Any]]
    parent_index: list[int]
    unsupported_ops: dict[str, int]
    steps: list[dict[str, Any]]
    peak_cpu_mem: float
    peak_cuda_mem: float
    has_cuda: bool
    has_memory: bool
    has_flops: bool
    event_count: int

    def __len__(self) -> int:
        return len(self.parent_index)


@dataclass
class _Nodes:
    """The growing tree while events arrive: one list per field, node id = index."""

    parent: list[int] = field(default_factory=list)
    kind: list[int] = field(default_factory=list)
    label: list[str] = field(default_factory=list)
    type: list[str | None] = field(default_factory=list)
    bwd: list[bool] = field(default_factory=list)
    owner: list[int] = field(default_factory=list)
    """Nearest module (or region inside a module) at or above the node; -1 for none."""
    covered: list[bool] = field(default_factory=list)
    """True when this node or an ancestor op has a FLOP formula (inner ops are not re-counted)."""
    children: list[dict[str, int]] = field(default_factory=list)
    calls: list[int] = field(default_factory=list)
    cpu_ns: list[int] = field(default_factory=list)
    cuda_ns: list[int] = field(default_factory=list)
    cpu_mem: list[int] = field(default_factory=list)
    cuda_mem: list[int] = field(default_factory=list)
    macs: list[int] = field(default_factory=list)
    flops: list[int] = field(default_factory=list)
    shapes: list[Any] = field(default_factory=list)
    source: list[str | None] = field(default_factory=list)

    def add(self, parent: int, kind: int, label: str, type_: str | None, bwd: bool, key: str) -> int:
        nid = len(self.parent)
        self.parent.append(parent)
        self.kind.append(kind)
        self.label.append(label)
        self.type.append(type_)
        self.bwd.append(bwd)
        if parent < 0:
            owner, covered = -1, False
        else:
            # Backward work is attributed to the nearest layer that ran the forward op: a
            # module, or a user region (not an iteration marker such as ProfilerStep#3).
            is_layer = kind == MODULE or (kind == REGION and not label.startswith(STEP_PREFIX))
            owner = nid if is_layer and not bwd else self.owner[parent]
            covered = self.covered[parent] or (kind == OP and label in _flops.FORMULAS)
            self.children[parent][key] = nid
        self.owner.append(owner)
        self.covered.append(covered)
        self.children.append({})
        for column in (self.calls, self.cpu_ns, self.cuda_ns, self.cpu_mem, self.cuda_mem, self.macs, self.flops):
            column.append(0)
        self.shapes.append(None)
        self.source.append(None)
        return nid


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
        self.nodes = _Nodes()
        self.root = self.nodes.add(-1, REGION, label, None, False, "")
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
        # Per distinct event name: (node key, module path or None, module type, starts backward).
        self._name_info: dict[str, tuple[str, str | None, str | None, bool]] = {}

    # -- per-name facts, computed once ------------------------------------------------------
    def _info(self, name: str, kind: int) -> tuple[str, str | None, str | None, bool]:
        info = self._name_info.get(name)
        if info is None:
            mod = parse_module_range(name) if kind == MODULE else None
            if mod is not None:
                info = (_TAG_MODULE + mod[0], mod[0], mod[1], False)
            elif kind == REGION:
                info = (_TAG_REGION + name, None, None, False)
            else:
                info = (name, None, None, name.startswith(BACKWARD_PREFIX))
            self._name_info[name] = info
        return info

    # -- one cycle ------------------------------------------------------------------------------
    def add(self, ev: EventColumns) -> None:
        """Fold one cycle of events into the tree.

        Algorithm. CPU ranges and memory events are visited once, each after the range around it
        (on its thread) and every backward op after the forward op that created it: either in
        the pre-order the source provides (``ev.parent`` set: the live profiler's own tree), or
        in order of start time with the longer range first on ties, where one stack per thread
        finds each range's parent (the top of its thread's stack once ranges that ended before
        it started are popped). Each range lands in the node ``(parent's node, name)``, so
        repeated calls aggregate and the number of nodes stays small.

        Backward: a range that starts a backward computation (``evaluate_function: XBackward0``, or
        any op carrying a forward-thread id) is placed under the module that ran the forward op
        with the same autograd sequence number (the latest such op: sequence numbers only grow),
        instead of where the autograd engine ran it. Unmatched backward work goes to an
        "(backward, no module)" node at its own place.

        Self time of a range is its duration minus the parts of its direct children that lie
        inside it, so self times partition the covered time and ``total = self + children``.

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
            order = range(n) if DEVICE not in kinds else [i for i, k in enumerate(kinds) if k != DEVICE]
        else:
            order, parent_ev = _nest(ev)
        self._fold(ev, order, parent_ev)

    def _fold(self, ev: EventColumns, order: Any, parent_ev: list[int]) -> None:
        nodes = self.nodes
        n = len(ev)
        names, kinds, starts, ends = ev.name, ev.kind, ev.start, ev.end
        seq_of = ev.seq.__getitem__ if ev.seq is not None else ev.seq_of
        fwd_tids = ev.fwd_tid
        fwd_tid_known = any(fwd_tids)  # traces carry it; the live tree marks backward by name only
        node_of = [-1] * n
        child_ns = [0] * n
        # Forward ops that sit directly in a layer, by sequence number, in time order. Sequence
        # numbers only grow, and every autograd node an op creates (its nested ops included) gets
        # a number from that op's own up to the next layer-level op's: so the latest layer-level
        # op at or below a backward op's number ran its forward (exact match first, then bisect).
        fwd_owner: dict[int, int] = {}
        fwd_seqs: list[int] = []
        fwd_owners: list[int] = []
        ordered = True
        runtime_by_corr: dict[int, int] = {}
        unattributed: dict[int, int] = {}
        root = self.root
        n_parent, n_kind, n_bwd, n_owner, n_children = nodes.parent, nodes.kind, nodes.bwd, nodes.owner, nodes.children
        n_calls, n_cpu, n_covered = nodes.calls, nodes.cpu_ns, nodes.covered
        formulas = _flops.FORMULAS if self.want_flops else {}
        inputs_of = ev.inputs
        want_shapes = self.want_shapes
        name_info = self._name_info
        info_of = self._info
        mem_events: list[int] = []
        frames = ev.frame

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
            if (bwd_name or fwd_tid_known and k == OP and fwd_tids[i] > 0) and not n_bwd[pnode]:
                bwd_root = True
                target = self._forward_owner(seq_of(i), fwd_owner, fwd_seqs, fwd_owners)
                if target < 0:
                    target = unattributed.get(pnode, -1)
                    if target < 0:
                        target = n_children[pnode].get(_KEY_UNATTRIBUTED, -1)
                        if target < 0:
                            target = nodes.add(pnode, REGION, UNATTRIBUTED_BACKWARD, None, True, _KEY_UNATTRIBUTED)
                        unattributed[pnode] = target
                    n_calls[target] += 1
                pnode = target
            else:
                bwd_root = False
            node = n_children[pnode].get(key, -1)
            if node < 0:
                if mpath is not None:
                    # A module can run inside backward (activation checkpointing recomputes it).
                    node = nodes.add(pnode, MODULE, mpath, mtype, n_bwd[pnode], key)
                else:
                    node = nodes.add(pnode, k, name, None, bwd_root or n_bwd[pnode], key)
                if want_shapes and k != RUNTIME:
                    args = inputs_of(i)
                    nodes.shapes[node] = args[0] if args else None
                if frames is not None:
                    nodes.source[node] = frames[i]
            node_of[i] = node
            n_calls[node] += 1
            n_cpu[node] += e - s  # child time is subtracted below, once all children are known
            if k == OP:
                if n_kind[pnode] != OP and not n_bwd[node] and not (fwd_tid_known and fwd_tids[i]):
                    seq = seq_of(i)
                    if seq >= 0:
                        owner = n_owner[node]
                        fwd_owner[seq] = owner
                        if fwd_seqs and seq < fwd_seqs[-1]:
                            fwd_seqs.clear()  # several forward threads: exact matches only
                            fwd_owners.clear()
                            ordered = False
                        if ordered:
                            fwd_seqs.append(seq)
                            fwd_owners.append(owner)
                if name in formulas and not n_covered[pnode]:
                    args = inputs_of(i)
                    if args is not None and args[0] is not None:
                        self.saw_shapes = True
                        concrete = args[1]
                        if name in _flops.LIST_ARGS and _flops.lacks_list_args(name, concrete):
                            concrete = self._complete_args(ev, i, name, node, concrete)
                        try:
                            macs, fl = formulas[name](args[0], concrete)
                        except Exception:  # a formula that cannot read these args: unknown, not zero
                            self.formula_errors[name] = self.formula_errors.get(name, 0) + 1
                            macs = fl = 0
                        nodes.macs[node] += macs
                        nodes.flops[node] += fl
                elif not self.saw_shapes and formulas and inputs_of(i) is not None:
                    self.saw_shapes = True  # shapes were recorded, even if nothing here has a formula
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

        self._add_memory(ev, mem_events, node_of)
        self._add_device(ev, node_of, runtime_by_corr)

    @staticmethod
    def _forward_owner(seq: int, exact: dict[int, int], seqs: list[int], owners: list[int]) -> int:
        if seq < 0:
            return -1
        owner = exact.get(seq)
        if owner is not None:
            return owner
        j = bisect_right(seqs, seq) - 1
        return owners[j] if j >= 0 else -1

    def _complete_args(self, ev: EventColumns, i: int, name: str, node: int, concrete: Any) -> Any:
        """Arguments the live profiler did not keep: from the layer that ran the op if it is a
        convolution or pooling module and knows them all (a convolution run without grad mode
        cannot tell which gradients its backward computes), else from the slow complete record."""
        nodes = self.nodes
        m = nodes.parent[node]
        while m >= 0 and nodes.kind[m] != MODULE:
            m = nodes.parent[m]
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
        """Kernels, memcpys and memsets go under the op that launched them: the op around the
        runtime call with the same correlation id, else the op whose id the kernel carries."""
        device = [i for i, k in enumerate(ev.kind) if k == DEVICE]
        if not device:
            return
        self.cuda = True
        nodes = self.nodes
        op_by_ext: dict[int, int] | None = None
        for i in device:
            launcher = runtime_by_corr.get(ev.corr[i], -2) if ev.corr[i] else -2
            if launcher >= 0:
                pnode = node_of[launcher]
            elif launcher == -1:  # a runtime call outside any range
                pnode = self.root
            else:
                if op_by_ext is None:
                    op_by_ext = {x: j for j, x in enumerate(ev.ext_id) if x and ev.kind[j] <= MODULE and node_of[j] >= 0}
                j = op_by_ext.get(ev.link[i], -1) if ev.link[i] else -1
                pnode = node_of[j] if j >= 0 else self.root
            name = ev.name[i]
            key = _TAG_KERNEL + name
            node = nodes.children[pnode].get(key, -1)
            if node < 0:
                node = nodes.add(pnode, DEVICE, name, None, nodes.bwd[pnode], key)
            nodes.calls[node] += 1
            nodes.cuda_ns[node] += ev.end[i] - ev.start[i]

    # -- the finished tree ----------------------------------------------------------------------
    def finish(self) -> Tree:
        nodes = self.nodes
        count = len(nodes.parent)
        parent = nodes.parent
        has_flops = self.want_flops and self.saw_shapes

        # Totals: children are always created after their parent, so a reverse sweep over node
        # ids sees every child before its parent.
        tot = {name: list(getattr(nodes, name)) for name in ("cpu_ns", "cuda_ns", "cpu_mem", "cuda_mem", "macs", "flops")}
        bwd_self_cpu = [c if b else 0 for c, b in zip(nodes.cpu_ns, nodes.bwd)]
        bwd_self_cuda = [c if b else 0 for c, b in zip(nodes.cuda_ns, nodes.bwd)]
        bwd_cpu, bwd_cuda = list(bwd_self_cpu), list(bwd_self_cuda)
        layer_cpu = [0] * count  # total time of op/kernel children, folded into a layer's self time
        layer_cuda = [0] * count
        layer_bwd_cpu = [0] * count  # ... and the backward part of it
        layer_bwd_cuda = [0] * count
        tot_cpu, tot_cuda = tot["cpu_ns"], tot["cuda_ns"]
        kind = nodes.kind
        for nid in range(count - 1, 0, -1):
            p = parent[nid]
            for col in tot.values():
                col[p] += col[nid]
            bwd_cpu[p] += bwd_cpu[nid]
            bwd_cuda[p] += bwd_cuda[nid]
            if kind[nid] not in (MODULE, REGION):
                layer_cpu[p] += tot_cpu[nid]
                layer_cuda[p] += tot_cuda[nid]
                layer_bwd_cpu[p] += bwd_cpu[nid]
                layer_bwd_cuda[p] += bwd_cuda[nid]

        order, depth = self._preorder(tot_cpu, tot_cuda)
        paths, names = self._paths(order)
        unsupported = self._unsupported() if has_flops else {}

        params_of = self._params()
        cols: dict[str, list[Any]] = {c: [] for c in COLUMNS}
        new_index = {nid: row for row, nid in enumerate(order)}
        parent_index = [new_index[parent[nid]] if parent[nid] >= 0 else -1 for nid in order]
        nan = float("nan")
        us = 1000.0
        for nid in order:
            k = kind[nid]
            is_layer = k in (MODULE, REGION)
            cols["path"].append(paths[nid])
            cols["name"].append(names[nid])
            cols["kind"].append(KIND_NAMES[k])
            cols["type"].append(nodes.type[nid])
            cols["parent"].append(paths[parent[nid]] if parent[nid] >= 0 else None)
            cols["depth"].append(depth[nid])
            cols["calls"].append(nodes.calls[nid] if nid != self.root else 1)
            cols["self_cpu_us"].append(nodes.cpu_ns[nid] / us)
            cols["cpu_us"].append(tot_cpu[nid] / us)
            cols["bwd_self_cpu_us"].append(bwd_self_cpu[nid] / us)
            cols["bwd_cpu_us"].append(bwd_cpu[nid] / us)
            cols["layer_self_cpu_us"].append((nodes.cpu_ns[nid] + layer_cpu[nid]) / us if is_layer else nodes.cpu_ns[nid] / us)
            cols["layer_bwd_self_cpu_us"].append((bwd_self_cpu[nid] + (layer_bwd_cpu[nid] if is_layer else 0)) / us)
            cols["is_backward"].append(nodes.bwd[nid])
            if self.cuda:
                cols["self_cuda_us"].append(nodes.cuda_ns[nid] / us)
                cols["cuda_us"].append(tot_cuda[nid] / us)
                cols["bwd_self_cuda_us"].append(bwd_self_cuda[nid] / us)
                cols["bwd_cuda_us"].append(bwd_cuda[nid] / us)
                cols["layer_self_cuda_us"].append((nodes.cuda_ns[nid] + layer_cuda[nid]) / us if is_layer else nodes.cuda_ns[nid] / us)
                cols["layer_bwd_self_cuda_us"].append((bwd_self_cuda[nid] + (layer_bwd_cuda[nid] if is_layer else 0)) / us)
            else:
                for c in ("self_cuda_us", "cuda_us", "bwd_self_cuda_us", "bwd_cuda_us", "layer_self_cuda_us", "layer_bwd_self_cuda_us"):
                    cols[c].append(nan)
            if self.memory:
                cols["self_cpu_mem"].append(float(nodes.cpu_mem[nid]))
                cols["cpu_mem"].append(float(tot["cpu_mem"][nid]))
                cols["self_cuda_mem"].append(float(nodes.cuda_mem[nid]))
                cols["cuda_mem"].append(float(tot["cuda_mem"][nid]))
            else:
                for c in ("self_cpu_mem", "cpu_mem", "self_cuda_mem", "cuda_mem"):
                    cols[c].append(nan)
            cols["params"].append(params_of(nid))
            if has_flops:
                cols["macs"].append(float(tot["macs"][nid]))
                cols["flops"].append(float(tot["flops"][nid]))
            else:
                cols["macs"].append(nan)
                cols["flops"].append(nan)
            cols["input_shapes"].append(_shape_text(nodes.shapes[nid]))
            cols["source"].append(nodes.source[nid])

        steps = [
            {"step": s["step"], "wall_us": s["wall_us"], "cpu_us": tot_cpu[s["node"]] / us,
             "cuda_us": tot_cuda[s["node"]] / us if self.cuda else nan,
             "bwd_cpu_us": bwd_cpu[s["node"]] / us}
            for s in self.steps
        ]  # fmt: skip
        return Tree(
            columns=cols,
            parent_index=parent_index,
            unsupported_ops=unsupported,
            steps=steps,
            peak_cpu_mem=float(self.peak[0]) if self.memory else nan,
            peak_cuda_mem=float(self.peak[1]) if self.memory and self.cuda else nan,
            has_cuda=self.cuda,
            has_memory=self.memory,
            has_flops=has_flops,
            event_count=self.event_count,
        )

    def _preorder(self, tot_cpu: list[int], tot_cuda: list[int]) -> tuple[list[int], list[int]]:
        """Pre-order with siblings by descending total CPU time (then CUDA time, then label)."""
        nodes = self.nodes
        depth = [0] * len(nodes.parent)
        order: list[int] = []
        stack = [self.root]
        while stack:
            nid = stack.pop()
            order.append(nid)
            kids = list(nodes.children[nid].values())
            if kids:
                kids.sort(key=lambda c: (-tot_cpu[c], -tot_cuda[c], nodes.label[c]))
                d = depth[nid] + 1
                for c in kids:
                    depth[c] = d
                stack.extend(reversed(kids))  # so the largest is popped first
        return order, depth

    def _paths(self, order: list[int]) -> tuple[dict[int, str], dict[int, str]]:
        """Unique row keys. Modules keep their dotted ``named_modules`` path (``ResNet.layer1.0``);
        anything else is ``<parent path>/<name>``; children of the root drop the root's label."""
        nodes = self.nodes
        paths: dict[int, str] = {}
        names: dict[int, str] = {}
        context: dict[int, str] = {}  # prefix before a module path (non-empty below a region/op)
        taken: set[str] = set()
        for nid in order:
            p = nodes.parent[nid]
            label = nodes.label[nid]
            if p < 0:
                path, name = label, label
                context[nid] = ""
            elif nodes.kind[nid] == MODULE:
                ctx = context[p] if nodes.kind[p] == MODULE else ("" if p == self.root else paths[p] + "/")
                context[nid] = ctx
                path = ctx + label
                parent_label = nodes.label[p]
                if nodes.kind[p] == MODULE and label.startswith(parent_label + "."):
                    name = label[len(parent_label) + 1 :]
                else:
                    name = label
            else:
                path = label if p == self.root else paths[p] + "/" + label
                name = label
            if path in taken:
                base, n = path, 2
                while f"{base} #{n}" in taken:
                    n += 1
                path = f"{base} #{n}"
            taken.add(path)
            paths[nid] = path
            names[nid] = name
        return paths, names

    def _unsupported(self) -> dict[str, int]:
        """Ops that have no formula, are not known to cost no FLOPs, are not inside an op that was
        counted and have no such op below them either (a leaf, or an op that only calls free ops,
        like a custom op computing in numpy), and ops whose formula could not read their
        arguments: their FLOPs are unknown, not zero. Autograd nodes (``AddBackward0``) count as
        free, their arithmetic being in the aten ops below them, unless they launched GPU
        kernels themselves."""
        nodes = self.nodes
        count = len(nodes.parent)
        labels, kinds, covered, parent = nodes.label, nodes.kind, nodes.covered, nodes.parent
        launches = [False] * count  # the op launched GPU work itself (a runtime call or kernel child)
        for nid in range(1, count):
            if kinds[nid] in (RUNTIME, DEVICE):
                launches[parent[nid]] = True

        def cost_unknown(nid: int) -> bool:
            name = labels[nid]
            return not _flops.is_free(name) or launches[nid] and _flops.is_autograd_node(name)

        # work_below[n]: an op under n is counted or has unknown cost itself. Children have larger
        # ids than their parent, so one reverse sweep sees a whole subtree before its root.
        work_below = [False] * count
        for nid in range(count - 1, 0, -1):
            if kinds[nid] == OP and (work_below[nid] or covered[nid] or cost_unknown(nid)):
                work_below[parent[nid]] = True
        found: dict[str, int] = {}
        for nid, k in enumerate(kinds):
            if k != OP or covered[nid] or work_below[nid]:
                continue
            name = labels[nid]
            if nodes.bwd[nid] and name.startswith(BACKWARD_PREFIX):
                continue
            if cost_unknown(nid):
                found[name] = found.get(name, 0) + nodes.calls[nid]
        for name, calls in self.formula_errors.items():
            found[name] = found.get(name, 0) + calls
        return dict(sorted(found.items(), key=lambda kv: (-kv[1], kv[0])))

    def _params(self):
        nodes, modules = self.nodes, self.modules
        nan = float("nan")
        root_total = None

        def params_of(nid: int) -> float:
            nonlocal root_total
            if nid == self.root:
                if root_total is None:
                    root_total = _root_params(nodes, modules)
                return root_total
            if nodes.kind[nid] != MODULE:
                return nan
            info = modules.get(nodes.label[nid])
            return float(info.params) if info is not None else nan

        return params_of


def _root_params(nodes: _Nodes, modules: dict[str, ModuleInfo]) -> float:
    """Parameters of the outermost modules seen (each root module once)."""
    seen: set[str] = set()
    total = 0
    found = False
    for nid, k in enumerate(nodes.kind):
        if k != MODULE:
            continue
        p = nodes.parent[nid]
        if p >= 0 and nodes.kind[p] == MODULE:
            continue
        label = nodes.label[nid]
        info = modules.get(label)
        if info is None or label in seen:
            continue
        seen.add(label)
        total += info.params
        found = True
    return float(total) if found else float("nan")


def _shape_text(shapes: Any) -> str | None:
    if not shapes:
        return None
    if isinstance(shapes, str):
        return shapes
    return str([list(s) if isinstance(s, (list, tuple)) else s for s in shapes])


def _nest(ev: EventColumns) -> tuple[list[int], list[int]]:
    """Order CPU ranges and memory events by (start, longer first) and find each one's parent:
    the innermost range of the same thread that is still open when it starts.

    Python frames (``with_stack`` traces) nest like ranges but are not parents: each stack entry
    carries the nearest real range and the nearest user-code frame at or below it, so both are
    found in O(1) and written to ``ev.frame``. Cost: one sort plus O(1) amortised per event.
    """
    kinds, tids, starts, ends, names = ev.kind, ev.tid, ev.start, ev.end, ev.name
    order = [i for i, k in enumerate(kinds) if k <= RUNTIME or k == MEMORY or k == PYFRAME]
    order.sort(key=lambda i: (starts[i], -ends[i]))
    n = len(kinds)
    parent = [-1] * n
    has_frames = PYFRAME in kinds
    frame: list[str | None] = [None] * n if has_frames else []
    real = list(range(n)) if has_frames else []  # nearest non-frame range at or above each entry
    stacks: dict[Any, list[int]] = {}
    last_tid: Any = object()
    stack: list[int] = []
    for i in order:
        tid = tids[i]
        if tid != last_tid:
            stack = stacks.setdefault(tid, [])
            last_tid = tid
        s = starts[i]
        while stack and ends[stack[-1]] <= s:
            stack.pop()
        k = kinds[i]
        if has_frames:
            top = stack[-1] if stack else -1
            parent[i] = real[top] if top >= 0 else -1
            inherited = frame[top] if top >= 0 else None
            if k == PYFRAME:
                real[i] = parent[i]
                frame[i] = names[i] if is_user_frame(names[i]) else inherited
            else:
                frame[i] = inherited
        elif stack:
            parent[i] = stack[-1]
        if k != MEMORY:
            stack.append(i)
    if has_frames:
        ev.frame = frame
        order = [i for i in order if kinds[i] != PYFRAME]
    return order, parent


def _step_number(text: str) -> int | str:
    """``ProfilerStep#12`` -> 12 (so steps sort numerically); anything else stays text."""
    return int(text) if text.isdigit() else text
