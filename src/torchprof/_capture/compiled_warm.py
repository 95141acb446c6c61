"""Layer maps of the graphs ``torch.compile`` compiled without capture: a model compiled and warmed
up before the Profiler opened, or compiled inside the block (compiled exactly as without
torchprof, cache hits included). Learnt when the profile is first read, never inside the block.

What torch keeps of a compiled frame, and how we reach it:

- Dynamo's cache entries on each code object it compiled (``torch._dynamo.convert_frame.input_codes``,
  ``_debug_get_cache_entry_list``) carry the compile id the profiler names
  (``Torch-Compiled Region: 0/0``) and the rewritten bytecode, which calls the compiled graph
  through a global ``__compiled_fn_<n>`` of the frame's module.
- That function's closures hold AOTAutograd's runtime wrappers, whose ``CompiledFunction``
  class holds the compiled forward and backward (``CompiledFxGraph``: Inductor's wrapper source,
  its kernels' names, the key the profiler shows as ``## Call CompiledFxGraph <key> ##``), and
  AOTAutograd's ``forward`` keeps the graph Dynamo traced (``forward.zero_grad.__self__``), whose
  nodes carry ``nn_module_stack`` and example (fake) inputs.
- Which layer each kernel computes is not kept (Inductor records provenance only while tracking
  it). So the graph Dynamo traced is compiled again, outside the block, with provenance on and
  our read-only pass (:mod:`.compiled`), up to Inductor's wrapper source: lowering and code
  generation only - nothing is written, loaded or built, and Dynamo's counters, AOTAutograd's
  and Inductor's caches and the random state are left as they were. The new wrapper source must
  equal the kept one (kernel names, order and arguments), else the map is not used and the
  graph's layers stay unknown, with the reason.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import gc
import sys
import threading
import types
from collections.abc import Iterable, Iterator
from typing import Any

from .._records import CompiledGraph, CompiledNode, graph_key
from . import compiled

_lock = threading.Lock()  # one relowering at a time (it sets process-wide hooks)
failures = compiled.failures
_MAX_WALK = 5000


def maps(ran: Iterable[str] = ()) -> dict[str, CompiledGraph]:
    """Every graph mapped so far in this process, and the maps of the graphs among ``ran`` (a
    profile's event names: its compiled regions and graph calls) that have none yet, learnt now."""
    known = compiled.graphs()
    regions, keys = compiled.ran_graphs(ran)
    missing = [cid for cid in regions if graph_key(cid, False) not in known and graph_key(cid, True) not in known]
    if missing:
        learnt = learn(missing, keys)
        compiled.remember(learnt)
        known.update(learnt)
    return known


def learn(compile_ids: Iterable[str], keys: Iterable[str]) -> dict[str, CompiledGraph]:
    """Layer maps of the graphs of ``compile_ids`` that ran (their forward or backward graph key
    among ``keys``), by :func:`~torchprof._records.graph_key`. A compile id that cannot be
    mapped is left out, its reason in :data:`failures`."""
    wanted = {cid for cid in compile_ids if cid not in failures}
    if not wanted or "torch._dynamo.convert_frame" not in sys.modules or "torch._inductor.output_code" not in sys.modules:
        return {}
    seen_keys = set(keys)
    out: dict[str, CompiledGraph] = {}
    with _lock:
        for cid, (gm, stored) in _compiled_frames(wanted).items():
            if not any(g._fx_graph_cache_key in seen_keys for g in stored.values()):
                continue  # another graph ran under this id (Dynamo was reset since): nothing to map
            try:
                graphs = _relower(cid, gm, stored)
            except Exception as exc:  # noqa: BLE001 - any failure leaves the graph unmapped, with why
                failures[cid] = f"{type(exc).__name__}: {exc}"
                continue
            for graph in graphs:
                out[graph.key] = graph
    return out


# -- finding what torch kept ----------------------------------------------------------------------
def _compiled_frames(wanted: set[str]) -> dict[str, tuple[Any, dict[bool, Any]]]:
    """For each wanted compile id: the graph Dynamo traced and Inductor's compiled graphs (by
    backward), found through Dynamo's cache entries."""
    from torch._C._dynamo.eval_frame import _debug_get_cache_entry_list
    from torch._dynamo.convert_frame import input_codes

    found: dict[str, tuple[Any, dict[bool, Any]]] = {}
    for ref in list(input_codes.seen):
        code = ref()
        if code is None:
            continue
        for entry in _debug_get_cache_entry_list(code):
            cid = str(entry.compile_id)
            if cid not in wanted or cid in found:
                continue
            for name in entry.code.co_names:
                if not name.startswith("__compiled_fn"):
                    continue
                fn = _global(name, code)
                gm, stored = _walk(fn, cid) if fn is not None else (None, {})
                if gm is not None and stored:
                    found[cid] = (gm, stored)
                    break
            else:
                failures.setdefault(cid, "torch kept no Inductor graph for it (another backend, or a graph without kernels)")
    for cid in wanted - found.keys():
        failures.setdefault(cid, "Dynamo no longer holds its compiled code")
    return found


def _global(name: str, code: Any) -> Any:
    """A ``__compiled_fn`` global of the frame's module (its name is unique in the process)."""
    modules = list(sys.modules.values())
    first = [m for m in modules if getattr(m, "__file__", None) == code.co_filename]
    for module in [*first, *modules]:
        names = getattr(module, "__dict__", None)
        if isinstance(names, dict) and name in names:
            return names[name]
    # Code run by exec() with globals of its own: the functions made from the code know them.
    for ref in gc.get_referrers(code):
        if isinstance(ref, types.FunctionType) and name in ref.__globals__:
            return ref.__globals__[name]
    return None


def _walk(fn: Any, cid: str) -> tuple[Any, dict[bool, Any]]:
    """Through closures, wrappers and AOTAutograd's classes from a compiled function: the graph
    Dynamo traced for ``cid`` and the ``CompiledFxGraph`` objects, by backward. Bounded."""
    from torch._inductor.output_code import CompiledFxGraph
    from torch.fx import GraphModule
    from torch.nn import Module

    gm: Any = None
    stored: dict[bool, Any] = {}
    stack: list[Any] = [fn]
    seen: set[int] = set()
    while stack and len(seen) < _MAX_WALK:
        obj = stack.pop()
        if id(obj) in seen or obj is None:
            continue
        seen.add(id(obj))
        if isinstance(obj, CompiledFxGraph):
            stored.setdefault(bool(obj.fx_kwargs.get("is_backward")), obj)
        elif isinstance(obj, GraphModule):
            if gm is None and str(obj.meta.get("dynamo_compile_id")) == cid:
                gm = obj
        elif isinstance(obj, (Module, str, bytes, int, float, types.ModuleType)):
            continue
        elif isinstance(obj, functools.partial):
            stack += [obj.func, *obj.args, *obj.keywords.values()]
        elif isinstance(obj, types.MethodType):
            stack += [obj.__func__, obj.__self__]
        elif isinstance(obj, types.BuiltinMethodType):
            # ``CompiledFunction.apply``: autograd.Function's C method, bound to the class.
            if isinstance(obj.__self__, type):
                stack.append(obj.__self__)
        elif isinstance(obj, (staticmethod, classmethod)):
            stack.append(obj.__func__)
        elif isinstance(obj, types.FunctionType):
            for cell in obj.__closure__ or ():
                with contextlib.suppress(ValueError):  # an empty cell
                    stack.append(cell.cell_contents)
            stack += list(vars(obj).values())
        elif isinstance(obj, (list, tuple)):
            stack += list(obj[:64])
        elif isinstance(obj, type):
            if obj.__module__.startswith("torch."):
                stack += list(vars(obj).values())
        elif type(obj).__module__.startswith(("torch._functorch", "torch._inductor", "torch._dynamo")):
            stack += list(getattr(obj, "__dict__", {}).values())
    return gm, stored


# -- compiling again, as far as the wrapper source --------------------------------------------------
def _relower(cid: str, gm: Any, stored: dict[bool, Any]) -> list[CompiledGraph]:
    import torch
    from torch._dynamo.utils import counters
    from torch._guards import CompileContext, TracingContext, compile_context, tracing
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    placeholders = list(gm.graph.find_nodes(op="placeholder"))
    inputs = [n.meta.get("example_value") for n in placeholders]
    fake = next((t for t in inputs if isinstance(t, FakeTensor)), None)
    if fake is None or any(t is None for t in inputs):
        raise RuntimeError("Dynamo kept no example inputs for it")
    if any(isinstance(d, torch.SymInt) for t in inputs if isinstance(t, torch.Tensor) for d in t.shape):
        # Its kernels are generic in the sizes, which its nodes do not know: no FLOPs either.
        raise RuntimeError("it was compiled for dynamic shapes; torchprof maps graphs compiled for fixed shapes")
    copied = _copy_graph(gm, placeholders)
    saved_counters = {name: counter.copy() for name, counter in counters.items()}
    compiled._stop.after_codegen = True
    try:
        # A graph compiled for inference (no_grad) is compiled again for inference.
        inference = False in stored and bool(stored[False].fx_kwargs.get("is_inference"))
        grad = torch.no_grad() if inference else contextlib.nullcontext()
        autocast = _autocast_of(gm, inputs)
        amp = torch.autocast(autocast[0], dtype=autocast[1]) if autocast is not None else contextlib.nullcontext()
        with torch.random.fork_rng(devices=[]), grad, amp, _relowering_config(stored), _torch_logs_quiet(), \
                tracing(TracingContext(FakeTensorMode(shape_env=fake.fake_mode.shape_env))), \
                compile_context(CompileContext(gm.meta["dynamo_compile_id"])):  # fmt: skip
            from torch._inductor.compile_fx import compile_fx

            compile_fx(copied, inputs, inner_compile=_inner_compile(stored))
    finally:
        compiled._stop.after_codegen = False
        counters.clear()
        counters.update(saved_counters)
        taken = _take(cid)
    graphs = []
    for backward, original in stored.items():
        if backward not in taken:
            raise RuntimeError(f"compiling it again gave no {'backward' if backward else 'forward'} graph")
        nodes, source, kernels = taken[backward]
        if _normalised(source) != _normalised(original.source_code):
            raise RuntimeError("compiling it again gave other kernels (Inductor's config changed since?)")
        graphs.append(compiled.graph_from(cid, backward, nodes, kernels))
    return graphs


def _autocast_of(gm: Any, inputs: list[Any]) -> tuple[str, Any] | None:
    """The autocast a graph was traced under, where the call ran inside ``torch.autocast`` (its
    nodes compute in a half type its inputs are not in): (device type, dtype). None otherwise.
    A wrong reading only fails the relowering's check of its kernels (the graph stays unmapped)."""
    import torch

    half = {torch.bfloat16, torch.float16}
    given = {t.dtype for t in inputs if isinstance(t, torch.Tensor)}
    made = set()
    for node in gm.graph.nodes:
        value = node.meta.get("example_value")
        if isinstance(value, torch.Tensor) and value.dtype in half and value.dtype not in given:
            made.add(value.dtype)
    device = next((t.device.type for t in inputs if isinstance(t, torch.Tensor)), None)
    return (device, made.pop()) if len(made) == 1 and device is not None else None


@contextlib.contextmanager
def _torch_logs_quiet() -> Iterator[None]:
    """torch's own log records from this thread held back while it compiles again for the map
    (a failure there, a fake tensor's, logs a traceback: the profile's warning says it instead)."""
    import logging
    import threading

    me = threading.get_ident()

    def keep(record: logging.LogRecord) -> bool:
        return not (record.thread == me and record.name.startswith("torch"))

    handlers = [*logging.getLogger("torch").handlers, *logging.getLogger().handlers]
    for handler in handlers:
        handler.addFilter(keep)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(keep)


def _copy_graph(gm: Any, placeholders: list[Any]) -> Any:
    """A copy compile_fx may change, with what AOTAutograd reads of Dynamo's graph (the sources
    of its inputs: which are parameters, kept across the backward)."""
    copied = copy.deepcopy(gm)
    for old, new in zip(placeholders, copied.graph.find_nodes(op="placeholder")):
        if hasattr(old, "_dynamo_source"):
            new._dynamo_source = old._dynamo_source
    if hasattr(gm, "_param_name_to_source"):
        copied._param_name_to_source = gm._param_name_to_source
    copied.meta.update(gm.meta)
    return copied


@contextlib.contextmanager
def _relowering_config(stored: dict[bool, Any]) -> Iterator[None]:
    """Capture's config; no cache read or written; the backward compiled now, not lazily; C++
    kernel profiling as the kept graph had it (it changes the generated code)."""
    import torch._functorch.config as functorch_config
    import torch._inductor.config as config

    profiled = any("RECORD_FUNCTION(" in g.source_code for g in stored.values())
    patch = {**compiled.capture_config(), "fx_graph_cache": False, "cpp.enable_kernel_profile": profiled}
    with config.patch(patch), functorch_config.patch(enable_autograd_cache=False, force_non_lazy_backward_lowering=True):
        yield


def _inner_compile(stored: dict[bool, Any]) -> Any:
    """Inductor's compile of one graph, stopped once its wrapper source is generated. The
    backward graph is lowered for the strides the forward's outputs really have: those of the
    kept forward graph (the same graph, as its source shows)."""
    from torch._inductor.compile_fx import compile_fx_inner
    from torch._inductor.output_code import MockFXGraphCacheOutput
    from torch._inductor.utils import set_tracing_context_output_strides

    def inner(gm: Any, example_inputs: Any, **kwargs: Any) -> Any:
        try:
            return compile_fx_inner(gm, example_inputs, **kwargs)
        except Exception as exc:  # our stop, maybe wrapped in one of Inductor's errors
            if not _stopped(exc):
                raise
        original = stored.get(bool(kwargs.get("is_backward")))
        if original is not None and original.output_strides is not None:
            set_tracing_context_output_strides(example_inputs, original)
        return MockFXGraphCacheOutput()  # never run: AOTAutograd goes on to the backward graph

    return inner


def _stopped(exc: BaseException | None) -> bool:
    while exc is not None:
        if isinstance(exc, compiled.StopAfterCodegen):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _take(cid: str) -> dict[bool, tuple[dict[str, CompiledNode], str, dict[str, Any]]]:
    """What compiling ``cid`` again left (taken out): by backward, the nodes our pass saw, the
    wrapper source and the kernels' provenance."""
    out: dict[bool, tuple[dict[str, CompiledNode], str, dict[str, Any]]] = {}
    with compiled._lock:
        for backward in (False, True):
            key = compiled.pending_key(cid, backward)
            nodes = compiled._pending.pop(key, None)
            output = compiled._outputs.pop(key, None)
            if nodes is not None and output is not None:
                out[backward] = (nodes, *output)
        if compiled._depth == 0:
            compiled._unhook_output_code()
    return out


def _normalised(source: str) -> list[str]:
    """The wrapper source without its comments: they differ between two compiles of one graph
    (its AOT id, provenance handles, the source-node names Inductor tracks with provenance on),
    while what runs - kernel names, their code, calls and arguments - does not."""
    return [line for line in source.splitlines() if not line.lstrip().startswith("#")]
