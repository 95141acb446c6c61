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

from .._records import CompiledGraph, CompiledKernel, ModuleInfo, graph_key
from .._vocab import (
    COMPILATION_MARKER,
    COMPILATION_RANGES,
    COMPILATION_SUFFIX,
    COMPILED_BACKWARD,
    COMPILED_FORWARD,
    COMPILED_GRAPH_PREFIX,
    COMPILED_REGION_PREFIX,
)

# Roles of an event name in a compiled region (cached per name with the other name facts).
NOT_COMPILED, REGION_ROLE, FORWARD_ROLE, BACKWARD_ROLE, GRAPH_ROLE, COMPILATION_ROLE = range(6)
_GENERATED_EVENT = re.compile(r"^graph_\d+_(cpp_.*)$")
# (A module passed positionally to a wrapper Dynamo compiled, as a decorated forward's ``self``
# is, is ``L['args'][0]``: the index is part of the source, never a layer's name.)
_DYNAMO_ROOT = re.compile(r"^[A-Z]\['[^']*'\](?:\[\d+\])*")
_DYNAMO_ITEM = re.compile(r"\._modules\['([^']*)'\]|\['([^']*)'\]")
_PASS_THROUGH = frozenset({"__self__", "_orig_mod", "__func__"})
_INLINED = "_torchdynamo_inline"


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
            if node is None:
                continue
            if not node.modules:
                # Work of no submodule in a graph compiled for a module's forward is that module's
                # own (its forward's code: a loss computed on its layers' output).
                if run.owner is not None and run.owner not in paths:
                    paths.append(run.owner)
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


def _root_token(fqn: str) -> str:
    """The Dynamo source a module name starts from: ``L['self'].block1`` -> ``L['self']``."""
    match = _DYNAMO_ROOT.match(fqn)
    return match.group(0) if match else ""


def _relative(fqn: str) -> str:
    """Dynamo's module name as a ``named_modules()`` path: ``L['self'].block1.conv`` ->
    ``block1.conv``; ``L['self']._modules['0']`` -> ``0``; ``L['model']`` -> ``""``;
    ``L['args'][0].model`` -> ``model``. The way
    through a bound method (``model.compile()`` compiles ``self._call_impl``: ``__self__``) or
    ``torch.compile``'s wrapper (``_orig_mod``) is no module of its own, nor is a method
    reached through its own compile wrapper (``forward._torchdynamo_inline.embed`` -> ``embed``)."""
    rel = _DYNAMO_ROOT.sub("", fqn)
    rel = _DYNAMO_ITEM.sub(lambda m: "." + (m.group(1) or m.group(2)), rel)
    parts = [part for part in rel.split(".") if part and part not in _PASS_THROUGH]
    # A method compiled on its own (Lightning compiles ``forward`` and ``training_step`` each)
    # and inlined into another compiled function is reached through its compile wrapper:
    # ``forward._torchdynamo_inline`` is that method, whose ``__self__`` is the module again.
    while _INLINED in parts:
        at = parts.index(_INLINED)
        del parts[max(at - 1, 0) : at + 1]
    return ".".join(parts)


def _common_ancestor(paths: list[str]) -> str:
    parts = [p.split(".") for p in paths]
    common: list[str] = []
    for level in zip(*parts):
        if all(x == level[0] for x in level):
            common.append(level[0])
        else:
            break
    return ".".join(common)
