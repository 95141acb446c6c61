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

_NOISE = re.compile(
    r"^(?:USDT:|ERROR:|WARNING:|INFO:|STAGE:)?\S*\s*\S*\s*\d+:\d+\s+\S+\.(?:cpp|h):\d+\]"
    r"|gpuGetDeviceCount failed|CUPTI|libkineto|ActivityProfiler"
)


def is_noise(line: str) -> bool:
    """True for a line written by kineto itself (``<LEVEL>:<date> <time> <pid>:<tid> <file>.cpp:<n>]``)."""
    return bool(_NOISE.search(line))


@contextmanager
def quiet_native_stderr() -> Iterator[None]:
    """Run the body with fd 2 captured; re-emit whatever is not kineto noise on ``sys.stderr``."""
    try:
        fd = sys.__stderr__.fileno() if sys.__stderr__ is not None else 2
    except (AttributeError, OSError, ValueError):
        fd = 2
    try:
        saved = os.dup(fd)
    except OSError:  # no usable fd 2 (some embedded interpreters): nothing to silence
        yield
        return
    for stream in (sys.stderr, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), fd)
        try:
            yield
        finally:
            os.dup2(saved, fd)
            os.close(saved)
            sink.seek(0)
            text = sink.read().decode("utf-8", errors="replace")
            kept = [line for line in text.splitlines(keepends=True) if line.strip() and not is_noise(line)]
            if kept:
                with suppress(OSError, ValueError):
                    sys.stderr.write("".join(kept))
