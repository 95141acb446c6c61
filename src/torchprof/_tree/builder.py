"""The layer tree: plain events in, one aggregated tree of modules, regions, ops and kernels out.

Pure Python on purpose (no torch, pandas or IPython): it is the part that has to be fast and
exactly right, and it is fed identically by a live capture and by a trace file.
"""

from __future__ import annotations

import bisect
from typing import Any

from .._records import CompiledKernel, EventColumns, parse_module_range
from .._vocab import (
    BACKWARD_PREFIX,
    COMPILATION,
    COMPILED_BACKWARD,
    COMPILED_REGION_PREFIX,
    DEVICE_RANGES,
    DEVICE_WITHOUT_OP,
    HOST_RANGE_KINDS,
    LAUNCHED_BEFORE,
    RECOMPUTE,
    STEP_PREFIX,
    UNATTRIBUTED_BACKWARD,
    EventKind,
)
from .activity import cycle_activity
from .backward import ForwardIndex
from .built import BuildState
from .comm import attribute_comm
from .compiled import COMPILATION_ROLE, FORWARD_ROLE, GRAPH_ROLE, GraphRun, role_of
from .device_time import IDLE, OVERLAP, ROW, device_of, device_time
from .finish import finish_tree
from .flops import formulas as _formulas
from .nesting import nest
from .nodes import (
    KEY_COMPILATION,
    KEY_COMPILED_BACKWARD,
    KEY_DEVICE_RANGES,
    KEY_DEVICE_WITHOUT_OP,
    KEY_LAUNCHED_BEFORE,
    KEY_RECOMPUTE,
    KEY_UNATTRIBUTED,
    TAG_KERNEL,
    TAG_MODULE,
    TAG_REGION,
)
from .tree import Tree

OP, REGION, MODULE, RUNTIME, DEVICE, MEMORY, DEVICE_RANGE = map(int, (
    EventKind.OP, EventKind.REGION, EventKind.MODULE, EventKind.RUNTIME, EventKind.DEVICE, EventKind.MEMORY,
    EventKind.DEVICE_RANGE))  # fmt: skip
_HOST = frozenset(int(k) for k in HOST_RANGE_KINDS)
_UNLAUNCHED_KEYS = {LAUNCHED_BEFORE: KEY_LAUNCHED_BEFORE, DEVICE_WITHOUT_OP: KEY_DEVICE_WITHOUT_OP}


class TreeBuilder(BuildState):
    """Aggregates the events of one or more profiling cycles into one tree.

    Call :meth:`add` once per cycle (a schedule yields several), then :meth:`finish`. Raw events
    are not kept: memory grows with the number of distinct tree nodes, not with run length. What
    it gathers is a :class:`~torchprof._tree.built.BuildState`, which the passes after placement
    (communication, the finished tree) read.
    """

    # -- per-name facts, computed once ------------------------------------------------------
    def _info(self, name: str, kind: int) -> tuple[str, str | None, str | None, bool, int, bool]:
        """Per distinct name: (node key, module path, module type, starts backward, compiled role,
        an op with a FLOP formula)."""
        info = self._name_info.get(name)
        if info is None:
            mod = parse_module_range(name) if kind == MODULE else None
            role = role_of(name)
            has_formula = self.want_flops and name in _formulas.FORMULAS  # (read for ops only)
            if mod is not None:
                info = (TAG_MODULE + mod[0], mod[0], mod[1], False, role, has_formula)
            elif kind == REGION:
                info = (TAG_REGION + name, None, None, False, role, has_formula)
            else:
                info = (name, None, None, name.startswith(BACKWARD_PREFIX), role, has_formula)
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
           and kernels go to the node of the range they belong to, their time split by what the
           device did (:meth:`_add_device_time`).

        Cost: O(1) amortised work per event after at most one sort (near linear: profilers emit
        events almost in order); arguments are read only for ops that have a FLOP formula and for
        the first call of a node when shapes are kept.
        """
        n = len(ev)
        self.event_count += n
        if n == 0:
            return
        if ev.span is not None:
            self._clip_host_ranges(ev)
        kinds = ev.kind
        if ev.parent is not None:
            parent_ev, ends = ev.parent, ev.end
            off_host = DEVICE in kinds or DEVICE_RANGE in kinds
            order: Any = range(n) if not off_host else [i for i, k in enumerate(kinds) if k != DEVICE and k != DEVICE_RANGE]
        else:
            order, parent_ev, ends = nest(ev)
        first_step = len(self.steps)
        node_of, runtime_by_corr, flop_ops, mem_events = self._place(ev, order, parent_ev, ends)
        self._count_flops(ev, flop_ops, node_of)
        self._add_memory(ev, mem_events, node_of)
        self._add_memory_over_time(ev, mem_events, node_of)
        self._add_device(ev, node_of, runtime_by_corr)
        if DEVICE_RANGE in kinds:
            self._add_device_ranges(ev)
        self.comm_ns += cycle_activity(ev, self.steps[first_step:], node_of, self.nodes.label)
        attribute_comm(self, ev, parent_ev, node_of)  # communication onto the layers it serves

    def _place(self, ev: EventColumns, order: Any, parent_ev: list[int], clipped: list[int]) -> tuple[list[int], dict[int, int], list[int], list[int]]:
        """Stage 2: put every range in its node; returns the node of each event, the runtime
        call of each device correlation id, the ops to count FLOPs of, and the memory events.

        Invariants. Events arrive after the range around them and every backward op after the
        forward op that created it. Each range lands in the node ``(parent's node, name)``, so
        repeated calls aggregate and the number of nodes stays small. A range that starts backward
        work (``evaluate_function: XBackward0``, or an op carrying a forward-thread id) lands under
        the layer that ran its forward op (:class:`~torchprof._tree.backward.ForwardIndex`)
        instead of where the autograd engine ran it; unmatched backward work goes to an
        "(backward, no module)" node at its own place. A module range inside backward work is a
        recomputation (activation checkpointing): it lands in a "(recompute)" node under that
        module's forward node, its ops count as that module's forward ops for the backward that
        follows, and an autograd engine run nested in backward (reentrant checkpointing) goes to
        the layer of its forward op when that is known. Self time of a range is its duration minus
        the parts of its direct children that lie inside it, so self times partition the covered
        time and ``total = self + children``. A range that outlives its parent counts only up to
        the parent's end (``clipped``: see :func:`~torchprof._tree.nesting.nest`; a source that
        gives the nesting is clipped here alike); the part cut off goes to :attr:`overrun`.
        """
        nodes = self.nodes
        n = len(ev)
        names, kinds, starts, tids = ev.name, ev.kind, ev.start, ev.tid
        recorded, ends = ev.end, clipped
        overrun = self.overrun
        seq_of = ev.seq.__getitem__ if ev.seq is not None else ev.seq_of
        assert seq_of is not None
        fwd_tids = ev.fwd_tid
        fwd_tid_known = any(fwd_tids)  # traces carry it; the live tree marks backward by name only
        fwd_tid_of = ev.fwd_tid_of
        first_op_child: dict[int, int] | None = None
        pre_order = ev.parent is not None  # event i's first child, if any, is event i + 1

        def backward_seq(i: int) -> tuple[int, Any]:
            """The sequence number and forward thread a backward range names."""
            nonlocal first_op_child
            seq, fwd, j = seq_of(i), fwd_tids[i], i
            if seq < 0:
                # FSDP2 records its "evaluate_function: XBackward0" ranges without a sequence
                # number; the XBackward0 op inside (the range's first op) carries it. (So does
                # AccumulateGrad's range, in every training step, whose op has none either: in
                # pre-order its op is the next event, found without the pass over all events.)
                if pre_order and i + 1 < n and parent_ev[i + 1] == i and kinds[i + 1] == OP:
                    j = i + 1
                elif pre_order and (i + 1 >= n or parent_ev[i + 1] != i):
                    j = -1  # no child at all (a gradient taken at a leaf: the range alone)
                else:
                    if first_op_child is None:
                        first_op_child = _first_op_children(order, parent_ev, kinds)
                    j = first_op_child.get(i, -1)
                if j >= 0:
                    seq, fwd = seq_of(j), fwd_tids[j]
            if not fwd and fwd_tid_of is not None and j >= 0 and forward.several_threads:
                fwd = fwd_tid_of(j)
            return seq, fwd
        node_of = [-1] * n
        forward = ForwardIndex(fwd_ids_are_tids=fwd_tid_of is not None)
        runtime_by_corr: dict[int, int] = {}
        flop_ops: list[int] = []
        mem_events: list[int] = []
        unattributed: dict[int, int] = {}
        steps_at = _StepsAt(starts, ends, kinds, names, parent_ev)
        forward_node = self._forward_node
        recompute_of = self._recompute_of
        runs: dict[int, GraphRun] = {}  # graph-call event -> its run
        compiling = self.compilation_nodes
        threads = self.threads
        spans: list[tuple[int, int]] = []  # every thread's outermost ranges
        runs_seen: set[tuple[int, int]] = set()
        root = self.root
        n_kind, n_bwd, n_owner, n_children, n_covered = nodes.kind, nodes.bwd, nodes.owner, nodes.children, nodes.covered
        n_calls, n_cpu = nodes.calls, nodes.cpu_ns
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
                pnode = node_of[p]
                pe = ends[p]
                if e > pe:  # outlives its parent (a source that nests events itself)
                    e = pe if pe > s else s
                    if ends is recorded:
                        ends = list(recorded)
                    ends[i] = e
                # The part of this range inside its parent is not the parent's self time; the
                # parent's node is final (events come after their parent), so it comes off now.
                n_cpu[pnode] -= e - s
            else:
                pnode = root
                if k != DEVICE:
                    row = threads.get(tids[i])
                    if row is None:
                        row = threads[tids[i]] = [0, 0]
                    row[0] += e - s
                    spans.append((s, e))
            if compiling and pnode in compiling:
                # Inside a compilation range: Dynamo's tracing and Inductor's passes run ops too
                # (on fake tensors); all of it is the compile's time, none of it a layer's op. (Its
                # part inside the parent came off the parent's self time above: it goes back.)
                node_of[i] = pnode
                n_cpu[pnode] += e - s  # (e is cut at the parent's end above)
                continue
            name = names[i]
            node = -1
            info = name_info.get(name)
            if info is None:
                info = info_of(name, k)
            key, mpath, mtype, bwd_name, role, has_formula = info
            if role == COMPILATION_ROLE:
                node = n_children[pnode].get(KEY_COMPILATION, -1)
                if node < 0:
                    node = nodes.add(pnode, REGION, COMPILATION, None, n_bwd[pnode], KEY_COMPILATION)
                compiling.add(node)
                threads.setdefault(tids[i], [0, 0])[1] += e - s
                node_of[i] = node
                n_calls[node] += 1
                n_cpu[node] += e - s
                continue
            kernel: CompiledKernel | None = None
            if runs and p in runs:  # a kernel or extern op of a compiled graph
                run = runs[p]
                pnode, kernel = self._compiled_target(run, name, pnode, runs_seen)
            bwd_root = False
            if n_bwd[pnode]:
                if mpath is not None and mpath in forward_node:
                    node = self._recompute_node(forward_node[mpath], recompute_of)
                elif bwd_name:  # an autograd engine run inside backward (reentrant checkpointing)
                    seq, fwd = backward_seq(i)
                    owner = forward.owner(seq, fwd, tids[i])
                    if owner >= 0 and not n_bwd[owner]:
                        pnode, bwd_root = owner, True
            elif bwd_name or (fwd_tid_known and k == OP and fwd_tids[i] > 0):
                bwd_root = True
                seq, fwd = backward_seq(i)
                owner = forward.owner(seq, fwd, tids[i])
                if owner < 0 and pnode == root and steps_at:
                    # Backward of no module on a thread of its own (autograd's device threads,
                    # DDP's gradient all-reduce) belongs to the step it ran in, not beside the steps.
                    j = steps_at.find(s)
                    if j >= 0:
                        key_j = info_of(names[j], REGION)[0]
                        pnode = n_children[root].get(key_j, -1)
                        if pnode < 0:
                            pnode = self._new_node(ev, j, root, REGION, None, None, False, key_j)
                pnode = self._backward_target(pnode, owner, unattributed)
            if node < 0:
                node = n_children[pnode].get(key, -1)
                if node < 0 and mpath is not None:
                    pnode = self._module_parent(pnode, mpath, key)
                    node = n_children[pnode].get(key, -1)
                if node < 0:
                    node = self._new_node(ev, i, pnode, k, mpath, mtype, bwd_root, key)
            if mpath is not None and not n_bwd[node]:
                forward_node[mpath] = node
            if role:
                self._compiled_role(i, role, seq_of, parent_ev, names, pnode, node, runs)
            if kernel is not None:
                self._compiled_flops(node, run, kernel)
            node_of[i] = node
            n_calls[node] += 1
            n_cpu[node] += e - s  # its children's parts come off as they arrive
            if e != recorded[i]:
                cut = overrun.get(node)
                if cut is None:
                    cut = overrun[node] = [0, 0]
                cut[0] += 1
                cut[1] += recorded[i] - e
            if k == OP:
                in_recompute = recompute_of.get(pnode, -1) if recompute_of else -1
                if n_kind[pnode] != OP and (not n_bwd[node] or in_recompute >= 0) and not (fwd_tid_known and fwd_tids[i]):
                    seq = seq_of(i)
                    if seq >= 0:
                        forward.add(tids[i], seq, in_recompute if in_recompute >= 0 else n_owner[node])
                if has_formula and not n_covered[pnode] and kernel is None:
                    flop_ops.append(i)
            elif k == RUNTIME:
                c = ev.corr[i]
                if c:
                    runtime_by_corr[c] = p
            elif k == REGION and name.startswith(STEP_PREFIX):
                self.steps.append({"step": _step_number(name[len(STEP_PREFIX):]), "start_ns": s, "wall_us": (e - s) / 1000.0, "node": node})
        self.cpu_union_ns += _union(spans)
        return node_of, runtime_by_corr, flop_ops, mem_events

    def _module_parent(self, pnode: int, mpath: str, key: str) -> int:
        """Where a module's row goes: under the node it ran in, unless the nearest module there
        does not hold it by path (a layer two blocks share, named once by ``named_modules()``,
        called by the block that does not own the name). Then under the nearest module up the
        tree whose path it is under (its owner), so the layer is one row whichever block called
        it; where there is none, where it ran. Found once per place (:attr:`_module_parents`)."""
        known = self._module_parents.get((pnode, key))
        if known is not None:
            return known
        nodes = self.nodes
        target = pnode
        m = nodes.nearest_module(pnode)
        if m >= 0 and not _holds(nodes.label[m], mpath):
            up = self._owner_above(nodes.nearest_module(nodes.parent[m]), mpath)
            if up >= 0 and nodes.bwd[up] == nodes.bwd[pnode]:
                target = up
        self._module_parents[(pnode, key)] = target
        return target

    def _owner_above(self, m: int, mpath: str) -> int:
        """The nearest module at or above module node ``m`` whose path holds ``mpath`` (-1 for
        none), each (node, path) looked at once (:attr:`_owners`)."""
        nodes, owners = self.nodes, self._owners
        walked: list[int] = []
        found = -1
        while m >= 0:
            known = owners.get((m, mpath))
            if known is not None:
                found = known
                break
            if _holds(nodes.label[m], mpath):
                found = m
                break
            walked.append(m)
            m = nodes.nearest_module(nodes.parent[m])
        for w in walked:
            owners[(w, mpath)] = found
        return found

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

    # -- compiled regions (see torchprof._tree.compiled) -------------------------------------------
    def _compiled_role(self, i: int, role: int, seq_of: Any, parent_ev: list[int], names: list[str], pnode: int,
                       node: int, runs: dict[int, GraphRun]) -> None:  # fmt: skip
        """Remember which compiled frame a ``CompiledFunction`` belongs to (by its sequence number,
        which its backward carries too), and start a graph run at ``## Call CompiledFxGraph``."""
        if role == FORWARD_ROLE:
            seq = seq_of(i)
            compile_id = self._compile_id(i, seq_of, parent_ev, names)
            if seq >= 0 and compile_id is not None:
                self.compiled.compile_id_of_seq[seq] = compile_id
        elif role == GRAPH_ROLE:
            nodes = self.nodes
            owner = nodes.nearest_module(pnode)
            run = self.compiled.run(self._compile_id(i, seq_of, parent_ev, names), nodes.bwd[pnode],
                                    nodes.label[owner] if owner >= 0 else None)  # fmt: skip
            # A compiled function has no module around it: its modules hang below its region,
            # in forward and in backward alike (its backward lands on that region).
            run.anchor = owner if owner >= 0 else self._compiled_region_node(pnode)
            runs[i] = run
            if run.graph is None:
                # Its kernels' FLOPs are unknown: the graph's row (and every row above) says so.
                self.flop_count.unmapped_graph(node)
            else:
                # The map counts all of the graph's work: what runs inside it besides the map's
                # kernels (allocations, a fallback op) is covered by it, not counted again.
                self._compiled_flops(node, run, None)

    def _compiled_region_node(self, nid: int) -> int:
        """The nearest ``Torch-Compiled Region`` node at or above ``nid`` (``nid`` if none)."""
        nodes, start = self.nodes, nid
        while nid >= 0 and not nodes.label[nid].startswith(COMPILED_REGION_PREFIX):
            nid = nodes.parent[nid]
        return nid if nid >= 0 else start

    def _compile_id(self, i: int, seq_of: Any, parent_ev: list[int], names: list[str]) -> str | None:
        """The compile id of the frame event ``i`` runs in: from the enclosing compiled region, or,
        in backward, from the sequence number of the enclosing ``CompiledFunctionBackward``."""
        q = parent_ev[i]
        while q >= 0:
            name = names[q]
            if name.startswith(COMPILED_REGION_PREFIX):
                return name[len(COMPILED_REGION_PREFIX) :]
            if name == COMPILED_BACKWARD:
                return self.compiled.compile_id_of_seq.get(seq_of(q))
            q = parent_ev[q]
        return None

    def _compiled_target(self, run: GraphRun, name: str, pnode: int, seen: set[tuple[int, int]]) -> tuple[int, CompiledKernel | None]:
        """Where a kernel of a compiled graph goes: under the module its work came from (in
        backward, under that module's ``CompiledFunctionBackward`` row), else where it ran."""
        kernel = run.kernel(name)
        if kernel is None:
            return pnode, None
        where = self.compiled.module_of(run, kernel)
        nodes = self.nodes
        if where is None and nodes.kind[run.anchor] != MODULE:
            return pnode, kernel
        # No node of it came from a submodule: it is the compiled module's own work.
        chain = self._module_chain(where[0], where[1], run.anchor) if where is not None else []
        module = chain[-1] if chain else run.anchor
        if not run.backward:
            for m in chain:  # each module below the compiled one ran once per forward graph run
                if (id(run), m) not in seen:
                    seen.add((id(run), m))
                    nodes.calls[m] += 1
            return module, kernel
        target = nodes.children[module].get(KEY_COMPILED_BACKWARD, -1)
        if target < 0:
            target = nodes.add(module, REGION, COMPILED_BACKWARD, None, True, KEY_COMPILED_BACKWARD)
        return target, kernel

    def _module_chain(self, path: str, classes: dict[str, str], anchor: int) -> list[int]:
        """The module nodes from below ``anchor`` (a module node, or the region a compiled function
        ran in) down to ``path``'s, created as the hooks would have; empty for the anchor itself."""
        nodes = self.nodes
        base = nodes.label[anchor] if nodes.kind[anchor] == MODULE else ""
        if base and (path == base or not path.startswith(base + ".")):
            if path == base:
                return []
            base = ""
        chain: list[int] = []
        node, prefix = anchor, base
        for part in (path[len(base) + 1 :] if base else path).split("."):
            prefix = f"{prefix}.{part}" if prefix else part
            key = TAG_MODULE + prefix
            child = nodes.children[node].get(key, -1)
            if child < 0:
                child = nodes.add(node, MODULE, prefix, classes.get(prefix), nodes.bwd[node], key)
            node = child
            chain.append(node)
        return chain

    def _compiled_flops(self, node: int, run: GraphRun, kernel: CompiledKernel | None) -> None:
        """A compiled kernel's FLOPs come from its graph nodes' shapes (its events have no useful
        arguments); its node is then covered, so nothing inside it is counted again. Without a
        kernel: the graph run's own node, with the graph's work no kernel of its map runs."""
        assert run.graph is not None
        count = self.flop_count
        count.add_kernel(self.nodes, node, count.kernel_cost(run.graph, kernel))

    def _recompute_node(self, module_node: int, recompute_of: dict[int, int]) -> int:
        """The "(recompute)" child of a module's forward node: where a module that activation
        checkpointing runs again inside backward lands, as backward work of that module."""
        nodes = self.nodes
        node = nodes.children[module_node].get(KEY_RECOMPUTE, -1)
        if node < 0:
            node = nodes.add(module_node, REGION, RECOMPUTE, None, True, KEY_RECOMPUTE)
            recompute_of[node] = module_node
        return node

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
            shapes = args[0] if args else None
            if not shapes and mpath is not None:
                info = self.modules.get(mpath)
                if info is not None and info.input_shapes is not None:
                    shapes = info.input_shapes
            nodes.shapes[node] = shapes
        if ev.frame is not None:
            nodes.source[node] = ev.frame[i]
        return node

    def _count_flops(self, ev: EventColumns, ops: list[int], node_of: list[int]) -> None:
        """Stage 3: FLOPs and MACs of the outermost ops that have a formula (the ops they call
        are covered by them), from their recorded shapes (:mod:`~torchprof._tree.flops`)."""
        if self.want_flops:
            self.flop_count.add_ops(ev, ops, node_of, self.nodes)

    def _add_memory(self, ev: EventColumns, mem_events: list[int], node_of: list[int]) -> None:
        """Stage 4a: each allocation or free counts in the node of the range it happened in."""
        if not mem_events:
            return
        self.memory = True
        cpu_mem, cuda_mem = self.nodes.cpu_mem, self.nodes.cuda_mem
        nbytes, on_cuda = ev.nbytes, ev.on_cuda
        for i in mem_events:
            if on_cuda[i]:
                cuda_mem[node_of[i]] += nbytes[i]
            else:
                cpu_mem[node_of[i]] += nbytes[i]

    def _add_memory_over_time(self, ev: EventColumns, mem_events: list[int], node_of: list[int]) -> None:
        """Stage 4a': memory over time (:class:`~torchprof._tree.memory.MemoryLedger`): what each
        layer's forward keeps, the highest total while each node ran, the peak per device (the
        allocator's own running total where the source records it, else the running sum of what
        this profile saw allocated) and what is alive then, and the timeline."""
        if not mem_events:
            return
        self.ledger.add_cycle(ev, mem_events, node_of)
        self.peak = self.ledger.peak_pair()

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
        device, starts, ends = self._in_window(ev, device)
        if not device:
            return
        self.cuda = True
        nodes = self.nodes
        corrs, links = ev.corr, ev.link
        op_by_ext: dict[int, int] | None = None
        first_launch = min(runtime_by_corr) if runtime_by_corr else None
        host_start: int | None = None  # the first host event's start: found for the first work no op launched
        host_start_known = False
        placed: list[int] = []
        for k, i in enumerate(device):
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
                else:
                    if not host_start_known:
                        host_start = min((s for s, k in zip(ev.start, ev.kind) if k in _HOST), default=None)
                        host_start_known = True
                    if (host_start is not None and ev.start[i] < host_start) or (c and first_launch is not None and c < first_launch):
                        # Correlation ids grow with every launch: one older than every launch
                        # seen was issued before the window opened.
                        pnode = self._unlaunched_row(LAUNCHED_BEFORE)
                    else:
                        pnode = self._unlaunched_row(DEVICE_WITHOUT_OP)
            name = ev.name[i]
            key = TAG_KERNEL + name
            node = nodes.children[pnode].get(key, -1)
            if node < 0:
                node = nodes.add(pnode, DEVICE, name, None, nodes.bwd[pnode], key)
            nodes.calls[node] += 1
            nodes.cuda_ns[node] += ends[k] - starts[k]
            placed.append(node)
        self._add_busy(starts, ends)
        self._add_device_time(ev, device, starts, ends, placed)

    def _clip_host_ranges(self, ev: EventColumns) -> None:
        """The window rule for host ranges, as :meth:`_in_window` for device work: a range the
        source wrote past the profiled window (kineto's span; a step range closed long after the
        profile stopped) counts only its part inside it, and one wholly outside is no row at all
        (:attr:`host_outside_window` keeps the count). Nesting is kept: a child clipped at the
        window's edge stays within its parent clipped there too."""
        assert ev.span is not None
        lo, hi = ev.span
        starts, ends, kinds = ev.start, ev.end, ev.kind
        outside = self.host_outside_window
        for i in [i for i, (s, e) in enumerate(zip(starts, ends)) if (s < lo or e > hi) and s != e]:
            if kinds[i] not in HOST_RANGE_KINDS:
                continue
            s, e = starts[i], ends[i]
            cs, ce = max(s, lo), min(e, hi)
            if ce > cs:
                starts[i], ends[i] = cs, ce
                outside[1] += 1
                outside[2] += (e - s) - (ce - cs)
            else:
                kinds[i] = EventKind.IGNORED
                outside[0] += 1
                outside[2] += e - s

    def _in_window(self, ev: EventColumns, device: list[int]) -> tuple[list[int], list[int], list[int]]:
        """The window rule for device work: where the source records the profiled window (kineto's
        ``PyTorch Profiler`` span), every device figure (each kernel's time, the layers' device
        columns, busy, idle, compute, comm) counts only the part of each activity inside it, and
        an activity wholly outside it is no row at all (:attr:`outside_window` keeps the count).
        Returns the activities kept and their clipped starts and ends."""
        starts, ends = [ev.start[i] for i in device], [ev.end[i] for i in device]
        if ev.span is None:
            return device, starts, ends
        lo, hi = ev.span
        if all(lo <= s and e <= hi for s, e in zip(starts, ends)):
            return device, starts, ends
        kept: list[int] = []
        kept_starts: list[int] = []
        kept_ends: list[int] = []
        outside = self.outside_window
        for i, s, e in zip(device, starts, ends):
            cs, ce = max(s, lo), min(e, hi)
            if ce > cs or (s == e and lo <= s <= hi):
                kept.append(i)
                kept_starts.append(cs)
                kept_ends.append(ce)
                if (cs, ce) != (s, e):
                    outside[1] += 1
                    outside[2] += (e - s) - (ce - cs)
            else:
                outside[0] += 1
                outside[2] += e - s
        return kept, kept_starts, kept_ends

    def _add_device_ranges(self, ev: EventColumns) -> None:
        """CUPTI range-profiler ranges: one row per kernel name under one row of the root, with
        their count and no time (their length is the profiler's replay of the kernel)."""
        nodes = self.nodes
        top = nodes.children[self.root].get(KEY_DEVICE_RANGES, -1)
        if top < 0:
            top = nodes.add(self.root, REGION, DEVICE_RANGES, None, False, KEY_DEVICE_RANGES)
        for i, k in enumerate(ev.kind):
            if k == DEVICE_RANGE:
                name = ev.name[i]
                key = TAG_REGION + name
                node = nodes.children[top].get(key, -1)
                if node < 0:
                    node = nodes.add(top, REGION, name, None, False, key)
                nodes.calls[node] += 1
                nodes.calls[top] += 1
                self.device_ranges += 1

    def _add_device_time(self, ev: EventColumns, device: list[int], starts: list[int], ends: list[int], placed: list[int]) -> None:
        """Stage 4c: the cycle's device time by what it did (:mod:`~torchprof._tree.device_time`):
        each activity's duration goes to its node as compute, comm or memcpy, with the part of a
        comm kernel that compute hid and the idle gap the activity ended; the run keeps the union
        of each kind and the comm/compute overlap. ``placed`` is the node of each of ``device``."""
        tids = ev.tid
        split = device_time([ev.name[i] for i in device], starts, ends, [device_of(tids[i]) for i in device], ev.span)
        per_node = self.device_split
        work, overlap, idle = split.work, split.overlap_ns, split.idle_ns
        for k, node in enumerate(placed):
            row = per_node.get(node)
            if row is None:
                row = per_node[node] = [0] * ROW
            row[work[k]] += ends[k] - starts[k]
            row[OVERLAP] += overlap[k]
            row[IDLE] += idle[k]
        totals = self.device_union_ns
        for w, ns in enumerate(split.union_ns):
            totals[w] += ns
        totals[OVERLAP] += split.comm_overlap_ns

    def _unlaunched_row(self, label: str) -> int:
        """The region row under the root that holds device work of no op (one per label)."""
        nodes = self.nodes
        key = _UNLAUNCHED_KEYS[label]
        node = nodes.children[self.root].get(key, -1)
        if node < 0:
            node = nodes.add(self.root, REGION, label, None, False, key)
        nodes.calls[node] += 1
        return node

    def _add_busy(self, starts: list[int], ends: list[int]) -> None:
        """The cycle's device busy time (the union of its device intervals over every stream and
        device) and its window (first device start to last device end), of the activities as
        :meth:`_in_window` clipped them. Sorting the cycle's intervals costs O(k log k) for k
        device events; nothing is kept but two sums, so the gaps between the cycles of a schedule
        are not counted as idle."""
        spans = sorted(zip(starts, ends))
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


def _first_op_children(order: Any, parent_ev: list[int], kinds: list[int]) -> dict[int, int]:
    """The first op inside each range, events in ``order`` (pre-order: a range's children come
    after it, in start order). One pass, made only when a source needs it."""
    first: dict[int, int] = {}
    for j in order:
        p = parent_ev[j]
        if p >= 0 and kinds[j] == OP and p not in first:
            first[p] = j
    return first


def _holds(outer: str, mpath: str) -> bool:
    """Module path ``outer`` and a "." begin ``mpath`` (without building ``outer + "."``)."""
    return len(mpath) > len(outer) and mpath[len(outer)] == "." and mpath.startswith(outer)


def _step_number(text: str) -> int | str:
    """``ProfilerStep#12`` -> 12 (so steps sort numerically); anything else (``#x``, ``#-1``,
    ``#1.5``, digits past int64, other scripts' digits) stays text, as it is saved and read back."""
    return int(text) if len(text) <= 18 and text.isascii() and text.isdigit() else text


class _StepsAt:
    """The top-level ``ProfilerStep#N`` ranges of a cycle, to find the one open at a time."""

    def __init__(self, starts: list[int], ends: list[int], kinds: list[int], names: list[str], parent: list[int]) -> None:
        spans = sorted((starts[i], ends[i], i) for i, k in enumerate(kinds)
                       if k == REGION and parent[i] < 0 and names[i].startswith(STEP_PREFIX))  # fmt: skip
        self._starts = [sp[0] for sp in spans]
        self._spans = spans

    def __bool__(self) -> bool:
        return bool(self._spans)

    def find(self, t: int) -> int:
        """The event index of the step open at ``t`` (-1 if none)."""
        k = bisect.bisect_right(self._starts, t) - 1
        if k >= 0 and t < self._spans[k][1]:
            return self._spans[k][2]
        return -1


def _union(spans: list[tuple[int, int]]) -> int:
    """Total length of the union of intervals. O(n log n)."""
    total, end = 0, None
    for s, e in sorted(spans):
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total
