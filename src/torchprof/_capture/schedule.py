"""``Profiler(steps=[100, 101, 102])``: a ``torch.profiler`` schedule that records exactly the chosen
iterations of a long loop, and is idle (records nothing, costs nothing) everywhere else."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class StepSchedule:
    """Records the chosen steps (numbered as ``prof.step()`` counts them, from the Profiler's
    ``first_step``), each run of consecutive steps as one cycle, after one warm-up step where the
    step before is not chosen itself (torch's profiler starts tracing a step early, so the first
    recorded step does not carry its start-up cost); idle on every other step."""

    def __init__(self, steps: Iterable[int]) -> None:
        from torch.profiler import ProfilerAction

        chosen = sorted(set(_checked(steps)))
        if not chosen:
            raise ValueError("steps must name at least one step")
        self.steps: tuple[int, ...] = tuple(chosen)
        """The chosen steps, sorted."""
        self._chosen = frozenset(chosen)
        self._action = ProfilerAction

    def __call__(self, step: int) -> Any:
        action, chosen = self._action, self._chosen
        if step in chosen:
            return action.RECORD if step + 1 in chosen else action.RECORD_AND_SAVE
        return action.WARMUP if step + 1 in chosen else action.NONE

    def __repr__(self) -> str:
        return f"StepSchedule({describe_steps(self.steps)})"


def _checked(steps: Iterable[int]) -> list[int]:
    if isinstance(steps, (str, bytes)) or not isinstance(steps, Iterable):
        raise TypeError(f"steps must be step numbers (a list or a range of ints), not {type(steps).__name__}")
    out = []
    for step in steps:
        if isinstance(step, bool) or not isinstance(step, int):
            raise TypeError(f"steps must be whole step numbers, not {step!r}")
        if step < 0:
            raise ValueError(f"steps must be 0 or more, not {step}")
        out.append(int(step))
    return out


def describe_steps(steps: Iterable[int]) -> str:
    """``[10, 11, 12, 20]`` -> ``"10-12, 20"``: runs of consecutive steps as ranges."""
    parts: list[str] = []
    run: list[int] = []
    for step in sorted(set(steps)):
        if run and step == run[-1] + 1:
            run.append(step)
            continue
        if run:
            parts.append(_run_text(run))
        run = [step]
    if run:
        parts.append(_run_text(run))
    return ", ".join(parts)


def _run_text(run: list[int]) -> str:
    return str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}"
