"""Communication on the layers it serves: a pass over one cycle's events after the builder placed
them (:meth:`~torchprof._tree.builder.TreeBuilder.add` calls :func:`attribute_comm` last).

What moves where, and why:

* **DDP's gradient all-reduce is split over the layers whose gradients its bucket carries.**
  DDP launches a bucket's all-reduce from the autograd hook of the bucket's last gradient, so
  torch records it inside an ``AccumulateGrad`` with no layer (``(backward, no module)``), and a
  CPU backend (gloo) runs it on a worker thread whose range sits at the root. Which parameters a
  bucket holds comes from the reducer, recorded by the capture
  (:func:`~torchprof._capture.distributed.ddp_buckets`): the k-th all-reduce a backward pass
  launches is bucket k of the layout whose bucket boundaries fall where the pass's gradients
  became ready (its ``AccumulateGrad`` count at each launch). Without that record (a trace from
  elsewhere) the bucket is the gradients that became ready since the previous launch, in the
  order the backward pass produced them, each on the layer whose backward function ran just
  before it, sized by its recorded shape (``record_shapes``); all-reduces launched together
  share the gradients ready by then. Each all-reduce (the c10d op with everything it ran,
  kernels included, and the worker's range on a CPU backend) is split over those layers **by the
  bytes of each layer's gradients in the bucket**, to the nanosecond: every figure of the event
  (CPU time, device time, comm/overlap/idle split, bytes) is divided by largest remainders, so
  the layers' parts add up exactly to the raw all-reduce (:mod:`~torchprof._tree.moves`). It lands
  on each layer as backward work, under the layer's own row, with its name (``c10d::allreduce_``,
  ``gloo:all_reduce``); each all-reduce counts its call on the layer with the largest part.
  A share whose layer ran outside this profile, or a bucket whose layout cannot be told, stays
  where torch recorded it.
* **FSDP2's collectives go to their layer.** FSDP names the layer of each of its ranges
  (``FSDP::all_gather (3)``, ``FSDP::backward_prefetch for 3``, ``FSDP::post_backward_reduce
  (0)``): a range found under another layer (a prefetch issued from the next layer's hook) or
  outside every layer (the last reduce-scatter, run by the root's post-backward callback) moves
  whole to the layer it names, the one whose ``FSDP::pre_forward`` ran last, as forward or
  backward work as its phase says.
* **A CPU backend's worker range goes to the layer that launched it.** Each c10d op of a CPU
  backend queues one work item, which the backend's worker thread runs in order: the worker
  ranges (``gloo:all_gather``) are paired with the c10d ops in launch order and move to the
  launching op's layer (forward or backward as that op).

Host communication also gets its exposed part (``comm_exposed_cpu_us``): the time an outermost
communication range ran while no op of the model (a forward op inside a layer or backward work)
ran on any thread outside communication; the rest of it was hidden behind compute.

Costs: nothing when no node is communication or FSDP. Otherwise C-speed scans of the cycle's
node ids, a sort of the model's outermost op ranges for the exposed time, and O(events moved).
FLOPs of moved ops stay on the rows where they ran (collectives count none).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from itertools import compress
from typing import TYPE_CHECKING, Any

from .._records import EventColumns, parse_module_range
from .._vocab import ACCUMULATE_GRAD, BACKWARD_PREFIX, COMM_RANGE_PREFIXES, FSDP_PREFIX, STEP_PREFIX, EventKind
from .device_time import covered, union_intervals
from .moves import EventMover, Target

if TYPE_CHECKING:
    from .built import BuildState, CommState
    from .nodes import Nodes

OP, REGION, MODULE, DEVICE = map(int, (EventKind.OP, EventKind.REGION, EventKind.MODULE, EventKind.DEVICE))
#: c10d's own ranges: the op a collective is launched by (``c10d::allreduce_``) and kineto's
#: record of it; the backends' ranges (``gloo:all_reduce``) are the work itself.
_LAUNCH_PREFIXES = ("c10d::", "record_param_comms")
_BACKEND_PREFIXES = tuple(p for p in COMM_RANGE_PREFIXES if p not in _LAUNCH_PREFIXES)
#: ``FSDP::all_gather (3)``, ``FSDP::post_backward_reduce (0)``: the layer's name relative to the
#: FSDP root; ``FSDP::backward_prefetch for 3``: the layer whose parameters it gathers.
_FSDP_NAMED = re.compile(r"^FSDP::(\w+?) \((.*)\)$|^FSDP::(\w+?) for (.*)$")
_FSDP_PRE_FORWARD = "pre_forward"
#: FSDP phases that are backward work wherever they ran (the root's post-backward callback runs
#: them outside any backward function).
_FSDP_BACKWARD = ("post_backward", "pre_backward", "backward_prefetch")


def attribute_comm(builder: BuildState, ev: EventColumns, parent_ev: list[int], node_of: list[int]) -> None:
    """The pass over one placed cycle (see the module's docstring)."""
    nodes = builder.nodes
    labels = nodes.label
    comm_nodes = {nid for nid, label in enumerate(labels) if label.startswith(COMM_RANGE_PREFIXES)}
    fsdp_nodes = {nid for nid, label in enumerate(labels) if label.startswith(FSDP_PREFIX)}
    if not comm_nodes and not fsdp_nodes:
        return
    cycle = _Cycle(builder, ev, parent_ev, node_of, comm_nodes, fsdp_nodes)
    cycle.exposed = cycle.mover.exposed_of = cycle.exposed_times()
    cycle.move_fsdp()
    launches, pairs = cycle.pair_workers()
    split = cycle.split_ddp(launches, pairs)
    cycle.move_workers(launches, pairs, split)
    acc = builder.comm.exposed
    for i, ns in cycle.exposed.items():
        if i not in cycle.mover.moved:  # a moved event's parts went with it; one inside it is on its new row
            node = node_of[i]
            acc[node] = acc.get(node, 0) + ns
    cycle.mover.finish()


def comm_note(state: CommState) -> str | None:
    """What ``summary["warnings"]`` says when some DDP all-reduces stayed where torch recorded them."""
    if not state.unsplit:
        return None
    return (f"{state.unsplit} DDP all-reduce(s) stay under '(backward, no module)': which layers their bucket carries "
            "is unknown (no bucket layout recorded by torchprof's capture fits them, and the gradients' sizes "
            "were not recorded: profile with torchprof, or with record_shapes)")


def comm_sums(nodes: Nodes, exposed: dict[int, int]) -> tuple[list[int], list[int]]:
    """Per node, over its subtree: the CPU ns of communication (every node that is a
    communication range or lies inside one) and the exposed part of it."""
    count, parent, labels, cpu = len(nodes), nodes.parent, nodes.label, nodes.cpu_ns
    comm = [0] * count
    inside = [False] * count
    for nid in range(count):
        p = parent[nid]
        inside[nid] = labels[nid].startswith(COMM_RANGE_PREFIXES) or (p >= 0 and inside[p])
        if inside[nid]:
            comm[nid] = cpu[nid]
    hidden = [0] * count
    for nid, ns in exposed.items():
        hidden[nid] = ns
    for values in (comm, hidden):
        for nid in range(count - 1, 0, -1):
            values[parent[nid]] += values[nid]
    return comm, hidden


class _Cycle:
    """One cycle's events as the pass reads and moves them."""

    def __init__(self, builder: BuildState, ev: EventColumns, parent_ev: list[int], node_of: list[int],
                 comm_nodes: set[int], fsdp_nodes: set[int]) -> None:  # fmt: skip
        self.builder = builder
        self.nodes = builder.nodes
        self.ev = ev
        self.parent_ev = parent_ev
        self.node_of = node_of
        self.comm_nodes = comm_nodes
        self.fsdp_nodes = fsdp_nodes
        nodes = self.nodes
        # Node level: at or below a communication range, and at or below one of FSDP's.
        count, parent = len(nodes), nodes.parent
        self.in_comm = [False] * count
        below_fsdp = [False] * count
        for nid in range(count):
            p = parent[nid]
            self.in_comm[nid] = nid in comm_nodes or (p >= 0 and self.in_comm[p])
            below_fsdp[nid] = nid in fsdp_nodes or (p >= 0 and below_fsdp[p])
        relevant = {nid for nid in range(count) if self.in_comm[nid] or below_fsdp[nid]}
        kinds = ev.kind
        events = [i for i in compress(range(len(node_of)), map(relevant.__contains__, node_of)) if kinds[i] != DEVICE]
        self.events = events
        self.mover = EventMover(builder, ev, parent_ev, node_of, events, builder.comm.exposed)
        self._modules: dict[str, list[tuple[int, int]]] | None = None
        self._producers: dict[Any, tuple[list[int], list[int]]] | None = None
        self._grad_ops: dict[int, list[int]] | None = None
        self.grads: list[int] = []
        """The cycle's ``AccumulateGrad`` ranges (found with the DDP all-reduces' passes)."""
        self.exposed: dict[int, int] = {}
        """Per outermost communication event: its exposed ns (set by the pass)."""
        # Read before anything moves: moved events sit on new nodes the sets above do not hold.
        self.outer = self._outer_comm()

    # -- which events are what ---------------------------------------------------------------------
    def _outer_comm(self) -> list[int]:
        """Outermost communication ranges (not inside another one), by start."""
        nodes, node_of, comm = self.nodes, self.node_of, self.comm_nodes
        out = []
        for i in self.events:
            node = node_of[i]
            if node in comm:
                p = nodes.parent[node]
                if p < 0 or not self.in_comm[p] or not self._comm_ancestor(i):
                    out.append(i)
        out.sort(key=self.ev.start.__getitem__)
        return out

    def _comm_ancestor(self, i: int) -> bool:
        p = self.parent_ev[i]
        while p >= 0:
            if self.node_of[p] in self.comm_nodes:
                return True
            p = self.parent_ev[p]
        return False

    def _has_ancestor(self, i: int, names: tuple[str, ...] | str) -> int:
        """The nearest enclosing event whose name starts with ``names``, -1 for none."""
        p = self.parent_ev[i]
        name = self.ev.name
        while p >= 0:
            if name[p].startswith(names):
                return p
            p = self.parent_ev[p]
        return -1

    # -- exposed time ---------------------------------------------------------------------------
    def exposed_times(self) -> dict[int, int]:
        """Per outermost host communication range: the ns during which no op of the model ran
        on any thread outside communication (the model's ops: forward ops inside a layer, and
        backward work)."""
        outer = self.outer
        if not outer:
            return {}
        ev, nodes, node_of = self.ev, self.nodes, self.node_of
        starts, ends, tids, kinds = ev.start, ev.end, ev.tid, ev.kind
        n_kind, n_owner, n_bwd, parent = nodes.kind, nodes.owner, nodes.bwd, nodes.parent
        in_comm = self.in_comm

        # Outermost nodes of the model's op work (an op whose parent node is not such an op).
        def model_op(nid: int) -> bool:
            return n_kind[nid] == OP and not in_comm[nid] and (n_bwd[nid] or n_owner[nid] >= 0)

        roots = {nid for nid in range(1, len(nodes)) if model_op(nid) and not model_op(parent[nid])}
        work: dict[Any, list[tuple[int, int]]] = {}
        for i in compress(range(len(node_of)), map(roots.__contains__, node_of)):
            if kinds[i] == OP:
                work.setdefault(tids[i], []).append((starts[i], ends[i]))
        talk: dict[Any, list[tuple[int, int]]] = {}
        for i in outer:
            talk.setdefault(tids[i], []).append((starts[i], ends[i]))
        busy: list[tuple[int, int]] = []
        for tid, spans in work.items():
            busy += _minus(union_intervals(spans), union_intervals(talk.get(tid, [])))
        merged = union_intervals(busy)
        merged_starts = [s for s, _ in merged]
        return {i: (ends[i] - starts[i]) - covered(merged, merged_starts, starts[i], ends[i]) for i in outer}

    # -- FSDP -----------------------------------------------------------------------------------
    def move_fsdp(self) -> None:
        """FSDP ranges found away from the layer they name move whole to it (see the module)."""
        fsdp = [i for i in self.events if self.node_of[i] in self.fsdp_nodes]
        if not fsdp:
            return
        ev, nodes, node_of = self.ev, self.nodes, self.node_of
        starts, names = ev.start, ev.name
        fsdp.sort(key=starts.__getitem__)
        layer_at: dict[str, tuple[list[int], list[int]]] = {}  # fqn -> (starts, module nodes) of its pre_forward
        named: list[tuple[int, str, str]] = []
        for i in fsdp:
            m = _FSDP_NAMED.match(names[i])
            if m is None:
                continue
            phase, fqn = (m.group(1), m.group(2)) if m.group(1) is not None else (m.group(3), m.group(4))
            if phase == _FSDP_PRE_FORWARD:
                module = nodes.nearest_module(node_of[i])
                if module >= 0:
                    seen = layer_at.setdefault(fqn, ([], []))
                    seen[0].append(starts[i])
                    seen[1].append(module)
            else:
                named.append((i, phase, fqn))
        moved: set[int] = set()
        for i, phase, fqn in named:
            found = layer_at.get(fqn)
            if found is None:
                continue
            k = bisect_right(found[0], starts[i]) - 1
            if k < 0:
                continue
            layer = found[1][k]
            here = nodes.nearest_module(node_of[i])
            if here == layer or self._inside(i, moved):
                continue
            bwd = nodes.bwd[node_of[i]] or phase.startswith(_FSDP_BACKWARD)
            self.mover.move(i, [Target(layer, 1, bwd)], 0)
            moved.add(i)

    def _inside(self, i: int, moved: set[int]) -> bool:
        p = self.parent_ev[i]
        while p >= 0:
            if p in moved:
                return True
            p = self.parent_ev[p]
        return False

    # -- CPU backends' worker ranges -----------------------------------------------------------------
    def pair_workers(self) -> tuple[list[int], dict[int, int]]:
        """The outermost c10d ops (launches, by start) and, for those a CPU backend ran on a worker
        thread, the worker's range. A backend's worker runs the work items in the order the c10d
        ops queued them, so each worker range (a top-level backend range), in start order, is
        paired with the earliest unpaired launch that started before it and names the same
        collective (``c10d::_allgather_base_`` and ``gloo:all_gather``; gloo runs a reduce-scatter
        as ``gloo:all_reduce``). Launches that ran a backend range of their own (an NCCL op
        records its ``nccl:all_reduce`` inside) queue nothing."""
        outer = self.outer
        names, starts = self.ev.name, self.ev.start
        launches = [i for i in outer if names[i].startswith(_LAUNCH_PREFIXES)]
        workers = [i for i in outer if self.parent_ev[i] < 0 and names[i].startswith(_BACKEND_PREFIXES)]
        queued = [i for i in launches if not self._runs_backend(i)]
        pairs: dict[int, int] = {}
        for w in workers:
            work = _collective(names[w])
            for k, launch in enumerate(queued):
                if starts[launch] > starts[w]:
                    break
                if _same_collective(_collective(names[launch]), work):
                    pairs[launch] = w
                    del queued[k]
                    break
        return launches, pairs

    def _runs_backend(self, i: int) -> bool:
        children = self.mover.children
        stack = list(children.get(i, ()))
        names = self.ev.name
        while stack:
            j = stack.pop()
            if names[j].startswith(_BACKEND_PREFIXES):
                return True
            stack.extend(children.get(j, ()))
        return False

    def move_workers(self, launches: list[int], pairs: dict[int, int], split: dict[int, list[Target]]) -> None:
        """Each paired worker range goes where its launch went: split as a DDP all-reduce was,
        else whole to the launching op's layer."""
        nodes, node_of = self.nodes, self.node_of
        for launch in launches:
            worker = pairs.get(launch)
            if worker is None or launch in split:
                continue
            node = node_of[launch]
            layer = nodes.nearest_module(node)
            if layer < 0:
                layer = nodes.owner[node]
            if layer >= 0:
                self.mover.move(worker, [Target(layer, 1, nodes.bwd[node])], 0)

    # -- DDP -------------------------------------------------------------------------------------
    def split_ddp(self, launches: list[int], pairs: dict[int, int]) -> dict[int, list[Target]]:
        """Splits each DDP all-reduce (and its worker's range) over its bucket's layers; returns
        the targets of every event split (launches and workers)."""
        ddp = [i for i in launches if self._has_ancestor(i, BACKWARD_PREFIX + ACCUMULATE_GRAD) >= 0]
        if not ddp:
            return {}
        passes = self._backward_passes(ddp)
        done: dict[int, list[Target]] = {}
        for grads, issued in passes:
            weights = self._from_buckets(grads, issued)
            if weights is None:
                weights = self._from_ready_order(grads, issued)
            for launch, (targets, stay) in zip(issued, weights):
                if not targets:
                    self.builder.comm.unsplit += 1
                    continue
                self.mover.move(launch, targets, stay)
                done[launch] = targets
                worker = pairs.get(launch)
                if worker is not None:
                    self.mover.move(worker, targets, stay)
                    done[worker] = targets
        return done

    def _backward_passes(self, ddp: list[int]) -> list[tuple[list[int], list[int]]]:
        """The cycle's backward passes that launched DDP all-reduces: per pass, its gradients
        (``AccumulateGrad`` ranges) and its launches, by start. A pass ends where the model's
        forward work or a new step begins (a layer's forward range, ``ProfilerStep#N``)."""
        ev, nodes, node_of = self.ev, self.nodes, self.node_of
        starts, kinds = ev.start, ev.kind
        grad_nodes = {nid for nid, label in enumerate(nodes.label) if label == BACKWARD_PREFIX + ACCUMULATE_GRAD}
        in_comm, count = self.in_comm, len(self.in_comm)
        marks = {nid for nid in range(1, count)
                 if ((nodes.owner[nid] == nid and not nodes.bwd[nid]) or
                     (nodes.kind[nid] == REGION and nodes.label[nid].startswith(STEP_PREFIX)))
                 and not in_comm[nid] and nid not in self.fsdp_nodes}  # fmt: skip
        wanted = grad_nodes | marks
        items: list[tuple[int, int, int]] = []  # (start, what: 0 mark, 1 gradient, 2 launch, event)
        for i in compress(range(len(node_of)), map(wanted.__contains__, node_of)):
            if kinds[i] in (OP, REGION, MODULE):
                items.append((starts[i], 0 if node_of[i] in marks else 1, i))
        items += [(starts[i], 2, i) for i in ddp]
        items.sort()
        self.grads = [i for _, what, i in items if what == 1]
        passes: list[tuple[list[int], list[int]]] = []
        grads: list[int] = []
        issued: list[int] = []
        for _, what, i in items:
            if what == 0:
                if issued:
                    passes.append((grads, issued))
                grads, issued = [], []
            elif what == 1:
                grads.append(i)
            else:
                issued.append(i)
        if issued:
            passes.append((grads, issued))
        return passes

    def _from_buckets(self, grads: list[int], issued: list[int]) -> list[tuple[list[Target], int]] | None:
        """The pass's all-reduces split by a layout the capture recorded: one with as many
        buckets as launches whose bucket boundaries fall at the launches (each launch comes
        after exactly the gradients of its bucket and of those before it became ready), else one
        whose buckets were at least all ready by their launch; None when no layout fits."""
        starts = self.ev.start
        grad_starts = sorted(starts[g] for g in grads)
        ready = [bisect_right(grad_starts, starts[i]) for i in issued]
        exact: list[tuple[dict[str, Any], list[list[int]]]] = []
        enough: list[tuple[dict[str, Any], list[list[int]]]] = []
        for ddp in self.builder.comm.ddp:
            for layout in ddp.get("maps", []):
                if len(layout) != len(issued):
                    continue
                cum = [0]
                for bucket in layout:
                    cum.append(cum[-1] + len(bucket))
                if all(count == c for count, c in zip(ready, cum[1:])):
                    exact.append((ddp, layout))
                elif all(count >= c for count, c in zip(ready, cum[1:])):
                    enough.append((ddp, layout))
        if not exact and not enough:
            return None
        ddp, layout = (exact or enough)[0]
        table = ddp["params"]
        out: list[tuple[list[Target], int]] = []
        for launch, bucket in zip(issued, layout):
            by_path: dict[str, int] = {}
            for index in bucket:
                path, nbytes = table[index]
                by_path[path] = by_path.get(path, 0) + int(nbytes)
            targets, stay = [], 0
            for path, nbytes in by_path.items():
                layer = self._module_node(path, starts[launch])
                if layer < 0:
                    stay += nbytes
                else:
                    targets.append(Target(layer, nbytes, True))
            out.append((targets, stay))
        return out

    def _module_node(self, path: str, before: int) -> int:
        """The node of the last forward call of module ``path`` that began before ``before``."""
        index = self._modules
        if index is None:
            index = {}
            ev, node_of, n_bwd = self.ev, self.node_of, self.nodes.bwd
            module_nodes = {nid for nid, k in enumerate(self.nodes.kind) if k == MODULE and not n_bwd[nid]}
            for i in compress(range(len(node_of)), map(module_nodes.__contains__, node_of)):
                if ev.kind[i] == MODULE:
                    parsed = parse_module_range(ev.name[i])
                    if parsed is not None:
                        index.setdefault(parsed[0], []).append((ev.start[i], node_of[i]))
            for calls in index.values():
                calls.sort()
            self._modules = index
        found = index.get(path)
        if not found:
            return -1
        k = bisect_right(found, (before, len(self.nodes))) - 1
        return found[k][1] if k >= 0 else -1

    def _from_ready_order(self, grads: list[int], issued: list[int]) -> list[tuple[list[Target], int]]:
        """Without a recorded layout: each launch carries the gradients that became ready since
        the previous one (launches with none in between carry the same ones), each gradient on
        the layer of the backward function that ran just before it on its thread, sized by its
        recorded shape. No targets where any gradient's size is unknown."""
        ev, nodes, node_of = self.ev, self.nodes, self.node_of
        starts, tids = ev.start, ev.tid
        producers = self._backward_functions()
        grads = sorted(grads, key=starts.__getitem__)
        out: list[tuple[list[Target], int]] = []
        g = 0
        current: tuple[list[Target], int] = ([], 0)
        for launch in issued:
            since = []
            while g < len(grads) and starts[grads[g]] <= starts[launch]:
                since.append(grads[g])
                g += 1
            if since:
                sizes: dict[int, int] = {}
                known = True
                for grad in since:
                    numel = self._gradient_numel(grad)
                    if numel is None:
                        known = False
                        break
                    before = producers.get(tids[grad])
                    layer = -1
                    if before is not None:
                        k = bisect_right(before[0], starts[grad]) - 1
                        if k >= 0:
                            layer = nodes.owner[node_of[before[1][k]]]
                    sizes[layer] = sizes.get(layer, 0) + numel
                current = ([Target(layer, size, True) for layer, size in sizes.items() if layer >= 0], sizes.get(-1, 0)) if known else ([], 0)
            out.append(current)
        return out

    def _backward_functions(self) -> dict[Any, tuple[list[int], list[int]]]:
        """Per thread, the backward functions that are not ``AccumulateGrad`` (starts, events)."""
        if self._producers is not None:
            return self._producers
        ev, nodes, node_of = self.ev, self.nodes, self.node_of
        grad = BACKWARD_PREFIX + ACCUMULATE_GRAD
        wanted = {nid for nid, label in enumerate(nodes.label) if label.startswith(BACKWARD_PREFIX) and label != grad}
        per: dict[Any, list[tuple[int, int]]] = {}
        for i in compress(range(len(node_of)), map(wanted.__contains__, node_of)):
            if ev.kind[i] == OP:
                per.setdefault(ev.tid[i], []).append((ev.start[i], i))
        out = {}
        for tid, items in per.items():
            items.sort()
            out[tid] = ([s for s, _ in items], [i for _, i in items])
        self._producers = out
        return out

    def _gradient_numel(self, grad: int) -> int | None:
        """Elements of the gradient an ``AccumulateGrad`` range accumulated: its own recorded
        input, else that of an op directly inside it (``torch::autograd::AccumulateGrad``)."""
        ev = self.ev
        if self._grad_ops is None:
            wanted = set(self.grads)
            inner: dict[int, list[int]] = {}
            for j in compress(range(len(self.parent_ev)), map(wanted.__contains__, self.parent_ev)):
                if ev.kind[j] == OP:
                    inner.setdefault(self.parent_ev[j], []).append(j)
            self._grad_ops = inner
        for j in [grad, *self._grad_ops.get(grad, ())]:
            args = ev.inputs(j)
            if args and args[0] and isinstance(args[0][0], (list, tuple)):
                numel = 1
                for d in args[0][0]:
                    numel *= int(d)
                return numel
        return None

def _collective(name: str) -> str:
    """The collective a c10d op or backend range names, letters only: ``c10d::_allgather_base_``
    -> ``allgatherbase``, ``gloo:all_gather`` -> ``allgather``."""
    return "".join(ch for ch in name.split(":")[-1] if ch.isalpha()).lower()


def _same_collective(launch: str, work: str) -> bool:
    """A backend range runs a c10d op's collective (an unknown name pairs with any: in order)."""
    if not work or work in launch:
        return True
    known = ("allreduce", "allgather", "reducescatter", "broadcast", "alltoall", "barrier", "gather", "scatter", "reduce",
             "send", "recv")  # fmt: skip
    if work == "allreduce" and "reducescatter" in launch:  # gloo's reduce-scatter
        return True
    return not any(name in work for name in known)


def _minus(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The disjoint sorted intervals ``a`` without the disjoint sorted intervals ``b``."""
    if not b:
        return a
    out = []
    j = 0
    for s, e in a:
        while j < len(b) and b[j][1] <= s:
            j += 1
        k = j
        cur = s
        while k < len(b) and b[k][0] < e:
            if b[k][0] > cur:
                out.append((cur, b[k][0]))
            cur = max(cur, b[k][1])
            k += 1
        if cur < e:
            out.append((cur, e))
    return out
