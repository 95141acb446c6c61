"""What every trainer integration shares: which optimizer steps to record, a
:class:`~torchprof.Profiler` that runs only around them, every step's wall time, and the
clean-up when training stops inside them.

A trainer tells the window three things: training begins (with the number of the first step and,
if known, of the last), a step ended (the optimizer stepped; the next one begins now), training
ended. Between two of those marks lies one step: its data loading, the forward and backward of
each gradient-accumulation micro-batch, the optimizer, and what the trainer does before the next
step begins (logging, evaluation, checkpoints after the previous step). The Profiler starts at the
mark before the first chosen step's warm-up step and stops at the mark after the last chosen step,
so the steps outside that span run without torchprof: a perf_counter() per step is all they pay.
"""

from __future__ import annotations

import contextlib
import sys
import time
import warnings
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .._capture.compiled import capture_compiled
from .._capture.schedule import describe_steps
from .._errors import ProfilerWarning
from .._profiler import Profiler
from .._vocab import STEP_TIME_COLUMNS

if TYPE_CHECKING:
    import torch

    from .._result import Result

#: By default: skip this many steps (torch.compile compiles, the optimizer creates its state, the
#: allocator and caches warm up), then record this many.
DEFAULT_SKIP = 5
DEFAULT_COUNT = 3


def default_steps(first: int, last: int | None, skip: int = DEFAULT_SKIP, count: int = DEFAULT_COUNT) -> list[int]:
    """The steps recorded when none are chosen: ``count`` steps after the first ``skip``; in a run
    too short for that, its last ``count`` steps (leaving the first step out where there are
    several: it is the one that compiles)."""
    if last is None or last >= first + skip + count - 1:
        return list(range(first + skip, first + skip + count))
    if last <= first:
        return [first]
    return list(range(max(first + 1, last - count + 1), last + 1))


def chosen_steps(steps: Iterable[int] | int | None) -> list[int] | None:
    """``steps`` as a sorted list of step numbers (None: the default), checked."""
    if steps is None:
        return None
    if isinstance(steps, int) and not isinstance(steps, bool):
        steps = [steps]
    if isinstance(steps, (str, bytes)) or not isinstance(steps, Iterable):
        raise TypeError(f"steps must be optimizer step numbers (a list or a range of ints), not {type(steps).__name__}")
    out = sorted(set(steps))
    if not out:
        raise ValueError("steps is empty: give the optimizer steps to record (or None for the default)")
    bad = [s for s in out if isinstance(s, bool) or not isinstance(s, int) or s < 1]
    if bad:
        raise ValueError(f"steps are optimizer steps counted from 1, as the trainer counts them: {bad[0]!r} is not one")
    return out


class StepWindow:
    """Records the chosen optimizer steps of one training run and times every step of it.

    ``options`` are the :class:`~torchprof.Profiler` keywords (``memory``, ``shapes``, ...).
    After :meth:`end`, ``result`` is the profile (None when no chosen step ran), with every
    step's wall time in its ``step_times``.
    """

    def __init__(self, steps: Iterable[int] | int | None, options: dict[str, Any], trainer: str) -> None:
        self.requested = chosen_steps(steps)
        self.options = options
        self.trainer = trainer
        """The framework's name, for messages (``Trainer``, ``Lightning``)."""
        self.steps: list[int] = []
        """The steps to record in this run (the requested ones, or the default)."""
        self.result: Result | None = None
        self.prof: Profiler | None = None
        self.first = 1
        self.last: int | None = None
        self.step = 0
        """The number of the step running now."""
        self.model: torch.nn.Module | None = None
        self.label = "train"
        self._chosen: frozenset[int] = frozenset()
        self._start_at = 0
        self._times: list[tuple[int, float, bool]] = []
        self._mark = 0.0
        self._compiled: contextlib.ExitStack | None = None
        self._cleanup: Any = None
        self._recorded: list[int] = []

    # -- the run --------------------------------------------------------------------------------------
    @property
    def capturing(self) -> bool:
        """The Profiler runs (from the warm-up step before the first chosen step to the last)."""
        return self.prof is not None

    @property
    def recording(self) -> bool:
        """The running step is one of the chosen steps, being recorded."""
        return self.prof is not None and self.step in self._chosen

    def begin(self, first: int, last: int | None, label: str, model: torch.nn.Module | None = None) -> None:
        """Training begins with step ``first`` (1 + the optimizer steps taken before: a resumed
        run starts later); ``last`` is its last step, when the trainer knows it."""
        self.close("a new training run began")
        self.first, self.last, self.step, self.model = first, last, first, model
        self.label = label
        self.result = None
        self._times = []
        self._recorded = []
        self.steps = self.requested if self.requested is not None else default_steps(first, last)
        past = [s for s in self.steps if s < first]
        if past:
            warnings.warn(f"torchprof: this run starts at step {first}, after step{'s' if len(past) > 1 else ''} "
                          f"{describe_steps(past)}: {'they are' if len(past) > 1 else 'it is'} not recorded",
                          ProfilerWarning, stacklevel=2)  # fmt: skip
            self.steps = [s for s in self.steps if s >= first]
        self._chosen = frozenset(self.steps)
        if self.steps:
            # torch.compile compiles in the first steps, before the window: graphs compiled while
            # this runs keep the map of which layer each kernel computes.
            self._compiled = contextlib.ExitStack()
            self._compiled.enter_context(capture_compiled())
            self._start_at = max(self.steps[0] - 1, first)  # one warm-up step where there is room
            self._cleanup = _stop_after_cell(self)
        self._mark = time.perf_counter()
        self._maybe_start()

    def boundary(self) -> None:
        """The running step ended (its optimizer step is done) and the next one begins."""
        ended = time.perf_counter()
        self._times.append((self.step, (ended - self._mark) * 1e6, self.recording))
        if self.recording:
            self._recorded.append(self.step)
        self.step += 1
        try:
            if self.prof is not None:
                self.prof.step()
                if self.step > self.steps[-1]:
                    self._stop()
            else:
                self._maybe_start()
        finally:
            # The next step's clock starts now: folding a recorded cycle in is not its time.
            self._mark = time.perf_counter()

    def end(self) -> Result | None:
        """Training ended: the profile of the chosen steps that ran, every step's wall time in
        its ``step_times`` (None when no chosen step ran: a warning says which did not)."""
        self._stop()
        self._close_compiled()
        self._unregister()
        missing = [s for s in self.steps if s not in self._recorded]
        if missing:
            ran = f"it ended at step {self.step - 1}" if self.step > self.first else "no step ran"
            warnings.warn(f"torchprof: step{'s' if len(missing) > 1 else ''} {describe_steps(missing)} "
                          f"{'were' if len(missing) > 1 else 'was'} not recorded: {ran}", ProfilerWarning, stacklevel=2)  # fmt: skip
        result = self.result
        if result is not None:
            if self._times:
                result.recording.step_times = {name: list(values) for name, values in zip(STEP_TIME_COLUMNS[1:], zip(*self._times))}
            result.meta["trainer"] = self.trainer
            result.meta["steps"] = describe_steps(self._recorded)
            result.meta["run_steps"] = describe_steps(range(self.first, self.step))
        return result

    def close(self, why: str) -> None:
        """Stop a capture left running by a run that ended without telling (an exception inside
        the chosen steps), keeping what it recorded as ``result``."""
        if self.prof is not None:
            warnings.warn(f"torchprof: the profile of steps {describe_steps(self.steps)} was cut short ({why}); "
                          "it keeps the steps recorded until then", ProfilerWarning, stacklevel=2)  # fmt: skip
            self._stop()
        self._close_compiled()
        self._unregister()

    def region(self, name: str) -> Any:
        """A region of the profile named ``name`` (None outside the recorded steps)."""
        return self.prof.region(name) if self.recording and self.prof is not None else None

    # -- the Profiler ---------------------------------------------------------------------------------
    def _maybe_start(self) -> None:
        if not self.steps or self.step != self._start_at or self.step > self.steps[-1]:
            return
        prof = Profiler(self.model, steps=self.steps, first_step=self.step, name=self.label, **self.options)
        prof._name_unreached_steps = False  # end() names them, as the trainer numbers them
        prof.start()
        self.prof = prof

    def _stop(self) -> None:
        prof, self.prof = self.prof, None
        if prof is None:
            return
        if self.step in self._chosen and self.step not in self._recorded:
            self._recorded.append(self.step)  # stopped inside a chosen step: recorded until then
        prof.stop()
        self.result = prof.result if self._recorded else None

    def disable(self, exc: BaseException) -> None:
        """Something of ours failed: say so, leave nothing running, record nothing more in
        this run (the training itself goes on)."""
        warnings.warn(f"torchprof: {type(exc).__name__}: {exc}; nothing more is profiled in this run", ProfilerWarning,
                      stacklevel=3)  # fmt: skip
        self.steps, self._chosen = [], frozenset()
        with contextlib.suppress(Exception):
            self._stop()
        self._close_compiled()
        self._unregister()

    def _unregister(self) -> None:
        cleanup, self._cleanup = self._cleanup, None
        if cleanup is not None:
            cleanup()

    def _close_compiled(self) -> None:
        compiled, self._compiled = self._compiled, None
        if compiled is not None:
            compiled.close()


def _stop_after_cell(window: StepWindow) -> Any:
    """In IPython: when the cell that runs the training ends before the training told the window
    it ended (it raised, or Ctrl-C), stop the capture, so no hook, no profiler and no compile
    capture is left behind. Returns what unregisters this; None outside IPython."""
    ipython_module = sys.modules.get("IPython")
    shell = ipython_module.get_ipython() if ipython_module is not None else None
    if shell is None:
        return None

    def after_cell(*_: Any) -> None:
        with contextlib.suppress(ValueError):
            shell.events.unregister("post_run_cell", after_cell)
        window._cleanup = None
        if window.capturing:
            window.close("training stopped inside the recorded steps")
            window.end()
        else:
            window.close("")  # training stopped before the recorded steps: the compile capture ends

    shell.events.register("post_run_cell", after_cell)

    def unregister() -> None:
        with contextlib.suppress(ValueError):
            shell.events.unregister("post_run_cell", after_cell)

    return unregister
