"""The FLOP count of a tree: recorded op events in, MACs and FLOPs per row out.

:class:`FlopCount` is the one entry point. The tree builder hands it, cycle by cycle, the ops it
placed (:meth:`FlopCount.add_ops`) and the kernels of compiled graphs (:meth:`FlopCount.add_kernel`);
at the end :meth:`FlopCount.finish` names the ops of unknown cost, and :meth:`FlopCount.unknown_rows`
says which rows read NaN. The counts themselves are the nodes' ``macs`` and ``flops``, which the
tree sums up its subtrees like every other column.

What is counted is what ran: every op the profiler recorded, by its formula
(:mod:`~torchprof._tree.flops.formulas`), from the shapes and arguments recorded for it; the
outermost op with a formula counts and the ops it called do not (``Nodes.covered``). No user code
runs again, and nothing is guessed: an op with no formula that is not known to cost nothing
(:mod:`~torchprof._tree.flops.kinds`), an op whose formula cannot read what was recorded, a
compiled graph with no layer map, and the ops of a model run inside ``torch.func`` (recorded per
example) make the rows that hold them NaN, and only those.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..._records import CompiledKernel, EventColumns
from ..._vocab import BACKWARD_PREFIX, COMPILED_GRAPH_PREFIX, EventKind
from .compiled import CompiledFlops
from .formulas import FORMULAS, LIST_ARGS, WITH_MACS, ZERO_COST, lacks_list_args
from .kinds import DATA_DEPENDENT, is_autograd_node, is_free

if TYPE_CHECKING:
    from ..._records import CompiledGraph, ModuleInfo
    from ..nodes import Nodes

OP, MODULE, RUNTIME, DEVICE = map(int, (EventKind.OP, EventKind.MODULE, EventKind.RUNTIME, EventKind.DEVICE))

#: How ``unsupported_ops`` names the runs of compiled graphs whose kernels have no layer map.
UNMAPPED_GRAPH = "compiled graph without a layer map (see summary['warnings'])"

#: Why a root's FLOPs are unknown when it ran inside a ``torch.func`` transform.
TRANSFORMED = ("it ran inside torch.func (vmap, grad), whose ops torch records once per example, with one "
               "example's sizes: the batch's FLOPs cannot be counted from them")  # fmt: skip


@dataclass
class FlopCount:
    """The FLOPs of one tree, gathered while its events are placed."""

    graphs: dict[str, CompiledGraph] = field(default_factory=dict)
    """The layer maps of compiled graphs (whose kernels' FLOPs come from their nodes)."""
    modules: dict[str, ModuleInfo] = field(default_factory=dict)
    saw_shapes: bool = False
    """Some op had recorded arguments: FLOPs are counted (a run without them has none)."""
    formula_errors: dict[str, int] = field(default_factory=dict)
    """Ops whose formula could not read their arguments, with their calls."""
    compiled_unknown: dict[str, int] = field(default_factory=dict)
    """Ops inside compiled graphs that have no formula, with their calls."""
    unknown_nodes: set[int] = field(default_factory=set)
    """Nodes of ops of unknown cost: they, and every row above them, read NaN."""
    unmapped_graph_nodes: set[int] = field(default_factory=set)
    """Runs of compiled graphs with no layer map (their fused kernels' FLOPs are unknown)."""
    problems: dict[str, str] = field(default_factory=dict)
    """Why a whole module's FLOPs are unknown, by module path (a ``torch.func`` root)."""
    transformed_ops: dict[str, int] = field(default_factory=dict)
    _kernel_cost: dict[int, tuple[int, int, list[str]]] = field(default_factory=dict)
    _compiled: CompiledFlops | None = None

    # -- in: the recorded ops ------------------------------------------------------------------------
    def add_ops(self, ev: EventColumns, ops: list[int], node_of: list[int], nodes: Nodes) -> None:
        """MACs and FLOPs of the outermost ops that have a formula (those the builder placed
        outside any counted op), from their recorded shapes and arguments. A formula that cannot
        read them makes the op's FLOPs unknown, never zero."""
        formulas = FORMULAS
        list_args = LIST_ARGS
        macs_of, flops_of = nodes.macs, nodes.flops
        for i in ops:
            args = ev.inputs(i)
            if args is None or args[0] is None:
                continue
            self.saw_shapes = True
            name = ev.name[i]
            node = node_of[i]
            concrete = args[1]
            if name in list_args and lacks_list_args(name, concrete) and ev.full_concrete is not None:
                # The live event tree keeps no int lists (stride, padding, a gradient's mask):
                # the profiler's complete record of this very call has them.
                concrete = ev.full_concrete(i) or concrete
            try:
                macs, flops = formulas[name](args[0], concrete)
            except Exception:  # noqa: BLE001 - a formula that cannot read these args: unknown, not zero
                self.formula_errors[name] = self.formula_errors.get(name, 0) + 1
                self.unknown_nodes.add(node)
                continue
            macs_of[node] += macs
            flops_of[node] += flops
        if not self.saw_shapes:
            # Shapes were recorded even if no op here has a formula: FLOPs are then known zero.
            kinds = ev.kind
            self.saw_shapes = any(kinds[i] == OP and ev.inputs(i) is not None for i in range(min(len(ev), 64)))

    def add_kernel(self, nodes: Nodes, node: int, cost: tuple[int, int, list[str]]) -> None:
        """A compiled kernel's (or graph's) MACs and FLOPs on ``node``, which they then cover."""
        macs, flops, unknown = cost
        nodes.macs[node] += macs
        nodes.flops[node] += flops
        nodes.covered[node] = True
        self.saw_shapes = True
        for op in unknown:
            self.compiled_unknown[op] = self.compiled_unknown.get(op, 0) + 1
        if unknown:
            self.unknown_nodes.add(node)

    def kernel_cost(self, graph: CompiledGraph, kernel: CompiledKernel | None) -> tuple[int, int, list[str]]:
        """MACs, FLOPs and the ops of unknown cost of one kernel of a compiled graph (with no
        kernel: the graph's work no kernel of its map runs), counted as eager counts them."""
        key = id(kernel) if kernel is not None else id(graph)
        cost = self._kernel_cost.get(key)
        if cost is None:
            if self._compiled is None:
                self._compiled = CompiledFlops(self.graphs)
            cost = self._kernel_cost[key] = self._compiled.cost(graph, kernel)
        return cost

    def unmapped_graph(self, node: int) -> None:
        """A compiled graph's run with no layer map: its kernels' FLOPs are unknown."""
        self.unmapped_graph_nodes.add(node)
        self.unknown_nodes.add(node)

    # -- out: what is unknown, and where -------------------------------------------------------------
    def has_flops(self) -> bool:
        return self.saw_shapes

    def finish(self, nodes: Nodes) -> dict[str, int]:
        """The ops of unknown cost, by name with their calls (``prof.unsupported_ops``), their
        nodes added to :attr:`unknown_nodes`; the roots run inside ``torch.func`` too."""
        self._mark_transformed(nodes)
        found, where = _ops_of_unknown_cost(nodes, self.unmapped_graph_nodes)
        self.unknown_nodes |= where
        for table in (self.formula_errors, self.compiled_unknown, self.transformed_ops):
            for name, calls in table.items():
                found[name] = found.get(name, 0) + calls
        return dict(sorted(found.items(), key=lambda kv: (-kv[1], kv[0])))

    def unknown_rows(self, nodes: Nodes, macs: bool = False) -> list[bool]:
        """Per node: its FLOPs (with ``macs``, its MACs) are unknown, an op of unknown cost being
        at or below it. A row that leaves out part of its work shows NaN, never a low number.
        For MACs, an op known to do no multiply-adds whose formula could not read its arguments
        (an add) leaves them known; an op of no formula may multiply-add (a custom matmul): unknown."""
        marked = self.unknown_nodes
        if macs:
            label = nodes.label
            marked = {nid for nid in marked if label[nid] not in FORMULAS or label[nid] in WITH_MACS}
        unknown = [False] * len(nodes)
        if marked:
            parent = nodes.parent
            for nid in marked:
                unknown[nid] = True
            for nid in range(len(unknown) - 1, 0, -1):  # children after parents: one reverse sweep
                if unknown[nid]:
                    unknown[parent[nid]] = True
        return unknown

    def _mark_transformed(self, nodes: Nodes) -> None:
        """Roots called inside a ``torch.func`` transform (``vmap``, ``grad``): torch records
        their ops per example (a vmapped matmul with one example's sizes, the batch's work
        inside it as other ops), so recorded shapes do not give the batch's FLOPs. Their counted
        ops are listed as of unknown cost and their rows unknown, with the reason. (Made anew
        at each finish: a read that was interrupted is done again.)"""
        self.transformed_ops = {}
        for nid in range(len(nodes)):
            if nodes.kind[nid] != MODULE:
                continue
            info = self.modules.get(nodes.label[nid])
            if info is None or not info.transformed:
                continue
            self.problems[nodes.label[nid]] = TRANSFORMED
            stack = [nid]
            while stack:
                at = stack.pop()
                if nodes.kind[at] == OP and nodes.label[at] in FORMULAS:
                    self.transformed_ops[nodes.label[at]] = self.transformed_ops.get(nodes.label[at], 0) + nodes.calls[at]
                    self.unknown_nodes.add(at)
                    continue
                stack.extend(nodes.children[at].values())


def _ops_of_unknown_cost(nodes: Nodes, unmapped_graphs: set[int]) -> tuple[dict[str, int], set[int]]:
    """Ops that have no formula, are not known to cost no FLOPs, are not inside an op that was
    counted and have no such op below them either (a leaf, or an op that only calls free ops,
    like a custom op computing in numpy), and ops whose arithmetic depends on the data
    (``DATA_DEPENDENT``, whatever they call): their FLOPs are unknown, not zero. Autograd nodes
    (``AddBackward0``) count as free, their arithmetic being in the aten ops below them, unless
    they launched GPU kernels themselves. By name with their calls, and their nodes."""
    count = len(nodes)
    labels, kinds, covered, parent = nodes.label, nodes.kind, nodes.covered, nodes.parent
    launches = [False] * count  # the op launched GPU work itself (a runtime call or kernel child)
    for nid in range(1, count):
        if kinds[nid] in (RUNTIME, DEVICE):
            launches[parent[nid]] = True

    free: dict[str, bool] = {}  # per distinct name (thousands of nodes share a few names)

    def cost_unknown(nid: int) -> bool:
        name = labels[nid]
        known = free.get(name)
        if known is None:
            known = free[name] = is_free(name)
        return not known or (launches[nid] and is_autograd_node(name))

    # work_below[n]: an op under n is counted or has unknown cost itself; an op that costs
    # nothing (a copy, a view) is no such work, nor is what it called. Children have larger ids
    # than their parent, so one reverse sweep sees a whole subtree before its root.
    zero = ZERO_COST
    work_below = [False] * count
    for nid in range(count - 1, 0, -1):
        if kinds[nid] == OP and labels[nid] not in zero and (work_below[nid] or covered[nid] or cost_unknown(nid)):
            work_below[parent[nid]] = True
    found: dict[str, int] = {}
    where: set[int] = set()
    for nid, k in enumerate(kinds):
        name = labels[nid]
        if name.startswith(COMPILED_GRAPH_PREFIX):
            # A compiled graph's run: its kernels' FLOPs come from the graph's map, where there is
            # one; without it (compiled before any capture) the fused kernels' FLOPs are unknown.
            if nid in unmapped_graphs:
                found[UNMAPPED_GRAPH] = found.get(UNMAPPED_GRAPH, 0) + nodes.calls[nid]
            continue
        if k != OP or covered[nid] or (work_below[nid] and name not in DATA_DEPENDENT):
            continue
        if nodes.bwd[nid] and name.startswith(BACKWARD_PREFIX):
            continue
        if cost_unknown(nid):
            found[name] = found.get(name, 0) + nodes.calls[nid]
            where.add(nid)
    return found, where
