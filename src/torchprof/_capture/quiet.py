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

from .interrupts import run_all

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
def quiet_native_stderr() -> Iterator[None]:
    """Run the body with fd 2 captured; re-emit whatever is not kineto noise on ``sys.stderr``.

    fd 2 is put back whatever happens, a Ctrl-C included (even one during the putting back:
    it is retried, and the interrupt raised once fd 2 is restored): a process whose fd 2 stayed on
    a deleted temporary file would lose every later error message.
    """
    try:
        fd = sys.__stderr__.fileno() if sys.__stderr__ is not None else 2
    except (AttributeError, OSError, ValueError):
        fd = 2
    try:
        saved = os.dup(fd)
    except OSError:  # no usable fd 2 (some embedded interpreters): nothing to silence
        yield
        return
    try:
        for stream in (sys.stderr, sys.__stderr__):
            try:
                if stream is not None:
                    stream.flush()
            except (OSError, ValueError):
                pass
        with tempfile.TemporaryFile() as sink:
            try:
                os.dup2(sink.fileno(), fd)
                yield
            finally:
                # Restoring is harmless if the redirection never happened (``saved`` is fd 2 itself).
                run_all([lambda: _restore(saved, fd), lambda: _replay(sink)])
    finally:
        os.close(saved)


def _restore(saved: int, fd: int) -> None:
    interrupted: KeyboardInterrupt | None = None
    for _ in range(3):
        try:
            os.dup2(saved, fd)
            break
        except KeyboardInterrupt as exc:  # a Ctrl-C while restoring: restore first, then raise it
            interrupted = exc
    if interrupted is not None:
        raise interrupted


def _replay(sink: IO[bytes]) -> None:
    sink.seek(0)
    text = sink.read().decode("utf-8", errors="replace")
    kept = [line for line in text.splitlines(keepends=True) if line.strip() and not is_noise(line)]
    if kept:
        with suppress(OSError, ValueError):
            sys.stderr.write("".join(kept))
