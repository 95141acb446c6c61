"""Ctrl-C while torchprof starts or stops torch's profiler.

A KeyboardInterrupt is raised wherever the interpreter next checks for signals: on entering a
function, after a call returns, on a loop's back edge. Landing between two steps of starting or
stopping (torch's Python flag set but its C++ profiler not enabled yet, the hooks removed but the
profiler still recording, fd 2 still pointing at a temporary file) it used to leave the process
unable to profile again. Two mechanisms keep every state consistent:

* :class:`SigintDeferral`: while a session runs, its SIGINT handler passes a Ctrl-C on to the
  previous handler (so the profiled code is interrupted as usual), except when a frame of a
  function marked :func:`lifecycle` is on the interrupted stack: then the interrupt is held and
  raised once that step is complete, with everything started or stopped.
* exception safety: every step of a teardown runs even when the one before raised, and a final
  safety net turns torch's profiler off whatever was left half done (for an interrupt raised by
  code, or where no handler can be installed: off the main thread).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

#: Code of the functions that start or stop a session: a Ctrl-C waits while one of them runs.
_LIFECYCLE: set[CodeType] = set()


def lifecycle(fn: F) -> F:
    """Mark ``fn`` as a step of starting or stopping: a Ctrl-C waits until it returns."""
    _LIFECYCLE.add(fn.__code__)
    return fn


def in_lifecycle(frame: FrameType | None) -> bool:
    """Whether a lifecycle function is on the stack at ``frame`` (walked up to the bottom)."""
    while frame is not None:
        if frame.f_code in _LIFECYCLE:
            return True
        frame = frame.f_back
    return False


class SigintDeferral:
    """The SIGINT handler of one session (see the module docstring).

    Installed only on the main thread (Python runs signal handlers there, and only there can they
    be set) and only over a Python-level handler; SIG_IGN and SIG_DFL are left alone. Removed only
    while it is still the handler, so a handler the profiled code installed stays in place.
    """

    def __init__(self) -> None:
        self.pending = False
        self._previous: Any = None
        self._installed = False

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        try:
            previous = signal.getsignal(signal.SIGINT)
            if not callable(previous):
                return
            self._previous = previous
            signal.signal(signal.SIGINT, self._handle)
        except (ValueError, OSError, RuntimeError):  # not the main interpreter, or no signals here
            return
        self._installed = True

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if in_lifecycle(frame):
            self.pending = True
            return
        self._previous(signum, frame)

    def uninstall(self) -> None:
        if not self._installed:
            return
        interrupted = False
        try:
            while signal.getsignal(signal.SIGINT) == self._handle:
                try:
                    signal.signal(signal.SIGINT, self._previous)
                except KeyboardInterrupt:
                    # signal.signal() runs pending handlers before it sets one: a Ctrl-C arriving
                    # just then is forwarded (raised) and the handler is not replaced. Put it
                    # back anyway, then raise the Ctrl-C.
                    interrupted = True
        except (ValueError, OSError, RuntimeError):  # stopped from another thread: leave it, it only forwards
            return
        self._installed = False
        if interrupted:
            raise KeyboardInterrupt

    def raise_pending(self) -> None:
        """Raise the Ctrl-C held during the step just finished, if one was."""
        if self.pending:
            self.pending = False
            raise KeyboardInterrupt


def run_all(steps: list[Callable[[], Any]]) -> None:
    """Run every step even if one before it raised (or was interrupted); then raise the first error.

    A step that must not be skipped by a second Ctrl-C (the last one is usually the safety net)
    gets its chance here: an interrupt raised during one step does not prevent the next.
    """
    first: BaseException | None = None
    for step in steps:
        try:
            step()
        except BaseException as exc:  # noqa: BLE001 - re-raised below, after the remaining steps
            if first is None:
                first = exc
    if first is not None:
        raise first
