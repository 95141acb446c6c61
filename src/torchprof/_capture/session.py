"""One capture session: ``torch.profiler`` plus torchprof's module hooks, started and stopped as a
unit, handing each completed cycle's events on as plain records."""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
import warnings
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._records import EventColumns, ModuleInfo
from .hooks import ModuleTracker
from .kineto import result_columns, save_trace
from .quiet import quiet_native_stderr

if TYPE_CHECKING:
    import torch

_CYCLE_WARNING = "Warning: Profiler clears events at the end of each cycle"


class ProfilerError(RuntimeError):
    """A Profiler was used in a way that cannot work (nested, bad options, no GPU for cuda=True)."""


@dataclass(frozen=True)
class CaptureOptions:
    """What to record (the :class:`~torchprof.Profiler` arguments that reach the capture)."""

    model: torch.nn.Module | None = None
    cuda: bool = False
    memory: bool = False
    shapes: bool = False
    stack: bool = False
    flops: bool = True
    schedule: Callable[[int], Any] | None = None
    on_trace_ready: Callable[[Any], Any] | None = None
    labels: Mapping[Any, str] | Callable[[Any], str | None] | None = None


#: The session that is running in this process, if any (torch allows one profiler at a time).
_active: CaptureSession | None = None

CycleSink = Callable[[EventColumns, "dict[str, ModuleInfo]"], None]


class CaptureSession:
    """Runs torch's profiler with the module hooks installed; hands events to ``on_cycle``.

    With a schedule every completed cycle is read and handed on at once (torch drops it when the
    next cycle starts), so nothing raw accumulates; without one, the single cycle is read lazily
    by :meth:`take_cycle`, so stopping costs no more than stopping ``torch.profiler`` itself.
    """

    def __init__(self, options: CaptureOptions, on_cycle: CycleSink) -> None:
        self.options = options
        self._on_cycle = on_cycle
        self._torch_profile: Any = None
        self._tracker: ModuleTracker | None = None
        self._pending: Any = None
        self._started = False
        self._t0 = 0.0
        self.wall_us: float | None = None
        self._trace_files: list[str] = []  # one chrome trace per recorded cycle, in order
        self._trace_problems: list[str] = []  # why a cycle's trace could not be kept

    @property
    def running(self) -> bool:
        return _active is self

    @property
    def used(self) -> bool:
        return self._torch_profile is not None

    @property
    def torch_profile(self) -> Any:
        """The ``torch.profiler.profile`` this session runs (None before it started)."""
        return self._torch_profile

    @property
    def modules(self) -> dict[str, ModuleInfo]:
        """What the hooks learnt about each module path seen so far."""
        return self._tracker.collect() if self._tracker is not None else {}

    def start(self) -> None:
        global _active
        import torch
        from torch.profiler import ProfilerActivity, profile

        if _active is not None:
            raise ProfilerError("a torchprof Profiler is already running; finish it before starting another")
        if torch.autograd.profiler._is_profiler_enabled:
            raise ProfilerError("another torch.profiler session is already running in this process")
        if self._torch_profile is not None:
            raise ProfilerError("this Profiler has already been used; create a new one")
        opts = self.options
        activities = [ProfilerActivity.CPU]
        if opts.cuda:
            activities.append(ProfilerActivity.CUDA)
        self._tracker = ModuleTracker(opts.model, opts.labels, record_inputs=opts.shapes)
        self._torch_profile = profile(
            activities=activities,
            record_shapes=opts.shapes or opts.flops,
            profile_memory=opts.memory,
            with_stack=opts.stack,
            schedule=opts.schedule,
            # Without a schedule the events are read lazily after stop(); torch still calls
            # on_trace_ready once at the end, so a user's handler is passed through.
            on_trace_ready=self._cycle_ready if opts.schedule is not None or opts.on_trace_ready is not None else None,
        )
        _active = self
        try:
            with quiet_native_stderr():
                self._torch_profile.start()
            self._started = True
            self._tracker.install()
        except BaseException:
            self._teardown()
            raise
        self._t0 = time.perf_counter()

    def stop(self) -> None:
        """Remove the hooks and stop the profiler. Safe to call twice."""
        if self._torch_profile is None or _active is not self:
            return
        self.wall_us = (time.perf_counter() - self._t0) * 1e6
        self._teardown()

    def _teardown(self) -> None:
        global _active
        try:
            if self._tracker is not None:
                self._tracker.remove()  # closes ranges left open while the profiler still records
        finally:
            try:
                prof = self._torch_profile
                if self._started:
                    self._started = False
                    with quiet_native_stderr():
                        prof.stop()
                    if self.options.schedule is None and prof.profiler is not None:
                        self._pending = prof.profiler.kineto_results
            finally:
                _active = None

    def step(self) -> None:
        if self._torch_profile is None or _active is not self:
            raise ProfilerError("step() needs a running Profiler: call it inside the with block, once per iteration")
        with quiet_native_stderr(), warnings.catch_warnings():
            # torch warns that each cycle replaces the last one's events; torchprof keeps every
            # cycle in its tree, so the warning would only mislead.
            warnings.filterwarnings("ignore", message=_CYCLE_WARNING)
            self._torch_profile.step()

    @property
    def step_num(self) -> int:
        return self._torch_profile.step_num if self._torch_profile is not None else 0

    def _cycle_ready(self, torch_prof: Any) -> None:
        """torch finished a cycle (a schedule's active phase, or the run without a schedule).

        The user's ``on_trace_ready`` runs afterwards, while ``torch_prof`` still holds this cycle
        (``key_averages()``, ``export_chrome_trace()`` work as with torch alone). With a schedule
        the cycle's chrome trace is kept after that (torch drops the cycle when the next starts),
        so :meth:`trace_files` can give the whole run.
        """
        opts = self.options
        result = None
        if opts.schedule is not None:
            result = torch_prof.profiler.kineto_results if torch_prof.profiler is not None else None
            if result is not None:
                self._on_cycle(result_columns(result, device=opts.cuda, python_frames=opts.stack), self.modules)
        if opts.on_trace_ready is not None:
            opts.on_trace_ready(torch_prof)
        if result is not None:
            self._keep_trace(result)

    def take_cycle(self) -> None:
        """Hand the unscheduled run's one cycle to ``on_cycle`` (once; later calls do nothing)."""
        if self._pending is not None:
            result, self._pending = self._pending, None
            self._on_cycle(result_columns(result, device=self.options.cuda, python_frames=self.options.stack), self.modules)

    def _keep_trace(self, result: Any) -> None:
        """Write ``result``'s chrome trace to a temporary file that goes with this session. A
        failure is remembered for :meth:`trace_files` to report, never raised into the run."""
        fd, tmp = tempfile.mkstemp(prefix="torchprof-", suffix=".json")
        os.close(fd)
        weakref.finalize(self, _remove, tmp)
        try:
            with quiet_native_stderr():
                save_trace(result, tmp)
        except Exception as exc:  # noqa: BLE001 - reported when a trace is asked for
            _remove(tmp)
            self._trace_problems.append(f"{type(exc).__name__}: {exc}")
            return
        self._trace_files.append(tmp)

    def trace_files(self) -> list[str]:
        """Chrome traces of the recorded cycles, in order, as kineto writes them (each written
        once, on first need for a run without a schedule, and read by every later export).
        ValueError when there is none, or a cycle's trace could not be written."""
        prof = self._torch_profile
        if self.options.schedule is None and not self._trace_files and not self._trace_problems:
            result = getattr(prof.profiler, "kineto_results", None) if prof is not None and prof.profiler is not None else None
            if result is not None:
                self._keep_trace(result)
        if self._trace_problems:
            raise ValueError(f"the trace of {len(self._trace_problems)} recorded cycle(s) could not be kept, so it cannot be "
                             f"exported: {self._trace_problems[0]}")  # fmt: skip
        if not self._trace_files:
            raise ValueError("this run recorded no complete cycle: there are no trace events to export")
        return list(self._trace_files)


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
