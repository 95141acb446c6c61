"""Fused C++ kernels of ``torch.compile``'d graphs as profiler ranges, without compiling again.

On the CPU, Inductor's fused kernels are plain C++ functions the graph's Python wrapper calls by
their module-level name (``cpp_fused_relu_0(buf0, buf1)``): the profiler sees none of them, only
the wrapper's ``## Call CompiledFxGraph`` range around them. (``cpp.enable_kernel_profile`` would
make each a range, but it changes the generated C++, so every graph would be compiled again.)

While a Profiler runs, each such name in every wrapper module Inductor has loaded in this
process is rebound to a small function that opens a range named after the kernel around the
call; modules loaded meanwhile (a graph compiled inside the block) are rebound as they load.
Everything goes back when the Profiler stops. A kernel already recorded by Inductor itself (its
module was compiled with kernel profiling) is left alone. Cost: one range per kernel call, as
``enable_kernel_profile`` adds; nothing when no graph was compiled.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

_lock = threading.Lock()
#: (module dict, name, original) of every rebound kernel while active.
_rebound: list[tuple[dict[str, Any], str, Any]] = []
_active = False
_original_load: Any = None
_profiled_sources: dict[str, bool] = {}  # module file -> Inductor records its kernels itself
_names: dict[int, tuple[Any, list[str]]] = {}  # id(wrapper module) -> (it, its kernels' names)
_wrappers: dict[int, tuple[Any, dict[str, Any]]] = {}  # id(wrapper module) -> (it, its kernels' range wrappers)


def _instrument(fn: Callable[..., Any], name: str, record: Any) -> Callable[..., Any]:
    def kernel(*args: Any) -> Any:
        with record(name):
            return fn(*args)

    kernel.torchprof_kernel = fn  # type: ignore[attr-defined]
    return kernel


def _profiles_itself(module: Any) -> bool:
    path = getattr(module, "__file__", None)
    if not path:
        return False
    known = _profiled_sources.get(path)
    if known is None:
        try:
            with open(path, encoding="utf-8") as f:
                known = "RECORD_FUNCTION(" in f.read()
        except OSError:
            known = False
        _profiled_sources[path] = known
    return known


def _kernel_names(module: Any) -> list[str]:
    """The names of a wrapper module's C++ kernels, found once per module."""
    known = _names.get(id(module))
    if known is None or known[0] is not module:
        names = vars(module)
        found = [] if _profiles_itself(module) else [
            k for k, v in names.items() if k.startswith("cpp_") and callable(v) and not isinstance(v, type)]  # fmt: skip
        known = _names[id(module)] = (module, found)
    return known[1]


def _rebind(module: Any) -> None:
    """Rebind the C++ kernels of one wrapper module (called with the lock held)."""
    names = vars(module)
    known = _wrappers.get(id(module))
    if known is None or known[0] is not module:
        known = _wrappers[id(module)] = (module, {})
    made = known[1]
    for name in _kernel_names(module):
        fn = names.get(name)
        if fn is None or hasattr(fn, "torchprof_kernel"):
            continue
        wrapper = made.get(name)
        if wrapper is None or wrapper.torchprof_kernel is not fn:  # made once per kernel, kept for the next Profiler
            from torch._C._profiler import _RecordFunctionFast

            wrapper = made[name] = _instrument(fn, name, _RecordFunctionFast)
        names[name] = wrapper
        _rebound.append((names, name, fn))


def start() -> None:
    """Rebind the kernels of every loaded wrapper module, and of each one loaded from now on.
    Uses only what is imported already (Inductor itself costs seconds to import); a compile
    that imports it later calls :func:`on_inductor_import`."""
    global _active
    with _lock:
        if _active:
            return
        _active = True
        if "torch._inductor.codecache" in sys.modules:
            _hook_loads(sys.modules["torch._inductor.codecache"])


def on_inductor_import(codecache: Any) -> None:
    """Inductor's code cache was imported while active: watch its loads."""
    with _lock:
        if _active:
            _hook_loads(codecache)


def _hook_loads(codecache: Any) -> None:
    global _original_load
    cache = codecache.PyCodeCache
    for module in list(cache.modules):
        _rebind(module)
    if _original_load is not None:
        return
    _original_load = cache.__dict__["load_by_key_path"]
    load = _original_load.__func__

    def load_by_key_path(cls: Any, *args: Any, **kwargs: Any) -> Any:
        module = load(cls, *args, **kwargs)
        try:
            with _lock:
                if _active:
                    _rebind(module)
        except Exception:  # noqa: BLE001 - never fail the user's compile: its kernels stay unseen
            pass
        return module

    cache.load_by_key_path = classmethod(load_by_key_path)


def stop() -> None:
    """Put every kernel and Inductor's loader back. Safe to call twice."""
    global _active, _original_load
    with _lock:
        _active = False
        while _rebound:
            names, name, fn = _rebound.pop()
            current = names.get(name)
            if getattr(current, "torchprof_kernel", None) is fn:
                names[name] = fn
        if _original_load is not None:
            codecache = sys.modules.get("torch._inductor.codecache")
            if codecache is not None:
                codecache.PyCodeCache.load_by_key_path = _original_load
            _original_load = None
