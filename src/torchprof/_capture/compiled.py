"""Which layer each kernel of a ``torch.compile``'d graph computes, learnt while Inductor compiles.

Inside a compiled region our module hooks cannot fire (the graph runs as one unit), so layer
attribution comes from the compiler: with ``trace.provenance_tracking_level = 1`` Inductor keeps,
for every generated or extern kernel, the post-grad FX nodes it computes (read when it hands the
graph's wrapper source to ``GraphLowering.save_output_code``), and a read-only post-grad pass of
ours copies each node's op, argument shapes and ``nn_module_stack`` (``fwd_nn_module_stack`` in a
backward graph: AOTAutograd copies the forward node's stack by sequence number). Provenance only
adds comments to the wrapper: the kernels are those of a compile without capture. On the CPU the
profiler sees the fused C++ kernels through :mod:`.kernels`.

Both only happen when Inductor really lowers a graph, so while capturing, the pass's ``uuid()``
carries a per-process nonce: it is part of the FX-graph and AOTAutograd cache keys, so graphs
compiled under capture are lowered again (their C++ and Triton binaries still come from the code
caches). Graphs compiled before any capture (a warmed-up model) get their map when a profile in
which they ran is first read, outside the profiled block (:mod:`.compiled_warm`).

Importing Inductor costs seconds, so nothing here imports it unless the program already did:
a capture that starts before Inductor is loaded switches itself on when Inductor gets imported.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import sys
import threading
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

from .._records import CompiledGraph, CompiledKernel, CompiledNode, graph_key
from .._vocab import COMPILED_GRAPH_PREFIX, COMPILED_REGION_PREFIX
from . import kernels
from .interrupts import lifecycle
from .swaps import ConfigPatch

_VERSION = "torchprof-layer-map-1"
_lock = threading.Lock()
#: Every graph compiled under capture in this process, by graph key (compile ids are unique until
#: ``torch._dynamo.reset()``, which :func:`graphs` notices).
_graphs: dict[str, CompiledGraph] = {}
_pending: dict[str, dict[str, CompiledNode]] = {}  # nodes the pass saw, by pending_key()
#: Each graph's wrapper source and kernel provenance (``"<kernel>:<handle>" -> {"post_grad_nodes"}``),
#: by pending_key(), as Inductor generated it.
_outputs: dict[str, tuple[str, dict[str, Any]]] = {}
_hooked: list[Any] = []  # [GraphLowering, the hook it had before ours] while ours is set
#: Why a compile id that ran has no map (learning it is not tried again until Dynamo's reset).
failures: dict[str, str] = {}
_stop = threading.local()  # .after_codegen: raise StopAfterCodegen once the wrapper source is known
_depth = 0  # nested captures (a Profiler inside capture_compiled())
_patch: Any = None  # the config patch while capturing
_nonce = uuid.uuid4().hex


def _pass_class() -> Any:
    from torch._inductor.custom_graph_pass import CustomGraphPass

    class LayerMapPass(CustomGraphPass):
        """Read-only: records each post-grad node's op, arguments and module stack."""

        torchprof_layer_map = True

        def __call__(self, graph: Any) -> None:
            import torch
            import torch._inductor.debug as debug

            # Inductor keeps kernel provenance in module globals that it resets for each frame,
            # but a backward graph is compiled later (at the first backward), over whatever an
            # earlier frame left there: start this graph's record empty, so its kernel list is
            # its own. (Nothing else reads them while provenance tracking is ours.)
            for table in ("_inductor_triton_kernel_to_post_grad_node_info", "_inductor_kernel_stack_trace",
                          "_inductor_kernel_extern_info"):  # fmt: skip
                getattr(debug, table, {}).clear()
            compile_id = torch._guards.CompileContext.current_compile_id()
            backward = any(n.op == "placeholder" and n.name.startswith("tangents") for n in graph.nodes)
            nodes = {n.name: _describe(n) for n in graph.nodes if n.op == "call_function"}
            with _lock:
                # Our callbacks in Dynamo's handler mark the graphs since the last reset as ours:
                # a capture without a Profiler (capture_compiled) must put them there too, or the
                # next Profiler would take this graph for one compiled before a reset.
                callback = sys.modules.get("torch._dynamo.callback")
                if callback is not None:
                    _watch_compiles(callback.callback_handler)
                _pending[pending_key(compile_id, backward)] = nodes
                _hook_output_code()

        def uuid(self) -> Any:
            return (_VERSION, _nonce)

    return LayerMapPass


def pending_key(compile_id: Any, backward: bool) -> str:
    return str((f"Torch-Compiled Region: {compile_id}", bool(backward)))


class StopAfterCodegen(Exception):
    """Raised after a graph's wrapper source is generated, when only its map is wanted."""


def _hook_output_code() -> None:
    """Put our hook in ``GraphLowering.save_output_code``, which Inductor calls with each graph's
    wrapper source right after generating it, before writing or loading it (called with the lock
    held; the user's own hook, if any, still runs first)."""
    if _hooked:
        return
    from torch._inductor.graph import GraphLowering

    before = GraphLowering.save_output_code
    _hooked[:] = [GraphLowering, before]

    def on_output_code(source: str) -> None:
        if before is not None:
            before(source)
        _keep_output(source)

    GraphLowering.save_output_code = on_output_code


def _unhook_output_code() -> None:
    """Called with the lock held."""
    if _hooked:
        owner, before = _hooked
        owner.save_output_code = before
        _hooked.clear()


def _keep_output(source: str) -> None:
    import torch
    import torch._inductor.debug as debug
    from torch._inductor.virtualized import V

    key = pending_key(torch._guards.CompileContext.current_compile_id(), bool(V.graph.is_backward))
    with _lock:
        if key in _pending:
            provenance = debug._inductor_triton_kernel_to_post_grad_node_info
            _outputs[key] = (source, {k: {"post_grad_nodes": list(v)} for k, v in provenance.items()})
    if getattr(_stop, "after_codegen", False):
        raise StopAfterCodegen


def _describe(node: Any) -> CompiledNode:
    """A post-grad node as plain data: op name, per-argument shapes and values (positional, in the
    op's schema order, as the profiler records an op), and the module stack."""
    import torch

    target = node.target
    op = target._overloadpacket._qualified_op_name if isinstance(target, torch._ops.OpOverload) else getattr(target, "__name__", str(target))
    values = list(node.args)
    schema = getattr(target, "_schema", None)
    if schema is not None and node.kwargs:
        for i, arg in enumerate(schema.arguments):
            if i >= len(values):
                values.append(node.kwargs.get(arg.name, arg.default_value if arg.has_default_value() else None))
    shapes: list[Any] = []
    concrete: list[Any] = []
    for value in values:
        shape, plain = _argument(value)
        shapes.append(shape)
        concrete.append(plain)
    stack = node.meta.get("nn_module_stack") or node.meta.get("fwd_nn_module_stack") or {}
    modules = [(str(fqn), cls.__name__ if isinstance(cls, type) else str(cls).rsplit(".", 1)[-1].rstrip("'>"))
               for fqn, cls in stack.values()]  # fmt: skip
    original = node.meta.get("original_aten")
    source = original._overloadpacket._qualified_op_name if isinstance(original, torch._ops.OpOverload) else op
    seq = node.meta.get("seq_nr")
    tag = node.meta.get("partitioner_tag")
    return CompiledNode(op=op, shapes=shapes, concrete=concrete, modules=modules, source=source,
                        seq=seq if isinstance(seq, int) else -1,
                        bwd=None if tag is None else tag == "is_backward", origin=_origin(node))  # fmt: skip


def _origin(node: Any) -> str:
    """The first node FX's provenance (``from_node``) traces ``node`` back to: the node of
    Dynamo's graph, one call of the eager program (``<graph id>:<name>``); "" where none is kept."""
    sources = node.meta.get("from_node")
    found = None
    for _ in range(256):  # (a chain per pass: never this long)
        if not isinstance(sources, list) or not sources:
            break
        found = sources[0]
        sources = getattr(found, "from_node", None)
    name = getattr(found, "name", None)
    return f"{getattr(found, 'graph_id', '')}:{name}" if isinstance(name, str) else ""


def _argument(value: Any) -> tuple[Any, Any]:
    """``(shape, value)`` of one argument: a tensor's sizes (None for a symbolic size) and None,
    a list of sizes for a tensor list, else ``[]`` and the value itself when it is plain data."""
    import torch

    if isinstance(value, torch.fx.Node):
        fake = value.meta.get("val")
        if isinstance(fake, torch.Tensor):
            return _sizes(fake), None
        if isinstance(fake, (list, tuple)) and all(isinstance(t, torch.Tensor) for t in fake):
            return [_sizes(t) for t in fake], None
        return [], None
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(v, torch.fx.Node) for v in value):
            return [_argument(v)[0] for v in value], None
        plain = [v if isinstance(v, (int, float, bool)) else None for v in value]
        return [], plain
    if isinstance(value, (int, float, bool, str)) or value is None:
        return [], value
    return [], None


def _sizes(tensor: Any) -> list[Any]:
    out: list[Any] = []
    for d in tensor.shape:
        try:
            out.append(int(d))
        except Exception:  # noqa: BLE001 - a symbolic size with no value: unknown
            out.append(None)
    return out


_WATCHED = ("torch._inductor.config", "torch._dynamo.callback", "torch._inductor.codecache")


class _InductorWatcher(importlib.abc.MetaPathFinder):
    """While a capture or a Profiler is active: when the program imports Inductor's config, turns
    the capture on; Dynamo's compile callbacks, hides the Profiler's hooks while compiling;
    Inductor's code cache, makes fused C++ kernels ranges (:mod:`.kernels`)."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name not in _WATCHED:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.machinery.PathFinder.find_spec(name, path)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_and_capture(module: Any) -> None:
            exec_module(module)
            with _lock:
                if _depth > 0 and name == "torch._inductor.config" and _patch is None:
                    _switch_on()
                elif (_depth > 0 or _hiders) and name == "torch._dynamo.callback":
                    _watch_compiles(module.callback_handler)
                _update_watcher()
            if name == "torch._inductor.codecache":
                kernels.on_inductor_import(module)

        loader.exec_module = exec_and_capture  # type: ignore[method-assign]
        return spec


_watcher = _InductorWatcher()


def _update_watcher() -> None:
    """The watcher is on the import path while something it would act on is not imported yet
    and a capture or a Profiler is active (called with the lock held)."""
    wanted = (_depth > 0 or bool(_hiders)) and not all(name in sys.modules for name in _WATCHED)
    if wanted and _watcher not in sys.meta_path:
        sys.meta_path.insert(0, _watcher)
    elif not wanted and _watcher in sys.meta_path:
        sys.meta_path.remove(_watcher)


def _switch_on() -> None:
    """Patch Inductor's config for capture (called with the lock held)."""
    global _patch
    import torch._inductor.config as config

    # Our own patch, not config.patch(): it can be undone from another thread, leaves the user's
    # own changes to these keys made meanwhile, and adds no context variable per profile.
    _patch = ConfigPatch(config, capture_config())
    _patch.apply()  # (kept first: a capture's end reverts a patch whose applying was interrupted)


def capture_config() -> dict[str, Any]:
    """Inductor's config while capturing: provenance of each kernel, and our read-only pass after
    the user's. The generated kernels are those of a compile without capture (the profiler sees
    CPU kernels through :mod:`.kernels`), so their binaries come from Inductor's code cache."""
    import torch._inductor.config as config

    user = config.post_grad_custom_post_pass
    passes = [] if user is None else list(user) if isinstance(user, (list, tuple)) else [user]
    passes = [p for p in passes if not getattr(p, "torchprof_layer_map", False)]
    return {
        "trace.provenance_tracking_level": 1,
        "post_grad_custom_post_pass": [*passes, _pass_class()()] if passes else _pass_class()(),
    }


#: Hook owners (a ModuleTracker) to hide from Dynamo while it compiles.
_hiders: list[Any] = []


def _on_compile_start(args: Any) -> None:
    for tracker in list(_hiders):
        tracker.hide()


def _on_compile_end(args: Any) -> None:
    for tracker in list(_hiders):
        tracker.show()


_registered = False  # our callbacks went into Dynamo's handler once


def _watch_compiles(handler: Any) -> None:
    """Register our compile start/end callbacks with Dynamo (called with the lock held)."""
    global _registered
    _forget_if_reset(handler)
    if _on_compile_start not in handler.start_callbacks:
        handler.register_start_callback(_on_compile_start)
    if _on_compile_end not in handler.end_callbacks:
        handler.register_end_callback(_on_compile_end)
    _registered = True


def _forget_if_reset(handler: Any) -> None:
    """``torch._dynamo.reset()`` drops every compile callback and starts compile ids again: when
    ours are gone, the graphs known by those ids are someone else's now (called with the lock held).
    Their layer maps go, so the pass's cache key changes too: a graph compiled under capture again
    must be lowered again (a cache hit would skip our pass and leave it without a map)."""
    global _nonce
    if _registered and _on_compile_start not in handler.start_callbacks:
        _graphs.clear()
        _pending.clear()
        _outputs.clear()
        failures.clear()
        _nonce = uuid.uuid4().hex


def start_hiding(tracker: Any) -> None:
    """From now on ``tracker``'s module hooks are out of torch's global tables whenever Dynamo
    compiles, so a graph compiled during profiling is the graph compiled without them (no guard
    on our hooks, no recompilation once they are gone), until :func:`stop_hiding`. Uses what is
    imported already."""
    with _lock:
        _hiders.append(tracker)
        if "torch._dynamo.callback" in sys.modules:
            _watch_compiles(sys.modules["torch._dynamo.callback"].callback_handler)
        _update_watcher()


@lifecycle
def stop_hiding(tracker: Any) -> None:
    with _lock:
        while tracker in _hiders:
            _hiders.remove(tracker)
            _update_watcher()


@contextlib.contextmanager
@lifecycle
def capture_compiled() -> Iterator[None]:
    """While this block runs, every graph ``torch.compile`` compiles records which layer each of
    its kernels computes as Inductor lowers it, so profiles of it (now or later in this process)
    show per-layer time inside compiled regions without lowering it again when first read. The
    graphs are lowered anew (the record is part of Inductor's cache key). Without it, a Profiler
    learns the maps of the graphs that ran - compiled before the block or inside it - when its
    profile is first read."""
    # Entered and left by token, each at most once, so an interrupt anywhere (see
    # .interrupts) leaves neither a capture counted that never ends nor one ended twice.
    token = object()
    try:
        try:
            _begin_capture(token)
            yield
        finally:
            _end_capture(token)
    finally:
        _end_capture(token)  # again, when an interrupt cut the first short (a no-op otherwise)


_capturing: set[int] = set()  # the captures running (ids of their tokens)


@lifecycle
def _begin_capture(token: object) -> None:
    global _depth
    with _lock:
        _capturing.add(id(token))
        _depth = len(_capturing)
        if "torch._dynamo.callback" in sys.modules:
            _watch_compiles(sys.modules["torch._dynamo.callback"].callback_handler)
        if _depth == 1 and "torch._inductor.config" in sys.modules and _patch is None:
            _switch_on()
        _update_watcher()


@lifecycle
def _end_capture(token: object) -> None:
    global _depth, _patch
    with _lock:
        if not _capturing or id(token) not in _capturing:  # (not _capturing: also at interpreter exit)
            _depth = len(_capturing or ())  # (an end cut short just before this line)
            return
        if len(_capturing) == 1:
            if _patch is not None:
                _patch.revert()
                _patch = None
            _collect()
            _unhook_output_code()
        _capturing.discard(id(token))
        _depth = len(_capturing)
        _update_watcher()


def _collect() -> None:
    """Join the kernels Inductor generated with the nodes our pass saw (called with the lock held)."""
    for key in [k for k in _outputs if k in _pending]:
        region, backward = _parse_key(key)
        graph = graph_from(region, backward, _pending.pop(key), _outputs.pop(key)[1])
        _graphs[graph.key] = graph


def graph_from(compile_id: str, backward: bool, nodes: dict[str, CompiledNode], kernels: dict[str, Any]) -> CompiledGraph:
    """A graph's layer map from the nodes our pass saw and Inductor's kernel provenance
    (``"<kernel>:<debug handle>" -> {"post_grad_nodes": [...]}``)."""
    graph = CompiledGraph(compile_id=compile_id, backward=backward, nodes=nodes)
    entries: list[tuple[str, bool, list[str]]] = []
    # Keys are "<kernel>:<debug handle>"; handles count up in the order the wrapper calls the
    # kernels, which is the order extern calls are matched to the profiler's events in.
    for name_handle, info in sorted(kernels.items(), key=lambda kv: _handle(kv[0])):
        name = name_handle.rpartition(":")[0] or name_handle
        post = [p for p in info.get("post_grad_nodes", []) if p in nodes]
        extern = not name.startswith(("cpp_", "triton_"))
        if extern:
            # Inductor's origins of an extern call also list pointwise nodes inlined into its
            # inputs: only the node that is the op itself is its work.
            name = _extern_event_name(name)
            post = [p for p in post if nodes[p].op == name] or post
        entries.append((name, extern, post))
    # Each node's work is counted once, as eager runs it: an extern op's node is the extern
    # kernel's; a node listed by several fused kernels (an origin they share, or pointwise
    # work Inductor recomputes) belongs to the first.
    claimed = {p for _, extern, post in entries if extern for p in post}
    for name, extern, post in entries:
        if not extern:
            post = [p for p in post if p not in claimed]
            claimed.update(post)
        graph.kernels.append(CompiledKernel(name=name, extern=extern, nodes=post))
    return graph


def _handle(name_handle: str) -> int:
    tail = name_handle.rpartition(":")[2]
    return int(tail) if tail.isdigit() else 0


def _parse_key(key: str) -> tuple[str, bool]:
    """``"('Torch-Compiled Region: 0/0', True)"`` -> ``("0/0", True)``."""
    inner = key.strip("()")
    region, _, flag = inner.rpartition(",")
    region = region.strip().strip("'\"")
    return region.removeprefix("Torch-Compiled Region: "), flag.strip() == "True"


def _extern_event_name(kernel: str) -> str:
    """The profiler's name for an extern kernel: ``extern_kernels.addmm`` -> ``aten::addmm``,
    ``torch.ops.aten.convolution_backward.default`` -> ``aten::convolution_backward``."""
    if kernel.startswith("extern_kernels."):
        return "aten::" + kernel.split(".", 1)[1]
    parts = kernel.split(".")
    if parts[:2] == ["torch", "ops"] and len(parts) >= 4:
        return f"{parts[2]}::{parts[3]}"
    if parts[0] == "aten" and len(parts) >= 2:
        return "aten::" + parts[1]
    return kernel


def graphs() -> dict[str, CompiledGraph]:
    """Every graph mapped so far in this process (those Dynamo still knows): captured while
    compiling, or learnt after a profile (:mod:`.compiled_warm`)."""
    with _lock:
        callback = sys.modules.get("torch._dynamo.callback")
        if callback is not None:
            _forget_if_reset(callback.callback_handler)
        _collect()
        return dict(_graphs)


def remember(learnt: dict[str, CompiledGraph]) -> None:
    """Keep maps learnt after the fact, as those captured (until ``torch._dynamo.reset()``)."""
    with _lock:
        _graphs.update(learnt)


def ran_graphs(names: Iterable[str]) -> tuple[list[str], set[str]]:
    """The compile ids of the compiled regions among event names, and the keys of the graphs
    that ran (``## Call CompiledFxGraph <key> ##``)."""
    regions: list[str] = []
    keys: set[str] = set()
    for name in set(names):
        if name.startswith(COMPILED_REGION_PREFIX):
            regions.append(name[len(COMPILED_REGION_PREFIX):])
        elif name.startswith(COMPILED_GRAPH_PREFIX):
            keys.add(name[len(COMPILED_GRAPH_PREFIX):].rstrip("# ").strip())
    return sorted(regions), keys


__all__ = ["capture_compiled", "graph_key", "graphs", "start_hiding", "stop_hiding"]
