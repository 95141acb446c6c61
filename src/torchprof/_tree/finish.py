"""From the growing node store to the finished :class:`~torchprof._tree.tree.Tree`: totals, the
pre-order, unique paths, and every registry column computed by the function named for it here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._records import ModuleInfo
from .._vocab import BACKWARD_PREFIX, COLUMNS, NODE_KIND_OF_EVENT, STEP_PREFIX, EventKind
from . import flops as _flops
from .nodes import Nodes
from .tree import Tree

if TYPE_CHECKING:
    from .builder import TreeBuilder

OP, REGION, MODULE, RUNTIME, DEVICE = map(int, (EventKind.OP, EventKind.REGION, EventKind.MODULE, EventKind.RUNTIME, EventKind.DEVICE))
NAN = float("nan")
US = 1000.0  # ns per µs


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


def rollup(nodes: Nodes) -> Sums:
    """Totals bottom-up: children are always created after their parent, so a reverse sweep over
    node ids sees every child before its parent. O(nodes)."""
    count = len(nodes)
    parent, kind = nodes.parent, nodes.kind
    total = {name: list(getattr(nodes, name)) for name in ("cpu_ns", "cuda_ns", "cpu_mem", "cuda_mem", "macs", "flops")}
    bwd_self = {d: [c if b else 0 for c, b in zip(getattr(nodes, d + "_ns"), nodes.bwd)] for d in ("cpu", "cuda")}
    bwd = {d: list(v) for d, v in bwd_self.items()}
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
        if kind[nid] not in layers:
            layer["cpu"][p] += tot_cpu[nid]
            layer["cuda"][p] += tot_cuda[nid]
            layer_bwd["cpu"][p] += bwd_cpu[nid]
            layer_bwd["cuda"][p] += bwd_cuda[nid]
    return Sums(total, bwd_self, bwd, layer, layer_bwd)


@dataclass
class Finishing:
    """What the column functions read: the builder's nodes and facts, the sums, the row order."""

    builder: TreeBuilder
    nodes: Nodes
    sums: Sums
    order: list[int]
    """Node ids in row order (pre-order)."""
    depth: list[int]
    paths: dict[int, str]
    names: dict[int, str]
    has_flops: bool

    def per_row(self, values: list[Any]) -> list[Any]:
        return [values[nid] for nid in self.order]

    def us(self, values: list[int]) -> list[float]:
        return [values[nid] / US for nid in self.order]

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


def _counted(fn: Callable[[Finishing], list[Any]]) -> Callable[[Finishing], list[Any]]:
    """A FLOP column: NaN everywhere when shapes were not recorded."""
    return lambda f: fn(f) if f.has_flops else [NAN] * len(f.order)


#: How each registry column is computed, by name (rows in pre-order).
COMPUTE: dict[str, Callable[[Finishing], list[Any]]] = {
    "path": lambda f: [f.paths[nid] for nid in f.order],
    "name": lambda f: [f.names[nid] for nid in f.order],
    "kind": lambda f: [NODE_KIND_OF_EVENT[f.nodes.kind[nid]].label for nid in f.order],
    "type": lambda f: f.per_row(f.nodes.type),
    "parent": lambda f: [f.paths[f.nodes.parent[nid]] if f.nodes.parent[nid] >= 0 else None for nid in f.order],
    "depth": lambda f: f.per_row(f.depth),
    "calls": lambda f: [f.nodes.calls[nid] if nid != f.builder.root else 1 for nid in f.order],
    "calls_per_step": lambda f: _calls_per_step(f),
    "self_cpu_us": lambda f: f.us(f.nodes.cpu_ns),
    "cpu_us": lambda f: f.us(f.sums.total["cpu_ns"]),
    "fwd_cpu_us": lambda f: [(f.sums.total["cpu_ns"][nid] - f.sums.bwd["cpu"][nid]) / US for nid in f.order],
    "self_cuda_us": _cuda(lambda f: f.us(f.nodes.cuda_ns)),
    "cuda_us": _cuda(lambda f: f.us(f.sums.total["cuda_ns"])),
    "bwd_self_cpu_us": lambda f: f.us(f.sums.bwd_self["cpu"]),
    "bwd_cpu_us": lambda f: f.us(f.sums.bwd["cpu"]),
    "bwd_self_cuda_us": _cuda(lambda f: f.us(f.sums.bwd_self["cuda"])),
    "bwd_cuda_us": _cuda(lambda f: f.us(f.sums.bwd["cuda"])),
    "self_cpu_mem": _mem(lambda f: [float(v) for v in f.per_row(f.nodes.cpu_mem)]),
    "cpu_mem": _mem(lambda f: [float(v) for v in f.per_row(f.sums.total["cpu_mem"])]),
    "self_cuda_mem": _mem(lambda f: [float(v) for v in f.per_row(f.nodes.cuda_mem)]),
    "cuda_mem": _mem(lambda f: [float(v) for v in f.per_row(f.sums.total["cuda_mem"])]),
    "params": lambda f: _params(f),
    "macs": _counted(lambda f: [float(v) for v in f.per_row(f.sums.total["macs"])]),
    "flops": _counted(lambda f: [float(v) for v in f.per_row(f.sums.total["flops"])]),
    "input_shapes": lambda f: [_shape_text(f.nodes.shapes[nid]) for nid in f.order],
    "source": lambda f: f.per_row(f.nodes.source),
    "layer_self_cpu_us": lambda f: f.layer_self("cpu", False),
    "layer_self_cuda_us": _cuda(lambda f: f.layer_self("cuda", False)),
    "layer_bwd_self_cpu_us": lambda f: f.layer_self("cpu", True),
    "layer_bwd_self_cuda_us": _cuda(lambda f: f.layer_self("cuda", True)),
    "is_backward": lambda f: f.per_row(f.nodes.bwd),
}


def finish_tree(builder: TreeBuilder) -> Tree:
    """Every registry column, rows in pre-order with siblings by descending total CPU time."""
    nodes = builder.nodes
    sums = rollup(nodes)
    order, depth = preorder(nodes, builder.root, sums.total["cpu_ns"], sums.total["cuda_ns"])
    paths, names = unique_paths(nodes, builder.root, order)
    has_flops = builder.want_flops and builder.saw_shapes
    f = Finishing(builder, nodes, sums, order, depth, paths, names, has_flops)
    columns = {c.name: COMPUTE[c.name](f) for c in COLUMNS}
    row_of = {nid: row for row, nid in enumerate(order)}
    parent_index = [row_of[nodes.parent[nid]] if nodes.parent[nid] >= 0 else -1 for nid in order]
    tot_cpu, tot_cuda, bwd_cpu = sums.total["cpu_ns"], sums.total["cuda_ns"], sums.bwd["cpu"]
    steps = [
        {"step": s["step"], "wall_us": s["wall_us"], "cpu_us": tot_cpu[s["node"]] / US,
         "cuda_us": tot_cuda[s["node"]] / US if builder.cuda else NAN,
         "bwd_cpu_us": bwd_cpu[s["node"]] / US}
        for s in builder.steps
    ]  # fmt: skip
    return Tree(
        columns=columns,
        parent_index=parent_index,
        unsupported_ops=unsupported_ops(builder) if has_flops else {},
        steps=steps,
        peak_cpu_mem=float(builder.peak[0]) if builder.memory else NAN,
        peak_cuda_mem=float(builder.peak[1]) if builder.memory and builder.cuda else NAN,
        has_cuda=builder.cuda,
        has_memory=builder.memory,
        has_flops=has_flops,
        event_count=builder.event_count,
    )


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


def unique_paths(nodes: Nodes, root: int, order: list[int]) -> tuple[dict[int, str], dict[int, str]]:
    """Unique row keys. Modules keep their dotted ``named_modules`` path (``ResNet.layer1.0``);
    anything else is ``<parent path>/<name>``; children of the root drop the root's label. A path
    met again gets `` #2``, `` #3``, ...

    A path is ``<scope's path>/<label>`` (or the bare label at the top), its scope the parent, or
    for a module the region or op above its run of modules. When no label holds a "/", two paths
    are equal exactly when scope and label are, so uniqueness is checked on (scope, label): a
    deep path (18 KB at depth 3000) is then built once and never hashed. O(nodes) plus building
    the path strings themselves.
    """
    paths: dict[int, str] = {}
    names: dict[int, str] = {}
    scope_of: dict[int, int] = {}  # the node whose path comes before a module's label (-1: none)
    by_text = any("/" in label for label in nodes.label)  # then only whole paths can tell
    taken: set[Any] = set()
    for nid in order:
        p = nodes.parent[nid]
        label = nodes.label[nid]
        name = label
        if p < 0:
            scope = -1
        elif nodes.kind[nid] == MODULE:
            scope = scope_of[p] if nodes.kind[p] == MODULE else (-1 if p == root else p)
            parent_label = nodes.label[p]
            cut = len(parent_label)
            if nodes.kind[p] == MODULE and label.startswith(parent_label) and label[cut : cut + 1] == ".":
                name = label[cut + 1 :]
        else:
            scope = -1 if p == root else p
        scope_of[nid] = scope
        prefix = paths[scope] if scope >= 0 else None
        path = label if prefix is None else f"{prefix}/{label}"
        key: Any = path if by_text else (scope, label)
        if key in taken:
            n = 2
            while (f"{path} #{n}" if by_text else (scope, f"{label} #{n}")) in taken:
                n += 1
            path = f"{path} #{n}"
            key = path if by_text else (scope, f"{label} #{n}")
        taken.add(key)
        paths[nid] = path
        names[nid] = name
    return paths, names


def unsupported_ops(builder: TreeBuilder) -> dict[str, int]:
    """Ops that have no formula, are not known to cost no FLOPs, are not inside an op that was
    counted and have no such op below them either (a leaf, or an op that only calls free ops,
    like a custom op computing in numpy), ops whose arithmetic depends on the data
    (``DATA_DEPENDENT``, whatever they call), and ops whose formula could not read their
    arguments: their FLOPs are unknown, not zero. Autograd nodes (``AddBackward0``) count as
    free, their arithmetic being in the aten ops below them, unless they launched GPU
    kernels themselves."""
    nodes = builder.nodes
    count = len(nodes)
    labels, kinds, covered, parent = nodes.label, nodes.kind, nodes.covered, nodes.parent
    launches = [False] * count  # the op launched GPU work itself (a runtime call or kernel child)
    for nid in range(1, count):
        if kinds[nid] in (RUNTIME, DEVICE):
            launches[parent[nid]] = True

    def cost_unknown(nid: int) -> bool:
        name = labels[nid]
        return not _flops.is_free(name) or (launches[nid] and _flops.is_autograd_node(name))

    # work_below[n]: an op under n is counted or has unknown cost itself. Children have larger
    # ids than their parent, so one reverse sweep sees a whole subtree before its root.
    work_below = [False] * count
    for nid in range(count - 1, 0, -1):
        if kinds[nid] == OP and (work_below[nid] or covered[nid] or cost_unknown(nid)):
            work_below[parent[nid]] = True
    found: dict[str, int] = {}
    for nid, k in enumerate(kinds):
        if k != OP or covered[nid] or (work_below[nid] and labels[nid] not in _flops.DATA_DEPENDENT):
            continue
        name = labels[nid]
        if nodes.bwd[nid] and name.startswith(BACKWARD_PREFIX):
            continue
        if cost_unknown(nid):
            found[name] = found.get(name, 0) + nodes.calls[nid]
    for name, calls in builder.formula_errors.items():
        found[name] = found.get(name, 0) + calls
    return dict(sorted(found.items(), key=lambda kv: (-kv[1], kv[0])))


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
    """Parameters of each module row; the root has those of the outermost modules seen."""
    nodes, modules = f.nodes, f.builder.modules
    out = []
    for nid in f.order:
        if nid == f.builder.root:
            out.append(root_params(nodes, modules))
        elif nodes.kind[nid] == MODULE:
            info = modules.get(nodes.label[nid])
            out.append(float(info.params) if info is not None else NAN)
        else:
            out.append(NAN)
    return out


def root_params(nodes: Nodes, modules: dict[str, ModuleInfo]) -> float:
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
    return float(total) if found else NAN


def _shape_text(shapes: Any) -> str | None:
    if not shapes:
        return None
    if isinstance(shapes, str):
        return shapes
    return str([list(s) if isinstance(s, (list, tuple)) else s for s in shapes])
