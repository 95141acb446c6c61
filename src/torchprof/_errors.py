"""Every exception and warning torchprof raises to its users, in one place: each module raises them
from here (their old homes re-export them, so ``from torchprof._files import TraceError`` keeps
working). Control-flow signals that never leave their module stay there."""

from __future__ import annotations

from typing import Any


class TraceError(ValueError):
    """A trace or saved-profile file that cannot be read: what is wrong, and where."""


class ProfilerError(RuntimeError):
    """A Profiler was used in a way that cannot work (nested, bad options, no GPU for cuda=True)."""


class ProfilerWarning(UserWarning):
    """Part of the profiled code is missing from the profile (another thread torch did not record,
    a ``torch.profiler`` session started inside the block), said when torchprof can tell."""


class OutputError(Exception):
    """A requested output file cannot be written (its folder is missing, a write failed)."""


class CellSyntaxError(Exception):
    """The code does not parse. Shown exactly as IPython shows a syntax error in a plain cell
    (the cell's line and a caret); a SyntaxError raised from a magic would come with the
    magic's whole call stack instead."""

    def __init__(self, shell: Any, error: SyntaxError) -> None:
        super().__init__(f"{type(error).__name__}: {error}")
        self.error = error
        self._shell = shell

    def _render_traceback_(self) -> list[str]:  # IPython's hook for an exception's own display
        return self._shell.SyntaxTB.structured_traceback(type(self.error), self.error, [])
