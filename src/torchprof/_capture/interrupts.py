"""Ctrl-C while torchprof changes process state (starts or stops torch's profiler, points fd 2 or
``sys.stdout`` elsewhere, patches a config, installs hooks), and undoing those changes safely.

A KeyboardInterrupt is raised wherever the interpreter next checks for signals: on entering a
function, after a call returns, on a loop's back edge. Landing between two steps of a change
(torch's Python flag set but its C++ profiler not enabled yet, fd 2 still on a temporary file,
``sys.stdout`` still a buffer) it used to leave the process unable to profile, or silent. Two
mechanisms keep every state consistent:

* the SIGINT deferral (:func:`hold`, :func:`release`): while torchprof holds it, its handler
  passes a Ctrl-C on to the previous handler (so the profiled code is interrupted as usual),
  except when a frame of a function marked :func:`lifecycle` (a step that changes or restores
  state) is on the interrupted stack: then it is held, and raised once the state is consistent:
  when the last holder lets go (:func:`release`), or where an entry point that returns to the
  user's code asks (:func:`raise_pending`). Such an entry point (``Profiler.__enter__``,
  ``step``) is not a lifecycle step itself, and makes every call inside a ``try`` that undoes
  what it started: a Ctrl-C after its last check lands in its own frame, where it is met.
* exception safety, for an interrupt raised by code (a handler of the user's own, a callback) or
  where no handler can be installed (off the main thread): every change is undone in a
  ``finally``, and that undoing is written to be repeated (each undo is idempotent and resumes
  where an interrupted one stopped), so a second ``finally`` around the first completes it:
  :func:`run_all` runs every step even when one before raised, :func:`run_or_undo` undoes a
  change whose making was interrupted.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any, TypeVar

# signal's own functions without its enum conversions (they cost as much as the rest of a hold)
_raw_signal: Any = getattr(signal, "_signal", signal)  # CPython's C module; the wrappers elsewhere
_getsignal: Callable[[int], Any] = _raw_signal.getsignal
_setsignal: Callable[[int, Any], Any] = _raw_signal.signal

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")

#: Code of the functions that change or restore state: a Ctrl-C waits while one of them runs.
_LIFECYCLE: set[CodeType] = set()


def lifecycle(fn: F) -> F:
    """Mark ``fn`` as a step that changes or restores process state: a Ctrl-C that arrives while
    it runs (or anything it calls) waits until it returns, if torchprof holds SIGINT then."""
    _LIFECYCLE.add(fn.__code__)
    return fn


def in_lifecycle(frame: FrameType | None) -> bool:
    """Whether a lifecycle function is on the stack at ``frame`` (walked up to the bottom)."""
    while frame is not None:
        if frame.f_code in _LIFECYCLE:
            return True
        frame = frame.f_back
    return False


class _Deferral:
    """The one SIGINT handler torchprof installs, held by any number of owners at once (a session
    for its whole block, an export for its fd swap), installed while at least one holds it.

    Installed only on the main thread (Python runs signal handlers there, and only there can they
    be set) and only over a Python-level handler; SIG_IGN and SIG_DFL are left alone. Removed only
    while it is still the handler, so a handler the profiled code installed stays in place.
    """

    def __init__(self) -> None:
        self.holders: set[int] = set()
        self.previous: Any = None
        self.pending = False

    def hold(self, owner: object) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        self.holders.add(id(owner))
        try:
            current = _getsignal(_SIGINT)
            if current == self.handle or not callable(current):
                return
            # Kept before the switch: a Ctrl-C right after it finds the handler to pass it to.
            self.previous = current
            _setsignal(_SIGINT, self.handle)
        except (ValueError, OSError, RuntimeError):  # not the main interpreter, or no signals here
            return

    def release(self, owner: object) -> None:
        self.holders.discard(id(owner))
        if self.holders or threading.current_thread() is not threading.main_thread():
            return  # off the main thread it cannot be removed: it removes itself at the next Ctrl-C
        try:
            if _getsignal(_SIGINT) == self.handle:
                _setsignal(_SIGINT, self.previous)
        except (ValueError, OSError, RuntimeError):
            return
        self.raise_pending()

    def raise_pending(self) -> None:
        if self.pending:
            self.pending = False
            raise KeyboardInterrupt

    def handle(self, signum: int, frame: FrameType | None) -> None:
        if not self.holders:  # released from another thread: step aside now
            signal.signal(signal.SIGINT, self.previous)
        elif in_lifecycle(frame):
            self.pending = True
            return
        self.previous(signum, frame)


_SIGINT = int(signal.SIGINT)
_DEFERRAL = _Deferral()


def hold(owner: object) -> None:
    """From now on, a Ctrl-C that lands in a lifecycle step waits for it (see the module docstring)."""
    _DEFERRAL.hold(owner)


def release(owner: object) -> None:
    """Stop holding SIGINT for ``owner`` (idempotent); call it after everything else is undone.
    The last holder to let go raises the Ctrl-C held meanwhile, if one was."""
    _DEFERRAL.release(owner)


def raise_pending() -> None:
    """Raise the Ctrl-C held while a lifecycle step ran, if one was."""
    _DEFERRAL.raise_pending()


def sigint_held() -> bool:
    """Whether torchprof's SIGINT handler is installed (for tests)."""
    return signal.getsignal(signal.SIGINT) == _DEFERRAL.handle


def run_all(steps: list[Callable[[], Any]]) -> None:
    """Run every step even if one before it raised (or was interrupted); then raise the first error."""
    first: BaseException | None = None
    for step in steps:
        try:
            step()
        except BaseException as exc:  # noqa: BLE001 - re-raised below, after the remaining steps
            if first is None:
                first = exc
    if first is not None:
        raise first


@lifecycle
def run_or_undo(do: Callable[[], T], undo: Callable[[], Any]) -> T:
    """``do()``; if it raises or is interrupted, ``undo()`` and raise. ``undo`` must be safe to
    run on a change made partly or not at all, and twice: it runs again if it was interrupted."""
    try:
        try:
            return do()
        except BaseException:
            undo()
            raise
    except BaseException:
        undo()  # again: the first undo was interrupted (it resumes), or it was done (a no-op)
        raise

