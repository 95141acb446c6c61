"""``module.compile()``: the module's own calls, seen without a graph of their own.

``module.compile()`` compiles ``nn.Module._call_impl`` for that module: ``module(x)`` goes
straight to the compiled ``_call_impl`` (``module._compiled_call_impl``), whose code reads torch's
global hook tables itself - so Dynamo guards on them. With torchprof's global hooks in the tables
every call would fail that guard and compile a second version (a new graph inside the profiled
block), and the hooks, traced as no-ops, would give the module no range.

So while a Profiler runs, each such module's ``_compiled_call_impl`` is replaced by a small
function that opens the module's range itself, takes torchprof's hooks out of the tables for the
compiled call (Dynamo then finds the tables as it compiled them: no new graph, no recompilation)
and puts them back after; the original goes back when the Profiler stops. The modules are known
from ``nn.Module.compile`` (torchprof notes each call once a Profiler has run in the process)
and, for modules compiled before that, from one scan of the live objects.

Caveat: while a compiled call runs, torchprof's hooks are out of the tables for every thread, so
a module running eagerly on another thread at that moment gets no range of its own.
"""

from __future__ import annotations

import gc
import sys
import threading
import types
import weakref
from typing import Any

_lock = threading.Lock()
_registry: weakref.WeakSet[Any] = weakref.WeakSet()  # modules .compile() was called on
_scanned = False
_original_compile: Any = None
_active: Any = None  # the GlobalHooks while attached
_swapped: list[tuple[Any, Any, Any]] = []  # (module, original compiled call, ours)


def attach(hooks: Any) -> None:
    """Route the calls of every ``module.compile()``'d module through :func:`_call`. ``hooks`` is
    torchprof's GlobalHooks (its dynamo-safe enter/exit functions and its hide/show)."""
    global _active
    with _lock:
        _note_compiles()
        _active = hooks
        for module in list(_registry):
            _swap(module)


def detach() -> None:
    """Give every module its own compiled call back. Safe to call twice."""
    global _active
    with _lock:
        _active = None
        while _swapped:
            module, original, ours = _swapped.pop()
            if module.__dict__.get("_compiled_call_impl") is ours:
                module.__dict__["_compiled_call_impl"] = original


def _note_compiles() -> None:
    """From now on note every ``module.compile()``; once, find the modules compiled before
    (called with the lock held). Nothing to find while Dynamo was never imported: compiling
    imports it."""
    global _scanned, _original_compile
    import torch

    if _original_compile is None:
        _original_compile = torch.nn.Module.compile

        def compile(self: Any, *args: Any, **kwargs: Any) -> None:
            _original_compile(self, *args, **kwargs)
            with _lock:
                _registry.add(self)
                if _active is not None:
                    _swap(self)

        compile.__doc__ = _original_compile.__doc__
        torch.nn.Module.compile = compile  # type: ignore[method-assign]
    if not _scanned and "torch._dynamo" in sys.modules:
        _scanned = True
        # A compiled _call_impl holds the module's bound _call_impl: those bound methods are
        # the referrers of the function (found by the collector in C, faster than a walk here).
        for ref in gc.get_referrers(torch.nn.Module._call_impl):
            owner = getattr(ref, "__self__", None) if isinstance(ref, types.MethodType) else None
            if isinstance(owner, torch.nn.Module) and owner.__dict__.get("_compiled_call_impl") is not None:
                _registry.add(owner)


def _swap(module: Any) -> None:
    """Called with the lock held."""
    original = module.__dict__.get("_compiled_call_impl")
    if original is None or getattr(original, "torchprof_compiled_call", False):
        return
    ours = _call(module, original, _active)
    module.__dict__["_compiled_call_impl"] = ours
    _swapped.append((module, original, ours))


def _call(module: Any, compiled_call: Any, hooks: Any) -> Any:
    enter, exit_ = hooks.functions()

    def call(*args: Any, **kwargs: Any) -> Any:
        if not hooks.recording():  # a schedule's idle step: as without torchprof
            return compiled_call(*args, **kwargs)
        enter(module, args)
        hidden = hooks.hide_while_compiled()
        try:
            output = compiled_call(*args, **kwargs)
        except BaseException:
            if hidden:
                hooks.show_again()
            exit_(module, args, None)
            raise
        if hidden:
            hooks.show_again()
        exit_(module, args, output)
        return output

    call.torchprof_compiled_call = True  # type: ignore[attr-defined]
    hooks.skip_in_dynamo(call)
    return call
