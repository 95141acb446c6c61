"""From the growing node store to the finished :class:`~torchprof._tree.tree.Tree`: totals, the
pre-order, unique paths, and every registry column computed by the function named for it here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from .._vocab import COLUMNS, NODE_KIND_OF_EVENT, RANK_COLUMNS, STEP_PREFIX, EventKind
from . import device_time as _device
from .comm import comm_sums
from .memory import act_values, memory_report, peak_values
from .mfu import tree_mfu
from .modules import root_modules
from .nodes import Nodes
from .tree import Columns, PathColumn, PathTrie, StepTotals, Tree

if TYPE_CHECKING:
    from .built import BuildState

OP, REGION, MODULE, RUNTIME, DEVICE = map(int, (EventKind.OP, EventKind.REGION, EventKind.MODULE, EventKind.RUNTIME, EventKind.DEVICE))
NAN = float("nan")
US = 1000.0  # ns per µs
#: ``df.kind`` of each event kind, one string object each (not one per row).
_KIND_LABEL = {k: v.label for k, v in NODE_KIND_OF_EVENT.items()}
COLUMN_NAMES = [c.name for c in COLUMNS]


@dataclass
class Sums:
    """Per-node sums over each subtree (node ids, not rows)."""

    total: dict[str, list[int]]
    """``cpu_ns``, ``cuda_ns``, ``cpu_mem``, ``cuda_mem``, ``macs``, ``flops`` of the subtree."""
    bwd_self: dict[str, list[int]]
    """``cpu``/``cuda``: the node's own time if it is backward work, else 0."""
    bwd: dict[str, list[int]]
    """``cpu``/``cuda``: backward time of the subtree."""
    layer: dict[str, list[int]]
    """``cpu``/``cuda``: total time of a node's op and kernel children (folded into a layer's self)."""
    layer_bwd: dict[str, list[int]]
    """``cpu``/``cuda``: the backward part of ``layer``."""
    fwd: dict[str, list[int]]
    """``cpu``/``cuda``: forward time of the subtree (work inside a module that is not backward)."""
    other: dict[str, list[int]]
    """``cpu``/``cuda``: the rest of the subtree: neither in a module's forward nor backward
    (the optimizer, a loss computed outside modules, data loading, collectives outside modules)."""


def in_module(nodes: Nodes) -> list[bool]:
    """True for a module node and everything below one. Parents are created before their
    children, so one forward sweep over node ids sees every parent first."""
    parent, kind = nodes.parent, nodes.kind
    inside = [False] * len(nodes)
    for nid in range(1, len(nodes)):
        inside[nid] = kind[nid] == MODULE or inside[parent[nid]]
    return inside


def rollup(nodes: Nodes) -> Sums:
    """Totals bottom-up: children are always created after their parent, so a reverse sweep over
    node ids sees every child before its parent. Every node's own time is exactly one of
    backward (``bwd``), forward (not backward, inside a module) or other, so the three parts add
    up to the total at every node. O(nodes)."""
    count = len(nodes)
    parent, kind = nodes.parent, nodes.kind
    total = {name: list(getattr(nodes, name)) for name in ("cpu_ns", "cuda_ns", "cpu_mem", "cuda_mem", "macs", "flops")}
    bwd_self = {d: [c if b else 0 for c, b in zip(getattr(nodes, d + "_ns"), nodes.bwd)] for d in ("cpu", "cuda")}
    bwd = {d: list(v) for d, v in bwd_self.items()}
    inside = in_module(nodes)
    fwd = {d: [0 if b or not m else c for c, b, m in zip(getattr(nodes, d + "_ns"), nodes.bwd, inside)] for d in ("cpu", "cuda")}
    other = {d: [0 if b or m else c for c, b, m in zip(getattr(nodes, d + "_ns"), nodes.bwd, inside)] for d in ("cpu", "cuda")}
    layer = {d: [0] * count for d in ("cpu", "cuda")}
    layer_bwd = {d: [0] * count for d in ("cpu", "cuda")}
    tot_cpu, tot_cuda = total["cpu_ns"], total["cuda_ns"]
    bwd_cpu, bwd_cuda = bwd["cpu"], bwd["cuda"]
    layers = (MODULE, REGION)
    for nid in range(count - 1, 0, -1):
        p = parent[nid]
        for col in total.values():
            col[p] += col[nid]
        bwd_cpu[p] += bwd_cpu[nid]
        bwd_cuda[p] += bwd_cuda[nid]
        for part in (fwd, other):
            part["cpu"][p] += part["cpu"][nid]
            part["cuda"][p] += part["cuda"][nid]
        if kind[nid] not in layers:
            layer["cpu"][p] += tot_cpu[nid]
            layer["cuda"][p] += tot_cuda[nid]
            layer_bwd["cpu"][p] += bwd_cpu[nid]
            layer_bwd["cuda"][p] += bwd_cuda[nid]
    return Sums(total, bwd_self, bwd, layer, layer_bwd, fwd, other)


@dataclass
class Finishing:
    """What the column functions read: the builder's nodes and facts, the sums, the row order."""

    builder: BuildState
    nodes: Nodes
    sums: Sums
    order: list[int]
    """Node ids in row order (pre-order)."""
    depth: list[int]
    paths: PathColumn
    """Each row's path (built on demand: see :class:`~torchprof._tree.tree.PathColumn`)."""
    names: dict[int, str]
    parent_index: list[int]
    has_flops: bool

    def per_row(self, values: list[Any]) -> list[Any]:
        return [values[nid] for nid in self.order]

    @cached_property
    def flops_unknown(self) -> list[bool]:
        """Nodes whose FLOPs are unknown (see :meth:`~torchprof._tree.flops.count.FlopCount.unknown_rows`)."""
        return self.builder.flop_count.unknown_rows(self.nodes)

    @cached_property
    def macs_unknown(self) -> list[bool]:
        return self.builder.flop_count.unknown_rows(self.nodes, macs=True)

    def counted(self, column: str) -> list[float]:
        """A FLOP column's subtree totals per row, NaN where part of them is unknown."""
        total, unknown = self.sums.total[column], self.macs_unknown if column == "macs" else self.flops_unknown
        return [NAN if unknown[nid] else float(total[nid]) for nid in self.order]

    def us(self, values: list[int]) -> list[float]:
        return [values[nid] / US for nid in self.order]

    @cached_property
    def device_time(self) -> list[list[int]]:
        """Per device-time field (:mod:`~torchprof._tree.device_time`: ns of compute, comm and
        memcpy, comm overlapped, idle ended), its total over each node's subtree."""
        return device_time_sums(self.nodes, self.builder.device_split)

    @cached_property
    def comm(self) -> tuple[list[int], list[int]]:
        """Per node, its subtree's host communication ns and the exposed part of it."""
        return comm_sums(self.nodes, self.builder.comm.exposed)

    def device_us(self, field: int) -> list[float]:
        return self.us(self.device_time[field])

    def layer_self(self, device: str, bwd: bool) -> list[float]:
        """Self time with a layer's op and kernel children folded in (ops keep their own)."""
        own = self.sums.bwd_self[device] if bwd else getattr(self.nodes, device + "_ns")
        extra = (self.sums.layer_bwd if bwd else self.sums.layer)[device]
        kind = self.nodes.kind
        return [(own[nid] + (extra[nid] if kind[nid] in (MODULE, REGION) else 0)) / US for nid in self.order]


def _cuda(fn: Callable[[Finishing], list[Any]]) -> Callable[[Finishing], list[Any]]:
    """A device column: NaN everywhere when the profile has no device."""
    return lambda f: fn(f) if f.builder.cuda else [NAN] * len(f.order)


def _mem(fn: Callable[[Finishing], list[Any]]) -> Callable[[Finishing], list[Any]]:
    """A memory column: NaN everywhere without memory events."""
    return lambda f: fn(f) if f.builder.memory else [NAN] * len(f.order)


def _over_time(values: Callable[[Any, bool], list[float | None]], device: bool) -> Callable[[Finishing], list[Any]]:
    """A column of memory over time (:mod:`~torchprof._tree.memory`): NaN everywhere without
    memory events of its kind (host or device), and where a node has no value. Kept bytes need
    allocation addresses too (to pair each free with its allocation)."""

    def compute(f: Finishing) -> list[Any]:
        ledger = f.builder.ledger
        has = any((k >= 0) == device for k in ledger.devices)
        if not has or (values is act_values and not ledger.has_addresses):
            return [NAN] * len(f.order)
        per_node = values(ledger, device)
        return [NAN if (v := per_node[nid]) is None else v for nid in f.order]

    return compute


def _device_mem(fn: Callable[[Finishing], list[Any]]) -> Callable[[Finishing], list[Any]]:
    """A device memory column: NaN everywhere unless memory was recorded on a device. A CPU run
    with ``memory=True`` recorded no device bytes at all, which is "not recorded", not 0."""
    return lambda f: fn(f) if f.builder.memory and (f.builder.cuda or any(f.nodes.cuda_mem)) else [NAN] * len(f.order)


def _exec_order(f: Finishing) -> list[int]:
    """Each row's rank in execution order. Nodes are created as their first range is placed, and
    ranges are placed in time order (a parent before its children, forward before the backward
    that follows it), so the node id orders nodes by when they first ran."""
    rank = {nid: r for r, nid in enumerate(sorted(f.order))}
    return [rank[nid] for nid in f.order]


def _counted(fn: Callable[[Finishing], list[Any]]) -> Callable[[Finishing], list[Any]]:
    """A FLOP column: NaN everywhere when shapes were not recorded."""
    return lambda f: fn(f) if f.has_flops else [NAN] * len(f.order)


#: How each registry column is computed, by name (rows in pre-order).
COMPUTE: dict[str, Callable[[Finishing], list[Any]]] = {
    "path": lambda f: [],  # made on first read (see tree.Columns)
    "name": lambda f: [f.names[nid] for nid in f.order],
    "kind": lambda f: [_KIND_LABEL[f.nodes.kind[nid]] for nid in f.order],
    "type": lambda f: f.per_row(f.nodes.type),
    "module": lambda f: [f.nodes.label[nid] if f.nodes.kind[nid] == MODULE else None for nid in f.order],
    "parent": lambda f: [],
    "depth": lambda f: f.per_row(f.depth),
    "exec_order": _exec_order,
    "calls": lambda f: [f.nodes.calls[nid] if nid != f.builder.root else 1 for nid in f.order],
    "calls_per_step": lambda f: _calls_per_step(f),
    "self_cpu_us": lambda f: f.us(f.nodes.cpu_ns),
    "cpu_us": lambda f: f.us(f.sums.total["cpu_ns"]),
    "fwd_cpu_us": lambda f: f.us(f.sums.fwd["cpu"]),
    "other_cpu_us": lambda f: f.us(f.sums.other["cpu"]),
    "comm_cpu_us": lambda f: f.us(f.comm[0]),
    "comm_exposed_cpu_us": lambda f: f.us(f.comm[1]),
    "fwd_cuda_us": _cuda(lambda f: f.us(f.sums.fwd["cuda"])),
    "other_cuda_us": _cuda(lambda f: f.us(f.sums.other["cuda"])),
    "self_cuda_us": _cuda(lambda f: f.us(f.nodes.cuda_ns)),
    "cuda_us": _cuda(lambda f: f.us(f.sums.total["cuda_ns"])),
    "bwd_self_cpu_us": lambda f: f.us(f.sums.bwd_self["cpu"]),
    "bwd_cpu_us": lambda f: f.us(f.sums.bwd["cpu"]),
    "bwd_self_cuda_us": _cuda(lambda f: f.us(f.sums.bwd_self["cuda"])),
    "bwd_cuda_us": _cuda(lambda f: f.us(f.sums.bwd["cuda"])),
    "compute_cuda_us": _cuda(lambda f: f.device_us(_device.COMPUTE)),
    "comm_cuda_us": _cuda(lambda f: f.device_us(_device.COMM)),
    "comm_overlap_cuda_us": _cuda(lambda f: f.device_us(_device.OVERLAP)),
    "comm_exposed_cuda_us": _cuda(lambda f: [c - o for c, o in zip(f.device_us(_device.COMM), f.device_us(_device.OVERLAP))]),
    "memcpy_cuda_us": _cuda(lambda f: f.device_us(_device.MEMCPY)),
    "idle_cuda_us": _cuda(lambda f: f.device_us(_device.IDLE)),
    "self_cpu_mem": _mem(lambda f: [float(v) for v in f.per_row(f.nodes.cpu_mem)]),
    "cpu_mem": _mem(lambda f: [float(v) for v in f.per_row(f.sums.total["cpu_mem"])]),
    "self_cuda_mem": _device_mem(lambda f: [float(v) for v in f.per_row(f.nodes.cuda_mem)]),
    "cuda_mem": _device_mem(lambda f: [float(v) for v in f.per_row(f.sums.total["cuda_mem"])]),
    "act_cpu_mem": _over_time(act_values, False),
    "peak_cpu_mem": _over_time(peak_values, False),
    "act_cuda_mem": _over_time(act_values, True),
    "peak_cuda_mem": _over_time(peak_values, True),
    "params": lambda f: _params(f),
    "macs": _counted(lambda f: f.counted("macs")),
    "flops": _counted(lambda f: f.counted("flops")),
    "mfu": lambda f: [NAN] * len(f.order),  # needs the finished times and FLOPs: set in finish_tree
    "input_shapes": lambda f: [_shape_text(f.nodes.shapes[nid]) for nid in f.order],
    "source": lambda f: f.per_row(f.nodes.source),
    "layer_self_cpu_us": lambda f: f.layer_self("cpu", False),
    "layer_self_cuda_us": _cuda(lambda f: f.layer_self("cuda", False)),
    "layer_bwd_self_cpu_us": lambda f: f.layer_self("cpu", True),
    "layer_bwd_self_cuda_us": _cuda(lambda f: f.layer_self("cuda", True)),
    "is_backward": lambda f: f.per_row(f.nodes.bwd),
    # One source is one rank: the ranks' range is filled where several are merged (``_tree/ranks.py``).
    **{name: (lambda f: [NAN] * len(f.order)) for name in RANK_COLUMNS},
}


def finish_tree(builder: BuildState) -> Tree:
    """Every registry column, rows in pre-order with siblings by descending total CPU time."""
    nodes = builder.nodes
    sums = rollup(nodes)
    order, depth = preorder(nodes, builder.root, sums.total["cpu_ns"], sums.total["cuda_ns"])
    scopes, labels, names = unique_paths(nodes, builder.root, order)
    row_of = [-1] * len(nodes)
    for row, nid in enumerate(order):
        row_of[nid] = row
    if builder.memory and builder.ledger.peaks:
        # The known tensors are all in: what each peak holds beyond the allocator's own total.
        builder.ledger.settle(builder.tensors)
        builder.peak = builder.ledger.peak_pair()
    parent_index = [row_of[nodes.parent[nid]] if nodes.parent[nid] >= 0 else -1 for nid in order]
    paths = PathColumn([row_of[scopes[nid]] if scopes[nid] >= 0 else -1 for nid in order], [labels[nid] for nid in order])
    has_flops = builder.want_flops and builder.flop_count.has_flops()
    # Every row that holds an op of unknown cost is NaN (Finishing.flops_unknown): a row never
    # shows part of its work.
    unknown_ops = builder.flop_count.finish(nodes) if has_flops else {}
    f = Finishing(builder, nodes, sums, order, depth, paths, names, parent_index, has_flops)
    # path and parent are made when first read (see tree.Columns).
    columns = Columns({c.name: COMPUTE[c.name](f) for c in COLUMNS if c.name not in Columns.LAZY}, paths, parent_index,
                      COLUMN_NAMES)  # fmt: skip
    peak = builder.peak_flops  # a devices.Peak set by whoever built the tree, if any
    if peak is not None:
        columns["mfu"] = tree_mfu(columns, builder.cuda, peak.flops_per_s)
    tot_cpu, tot_cuda, bwd_cpu = sums.total["cpu_ns"], sums.total["cuda_ns"], sums.bwd["cpu"]
    steps: list[StepTotals] = [
        {"step": s["step"], "wall_us": s["wall_us"], "cpu_us": tot_cpu[s["node"]] / US,
         "cuda_us": tot_cuda[s["node"]] / US if builder.cuda else NAN,
         "bwd_cpu_us": bwd_cpu[s["node"]] / US,
         "gpu_busy_us": s.get("gpu_busy_ns", 0) / US if builder.cuda else NAN, "comm_us": s.get("comm_ns", 0) / US}
        for s in builder.steps
    ]  # fmt: skip
    return Tree(
        columns=columns,
        parent_index=parent_index,
        unsupported_ops=unknown_ops,
        steps=steps,
        peak_cpu_mem=float(builder.peak[0]) if builder.memory else NAN,
        # Device memory is recorded without device activities too (memory events alone).
        peak_cuda_mem=float(builder.peak[1]) if builder.memory and (builder.cuda or any(k >= 0 for k in builder.ledger.devices)) else NAN,
        has_cuda=builder.cuda,
        has_memory=builder.memory,
        has_flops=has_flops,
        event_count=builder.event_count,
        gpu_busy_us=builder.device_busy_ns / US if builder.device_window_ns else NAN,
        gpu_window_us=builder.device_window_ns / US if builder.device_window_ns else NAN,
        gpu_time_us=gpu_time(builder),
        comm_us=builder.comm_ns / US,
        overruns=sorted(([row_of[nid], ranges, ns / US] for nid, (ranges, ns) in builder.overrun.items()),
                        key=lambda r: (-r[2], r[0])),
        memory=memory_report(builder.ledger, builder.tensors, order, lambda nid: paths[row_of[nid]], columns["module"]) if builder.memory else {},
        peak_flops=peak.to_json() if peak is not None else {},
        cpu_union_us=builder.cpu_union_ns / US if builder.threads else NAN,
        threads=[{"thread": tid, "cpu_us": cpu / US, "compile_us": compile_ns / US}
                 for tid, (cpu, compile_ns) in sorted(builder.threads.items(), key=lambda kv: -kv[1][0])],
    )


def device_time_sums(nodes: Nodes, split: dict[int, list[int]]) -> list[list[int]]:
    """Per device-time field, each node's subtree total: only nodes holding device work have a
    row of their own, and a reverse sweep over node ids (children after parents) adds each node
    into its parent, so every total is its own row plus its children's. O(nodes)."""
    count, parent = len(nodes), nodes.parent
    fields = [[0] * count for _ in range(_device.ROW)]
    for nid, row in split.items():
        for field, ns in enumerate(row):
            fields[field][nid] = ns
    for values in fields:
        for nid in range(count - 1, 0, -1):
            values[parent[nid]] += values[nid]
    return fields


def gpu_time(builder: BuildState) -> dict[str, float]:
    """The run's device time by what it did (``prof.summary``): the time compute, communication
    and memcpy/memset work ran (their unions) and the time communication ran beside compute; NaN
    without device events."""
    totals = builder.device_union_ns
    have = bool(builder.device_window_ns)
    return {key: totals[field] / US if have else NAN for key, field in (
        ("gpu_compute_us", _device.COMPUTE), ("gpu_comm_us", _device.COMM), ("gpu_memcpy_us", _device.MEMCPY),
        ("gpu_comm_overlap_us", _device.OVERLAP))}  # fmt: skip


def preorder(nodes: Nodes, root: int, tot_cpu: list[int], tot_cuda: list[int]) -> tuple[list[int], list[int]]:
    """Pre-order with siblings by descending total CPU time (then device time, then label);
    an explicit stack, so no depth reaches Python's recursion limit."""
    depth = [0] * len(nodes)
    order: list[int] = []
    stack = [root]
    label = nodes.label
    while stack:
        nid = stack.pop()
        order.append(nid)
        kids = list(nodes.children[nid].values())
        if kids:
            kids.sort(key=lambda c: (-tot_cpu[c], -tot_cuda[c], label[c]))
            d = depth[nid] + 1
            for c in kids:
                depth[c] = d
            stack.extend(reversed(kids))  # so the largest is popped first
    return order, depth


def unique_paths(nodes: Nodes, root: int, order: list[int]) -> tuple[dict[int, int], dict[int, str], dict[int, str]]:
    """Unique row keys, as each node's scope and label (``path = <scope's path>/<label>``, the
    bare label without a scope: see :class:`~torchprof._tree.tree.PathColumn`) and its name. A
    module keeps its dotted ``named_modules`` path (``ResNet.layer1.0``), also when a region or op
    sits between it and the module that contains it (DDP's ``DistributedDataParallel.forward``, a
    checkpoint function), and its name is the part after that module's path; below a region
    outside every module (``ProfilerStep#3``) the region's path is a prefix
    (``ProfilerStep#3/ResNet``). Anything else is ``<parent path>/<name>``; children of the root
    drop the root's label. A path met again gets `` #2``, `` #3``, ... on its label. A layer
    shared by two blocks can have a row under a module that is not its named parent (the block
    that does not hold it by name called it): such rows are named after all the others, so the
    row under its named parent keeps the bare path whichever ran first, and one that would repeat
    a path is named within its enclosing module instead (``Pair/Pair.left.0``): the same paths
    every run.

    Paths are compared without being built (:class:`~torchprof._tree.tree.PathTrie`):
    O(nodes + the labels' segments), so deep trees cost memory linear in their rows.
    """
    scopes: dict[int, int] = {}
    labels: dict[int, str] = {}
    names: dict[int, str] = {}
    enclosing: dict[int, int] = {root: -1}  # nearest module at or above each node
    trie = PathTrie()
    at: dict[int, int] = {-1: -1}  # the trie node of each node's path (-1: the empty path)
    node_label, node_kind, node_parent = nodes.label, nodes.kind, nodes.parent

    for nid in _named_parents_first(nodes, order):
        p = node_parent[nid]
        label = node_label[nid]
        name = label
        if p < 0:
            scope = -1
        elif node_kind[nid] == MODULE:
            outer = enclosing[p]
            outer_label = node_label[outer] if outer >= 0 else ""
            cut = len(outer_label)
            if outer >= 0 and label.startswith(outer_label) and label[cut : cut + 1] == ".":
                scope = scopes[outer]
                name = label[cut + 1 :]
                if trie.is_taken(at[scope], label) and label.rpartition(".")[0] != outer_label:
                    scope = outer  # a shared layer's second place: within the module it ran in
            else:
                scope = scopes[p] if node_kind[p] == MODULE else (-1 if p == root else p)
        else:
            scope = -1 if p == root else p
        if p >= 0:
            enclosing[nid] = nid if node_kind[nid] == MODULE else enclosing[p]
        label, at[nid] = trie.claim(at[scope], label)
        scopes[nid] = scope
        labels[nid] = label
        names[nid] = name
    return scopes, labels, names


def _named_parents_first(nodes: Nodes, order: list[int]) -> list[int]:
    """``order`` with the subtrees of module rows whose nearest module is not their named parent
    (``M.a.b`` under ``M``, not under ``M.a``) moved after everything else, each still after its
    parent and in pre-order: those are the rows that may repeat a path, and they give way."""
    label, kind, parent = nodes.label, nodes.kind, nodes.parent
    module_above: dict[int, int] = {}
    later: set[int] = set()
    first: list[int] = []
    rest: list[int] = []
    for nid in order:
        p = parent[nid]
        outer = module_above.get(p, -1) if p >= 0 else -1
        if p in later or (kind[nid] == MODULE and outer >= 0 and label[nid].rpartition(".")[0] != label[outer]):
            later.add(nid)
        module_above[nid] = nid if kind[nid] == MODULE else outer
        (rest if nid in later else first).append(nid)
    return first + rest if rest else order


def _calls_per_step(f: Finishing) -> list[float]:
    steps = len(f.builder.steps)
    if not steps:
        return [NAN] * len(f.order)
    nodes = f.nodes
    in_step = [False] * len(nodes)
    for nid in f.order:  # pre-order: a parent's flag is known before its children's
        p = nodes.parent[nid]
        if p >= 0:
            in_step[nid] = in_step[p] or (nodes.kind[p] == REGION and nodes.label[p].startswith(STEP_PREFIX))
    return [float(nodes.calls[nid]) if in_step[nid] else (1 if nid == f.builder.root else nodes.calls[nid]) / steps
            for nid in f.order]  # fmt: skip


def _params(f: Finishing) -> list[float]:
    """Parameters of each module row; the root's are those of the root modules that ran, each
    counted once wherever it ran (under a region such as DistributedDataParallel.forward, under
    several steps, or again inside backward)."""
    nodes, modules = f.nodes, f.builder.modules
    out = []
    for nid in f.order:
        if nid == f.builder.root:
            seen = {nodes.label[m] for m in range(len(nodes)) if nodes.kind[m] == MODULE}
            roots = root_modules(modules, seen)
            out.append(float(sum(modules[r].params for r in roots)) if roots else NAN)
        elif nodes.kind[nid] == MODULE:
            info = modules.get(nodes.label[nid])
            out.append(float(info.params) if info is not None else NAN)
        else:
            out.append(NAN)
    return out


def _shape_text(shapes: Any) -> str | None:
    if not shapes:
        return None
    if isinstance(shapes, str):
        return shapes
    return str([list(s) if isinstance(s, (list, tuple)) else s for s in shapes])
