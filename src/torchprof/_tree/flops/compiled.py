"""FLOPs of compiled graphs' kernels, counted as eager counts the ops they came from.

A fused kernel's events carry no useful arguments; its graph's nodes do (their shapes and the
eager op call each came from: :class:`~torchprof._records.CompiledGraph`). The layer each kernel
goes to is :mod:`~torchprof._tree.compiled`'s business; what it costs is this module's.
"""

from __future__ import annotations

from typing import Any

from ..._records import CompiledGraph, CompiledKernel, CompiledNode, graph_key
from .formulas import FORMULAS, PER_TARGET, STRUCTURED
from .kinds import is_free

GRAPH_LEVEL = -1  # the plan's key for a graph's work that no kernel of its map runs


class CompiledFlops:
    """The FLOP plans of the compiled frames of one tree (made once per compile id)."""

    def __init__(self, graphs: dict[str, CompiledGraph]) -> None:
        self.graphs = graphs
        self._plans: dict[str, dict[tuple[str, int], tuple[int, int, list[str]]]] = {}

    def cost(self, graph: CompiledGraph, kernel: CompiledKernel | None) -> tuple[int, int, list[str]]:
        """MACs and FLOPs of a kernel, and the ops among its work whose cost is unknown (see
        :meth:`_plan`); with no kernel, of the graph's work no kernel of the map runs."""
        plan = self._plans.get(graph.compile_id)
        if plan is None:
            plan = self._plans[graph.compile_id] = self._plan(graph.compile_id)
        return plan.get((graph.key, id(kernel) if kernel is not None else GRAPH_LEVEL), (0, 0, []))

    def _plan(self, compile_id: str) -> dict[tuple[str, int], tuple[int, int, list[str]]]:
        """FLOPs of a compiled frame's kernels, counted as eager counts them.

        Inductor decomposes ops (batch norm into means, products and sums), moves some backward
        work into the forward graph and recomputes cheap forward work in the backward graph. Each
        node names the eager op call it came from (its source op and that op's sequence number),
        so the nodes of one call are counted once, as that op by the eager formula: from its own
        node's arguments when it was not decomposed (matmuls, convolutions, attention), else from
        the largest tensor among its nodes' arguments (the formulas of decomposed ops are per
        element of their input). A forward op counts in the forward graph (a recomputation in the
        backward graph is not counted again), a backward op in the backward graph; the count goes
        to the kernel that runs the call's first node there."""
        graphs = [g for g in (self.graphs.get(graph_key(compile_id, False)), self.graphs.get(graph_key(compile_id, True))) if g]
        owner: dict[tuple[str, str], CompiledKernel] = {}
        for graph in graphs:
            for kernel in graph.kernels:
                for name in kernel.nodes:
                    owner.setdefault((graph.key, name), kernel)
        # An eager op call is (source op, sequence number, forward or backward work): a backward
        # graph's gradient matmuls share their forward matmul's op and number, but are calls of
        # their own; a forward node recomputed in the backward graph is the forward call again.
        # A node without a number is its own call, except the parts of a decomposed matmul-like
        # op (Inductor on CUDA splits addmm into mm and a bias add, numbering neither): they
        # group by graph and module, where each part that is itself such an op is counted below.
        calls: dict[tuple[Any, ...], list[tuple[CompiledGraph, str, CompiledNode]]] = {}
        # A node of a decomposed op that lost its number (a mask Inductor hoists out of an
        # nll_loss_backward) is part of that op's call when the frame has just one numbered call
        # of that op in that direction: (source, backward) -> its numbers.
        numbered: dict[tuple[str, bool | None], set[int]] = {}
        for graph in graphs:
            for node in graph.nodes.values():
                if node.seq >= 0 and node.bwd is not None:
                    numbered.setdefault((node.source or node.op, node.bwd), set()).add(node.seq)
        for graph in graphs:
            for name, node in graph.nodes.items():
                if node.op == "getitem":
                    continue  # reads one output of a multi-output op (attention's): no call of its own
                source = node.source or node.op
                if _inductor_made(node):
                    continue  # a pass's rewrite of other nodes' work (a scatter as a compare and a select)
                seq = node.seq
                if seq < 0 and node.bwd is not None and source != node.op and len(numbered.get((source, node.bwd), ())) == 1:
                    seq = next(iter(numbered[(source, node.bwd)]))
                if seq >= 0 and (node.bwd is not None or not node.origin):
                    key: tuple[Any, ...] = (source, seq, node.bwd)
                elif node.origin and not graph.backward:
                    # No autograd (inference, no partitioner's tag): the eager call is the node of
                    # Dynamo's graph it came from (every node carries the same, stale, sequence
                    # number once autograd has run in the process; a backward graph's nodes trace
                    # back to the joint graph instead).
                    key = (source, graph.key, f"from {node.origin}")
                elif source in STRUCTURED and source != node.op:
                    key = (source, graph.key, node.modules[-1][0] if node.modules else "")
                else:
                    key = (source, graph.key, name)
                calls.setdefault(key, []).append((graph, name, node))
        plan: dict[tuple[str, int], tuple[int, int, list[str]]] = {}
        for (source, *rest), members in calls.items():
            phase = rest[1] if len(rest) == 2 else None
            home_backward = phase if isinstance(phase, bool) else "backward" in source
            home = [m for m in members if m[0].backward == home_backward] or members
            homed = [m for m in home if (m[0].key, m[1]) in owner]
            exact = [m for m in homed if _counts_as(m[2].op, source)]
            if exact:
                counted = [(m, source, m[2].shapes, m[2].concrete) for m in exact]
            elif source in STRUCTURED:
                # A matmul-like call split into parts: its matmul parts count by their own
                # formulas (an addmm's mm has its MACs; eager counts no bias add). With no such
                # part, the layout that would count it is gone: unknown, never a guess from the
                # largest tensor.
                parts = [m for m in homed or home if m[2].op in STRUCTURED]
                counted = [(m, m[2].op, m[2].shapes, m[2].concrete) for m in parts]
                if not parts:
                    graph, name, _ = (homed or home)[0]
                    runner = owner.get((graph.key, name))
                    key2 = (graph.key, id(runner) if runner is not None else GRAPH_LEVEL)
                    m0, f0, u0 = plan.get(key2, (0, 0, []))
                    plan[key2] = (m0, f0, [*u0, source])
            else:
                counted = [((homed or home)[0], source, _decomposed_arguments(source, [m[2] for m in members]), [None] * 8)]
            if source not in STRUCTURED:
                # A matmul Inductor fused into this call's node keeps only this call's provenance
                # (``add(mm(a, b), c)`` -> ``addmm(c, a, b)``: the gradients of a weight two
                # layers share, a hand-written bias): its own call is gone from the map, so it
                # counts here, by its own arguments.
                counted += [(m, m[2].op, m[2].shapes, m[2].concrete) for m in homed or home
                            if m[2].op in STRUCTURED and not _counts_as(m[2].op, source)]  # fmt: skip
            for (graph, name, _), op, shapes, concrete in counted:
                macs, flops, unknown = _cost(op, shapes, concrete)
                if not (macs or flops or unknown):
                    continue
                # Work no kernel of the map runs (a view Inductor folded away costs nothing; an
                # op Inductor runs as a fallback without provenance, as a scatter, does) counts
                # at the graph's own row: the model's total stays whole.
                runner = owner.get((graph.key, name))
                key2 = (graph.key, id(runner) if runner is not None else GRAPH_LEVEL)
                m0, f0, u0 = plan.get(key2, (0, 0, []))
                plan[key2] = (m0 + macs, f0 + flops, u0 + unknown)
        return plan


#: Ops Inductor puts in place of an eager op, with its arguments in the same order: counted as
#: that op (the low-memory max pooling of ``max_pool{n}d_with_indices``).
_SAME_ARGUMENTS = {"prims::_low_memory_max_pool_with_offsets": "max_pool"}
#: Matmuls whose first argument is added to the product of the next two.
_ADDS_TO_PRODUCT = frozenset({"aten::addmm", "aten::addmm_", "aten::_addmm_activation", "aten::baddbmm", "aten::baddbmm_"})
#: Where a decomposed gather gradient scatters its incoming gradient: the op, and which of its
#: arguments holds the gradient values (eager counts one addition per incoming gradient).
_SCATTERS = {"aten::scatter_add": 3, "aten::index_put": 2, "aten::index_add": 3, "aten::_unsafe_index_put": 2,
             "aten::_unsafe_masked_index_put_accumulate": 3}  # fmt: skip


def _counts_as(op: str, source: str) -> bool:
    """A node of op ``op`` is the eager call of ``source`` itself, arguments and all."""
    alias = _SAME_ARGUMENTS.get(op)
    return op == source or (alias is not None and alias in source)


#: The provenance FX gives a node one of Inductor's passes made (its pattern replacements): from
#: no graph, of no name.
_MADE_BY_A_PASS = "-1:"


def _inductor_made(node: CompiledNode) -> bool:
    """A node no eager op call made: one of Inductor's passes put it in place of other nodes (the
    iota, compare and select that replace a decomposed ``nll_loss_backward``'s scatter). It has
    no op of its own to come from, no sequence number, no partitioner tag, and FX's provenance
    names no graph. Its work is the work of the nodes it replaced, counted with their call."""
    return node.origin == _MADE_BY_A_PASS and node.seq < 0 and node.bwd is None and (node.source or node.op) == node.op


def _decomposed_arguments(source: str, members: list[CompiledNode]) -> list[Any]:
    """Argument shapes to count a decomposed op call by its eager formula. The formulas of
    decomposed ops count per element of their input (normalisation, softmax, activations): the
    largest tensor among its nodes' arguments. A gather's gradient (max pooling's, nearest
    upsampling's) counts per incoming gradient: the values its scatter adds."""
    if source in PER_TARGET:
        # A loss over class scores counts per target: the narrowest tensor its nodes read (the
        # targets, [N]; the scores are [N, C], the reduction a scalar).
        narrow = [shape for node in members for shape in node.shapes if _is_sizes(shape)]
        if narrow:
            return [min(narrow, key=_numel)] * 8
    if source.endswith("_backward"):
        # (the widest: an embedding's gradient scaled by frequency also scatters ones to count them)
        added = [node.shapes[at] for node in members if (at := _SCATTERS.get(node.op)) is not None and at < len(node.shapes)]
        added = [shape for shape in added if _is_sizes(shape)]
        if added:
            return [max(added, key=_numel)] * 8
    # A matmul fused into the call (see _plan) adds to its product: its factors are not the
    # call's elements, the product is.
    shapes: list[Any] = [shape for m in members for shape in ((_product(m),) if m.op in STRUCTURED else m.shapes)]
    widest: list[int] = max((shape for shape in shapes if _is_sizes(shape)), key=_numel, default=[])
    return [widest] * 8


def _product(node: CompiledNode) -> list[int] | None:
    """The sizes of a matmul node's product (None for other ops)."""
    first = 1 if node.op in _ADDS_TO_PRODUCT else 0
    if len(node.shapes) < first + 2 or not (_is_sizes(node.shapes[first]) and _is_sizes(node.shapes[first + 1])):
        return None
    a, b = node.shapes[first], node.shapes[first + 1]
    if node.op.rstrip("_").endswith("bmm") and len(a) == 3 and len(b) == 3:
        return [a[0], a[1], b[2]]
    if len(a) == 2 and len(b) == 2 and node.op.endswith(("mm", "mm_", "_addmm_activation")):
        return [a[0], b[1]]
    return None


def _is_sizes(shape: Any) -> bool:
    return isinstance(shape, list) and bool(shape) and all(isinstance(d, int) for d in shape)


def _numel(shape: list[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _cost(op: str, shapes: list[Any], concrete: list[Any]) -> tuple[int, int, list[str]]:
    """``(macs, flops, [op] if its cost is unknown)`` of one op call by the eager formulas."""
    formula = FORMULAS.get(op)
    if formula is None:
        unknown = not is_free(op) and op.startswith(("aten::", "prims::"))
        return 0, 0, [op] if unknown else []
    try:
        macs, flops = formula(shapes, concrete)
    except Exception:  # noqa: BLE001 - a formula that cannot read these arguments: unknown, not zero
        return 0, 0, [op]
    return macs, flops, []
