"""Dynamo's switch into compiled code, watched while a Profiler runs.

Every ``torch.compile`` wrapper and ``optimize`` context turns compiled code on through
``torch._dynamo.eval_frame._maybe_set_eval_frame(callback)`` and off again with ``None`` (a
``disable``'d function inside compiled code turns it off through torch's C function and back on
through this one, so it stays "in compiled code" here).

Compiled code checks guards on what its frames read when they were compiled, and some of it reads
torch's global tables that torchprof's hooks sit in: a module called inside a compiled function
whose ``_call_impl`` Dynamo inlined reads the global module hook tables (a Lightning module with
its ``forward`` and ``training_step`` compiled each). With torchprof's hooks in them every call
would fail its guard and compile again. So each listener is told when a thread enters compiled
code and when it leaves it, and takes its entries out of those tables meanwhile where it must
(the module hooks, on the terms of :meth:`ModuleTracker.compiled_code_starts`).
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Protocol


class Listener(Protocol):
    def compiled_code_starts(self, thread: int, first: bool) -> None:
        """``first``: that thread was not in compiled code (a ``disable``'d function's return, or a
        compiled call nested in a graph break's eager code, switches it on again)."""


    def compiled_code_ends(self, thread: int, any_left: bool) -> None:
        """``any_left``: another thread is still in compiled code."""


class CompiledEntry:
    """The watch: ``listeners`` are told each switch, ``threads`` are those in compiled code.

    Made first and installed after (:meth:`install`), so that its undo (:meth:`remove`) can be
    noted in between: an interrupt anywhere leaves torch's switch as it was, or removable."""

    def __init__(self) -> None:
        self._eval_frame: Any = None
        self._original: Any = None
        self._ours: Any = None
        self.listeners: list[Listener] = []
        self.threads: set[int] = set()

    def install(self) -> bool:
        """Watch the switch; False where Dynamo is not imported (nothing compiled yet: a compile
        imports it) or this torch has no such switch. A watch an interrupted stop left in place
        is replaced (its original is the one put back)."""
        eval_frame = sys.modules.get("torch._dynamo.eval_frame")
        original = getattr(eval_frame, "__dict__", {}).get("_maybe_set_eval_frame")
        while original is not None and getattr(original, "torchprof_watch", False):
            original = getattr(original, "torchprof_original", None)
        if original is None:
            return False
        get_ident = threading.get_ident
        listeners, threads = self.listeners, self.threads

        def _maybe_set_eval_frame(callback: Any) -> Any:
            try:
                thread = get_ident()
                if callback is None:  # that thread left compiled code
                    threads.discard(thread)
                    for listener in list(listeners):
                        _tell(listener.compiled_code_ends, thread, bool(threads))
                else:
                    first = thread not in threads
                    threads.add(thread)
                    for listener in list(listeners):
                        _tell(listener.compiled_code_starts, thread, first)
            except Exception:  # noqa: BLE001 - never in the way of the user's compiled call
                pass
            return original(callback)

        _maybe_set_eval_frame.torchprof_watch = True  # type: ignore[attr-defined]
        _maybe_set_eval_frame.torchprof_original = original  # type: ignore[attr-defined]
        self._eval_frame, self._original, self._ours = eval_frame, original, _maybe_set_eval_frame
        eval_frame._maybe_set_eval_frame = _maybe_set_eval_frame  # type: ignore[union-attr]
        return True

    def remove(self) -> None:
        """Put torch's switch back (a no-op once done, or where it was never installed); the
        listeners are told nothing more."""
        self.listeners.clear()
        if self._ours is not None and self._eval_frame.__dict__.get("_maybe_set_eval_frame") is self._ours:
            self._eval_frame._maybe_set_eval_frame = self._original
        self._ours = None


def _tell(fn: Any, *args: Any) -> None:
    try:  # noqa: SIM105 - not contextlib.suppress: this runs at every entry into compiled code
        fn(*args)
    except Exception:  # noqa: BLE001 - one listener's failure stops neither the others nor the call
        pass
