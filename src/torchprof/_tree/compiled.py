"""Layers inside ``torch.compile``'d regions: where a compiled graph's kernels go in the tree.

A compiled region runs as one unit, so no module range opens inside it. What the compiler
recorded (:class:`~torchprof._records.CompiledGraph`) says which post-grad nodes each kernel
computes and which module each node came from. The events say which graph ran:

- ``Torch-Compiled Region: <id>`` around a compiled frame names its compile id;
- its ``CompiledFunction`` op carries an autograd sequence number, and the backward's
  ``CompiledFunctionBackward`` op carries the same one: that is how a backward graph is found;
- ``## Call CompiledFxGraph <key> ##`` is one run of the graph; the kernels and extern ops
  directly inside it are matched to the graph's kernels, generated ones by name (the CPU's
  ``graph_<n>_cpp_fused_...`` events drop the ``graph_<n>_`` prefix) and extern ones in order.

A kernel goes to the module its nodes came from, or, when it fuses nodes of several modules, to
their nearest common ancestor; nothing is invented: a kernel no node of which came from a module
stays where it ran. Module paths are Dynamo's (``L['self'].block1.conv``), relative to the module
whose forward was compiled, so they hang below that module's node; a compiled function that calls
a model (no module range around it) roots them at the model's class name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .._records import CompiledGraph, CompiledKernel, CompiledNode, ModuleInfo, graph_key
from .._vocab import (
    COMPILATION_MARKER,
    COMPILATION_RANGES,
    COMPILATION_SUFFIX,
    COMPILED_BACKWARD,
    COMPILED_FORWARD,
    COMPILED_GRAPH_PREFIX,
    COMPILED_REGION_PREFIX,
)
from . import flops as _flops

# Roles of an event name in a compiled region (cached per name with the other name facts).
NOT_COMPILED, REGION_ROLE, FORWARD_ROLE, BACKWARD_ROLE, GRAPH_ROLE, COMPILATION_ROLE = range(6)
GRAPH_LEVEL = -1  # the plan's key for a graph's work that no kernel of its map runs
_GENERATED_EVENT = re.compile(r"^graph_\d+_(cpp_.*)$")
# (A module passed positionally to a wrapper Dynamo compiled, as a decorated forward's ``self``
# is, is ``L['args'][0]``: the index is part of the source, never a layer's name.)
_DYNAMO_ROOT = re.compile(r"^[A-Z]\['[^']*'\](?:\[\d+\])*")
_DYNAMO_ITEM = re.compile(r"\._modules\['([^']*)'\]|\['([^']*)'\]")
_PASS_THROUGH = frozenset({"__self__", "_orig_mod", "__func__"})


def role_of(name: str) -> int:
    if name.startswith(COMPILED_REGION_PREFIX):
        return REGION_ROLE
    if name == COMPILED_FORWARD:
        return FORWARD_ROLE
    if name == COMPILED_BACKWARD:
        return BACKWARD_ROLE
    if name.startswith(COMPILED_GRAPH_PREFIX):
        return GRAPH_ROLE
    if name in COMPILATION_RANGES or name.endswith(COMPILATION_SUFFIX) or COMPILATION_MARKER in name:
        return COMPILATION_ROLE
    return NOT_COMPILED


@dataclass
class GraphRun:
    """One run of a compiled graph (a ``## Call CompiledFxGraph`` event): its map, if known, and
    how far the extern kernels have been matched."""

    graph: CompiledGraph | None
    owner: str | None
    """The module path the graph's ``L['self']`` stands for; None for a compiled function."""
    backward: bool
    next_extern: int = 0
    by_name: dict[str, list[CompiledKernel]] = field(default_factory=dict)
    calls_of: dict[str, int] = field(default_factory=dict)
    anchor: int = -1
    """The tree node the graph's modules hang below (the owner module's node)."""

    def kernel(self, name: str) -> CompiledKernel | None:
        """The graph's kernel an event directly inside this run is. A generated kernel's name
        can stand for several call sites (Inductor defines identical kernels once, as in two
        equal layers): the n-th call of a name in a run is its n-th call site."""
        if self.graph is None:
            return None
        match = _GENERATED_EVENT.match(name)
        generated = match.group(1) if match else name if name.startswith(("triton_", "cpp_")) else None
        if generated is not None:
            if not self.by_name:
                for k in self.graph.kernels:
                    if not k.extern:
                        self.by_name.setdefault(k.name, []).append(k)
            sites = self.by_name.get(generated)
            if not sites:
                return None
            n = self.calls_of.get(generated, 0)
            self.calls_of[generated] = n + 1
            return sites[n] if n < len(sites) else sites[-1]
        kernels = self.graph.kernels
        for j in range(self.next_extern, len(kernels)):
            if kernels[j].extern and kernels[j].name == name:
                self.next_extern = j + 1
                return kernels[j]
        return None


class CompiledRegions:
    """What stage 2 (placement) needs to know about compiled regions while events arrive."""

    def __init__(self, graphs: dict[str, CompiledGraph], modules: dict[str, ModuleInfo]) -> None:
        self.graphs = graphs
        self.modules = modules
        self.compile_id_of_seq: dict[int, str] = {}
        self.unmapped: set[str] = set()  # graph keys that ran but were compiled without a map
        self._plans: dict[str, dict[tuple[str, int], tuple[int, int, list[str]]]] = {}
        self._bases: dict[tuple[str, str | None, str], str] = {}  # (graph, owner, Dynamo root) -> module path

    def run(self, compile_id: str | None, backward: bool, owner: str | None) -> GraphRun:
        graph = self.graphs.get(graph_key(compile_id, backward)) if compile_id is not None else None
        if graph is None and compile_id is not None:
            self.unmapped.add(graph_key(compile_id, backward))
        return GraphRun(graph, owner, backward)

    def module_of(self, run: GraphRun, kernel: CompiledKernel) -> tuple[str, dict[str, str]] | None:
        """The module path the kernel's work belongs to (the module of its nodes, or their nearest
        common ancestor) and the class of every module path on the way; None when no node came
        from a module."""
        assert run.graph is not None
        paths: list[str] = []
        classes: dict[str, str] = {}
        for name in kernel.nodes:
            node = run.graph.nodes.get(name)
            if node is None or not node.modules:
                continue
            for fqn, cls_name in node.modules:
                classes.setdefault(self._path(fqn, run), cls_name)
            path = self._path(node.modules[-1][0], run)
            if path not in paths:
                paths.append(path)
        if not paths:
            return None
        target = paths[0] if len(paths) == 1 else _common_ancestor(paths)
        if not target:
            return None  # modules of unrelated roots: the work stays where it ran
        for path in list(classes):
            info = self.modules.get(path)
            if info is not None:
                classes[path] = info.type
        return target, classes

    def flops_of(self, run: GraphRun, kernel: CompiledKernel | None) -> tuple[int, int, list[str]]:
        """MACs and FLOPs of a kernel, and the ops among its work whose cost is unknown (see
        :meth:`_plan`); with no kernel, of the graph's work no kernel of the map runs."""
        assert run.graph is not None
        plan = self._plans.get(run.graph.compile_id)
        if plan is None:
            plan = self._plans[run.graph.compile_id] = self._plan(run.graph.compile_id)
        return plan.get((run.graph.key, id(kernel) if kernel is not None else GRAPH_LEVEL), (0, 0, []))

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
        for graph in graphs:
            for name, node in graph.nodes.items():
                if node.op == "getitem":
                    continue  # reads one output of a multi-output op (attention's): no call of its own
                source = node.source or node.op
                if node.seq >= 0 and (node.bwd is not None or not node.origin):
                    key: tuple[Any, ...] = (source, node.seq, node.bwd)
                elif node.origin and not graph.backward:
                    # No autograd (inference, no partitioner's tag): the eager call is the node of
                    # Dynamo's graph it came from (every node carries the same, stale, sequence
                    # number once autograd has run in the process; a backward graph's nodes trace
                    # back to the joint graph instead).
                    key = (source, graph.key, f"from {node.origin}")
                elif source in _flops.STRUCTURED and source != node.op:
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
            elif source in _flops.STRUCTURED:
                # A matmul-like call split into parts: its matmul parts count by their own
                # formulas (an addmm's mm has its MACs; eager counts no bias add). With no such
                # part, the layout that would count it is gone: unknown, never a guess from the
                # largest tensor.
                parts = [m for m in homed or home if m[2].op in _flops.STRUCTURED]
                counted = [(m, m[2].op, m[2].shapes, m[2].concrete) for m in parts]
                if not parts:
                    graph, name, _ = (homed or home)[0]
                    runner = owner.get((graph.key, name))
                    key2 = (graph.key, id(runner) if runner is not None else GRAPH_LEVEL)
                    m0, f0, u0 = plan.get(key2, (0, 0, []))
                    plan[key2] = (m0, f0, [*u0, source])
            else:
                counted = [((homed or home)[0], source, _decomposed_arguments(source, [m[2] for m in members]), [None] * 8)]
            if source not in _flops.STRUCTURED:
                # A matmul Inductor fused into this call's node keeps only this call's provenance
                # (``add(mm(a, b), c)`` -> ``addmm(c, a, b)``: the gradients of a weight two
                # layers share, a hand-written bias): its own call is gone from the map, so it
                # counts here, by its own arguments.
                counted += [(m, m[2].op, m[2].shapes, m[2].concrete) for m in homed or home
                            if m[2].op in _flops.STRUCTURED and not _counts_as(m[2].op, source)]  # fmt: skip
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

    def _path(self, fqn: str, run: GraphRun) -> str:
        """The tree path of a module Dynamo names ``fqn`` (``L['self'].block1.conv``)."""
        token = _root_token(fqn)
        rel = _relative(fqn)
        assert run.graph is not None
        key = (run.graph.key, run.owner, token)
        base = self._bases.get(key)
        if base is None:
            base = self._bases[key] = self._base(token, run)
        return f"{base}.{rel}" if rel else base

    def _base(self, token: str, run: GraphRun) -> str:
        """The module path a Dynamo root (``L['self']``, ``L['model']``, ``G['net']``) stands for:
        the module whose range the graph ran in, when the graph's modules below that root are its
        submodules (the compiled frame is its forward, whatever its ``self`` is called); else the
        root's class name (a compiled function that calls a model)."""
        assert run.graph is not None
        owner = run.owner
        root_cls: str | None = None
        below: list[tuple[str, str]] = []
        for node in run.graph.nodes.values():
            for fqn, cls_name in node.modules:
                if _root_token(fqn) != token:
                    continue
                rel = _relative(fqn)
                if not rel:
                    root_cls = cls_name
                elif len(below) < 8:
                    below.append((rel, cls_name))
        if owner is not None:
            info = self.modules.get(owner)
            if root_cls is not None and info is not None and info.type == root_cls:
                return owner
            if below and all(f"{owner}.{rel}" in self.modules for rel, _ in below):
                return owner
            if root_cls is None and not self.modules:
                return owner  # nothing to check against (a trace without module infos)
        if root_cls is not None:
            return root_cls
        return owner if owner is not None else (below[0][1] if below else "compiled")


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


def _decomposed_arguments(source: str, members: list[CompiledNode]) -> list[Any]:
    """Argument shapes to count a decomposed op call by its eager formula. The formulas of
    decomposed ops count per element of their input (normalisation, softmax, activations): the
    largest tensor among its nodes' arguments. A gather's gradient (max pooling's, nearest
    upsampling's) counts per incoming gradient: the values its scatter adds."""
    if source.endswith("_backward"):
        # (the widest: an embedding's gradient scaled by frequency also scatters ones to count them)
        added = [node.shapes[at] for node in members if (at := _SCATTERS.get(node.op)) is not None and at < len(node.shapes)]
        added = [shape for shape in added if _is_sizes(shape)]
        if added:
            return [max(added, key=_numel)] * 8
    # A matmul fused into the call (see _plan) adds to its product: its factors are not the
    # call's elements, the product is.
    shapes: list[Any] = [shape for m in members for shape in ((_product(m),) if m.op in _flops.STRUCTURED else m.shapes)]
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
    formula = _flops.FORMULAS.get(op)
    if formula is None:
        unknown = not _flops.is_free(op) and op.startswith(("aten::", "prims::"))
        return 0, 0, [op] if unknown else []
    try:
        macs, flops = formula(shapes, concrete)
    except Exception:  # noqa: BLE001 - a formula that cannot read these arguments: unknown, not zero
        return 0, 0, [op]
    return macs, flops, []


def _root_token(fqn: str) -> str:
    """The Dynamo source a module name starts from: ``L['self'].block1`` -> ``L['self']``."""
    match = _DYNAMO_ROOT.match(fqn)
    return match.group(0) if match else ""


def _relative(fqn: str) -> str:
    """Dynamo's module name as a ``named_modules()`` path: ``L['self'].block1.conv`` ->
    ``block1.conv``; ``L['self']._modules['0']`` -> ``0``; ``L['model']`` -> ``""``;
    ``L['args'][0].model`` -> ``model``. The way
    through a bound method (``model.compile()`` compiles ``self._call_impl``: ``__self__``) or
    ``torch.compile``'s wrapper (``_orig_mod``) is no module of its own."""
    rel = _DYNAMO_ROOT.sub("", fqn)
    rel = _DYNAMO_ITEM.sub(lambda m: "." + (m.group(1) or m.group(2)), rel)
    return ".".join(part for part in rel.split(".") if part and part not in _PASS_THROUGH)


def _common_ancestor(paths: list[str]) -> str:
    parts = [p.split(".") for p in paths]
    common: list[str] = []
    for level in zip(*parts):
        if all(x == level[0] for x in level):
            common.append(level[0])
        else:
            break
    return ".".join(common)
