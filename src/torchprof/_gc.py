"""Pause Python's cyclic garbage collector while building big, acyclic structures."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    """Parsing a trace or folding a cycle allocates millions of small lists and dicts and no
    reference cycles; every allocation burst would trigger full collections that rescan them all
    (measured: half of load_trace's time). Reference counting still frees everything."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
