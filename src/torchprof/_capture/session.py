"""One capture session: ``torch.profiler`` plus torchprof's module hooks, started and stopped as a
unit, handing each completed cycle's events on as plain records."""

from __future__ import annotations

import contextlib
import inspect
import os
import sys
import tempfile
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING, Any

from .._errors import ProfilerError as ProfilerError  # re-exported: their home before _errors.py
from .._errors import ProfilerWarning as ProfilerWarning
from .._errors import TraceError
from .._records import CompiledGraph, EventColumns, KnownTensor, ModuleInfo
from .._traces.rewrite import restore_names, retime_device_work
from . import compiled, compiled_warm, kernels
from .compiled_entry import CompiledEntry
from .distributed import ddp_buckets
from .interrupts import hold, lifecycle, release, run_all
from .kineto import device_times, event_names, names_kineto_mangles, result_columns, save_trace
from .module_ranges import ModuleTracker
from .quiet import quiet_native_stderr, quiet_torch_switch
from .tensors import TensorWatch

if TYPE_CHECKING:
    import torch

#: torch (2.11 at a session's start too) warns that each cycle replaces the last one's events:
#: torchprof keeps every cycle in its tree, so the warning would only mislead.
_CYCLE_WARNING = "Warning: Profiler clears events at the end of each cycle"
#: torch warns that global module hooks fire an extra time for torch.compile's wrapper: ours
#: handle it (the wrapper stands for the model it wraps), so the warning would only mislead.
_COMPILE_HOOK_WARNING = r"Using `torch.compile\(module\)` when there are global hooks"


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
    first_step: int = 0
    """The number of the step that runs when the session starts (torch counts from 0)."""

    @property
    def record_shapes(self) -> bool:
        """torch records every op's input shapes and scalar arguments: what FLOPs are counted
        from (and what ``shapes`` shows per node)."""
        return self.flops or self.shapes


#: The session that is running in this process, if any (torch allows one profiler at a time).
_active: CaptureSession | None = None

CycleSink = Callable[[EventColumns, "dict[str, ModuleInfo]"], None]


def _thread_config(memory: bool) -> tuple[bool, Any]:
    """Whether torch's profiler will record every thread, and the experimental config for it.

    ``profile_all_threads`` (torch 2.6+) registers the profiler's callbacks globally, so ops and
    module ranges on every thread are recorded: Python threads, thread pools, threads started
    before the profiler, C++ threads. Its state then lives in one global slot instead of the
    starting thread's, and memory events, which torch reports through that thread-local slot,
    are lost (all of them, the main thread's too): with ``memory`` only the starting thread (and
    the threads torch hands its state to: autograd, intra-op) is recorded, and module calls on
    other threads are reported as missed. The cost is one global callback check per op on every
    thread; on the profiled thread it measured within noise (docs/benchmarks.md, "Other captures").
    """
    if memory:
        return False, None
    if not _ALL_THREADS:  # made once: torch copies a config before changing it
        from torch._C._profiler import _ExperimentalConfig

        try:
            _ALL_THREADS.append(_ExperimentalConfig(profile_all_threads=True))
        except TypeError:  # a torch without profile_all_threads
            _ALL_THREADS.append(None)
    config = _ALL_THREADS[0]
    return config is not None, config


_ALL_THREADS: list[Any] = []


class CaptureSession:
    """Runs torch's profiler with the module hooks installed; hands events to ``on_cycle``.

    With a schedule every completed cycle is read and handed on at once (torch drops it when the
    next cycle starts), so nothing raw accumulates; without one, the single cycle stays in torch's
    result, read by :meth:`cycle_columns` when the tree is first built, so stopping costs no more
    than stopping ``torch.profiler`` itself (and a read interrupted by Ctrl-C can be repeated).

    Starting and stopping are safe against interrupts (see :mod:`.interrupts`): a Ctrl-C during
    either is held until the step is done, and any step that fails or is interrupted by code
    leaves no hook installed and torch's profiler off, with what was recorded kept.
    """

    def __init__(self, options: CaptureOptions, on_cycle: CycleSink) -> None:
        self.options = options
        self._on_cycle = on_cycle
        self._torch_profile: Any = None
        self._tracker: ModuleTracker | None = None
        self._result: Any = None  # the unscheduled run's one cycle (torch's result)
        self._cycle_cut = False  # the user's on_trace_ready raised while torch changed cycles
        self._torch_on = False  # torch's profiler may be running: set before starting it, cleared once it is stopped
        self._torch_stop_tried = False  # torch's own stop is tried once; the safety net does the rest
        self._stopped = False  # the teardown is complete (a stop interrupted before that is resumed)
        self._every_thread = False
        self._thread = threading.get_ident()  # the thread that started it
        self._thread_name = threading.current_thread().name
        self.entered_from: FrameType | None = None
        """The frame whose ``with`` statement started this session, if one did (see :meth:`left_behind`)."""
        self.owner_stop: Callable[[], Any] | None = None
        """Stops the session the way its owner (the Profiler) does, result included."""
        self._notes: list[str] = []
        self._t0 = 0.0
        self.wall_us: float | None = None
        self._trace_files: list[str] = []  # one chrome trace per recorded cycle, in order
        self._trace_problems: list[str] = []  # why a cycle's trace could not be kept
        self._mangled: dict[tuple[int, int], str] | None = None  # real names of the unscheduled cycle's events
        self._compile_capture: list[Callable[[], None]] | None = None
        self._tensors: TensorWatch | None = None  # with memory=True: parameters, gradients, optimizer state
        self._step_times: list[tuple[int, float, bool]] = []  # (step, wall µs, recorded) per step() mark
        self._step_mark = 0.0
        self._none: Any = None  # torch's ProfilerAction.NONE, and the actions that record (set at start)
        self._active_actions: tuple[Any, ...] = ()

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

    def module_infos(self, compiled_ran: bool) -> dict[str, ModuleInfo]:
        """What the hooks learnt about each module path seen so far (every submodule of the roots
        too when compiled graphs ran, whose layers the hooks cannot see)."""
        if self._tracker is None:
            return {}
        return self._tracker.collect(submodules=compiled_ran)

    @property
    def modules(self) -> dict[str, ModuleInfo]:
        return self.module_infos(bool(compiled.graphs()))

    def ddp_buckets(self) -> list[dict[str, Any]]:
        """How the profiled DistributedDataParallel modules bucket their gradients (read now)."""
        return ddp_buckets(self._tracker.roots()) if self._tracker is not None else []

    @staticmethod
    def compiled_graphs(names: Iterable[str] = ()) -> dict[str, CompiledGraph]:
        """Which layer each kernel of compiled graphs computes: those compiled under capture (in
        this process), and those among ``names`` (a cycle's event names) compiled before it,
        learnt now (after the block)."""
        return compiled_warm.maps(names)

    @staticmethod
    def unmapped_compiled() -> dict[str, str]:
        """Why compiled graphs that ran have no layer map, by compile id."""
        return dict(compiled_warm.failures)

    @lifecycle
    def start(self) -> None:
        global _active
        import torch
        from torch.profiler import ProfilerAction, ProfilerActivity, profile

        self._none, self._active_actions = ProfilerAction.NONE, (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)
        if _active is not None:
            _active.give_way()
        if torch.autograd.profiler._is_profiler_enabled:
            raise ProfilerError("another torch.profiler session is already running in this process")
        if self._torch_profile is not None:
            raise ProfilerError("this Profiler has already been used; create a new one")
        opts = self.options
        activities = [ProfilerActivity.CPU]
        if opts.cuda:
            activities.append(ProfilerActivity.CUDA)
        self._every_thread, experimental = _thread_config(opts.memory)
        self._thread, self._thread_name = threading.get_ident(), threading.current_thread().name
        self._tracker = ModuleTracker(opts.model, opts.labels, record_inputs=opts.shapes)
        self._torch_profile = profile(
            activities=activities,
            record_shapes=opts.record_shapes,
            profile_memory=opts.memory,
            with_stack=opts.stack,
            schedule=opts.schedule,
            # Without a schedule the events are read lazily after stop(); torch still calls
            # on_trace_ready once at the end, so a user's handler is passed through.
            on_trace_ready=self._cycle_ready if opts.schedule is not None or opts.on_trace_ready is not None else None,
            experimental_config=experimental,
        )
        if opts.first_step:
            _start_at_step(self._torch_profile, opts.first_step)
        self._t0 = self._step_mark = time.perf_counter()
        try:
            hold(self)  # from here a Ctrl-C that lands in the start waits until it is complete
            _active = self
            # Our hooks stay out of what Dynamo compiles (a graph compiled in the block is the one
            # compiled without us, cache hits included), and fused C++ kernels are ranges. Which
            # layer each kernel computes is learnt when the profile is first read.
            # Each undone by _end_compile_capture, last first (plain calls: a context manager's
            # generator costs more than the step it guards, in a block of a millisecond). Each
            # undo is noted before its change is made, and does nothing where it was not made:
            # an interrupt between the two leaves nothing behind.
            undo = self._compile_capture = []
            tracker = self._tracker
            undo.append(lambda: compiled.stop_hiding(tracker))
            compiled.start_hiding(tracker)
            undo.append(kernels.stop)
            kernels.start()
            filter_entry = _warnings_filter(_COMPILE_HOOK_WARNING, _CYCLE_WARNING)
            undo.append(lambda: _remove_filter(filter_entry))
            _add_filter(filter_entry)
            self._torch_on = True
            with quiet_torch_switch(decide=opts.schedule is None and not opts.first_step):
                _start_torch(self._torch_profile)
            watch = CompiledEntry()
            undo.append(watch.remove)
            compiled_entry = watch if watch.install() else None  # (None while Dynamo is not imported: nothing was compiled)
            self._tracker.install(every_thread=self._every_thread, entry=compiled_entry)
            self._follow_schedule()
            if opts.memory:
                self._tensors = TensorWatch()
                self._tensors.install()
            self._t0 = self._step_mark = time.perf_counter()
        except BaseException:
            self.undo_start()
            raise

    @lifecycle
    def undo_start(self) -> None:
        """Undo a start that failed or was interrupted: no hook, torch's profiler off, SIGINT as it
        was. Safe on a start done partly or not at all, and to repeat."""
        run_all([lambda: self._teardown(stop_torch=False), lambda: release(self)])

    @lifecycle
    def abandon(self) -> None:
        """Stop this session if it runs (what it recorded is dropped) and stop holding SIGINT for
        it: nothing of it is left behind. A no-op for a session stopped or never started."""
        if self._torch_profile is not None and not self._stopped:
            self.undo_start()
        release(self)

    def give_way(self) -> None:
        """Called on the running session when another wants to start: ProfilerError, unless this
        one was left behind (:meth:`left_behind`); then it is stopped, its profile kept."""
        if not self.left_behind():
            raise ProfilerError("a torchprof Profiler is already running; finish it before starting another")
        self._note(f"the Profiler started at {self.where_entered} was still running after its with block had ended "
                   "(an interrupt landed as the block exited): it was stopped when the next Profiler started.")
        run_all([self.owner_stop or self.stop, lambda: release(self)])

    def left_behind(self) -> bool:
        """Whether the ``with`` block that started this session is over although the session runs:
        its frame is on no thread's stack any more (an interrupt landed as it exited, before any
        line of torchprof's ran). Only for plain function frames entered by a ``with`` statement: a
        generator's or coroutine's frame may be suspended inside its block, and a Profiler entered
        otherwise (``ExitStack``, ``start()``) is stopped by its owner."""
        frame = self.entered_from
        if frame is None or not self.running:
            return False
        suspendable = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE
        if frame.f_code.co_flags & suspendable:
            return False
        for top in list(sys._current_frames().values()):
            f: FrameType | None = top
            while f is not None:
                if f is frame:
                    return False
                f = f.f_back
        return True

    @property
    def where_entered(self) -> str:
        frame = self.entered_from
        return f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else "?"

    @lifecycle
    def stop(self) -> None:
        """Remove the hooks and stop the profiler. Safe to call twice.

        Every step runs even if one before it fails or is interrupted, and the first error is
        raised at the end: by then no hook is installed, torch's profiler is off and what it
        recorded is kept. A Ctrl-C that arrives meanwhile is held until
        :meth:`release_interrupts`.
        """
        if self._torch_profile is None or self._stopped:
            return
        if self.wall_us is None:
            self.wall_us = (time.perf_counter() - self._t0) * 1e6
        self._teardown(stop_torch=True)

    def check_thread(self, what: str) -> None:
        """ProfilerError when ``what`` (stop, step) is asked on another thread than the start's
        while torch's profiler keeps its state in that thread (``memory=True``, or a torch
        without ``profile_all_threads``): from here it could neither stop nor read it."""
        if self.running and not self._every_thread and threading.get_ident() != self._thread:
            why = ("with memory=True torch's profiler keeps its state in the thread that started it"
                   if self.options.memory else "this torch's profiler keeps its state in the thread that started it")
            raise ProfilerError(f"{what}() must run on the thread that started the Profiler ({self._thread_name!r}): {why}, "
                                "and no other thread can stop or read it. Nothing was changed: the profile is still running.")

    @lifecycle
    def release_interrupts(self) -> None:
        """Stop holding Ctrl-C (idempotent): one that arrived while the session stopped is
        delivered now, at the next point the interpreter checks."""
        release(self)

    @lifecycle
    def _teardown(self, stop_torch: bool) -> None:
        steps: list[Callable[[], Any]] = []
        if self._tracker is not None:
            steps.append(self._tracker.remove)  # closes ranges left open while the profiler still records
        if stop_torch:
            steps += [self._check_still_ours, self._stop_torch]
        if self._tensors is not None:
            steps.append(lambda: self._end_tensor_watch(look=stop_torch))
        steps += [lambda: self._make_sure_off(keep=stop_torch), self._end_compile_capture, self._release]
        run_all(steps)
        self._stopped = True  # only now: a teardown cut short is run again by the next stop()

    def _end_tensor_watch(self, look: bool) -> None:
        watch = self._tensors
        if watch is None:
            return
        watch.remove()
        if look and self._tracker is not None:
            watch.at_stop(self._tracker.roots())

    def root_modules(self) -> list[tuple[Any, str]]:
        """The root modules the hooks saw, with their labels."""
        return self._tracker.roots() if self._tracker is not None else []

    def root_dtype_bytes(self) -> dict[int, dict[Any, int]]:
        """id(root) -> its parameters' bytes by dtype, where the stop counted them already."""
        return self._tracker.names.dtype_bytes if self._tracker is not None else {}

    def autocast_dtypes(self) -> list[Any]:
        """The dtypes of the autocast contexts root module calls ran in."""
        return list(self._tracker.autocast) if self._tracker is not None else []

    def known_tensors(self) -> list[KnownTensor]:
        """Parameters, gradients and optimizer state seen during the run (``memory=True`` only)."""
        return self._tensors.collect() if self._tensors is not None else []

    @lifecycle
    def _end_compile_capture(self) -> None:
        undo = self._compile_capture
        if undo is not None:
            while undo:  # each taken off once done: an interrupted end resumes with what is left
                undo[-1]()
                undo.pop()
            self._compile_capture = None

    @lifecycle
    def _check_still_ours(self) -> None:
        import torch

        # Without a schedule torch's profiler runs from start to stop; if its flag is down now,
        # another session started inside the block replaced ours (torch keeps one) and ended.
        if self.options.schedule is None and self._torch_on and not torch.autograd.profiler._is_profiler_enabled:
            self._note(
                "torch's profiler was stopped before the profiled block ended: a torch.profiler session was "
                "started (and stopped) inside the block, as some libraries do, and torch, which runs one session "
                "at a time, dropped torchprof's with what it had recorded. Turn the library's profiler off while "
                "torchprof runs, or open the trace it writes with torchprof.load_trace()."
            )

    @lifecycle
    def _stop_torch(self) -> None:
        if not self._torch_on or self._torch_stop_tried:
            return  # stopped, or torch's stop was interrupted: the safety net finishes it
        self._torch_stop_tried = True
        prof = self._torch_profile
        if self._cycle_cut:  # nothing runs: the handler's error cut torch's change of cycle short
            from torch.profiler import ProfilerAction

            prof.current_action = ProfilerAction.NONE
        import torch

        # Only kineto's lines are left unswapped: a session of the block's own that replaced ours
        # makes torch's stop log through c10, and a schedule's stop may end a cycle.
        plain = self.options.schedule is None and torch.autograd.profiler._is_profiler_enabled
        with quiet_torch_switch(stopping=True) if plain else quiet_native_stderr():
            try:
                prof.stop()
            except RuntimeError as exc:
                # torch 2.11 raises where a session of the block's own (a library's) stopped
                # torchprof's already; later releases return what is left (nothing). Noted above.
                if not _none_ran(exc):
                    raise
        if self.options.schedule is None and prof.profiler is not None:
            self._result = _recorded(prof.profiler.kineto_results)
        self._torch_on = False  # last: until then the safety net keeps the result

    @lifecycle
    def _make_sure_off(self, keep: bool) -> None:
        """The safety net: whatever step of starting or stopping failed or was interrupted, no
        hook of ours stays installed and torch's profiler is off; with ``keep``, what it recorded
        is kept for the profile."""
        import torch

        steps: list[Callable[[], Any]] = []
        if self._tracker is not None:
            steps.append(self._tracker.scrub)
        if self._torch_on:
            steps.append(lambda: self._force_disable(keep))
        # torch's Python-side flag (what "another session is running" is judged by): down, as
        # torch's own stop would have left it (unless another session runs now: a stop resumed late).
        if _active is self or _active is None:
            steps.append(lambda: setattr(torch.autograd.profiler, "_is_profiler_enabled", False))
        run_all(steps)

    def _force_disable(self, keep: bool) -> None:
        from torch._C import _autograd

        # torch's stop did not finish: its C++ profiler may still run, and no query tells for
        # every mode (with profile_all_threads its state is global, not this thread's). Disabling
        # when nothing runs only logs a line, so disable whenever unsure.
        prof = self._torch_profile
        recorded = _recorded(getattr(prof.profiler, "kineto_results", None)) if prof is not None and prof.profiler is not None else None
        results: list[Any] = []
        tried = False
        try:
            with quiet_native_stderr():
                tried = True
                with contextlib.suppress(RuntimeError):  # an older torch raises when nothing runs
                    results.append(_autograd._disable_profiler())
        finally:
            if not tried:  # quieting fd 2 itself failed: disable loudly rather than not at all
                with contextlib.suppress(RuntimeError):
                    results.append(_autograd._disable_profiler())
            self._torch_on = False
        if keep and self.options.schedule is None and self._result is None:
            # torch's own stop may have got its result before it was interrupted; else ours has
            # what was recorded until then (empty if torch's disable had already run).
            self._result = recorded if recorded is not None else (_recorded(results[0]) if results else None)

    @lifecycle
    def _release(self) -> None:
        global _active
        if _active is self:
            _active = None
        self.entered_from = self.owner_stop = None

    @lifecycle
    def step(self) -> None:
        if self._torch_profile is None or _active is not self:
            raise ProfilerError("step() needs a running Profiler: call it inside the with block, once per iteration")
        ended = time.perf_counter()
        prof, schedule, none = self._torch_profile, self.options.schedule, self._none
        self._step_times.append((self.step_num, (ended - self._step_mark) * 1e6, self._recording()))
        try:
            if schedule is not None and prof.current_action is none and schedule(prof.step_num + 1) is none:
                # Idle to idle: torch only moves its counter (and its step range), kineto says
                # nothing, and the hooks stay out: a long wait costs the loop next to nothing.
                prof.step()
            else:
                with quiet_native_stderr(), warnings.catch_warnings():
                    warnings.filterwarnings("ignore", message=_CYCLE_WARNING)
                    try:
                        prof.step()
                    except RuntimeError as exc:
                        # torch 2.11 raises ending a cycle that a torch.profiler session of the
                        # block's own already ended (later releases end it empty): the cycle is
                        # left out, and the step's next cycle started as torch would have.
                        if not _none_ran(exc):
                            raise
                        _restart_cycle(prof)
                        self._note("a profiling cycle recorded nothing: a torch.profiler session was started inside the "
                                   "block, as some libraries do, and torch, which runs one session at a time, dropped "
                                   "torchprof's for it. The cycle is left out. Turn the library's profiler off while "
                                   "torchprof runs.")  # fmt: skip
                self._follow_schedule()
        finally:
            # The next step's clock starts now: folding a finished cycle in is not the loop's time.
            self._step_mark = time.perf_counter()

    def _recording(self) -> bool:
        """torch's profiler records the step that runs now (a schedule's active phase)."""
        return self._torch_profile.current_action in self._active_actions

    def _follow_schedule(self) -> None:
        """The module hooks are out of torch's tables during a schedule's idle steps (torch's
        profiler records nothing then either), so a long wait before the recorded steps costs
        the loop nothing; they are back from the warm-up step on."""
        if self.options.schedule is None or self._tracker is None:
            return
        if self._torch_profile.current_action is self._none:
            self._tracker.pause()
        else:
            self._tracker.resume()

    def step_times(self) -> list[tuple[int, float, bool]]:
        """``(step, wall µs, recorded)`` of each step marked by :meth:`step`: the time from the
        previous mark (or the start) to this one, the time spent folding a cycle in left out."""
        return list(self._step_times)

    @staticmethod
    def region(name: str) -> Any:
        """A named range for code outside torchprof to open and close: torch's user-scope
        ``record_function``, which the tree makes a region (a fast range of another scope would
        read as an op)."""
        from torch.autograd.profiler import record_function

        return record_function(name)

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
        # An empty cycle (another torch.profiler session replaced ours for it) has no trace, and
        # kineto crashes the process saving one: neither it nor the user's handler may touch it.
        result = _recorded(torch_prof.profiler.kineto_results) if torch_prof.profiler is not None else None
        if result is None:
            if opts.schedule is None:
                return  # the stop notes it (_check_still_ours)
            self._note("a profiling cycle recorded nothing: a torch.profiler session was started inside the block, "
                       "as some libraries do, and torch, which runs one session at a time, dropped torchprof's for it. "
                       "The cycle is left out" + (" and on_trace_ready was not called for it" if opts.on_trace_ready else "")
                       + ". Turn the library's profiler off while torchprof runs.")
            return
        cols = None
        if opts.schedule is not None:
            cols = result_columns(result, device=opts.cuda, python_frames=opts.stack, shapes=opts.record_shapes)
            self._on_cycle(cols, self.modules)
        mangled = names_kineto_mangles(cols) if cols is not None else None
        kept = False
        if opts.schedule is not None and opts.on_trace_ready is not None and not _exports_twice():
            # kineto writes a cycle's trace once, and this torch has no second writer: ours is
            # written first, and the handler's export_chrome_trace (tensorboard_trace_handler's)
            # gets a copy of it.
            self._keep_trace(result, mangled)
            kept = True
            if not self._trace_problems:
                kept_file = self._trace_files[-1]
                torch_prof.export_chrome_trace = lambda path, *args, **kwargs: _copy_trace(kept_file, path)
        if opts.on_trace_ready is not None:
            try:
                opts.on_trace_ready(torch_prof)
            except BaseException:
                # torch's own change of cycle ends here, before the next cycle is prepared: its
                # stop would stop a cycle that never started (torch 2.11 crashes the process).
                self._cycle_cut = True
                raise
            finally:
                torch_prof.__dict__.pop("export_chrome_trace", None)
        if opts.schedule is not None and not kept:
            self._keep_trace(result, mangled)

    def cycle_columns(self) -> EventColumns | None:
        """The unscheduled run's one cycle (None with a schedule, or if nothing was recorded).

        Read anew at each call from torch's result, which the session keeps: a read that was
        interrupted can be repeated.
        """
        result = self._result
        if result is None:
            return None
        cols = result_columns(result, device=self.options.cuda, python_frames=self.options.stack,
                              shapes=self.options.record_shapes)
        # The trace itself is written only when asked for (kineto writes a result once, and the
        # user may want torch's own export_chrome_trace first); the real names are known now.
        self._mangled = names_kineto_mangles(cols)
        return cols

    # -- what the profile misses --------------------------------------------------------------------
    def _note(self, text: str) -> None:
        if text not in self._notes:
            self._notes.append(text)
            warnings.warn(f"torchprof: {text}", ProfilerWarning, stacklevel=_stacklevel_outside_torchprof())

    def coverage_notes(self, recorded: int | None, interrupted: bool = False) -> list[str]:
        """What the profile misses of what the hooks saw, also given as warnings: module calls on
        threads torch did not record, a profile emptied by another ``torch.profiler`` session,
        modules the hooks could not name.

        ``recorded``: module calls the profile has (None when that cannot be compared with the
        hooks' count: a schedule records only its active steps). ``interrupted``: the block ended
        by an exception (a Ctrl-C in a hook may leave one call half recorded: not another
        session's doing).
        """
        for problem in self._tracker.problems if self._tracker is not None else []:
            self._note(problem)
        threads = self._tracker.thread_calls() if self._tracker is not None else []
        missed = [(name, calls) for name, calls, recorded_here in threads if recorded_here is False]
        if missed:
            where = ", ".join(f"{calls} on thread {name!r}" for name, calls in missed)
            why = ("with memory=True torch's profiler records only the thread that started it (its "
                   "profile_all_threads mode, which records every thread, drops memory events); run those modules "
                   "on that thread, or profile without memory=True"
                   if self.options.memory else
                   "this torch cannot record other threads (it has no profile_all_threads); run those modules on "
                   "the thread that started the Profiler, or upgrade torch")  # fmt: skip
            self._note(f"module calls not recorded: {where}: {why}.")
        tracker = self._tracker
        if tracker is not None and tracker.faults:
            self._note(
                f"torchprof's module hooks failed in {tracker.faults} module call(s) (first: {tracker.first_fault}); "
                "the calls ran as usual, but their time may sit on the layer above and FLOPs are unknown. "
                "Please report this with the model that shows it."
            )
        seen = sum(calls for _, calls, _ in threads) - sum(calls for _, calls in missed)
        if recorded is not None and recorded < seen and not self._notes and not interrupted:
            have = f"only {recorded}" if recorded else "none"
            self._note(
                f"torchprof's hooks saw {seen} module calls but the profile has {have}: torch's profiler did not "
                "record the rest. A torch.profiler session started inside the profiled block replaces torchprof's "
                "(torch runs one session at a time): turn the library's profiler off while torchprof runs."
            )
        return list(self._notes)

    def _keep_trace(self, result: Any, mangled: dict[tuple[int, int], str] | None = None) -> None:
        """Write ``result``'s chrome trace to a temporary file that goes with this session, with
        the names kineto's writer mangles put back. A failure is remembered for
        :meth:`trace_files` to report, never raised into the run."""
        fd, tmp = tempfile.mkstemp(prefix="torchprof-", suffix=".json")
        os.close(fd)
        weakref.finalize(self, _remove, tmp)
        try:
            with quiet_native_stderr():
                save_trace(result, tmp)
            if self.options.cuda:  # device work kineto wrote without times (torch 2.11) gets them
                with contextlib.suppress(TraceError):
                    retime_device_work(tmp, device_times(result))
            # Best effort: a file kineto wrote as invalid JSON (unescaped quotes, in some
            # versions) stays as it is, and the profile itself does not depend on it.
            with contextlib.suppress(TraceError):
                restore_names(tmp, mangled if mangled is not None else names_kineto_mangles(event_names(result)))
        except Exception as exc:  # noqa: BLE001 - reported when a trace is asked for
            _remove(tmp)
            self._trace_problems.append(f"{type(exc).__name__}: {exc}")
            return
        except BaseException:
            # Interrupted after kineto wrote the file (it cannot be written twice): keep it.
            if os.path.getsize(tmp) > 0:
                self._trace_files.append(tmp)
            else:
                _remove(tmp)
            raise
        self._trace_files.append(tmp)

    def trace_files(self) -> list[str]:
        """Chrome traces of the recorded cycles, in order, as kineto writes them (each written
        once, on first need for a run without a schedule, and read by every later export).
        ValueError when there is none, or a cycle's trace could not be written."""
        if self.options.schedule is None and not self._trace_files and not self._trace_problems:
            result = self._result
            if result is None and self._torch_profile is not None and self._torch_profile.profiler is not None:
                result = _recorded(getattr(self._torch_profile.profiler, "kineto_results", None))
            if result is not None:
                self._keep_trace(result, self._mangled)
        if self._trace_problems:
            raise ValueError(f"the trace of {len(self._trace_problems)} recorded cycle(s) could not be kept, so it cannot be "
                             f"exported: {self._trace_problems[0]}")  # fmt: skip
        if not self._trace_files:
            raise ValueError("this run recorded no complete cycle: there are no trace events to export")
        return list(self._trace_files)


def _warnings_filter(*messages: str) -> Any:
    """The warnings filter that ignores warnings starting with any of ``messages`` (regular
    expressions), as ``warnings.filterwarnings`` makes it, made once. The user's code runs while
    it is in place: a filter of our own, removed again, instead of catch_warnings, which would
    reset the user's filters."""
    entry = _FILTERS.get(messages)
    if entry is None:
        with warnings.catch_warnings():  # (only to read the filter it makes)
            warnings.filterwarnings("ignore", message="|".join(f"(?:{m})" for m in messages))
            entry = _FILTERS[messages] = warnings.filters[0]
    return entry


def _add_filter(entry: Any) -> None:
    warnings.filters.insert(0, entry)  # type: ignore[attr-defined]
    warnings._filters_mutated()  # type: ignore[attr-defined]


def _remove_filter(entry: Any) -> None:
    """Take ``entry`` out of the filters; nothing where it is not in them."""
    try:
        warnings.filters.remove(entry)  # type: ignore[attr-defined]
        warnings._filters_mutated()  # type: ignore[attr-defined]
    except ValueError:
        pass


_FILTERS: dict[tuple[str, ...], Any] = {}


def _stacklevel_outside_torchprof() -> int:
    """The ``stacklevel`` that attributes a warning to the user's line (the ``with`` block's end,
    ``prof.df``), not to torchprof's own frames."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frame = sys._getframe(1)
    level = 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package + os.sep):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level


def _start_at_step(prof: Any, step: int) -> None:
    """Number torch's steps from ``step`` (its ``ProfilerStep#N`` ranges and the schedule's
    argument), for a session started in the middle of a run."""
    prof.step_num = step
    action = prof.schedule(step)
    prof.current_action = action
    if hasattr(prof, "_prev_schedule_action"):  # torch 2.10+: what step() compares cycles against
        prof._prev_schedule_action = action


def _restart_cycle(prof: Any) -> None:
    """After torch's change of cycle failed half-way (its step set the new action, then raised
    before preparing it): run that change again from nothing running."""
    import torch
    from torch.profiler import ProfilerAction

    intended = prof.current_action
    prof.current_action = ProfilerAction.NONE
    try:
        prof._transit_action(ProfilerAction.NONE, intended)
    except Exception:  # noqa: BLE001 - then the run goes on unrecorded until the next cycle
        return
    prof.current_action = intended
    if getattr(prof, "record_steps", False):  # and the step's range, which torch opens last
        prof.step_rec_fn = torch.autograd.profiler.record_function(f"ProfilerStep#{prof.step_num}")
        prof.step_rec_fn.__enter__()


def _exports_twice() -> bool:
    """Whether this torch can write a cycle's chrome trace again after kineto wrote it (its
    Python exporter, which 2.11 lacks)."""
    import importlib.util

    return importlib.util.find_spec("torch.profiler._chrome_trace_export") is not None


def _copy_trace(kept: str, path: str) -> None:
    """torch's ``export_chrome_trace(path)`` for a cycle torchprof already wrote: a copy of that
    file, gzipped where the path ends in ``.gz`` (as torch's does), written atomically."""
    from .._files import write_atomic_chunks

    with open(kept, "rb") as src:
        write_atomic_chunks(path, iter(lambda: src.read(1 << 20), b""))


#: What torch 2.11 raises where it is asked to stop (or, a session left prepared, to prepare) while
#: no session runs; later releases log it instead.
_KINETO_NOT_RUNNING = "Kineto profiler when it's not running"


def _none_ran(exc: RuntimeError) -> bool:
    """``exc`` is torch 2.11 saying no session ran, and none runs now: a session of the block's
    own (a library's) stopped torchprof's already."""
    import torch

    running = bool(torch.autograd.profiler._is_profiler_enabled) or bool(torch._C._autograd._profiler_enabled())
    return _KINETO_NOT_RUNNING in str(exc) and not running


def _start_torch(prof: Any) -> None:
    """torch's profiler started. torch 2.11 keeps a session that was prepared but never started
    (a Ctrl-C between the two) and then fails every later start ("Can't disable Kineto profiler
    when it's not running"); such a session is started and stopped, and the start tried again."""
    try:
        prof.start()
    except RuntimeError as exc:
        if _KINETO_NOT_RUNNING not in str(exc) or not _clear_prepared(prof):
            raise
        prof.start()


def _clear_prepared(prof: Any) -> bool:
    from torch._C import _autograd

    inner = getattr(prof, "profiler", None)
    if inner is None:
        return False
    try:
        _autograd._enable_profiler(inner.config(), inner.kineto_activities)
        _autograd._disable_profiler()
    except Exception:  # noqa: BLE001 - the start's own error is the one to show
        return False
    return True


def _recorded(result: Any) -> Any:
    """torch's result if it holds a recording; None for the empty one torch returns when no session
    ran (another session had replaced ours, or the disable was repeated): it has no trace, and
    saving it would crash the process."""
    return result if result is not None and result.trace_start_ns() else None


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
