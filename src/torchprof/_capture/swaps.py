"""Process state torchprof changes for a while and puts back: keys of torch's Inductor and Dynamo
configs (what the capture of compiled graphs turns on).

Each change is made and undone by a :func:`~.interrupts.lifecycle` step (a Ctrl-C waits while one
runs), and undone in a ``finally`` that is repeated by a second one when it was interrupted by
code: every undo here resumes where an interrupted one stopped, and does nothing once done.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from .interrupts import lifecycle

#: Patches reverted on another thread than their own, to finish on theirs (config values live in
#: each thread's context in recent torch): thread id -> patches.
_elsewhere: dict[int, list[ConfigPatch]] = {}
_elsewhere_lock = threading.Lock()
_PLAIN = (bool, int, float, str, type(None))


class ConfigPatch:
    """Some keys of a torch config module (``torch._inductor.config``, ``torch._dynamo.config``)
    set for a while, then put back.

    Not torch's ``config.patch()``: that keeps the prior values in a context variable it creates
    per use (one more left in the context at every profile), fails with an AssertionError when
    exited on another thread or context than it entered, and puts back every key, undoing a
    change the user made meanwhile. Here a key is put back only while it still holds the value
    set here; one changed since keeps the new value. Reverted on another thread (where these
    values are not visible), the patch is finished on its own thread the next time a patch is
    applied or reverted there.
    """

    def __init__(self, config: Any, changes: Mapping[str, Any]) -> None:
        self.config = config
        self.changes = dict(changes)
        self.prior: dict[str, Any] = {}
        self.set: dict[str, Any] = {}  # the values set here, by key
        self.thread = threading.get_ident()

    @lifecycle
    def apply(self) -> ConfigPatch:
        finish_reverted_elsewhere()
        self.thread = threading.get_ident()
        config = self.config
        for key, value in self.changes.items():
            if key not in self.prior:
                self.prior[key] = getattr(config, key)
            self.set[key] = value  # first: a revert after an interrupt here puts back the prior value
            setattr(config, key, value)
        return self

    @lifecycle
    def revert(self) -> None:
        """Put back each key that still holds the value set here (idempotent)."""
        config = self.config
        for key in list(self.set):
            ours = self.set[key]
            now = getattr(config, key)
            if now is ours or (type(now) in _PLAIN and type(now) is type(ours) and now == ours):
                setattr(config, key, self.prior[key])
            if threading.get_ident() == self.thread:
                del self.set[key]
        if self.set:  # not this patch's thread: finish there
            with _elsewhere_lock:
                waiting = _elsewhere.setdefault(self.thread, [])
                if self not in waiting:
                    waiting.append(self)
        finish_reverted_elsewhere()

    @contextlib.contextmanager
    @lifecycle
    def applied(self) -> Iterator[ConfigPatch]:
        """The patch as a context manager (applied in the body, then reverted)."""
        try:
            try:
                yield self.apply()
            finally:
                self.revert()
        finally:
            self.revert()  # completes a revert that was interrupted


@lifecycle
def finish_reverted_elsewhere() -> None:
    """Revert, on this thread, the patches of this thread that another thread reverted."""
    thread = threading.get_ident()
    if thread not in _elsewhere:
        return
    with _elsewhere_lock:
        patches = _elsewhere.pop(thread, [])
    for patch in patches:
        patch.revert()
