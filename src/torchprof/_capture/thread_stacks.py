"""Per-thread bookkeeping of the module hooks: each thread's stack of open module calls (a forward
pass on a worker thread nests within itself), how many module calls it made, and whether torch's
profiler records it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class CallStack(list):
    """One thread's open module calls, and how many module calls that thread made.

    Each entry is ``[module, path, open range, times re-entered]``."""

    __slots__ = ("calls", "name", "recorded")

    def __init__(self, name: str, recorded: bool | None) -> None:
        super().__init__()
        self.calls = 0
        self.name = name
        self.recorded = recorded
        """Whether torch's profiler records this thread: None where it records every thread."""


def every_thread_recorded() -> bool | None:
    """Torch's profiler records every thread: whether one is recorded is not asked (None)."""
    return None


def recorded_where_started() -> Callable[[], bool | None]:
    """Whether torch's profiler, started on this thread without recording every thread, records
    the thread that asks (each thread asks on its first module call)."""
    import torch

    starter = threading.get_ident()
    enabled = torch._C._autograd._profiler_enabled

    def recorded() -> bool | None:
        if threading.get_ident() == starter:
            return True
        if isinstance(threading.current_thread(), threading._DummyThread):
            return None  # a thread Python did not start (autograd's, torch's pools): torch hands its state to those
        return enabled()

    return recorded
