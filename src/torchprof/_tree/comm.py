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
  the layers' parts add up exactly to the raw all-reduce. It lands on each layer as backward
  work, under the layer's own row, with its name (``c10d::allreduce_``, ``gloo:all_reduce``).
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

import heapq
import re
from bisect import bisect_right
from dataclasses import dataclass, field
from itertools import compress
from typing import TYPE_CHECKING, Any

from .._records import EventColumns, parse_module_range
from .._vocab import ACCUMULATE_GRAD, BACKWARD_PREFIX, COMM_RANGE_PREFIXES, FSDP_PREFIX, STEP_PREFIX, EventKind
from .activity import covered
from .device_time import IDLE, OVERLAP, ROW, device_of, device_time, union_intervals
from .nodes import TAG_KERNEL

if TYPE_CHECKING:
    from .builder import TreeBuilder
    from .nodes import Nodes

OP, REGION, MODULE, RUNTIME, DEVICE, MEMORY = map(int, (
    EventKind.OP, EventKind.REGION, EventKind.MODULE, EventKind.RUNTIME, EventKind.DEVICE, EventKind.MEMORY))  # fmt: skip
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
#: The key of a backward copy of a row placed under a forward row, apart from a forward one.
_KEY_BACKWARD = "\x0e"


@dataclass
class CommState:
    """What the pass needs besides the events, and what it leaves for the finished tree."""

    ddp: list[dict[str, Any]] = field(default_factory=list)
    """Each DDP module's gradient buckets (:func:`~torchprof._capture.distributed.ddp_buckets`)."""
    exposed: dict[int, int] = field(default_factory=dict)
    """Per node: ns of its outermost communication ranges during which no model op ran."""
    unsplit: int = 0
    """DDP all-reduces whose bucket could not be told (they stay where torch recorded them)."""


def attribute_comm(builder: TreeBuilder, ev: EventColumns, parent_ev: list[int], node_of: list[int]) -> None:
    """The pass over one placed cycle (see the module's docstring)."""
    nodes = builder.nodes
    labels = nodes.label
    comm_nodes = {nid for nid, label in enumerate(labels) if label.startswith(COMM_RANGE_PREFIXES)}
    fsdp_nodes = {nid for nid, label in enumerate(labels) if label.startswith(FSDP_PREFIX)}
    if not comm_nodes and not fsdp_nodes:
        return
    cycle = _Cycle(builder, ev, parent_ev, node_of, comm_nodes, fsdp_nodes)
    cycle.exposed = cycle.exposed_times()
    cycle.move_fsdp()
    launches, pairs = cycle.pair_workers()
    split = cycle.split_ddp(launches, pairs)
    cycle.move_workers(launches, pairs, split)
    acc = builder.comm.exposed
    for i, ns in cycle.exposed.items():
        if i not in split:  # a split event's parts went with it; a moved one is on its new node
            node = node_of[i]
            acc[node] = acc.get(node, 0) + ns
    cycle.finish()


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


def shares(value: int, weights: list[int]) -> list[int]:
    """``value`` split in proportion to ``weights`` in whole units that add up to it exactly:
    each part rounded down, the rest handed out one by one to the largest remainders (the first
    of equal ones first)."""
    total = sum(weights)
    if total <= 0:
        return [value] + [0] * (len(weights) - 1)
    parts = [value * w // total for w in weights]
    left = value - sum(parts)
    if left:
        by_remainder = sorted(range(len(weights)), key=lambda k: (-(value * weights[k] % total), k))
        for k in by_remainder[:left]:
            parts[k] += 1
    return parts


@dataclass
class _Target:
    """Where a part of an event goes: under ``parent`` (a layer's node) as ``bwd`` work."""

    parent: int
    weight: int
    bwd: bool


class _Cycle:
    """One cycle's events as the pass reads and moves them."""

    def __init__(self, builder: TreeBuilder, ev: EventColumns, parent_ev: list[int], node_of: list[int],
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
        self.children: dict[int, list[int]] = {}
        for i in events:  # in event order; sorted by start where it matters
            p = parent_ev[i]
            if p >= 0:
                self.children.setdefault(p, []).append(i)
        self._device: Any = None
        self._key_of: dict[int, str] = {}
        self._mirror: dict[tuple[int, int, bool], int] = {}
        self._modules: dict[str, list[tuple[int, int]]] | None = None
        self._producers: dict[Any, tuple[list[int], list[int]]] | None = None
        self._grad_ops: dict[int, list[int]] | None = None
        self.touched: set[int] = set()
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
            self.move(i, [_Target(layer, 1, bwd)], 0)
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
        thread, the worker's range: worker ranges (top-level backend ranges) paired in order with
        the launches that ran no backend range of their own (an NCCL op records its
        ``nccl:all_reduce`` inside), each with the earliest such launch that started before it."""
        outer = self.outer
        names, starts = self.ev.name, self.ev.start
        launches = [i for i in outer if names[i].startswith(_LAUNCH_PREFIXES)]
        workers = [i for i in outer if self.parent_ev[i] < 0 and names[i].startswith(_BACKEND_PREFIXES)]
        queued = [i for i in launches if not self._runs_backend(i)]
        pairs: dict[int, int] = {}
        k = 0
        for w in workers:
            if k < len(queued) and starts[queued[k]] <= starts[w]:
                pairs[queued[k]] = w
                k += 1
        return launches, pairs

    def _runs_backend(self, i: int) -> bool:
        stack = list(self.children.get(i, ()))
        names = self.ev.name
        while stack:
            j = stack.pop()
            if names[j].startswith(_BACKEND_PREFIXES):
                return True
            stack.extend(self.children.get(j, ()))
        return False

    def move_workers(self, launches: list[int], pairs: dict[int, int], split: dict[int, list[_Target]]) -> None:
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
                self.move(worker, [_Target(layer, 1, nodes.bwd[node])], 0)

    # -- DDP -------------------------------------------------------------------------------------
    def split_ddp(self, launches: list[int], pairs: dict[int, int]) -> dict[int, list[_Target]]:
        """Splits each DDP all-reduce (and its worker's range) over its bucket's layers; returns
        the targets of every event split (launches and workers)."""
        ddp = [i for i in launches if self._has_ancestor(i, BACKWARD_PREFIX + ACCUMULATE_GRAD) >= 0]
        if not ddp:
            return {}
        passes = self._backward_passes(ddp)
        done: dict[int, list[_Target]] = {}
        for grads, issued in passes:
            weights = self._from_buckets(grads, issued)
            if weights is None:
                weights = self._from_ready_order(grads, issued)
            for launch, (targets, stay) in zip(issued, weights):
                if not targets:
                    self.builder.comm.unsplit += 1
                    continue
                self.move(launch, targets, stay)
                done[launch] = targets
                worker = pairs.get(launch)
                if worker is not None:
                    self.move(worker, targets, stay)
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

    def _from_buckets(self, grads: list[int], issued: list[int]) -> list[tuple[list[_Target], int]] | None:
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
        out: list[tuple[list[_Target], int]] = []
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
                    targets.append(_Target(layer, nbytes, True))
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

    def _from_ready_order(self, grads: list[int], issued: list[int]) -> list[tuple[list[_Target], int]]:
        """Without a recorded layout: each launch carries the gradients that became ready since
        the previous one (launches with none in between carry the same ones), each gradient on
        the layer of the backward function that ran just before it on its thread, sized by its
        recorded shape. No targets where any gradient's size is unknown."""
        ev, nodes, node_of = self.ev, self.nodes, self.node_of
        starts, tids = ev.start, ev.tid
        producers = self._backward_functions()
        grads = sorted(grads, key=starts.__getitem__)
        out: list[tuple[list[_Target], int]] = []
        g = 0
        current: tuple[list[_Target], int] = ([], 0)
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
                current = ([_Target(layer, size, True) for layer, size in sizes.items() if layer >= 0], sizes.get(-1, 0)) if known else ([], 0)
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

    # -- moving events ---------------------------------------------------------------------------
    def move(self, i: int, targets: list[_Target], stay: int) -> None:
        """Move event ``i`` with everything it ran (ranges, allocations, device work launched
        inside) to copies of their nodes under each target, each figure split by the targets'
        weights (``stay``: the weight of the part that stays where it is). A whole move (one
        target, nothing staying) also puts the events on their new nodes (``node_of``)."""
        ev, nodes, node_of = self.ev, self.nodes, self.node_of
        root = node_of[i]
        weights = [stay] + [t.weight for t in targets]
        whole = stay == 0 and len(targets) == 1
        starts, ends, kinds = ev.start, ev.end, ev.kind
        for j in self._subtree(i):
            node = node_of[j]
            k = kinds[j]
            if k == MEMORY:
                column = nodes.cuda_mem if ev.on_cuda[j] else nodes.cpu_mem
                self._spread(node, root, targets, weights, column, ev.nbytes[j], calls=False)
                continue
            own = ends[j] - starts[j]
            for c in self.children.get(j, ()):
                if kinds[c] != MEMORY:
                    own -= min(ends[c], ends[j]) - starts[c]
            mirrors = self._spread(node, root, targets, weights, nodes.cpu_ns, own, calls=True)
            for d in self._kernels(j):
                self._move_kernel(d, node, root, targets, weights)
            if whole and mirrors:
                node_of[j] = mirrors[0]
        x = self.exposed.get(i, 0)
        if x and not whole:
            exposed = self.builder.comm.exposed
            parts = shares(x, weights)
            for mirror, part in zip(self._mirrors(root, root, targets), parts[1:]):
                exposed[mirror] = exposed.get(mirror, 0) + part
            if parts[0]:
                exposed[root] = exposed.get(root, 0) + parts[0]

    def _spread(self, node: int, root: int, targets: list[_Target], weights: list[int], column: list[int], value: int,
                calls: bool) -> list[int]:  # fmt: skip
        """``value`` of ``column`` at ``node`` shared out to its copies under the targets."""
        mirrors = self._mirrors(node, root, targets)
        if not mirrors:
            return []
        parts = shares(value, weights)
        column[node] -= value - parts[0]
        for mirror, part in zip(mirrors, parts[1:]):
            column[mirror] += part
        if calls:
            if weights[0] == 0:
                self.nodes.calls[node] -= 1
            for mirror in mirrors:
                self.nodes.calls[mirror] += 1
        self.touched.add(node)
        return mirrors

    def _mirrors(self, node: int, root: int, targets: list[_Target]) -> list[int]:
        """``node``'s copy under each target, ``root`` (an ancestor of it, or itself) becoming the
        target's child; none when ``node`` is not below ``root``."""
        chain = [node]
        parent = self.nodes.parent
        while chain[-1] != root:
            p = parent[chain[-1]]
            if p < 0:
                return []
            chain.append(p)
        out = []
        for t in targets:
            at = t.parent
            bwd = t.bwd
            for nid in reversed(chain):
                at = self._mirror_of(nid, at, bwd)
            out.append(at)
        return out

    def _mirror_of(self, nid: int, parent: int, bwd: bool) -> int:
        """The copy of node ``nid`` under ``parent``: backward work when ``bwd`` or its parent is.
        A backward copy under a forward row is keyed apart from a forward one of the same name."""
        key = (nid, parent, bwd)
        found = self._mirror.get(key)
        if found is not None:
            return found
        nodes = self.nodes
        backward = bwd or nodes.bwd[parent]
        child_key = self._key(nid)
        if backward and not nodes.bwd[parent]:
            child_key = _KEY_BACKWARD + child_key
        mirror = nodes.children[parent].get(child_key, -1)
        if mirror < 0:
            mirror = nodes.add(parent, nodes.kind[nid], nodes.label[nid], nodes.type[nid], backward, child_key)
            nodes.shapes[mirror] = nodes.shapes[nid]
            nodes.source[mirror] = nodes.source[nid]
            nodes.covered[mirror] = nodes.covered[mirror] or nodes.covered[nid]
        self._mirror[key] = mirror
        return mirror

    def _key(self, nid: int) -> str:
        """The key of ``nid`` among its parent's children."""
        key = self._key_of.get(nid)
        if key is None:
            for k, child in self.nodes.children[self.nodes.parent[nid]].items():
                self._key_of[child] = k
            key = self._key_of[nid]
        return key

    def _subtree(self, i: int) -> list[int]:
        out, stack = [], [i]
        while stack:
            j = stack.pop()
            out.append(j)
            stack.extend(self.children.get(j, ()))
        return out

    # -- device work launched inside moved events ------------------------------------------------------
    def _kernels(self, j: int) -> list[int]:
        """Device work the builder placed under event ``j``'s node because ``j`` launched it (as
        :meth:`~torchprof._tree.builder.TreeBuilder._add_device` places it): by the correlation
        id of a runtime call directly inside ``j``, else by ``j``'s own id (External id)."""
        ev = self.ev
        if not ev.corr or DEVICE not in ev.kind:
            return []
        by_corr, by_link = self._device_index()
        out: list[int] = []
        for c in self.children.get(j, ()):
            if ev.kind[c] == RUNTIME and ev.corr[c]:
                out += by_corr.get(ev.corr[c], ())
        if ev.ext_id and ev.ext_id[j] and ev.kind[j] in (OP, REGION, MODULE):
            out += by_link.get(ev.ext_id[j], ())
        return out

    def _device_index(self) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
        if self._device is None:
            ev = self.ev
            kinds = ev.kind
            device = [i for i, k in enumerate(kinds) if k == DEVICE]
            runtime_corr = {ev.corr[i] for i, k in enumerate(kinds) if k == RUNTIME and ev.corr[i] and self.parent_ev[i] >= 0}
            by_corr: dict[int, list[int]] = {}
            by_link: dict[int, list[int]] = {}
            for d in device:
                c = ev.corr[d]
                if c and c in runtime_corr:
                    by_corr.setdefault(c, []).append(d)
                elif ev.link[d]:
                    by_link.setdefault(ev.link[d], []).append(d)
            split = device_time([ev.name[d] for d in device], [ev.start[d] for d in device], [ev.end[d] for d in device],
                                [device_of(ev.tid[d]) for d in device], ev.span)  # fmt: skip
            self._device = (by_corr, by_link, {d: k for k, d in enumerate(device)}, split)
        return self._device[0], self._device[1]

    def _move_kernel(self, d: int, launcher: int, root: int, targets: list[_Target], weights: list[int]) -> None:
        """Device activity ``d``, launched from a node ``launcher`` being moved, shared out with
        its device-time split (kind of work, overlapped comm, idle time it ended)."""
        ev, nodes = self.ev, self.nodes
        node = nodes.children[launcher].get(TAG_KERNEL + ev.name[d], -1)
        if node < 0:
            return
        dur = ev.end[d] - ev.start[d]
        mirrors = self._spread(node, root, targets, weights, nodes.cuda_ns, dur, calls=True)
        if not mirrors:
            return
        _, _, position, split = self._device
        k = position[d]
        values = [0] * ROW
        values[split.work[k]] = dur
        values[OVERLAP] = split.overlap_ns[k]
        values[IDLE] = split.idle_ns[k]
        per_node = self.builder.device_split
        row = per_node.setdefault(node, [0] * ROW)
        for f, value in enumerate(values):
            if value:
                parts = shares(value, weights)
                row[f] -= value - parts[0]
                for mirror, part in zip(mirrors, parts[1:]):
                    per_node.setdefault(mirror, [0] * ROW)[f] += part

    # -- the end of the pass -----------------------------------------------------------------------------
    def finish(self) -> None:
        """Rows that every event left (no calls, no time, nothing below them) leave the tree,
        emptied parents after their children; not when memory over time may name them."""
        if self.builder.memory or not self.touched:
            return
        nodes, split, exposed = self.nodes, self.builder.device_split, self.builder.comm.exposed
        steps = {s["node"] for s in self.builder.steps}
        pending = [-nid for nid in self.touched]
        heapq.heapify(pending)
        seen = set(self.touched)
        while pending:
            nid = -heapq.heappop(pending)  # children (larger ids) before their parents
            p = nodes.parent[nid]
            if p < 0 or nid in steps or nodes.children[nid] or nodes.calls[nid] or nodes.cpu_ns[nid] or nodes.cuda_ns[nid]:
                continue
            if nodes.cpu_mem[nid] or nodes.cuda_mem[nid] or nodes.macs[nid] or nodes.flops[nid] or exposed.get(nid):
                continue
            if any(split.get(nid, ())):
                continue
            nodes.children[p].pop(self._key(nid), None)
            split.pop(nid, None)
            if p not in seen:
                seen.add(p)
                heapq.heappush(pending, -p)


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
