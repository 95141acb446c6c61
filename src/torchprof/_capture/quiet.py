"""Keep kineto's native log lines out of the user's output.

This torch build's kineto writes lines such as ``USDT:... profiler_start`` and
``gpuGetDeviceCount failed`` straight to file descriptor 2 when a profiler starts or stops.
Python-level redirection cannot catch them (and ipykernel forwards fd 2 into the cell), so around
those calls we point fd 2 at a temporary file and replay every line that is not kineto noise.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import IO

from .interrupts import hold, lifecycle, release

_NOISE = re.compile(
    r"^(?:USDT:|ERROR:|WARNING:|INFO:|STAGE:)?\S*\s*\S*\s*\d+:\d+\s+\S+\.(?:cpp|h):\d+\]"
    r"|gpuGetDeviceCount failed|CUPTI|libkineto|ActivityProfiler"
    # torch's own profiler glue, in c10's log format: ``[W1122 16:29:48.706 profiler_kineto.cpp:908]``
    # (e.g. "disableProfiler called but no active profiling session found" when torchprof makes
    # sure, after an interrupted stop, that nothing is left running).
    r"|^\[[WIEF]\d{4} [^\]]*profiler_kineto\.cpp:\d+\]"
)


def is_noise(line: str) -> bool:
    """True for a line written by kineto itself (``<LEVEL>:<date> <time> <pid>:<tid> <file>.cpp:<n>]``)."""
    return bool(_NOISE.search(line))


@contextmanager
@lifecycle
def quiet_native_stderr() -> Iterator[None]:
    """Run the body with fd 2 captured; re-emit whatever is not kineto noise on ``sys.stderr``.

    fd 2 is put back whatever happens, a Ctrl-C included: while fd 2 is being swapped either way
    a Ctrl-C waits (see :mod:`.interrupts`), and a restore interrupted by code is completed by a
    second one. A process whose fd 2 stayed on a deleted temporary file would lose every later
    error message.
    """
    swap = _Fd2Swap()
    try:
        try:
            swap.start()
            yield
        finally:
            swap.finish()
    finally:
        swap.finish()  # completes a finish that was interrupted; nothing left to do otherwise


class _Fd2Swap:
    """fd 2 pointed at a temporary file, and back. :meth:`finish` resumes where an interrupted
    one stopped, and does nothing once everything is back."""

    def __init__(self) -> None:
        self.fd = 2
        self.saved: int | None = None  # a duplicate of the real fd 2
        self.sink: IO[bytes] | None = None
        self.redirected = False

    @lifecycle
    def start(self) -> None:
        hold(self)
        try:
            self.fd = sys.__stderr__.fileno() if sys.__stderr__ is not None else 2
        except (AttributeError, OSError, ValueError):
            self.fd = 2
        for stream in (sys.stderr, sys.__stderr__):
            try:
                if stream is not None:
                    stream.flush()
            except (OSError, ValueError):
                pass
        try:
            self.saved = os.dup(self.fd)
        except OSError:  # no usable fd 2 (some embedded interpreters): nothing to silence
            return
        self.sink = tempfile.TemporaryFile()  # noqa: SIM115 - closed by finish(), which outlives this call
        # Marked first: a restore when the switch did not happen copies fd 2 onto itself.
        self.redirected = True
        os.dup2(self.sink.fileno(), self.fd)

    @lifecycle
    def finish(self) -> None:
        if self.redirected and self.saved is not None:
            os.dup2(self.saved, self.fd)
        self.redirected = False
        saved, self.saved = self.saved, None
        if saved is not None:
            os.close(saved)  # (an interrupt just before this leaks one descriptor, never closes a wrong one)
        sink, self.sink = self.sink, None
        if sink is not None:
            with sink:
                _replay(sink)
        release(self)


def _replay(sink: IO[bytes]) -> None:
    sink.seek(0)
    text = sink.read().decode("utf-8", errors="replace")
    kept = [line for line in text.splitlines(keepends=True) if line.strip() and not is_noise(line)]
    if kept:
        with suppress(OSError, ValueError):
            sys.stderr.write("".join(kept))
