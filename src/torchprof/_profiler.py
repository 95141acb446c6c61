"""``torchprof.Profiler``: the options and the run; its result is a :class:`~torchprof.Result`."""

from __future__ import annotations

import contextlib
import dis
import sys
import warnings
from collections.abc import Callable, Iterable, Mapping
from types import FrameType
from typing import TYPE_CHECKING, Any, Literal

from ._capture.distributed import distributed_info
from ._capture.facts import RunFacts
from ._capture.interrupts import lifecycle, raise_pending
from ._capture.quiet import StderrFilter
from ._capture.schedule import StepSchedule, describe_steps
from ._capture.session import CaptureOptions, CaptureSession, _stacklevel_outside_torchprof
from ._errors import ProfilerError, ProfilerWarning
from ._records import EventColumns, ModuleInfo, Recording
from ._result import Result
from ._tree.builder import TreeBuilder
from ._tree.comm import comm_note
from ._tree.devices import choose_peak
from ._views.format import unknown_flops_note
from ._vocab import RECOMPUTE, STEP_TIME_COLUMNS, NodeKind

if TYPE_CHECKING:
    import torch

#: What a Profiler forwards to its result once the run is over (``prof.df`` after the block).
RESULT_API = frozenset(
    name for name in dir(Result) if not name.startswith("_")
) | {"recording", "meta"}


class Profiler:
    """Profile a block of PyTorch code layer by layer.

    >>> with torchprof.Profiler() as prof:
    ...     loss = model(x).sum(); loss.backward(); opt.step()
    >>> prof.df          # one row per node of the layer tree
    >>> print(prof)      # the terminal tree table

    After the block, ``prof.result`` is the :class:`~torchprof.Result`, and every attribute of
    it is also reachable on the Profiler itself (``prof.df``, ``prof.summary``, ``display(prof)``).

    Args:
        model: attribute only this module's layers (paths rooted at it); default: every module.
        cuda: record GPU kernels; default: when CUDA is available.
        memory: record allocated bytes per layer.
        shapes: show each node's input shapes (the ops' are recorded whenever FLOPs are counted;
            this adds the module calls').
        stack: record Python source locations (slower).
        flops: count FLOPs and MACs of every op that ran, from the shapes and arguments torch's
            profiler records for it (``record_shapes``), the loss and the optimizer included; an
            op whose cost is unknown is listed in ``unsupported_ops`` and the rows holding it
            read NaN. ``flops=False`` records no shapes: the cheapest capture.
        name: label of the tree's root (the profiled block).
        schedule, on_trace_ready: as in ``torch.profiler.profile`` for long runs; call
            :meth:`step` once per iteration. Each completed cycle is folded into the tree.
            During the schedule's idle steps the module hooks are out too, so they cost nothing.
        steps: record exactly these iterations (``steps=[100, 101, 102]``, ``range(100, 103)``)
            instead of a ``schedule``: one warm-up step before each run of consecutive steps,
            idle (no cost) everywhere else; call :meth:`step` once per iteration.
        first_step: the number of the iteration that runs when the Profiler starts (default 0,
            as torch counts), for a Profiler started in the middle of a run: it numbers the
            ``ProfilerStep#N`` rows, ``steps`` and the schedule's argument.
        labels: names for root modules (e.g. their variable names), used instead of class names:
            a mapping ``{module: name}``, or a callable asked the first time a root module runs.
        peak_flops: what MFU is measured against: FLOP/s (a number), or a data type (``"bf16"``,
            ``"fp32"``, ``"tf32"``, ``"fp16"``, ``"fp8"``) of the device, which is otherwise
            recognised from ``torch.cuda.get_device_properties`` at the dtype the model computed in.
    """

    def __init__(
        self,
        model: torch.nn.Module | None = None,
        *,
        cuda: bool | None = None,
        memory: bool = False,
        shapes: bool = False,
        stack: bool = False,
        flops: bool = True,
        name: str | None = None,
        schedule: Callable[[int], Any] | None = None,
        on_trace_ready: Callable[[Any], Any] | None = None,
        labels: Mapping[Any, str] | Callable[[Any], str | None] | None = None,
        steps: Iterable[int] | None = None,
        first_step: int = 0,
        peak_flops: float | str | None = None,
    ) -> None:
        import torch

        if model is not None and not isinstance(model, torch.nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, not {type(model).__name__}")
        if cuda is None:
            cuda = torch.cuda.is_available()
        elif cuda and not torch.cuda.is_available():
            raise ProfilerError("cuda=True, but no CUDA device is available (torch.cuda.is_available() is False)")
        if name is not None and not isinstance(name, str):
            raise TypeError(f"name must be a string, not {type(name).__name__}")
        if isinstance(first_step, bool) or not isinstance(first_step, int) or first_step < 0:
            raise ValueError(f"first_step must be a step number (an int, 0 or more), not {first_step!r}")
        if steps is not None:
            if schedule is not None:
                raise ValueError("give steps= or schedule=, not both: steps= is a schedule that records those steps")
            schedule = StepSchedule(steps)
            early = [s for s in schedule.steps if s < first_step]
            if early:
                raise ValueError(f"steps {early} come before first_step={first_step}: they can never be recorded")
        self.options = CaptureOptions(
            model=model, cuda=bool(cuda), memory=bool(memory), shapes=bool(shapes), stack=bool(stack),
            flops=bool(flops), schedule=schedule, on_trace_ready=on_trace_ready, labels=labels, first_step=first_step,
        )  # fmt: skip
        self.name = name
        if peak_flops is not None:
            choose_peak({}, peak_flops, False)  # a bad value is an error now, not after the run
        self.peak_flops = peak_flops
        self.interrupted: BaseException | None = None
        """The exception that ended the profiled block early, if one did."""
        self._session: CaptureSession | None = None
        self._builder: TreeBuilder | None = None
        self._result: Result | None = None
        self._facts: RunFacts | None = None
        self._stderr = StderrFilter()

    # -- the run ----------------------------------------------------------------------------------
    # Stopping is a lifecycle step: a Ctrl-C that arrives during it (even on the first line of
    # ``__exit__``) waits until it is complete, then lands. An interrupt raised by code is met by
    # running the stop again from wherever it was cut short (every step of it resumes, and is a
    # no-op once done). Starting is undone when anything interrupts it (see :meth:`start`).
    @lifecycle
    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]:
        try:
            if exc is not None:
                self.interrupted = exc
            self.stop()
        finally:
            self.stop()  # completes a stop that was interrupted; returns at once after one that finished
        return False

    def start(self) -> Profiler:
        """Install the hooks and start torch's profiler (the ``with`` block does this for you).

        Raises, leaving nothing behind, when another profiler runs or the start is interrupted.
        """
        # Also ``__enter__``. Not a lifecycle step itself: it returns to the user's code with the
        # session running, so a Ctrl-C held during the start is raised here, and one landing
        # after that check lands in this frame, inside the try that undoes the start.
        if self._session is not None:
            raise ProfilerError("this Profiler has already been used; create a new one")
        entered_from = _with_statement_frame(sys._getframe(1))
        try:
            try:
                self._start(entered_from)
                raise_pending()
                return self
            except BaseException:
                self._undo_start()
                raise
        except BaseException as exc:
            self._undo_start()  # again: the first undo was interrupted (it resumes), or it is a no-op
            if isinstance(exc, ProfilerError):
                # A usage error (another profiler runs): the user's line is where it is, not
                # the frames of torchprof's start below this one.
                raise exc.with_traceback(None) from None
            raise

    __enter__ = start

    @lifecycle
    def _start(self, entered_from: FrameType | None) -> None:
        # A schedule's cycles are folded in as they complete; one unscheduled cycle is read into a
        # fresh builder when the profile is first read (see _make_result).
        self._builder = self._new_builder() if self.options.schedule is not None else None
        self._facts = RunFacts()
        if self.options.memory:
            # c10 logs a line to fd 2 for each block from before the run freed inside it (every
            # 1000th): the user's own output keeps flowing, that line is dropped.
            self._stderr.start()
        session = self._session = CaptureSession(self.options, self._fold)
        session.entered_from = entered_from
        session.owner_stop = self.stop
        session.start()

    @lifecycle
    def _undo_start(self) -> None:
        self._stderr.stop()
        session = self._session
        if session is not None:
            session.abandon()

    def _new_builder(self) -> TreeBuilder:
        opts = self.options
        return TreeBuilder(label=self.name or "profile", flops=opts.flops, shapes=opts.shapes, memory=opts.memory,
                           cuda=opts.cuda, compiled={})  # fmt: skip

    def _fold(self, events: EventColumns, modules: dict[str, ModuleInfo]) -> None:
        assert self._builder is not None
        self._builder.modules.update(modules)
        self._builder.compiled.graphs.update(CaptureSession.compiled_graphs(events.name))
        if self._session is not None:  # DDP's buckets as they are now, for this cycle's all-reduces
            self._builder.comm.ddp = self._session.ddp_buckets()
        self._builder.add(events)

    @lifecycle
    def stop(self) -> None:
        """Remove the hooks and stop the profiler. Safe to call twice.

        Even when the stop is interrupted (Ctrl-C) or fails, the hooks are gone, torch's
        profiler is off and the result holds what was recorded; the interrupt is raised after.
        From another thread than the start's it works where torch records every thread (the
        default); with ``memory=True`` it is a ProfilerError that changes nothing.
        """
        if self._session is not None:
            self._session.check_thread("stop")
        try:
            self._stop()
        finally:
            self._stop()  # completes a stop that was interrupted; a no-op after one that finished

    @lifecycle
    def _stop(self) -> None:
        session = self._session
        if session is None:
            return
        try:
            session.stop()
        finally:
            self._stderr.stop()  # a no-op after the first time
            if self._result is None and session.used:
                self._result = self._make_result(session)
            session.release_interrupts()

    def step(self) -> None:
        """Mark the end of one iteration, as ``torch.profiler.profile.step()``.

        With a ``schedule`` this drives its wait/warmup/active phases; each completed cycle is
        folded into the tree (and passed to ``on_trace_ready``) right away, so only the tree
        grows: by the nodes of each recorded ``ProfilerStep#N`` range, nothing per raw event.
        Without a schedule torch records no step ranges, so ``prof.steps`` stays empty.
        """
        if self._session is None or not self._session.running:
            raise ProfilerError("step() needs a running Profiler: call it inside the with block, once per iteration")
        self._session.check_thread("step")
        self._session.step()
        raise_pending()  # a Ctrl-C held while the cycle was folded in (one after it lands here)

    @property
    def step_num(self) -> int:
        """The number of the iteration running now: ``first_step`` plus the iterations marked by
        :meth:`step` so far (torch's counter)."""
        return self._session.step_num if self._session is not None else self.options.first_step

    def region(self, name: str) -> Any:
        """A context manager that makes the code inside it a region of the tree named ``name``
        (beside the layers it runs, as ``torch.profiler.record_function`` does): for frameworks
        that announce their phases (a trainer's data loading, its hooks). Regions must nest; a
        region opened while nothing is recorded is simply not in the profile."""
        if not isinstance(name, str):
            raise TypeError(f"a region's name must be a string, not {type(name).__name__}")
        return CaptureSession.region(name)

    @property
    def wall_us(self) -> float | None:
        """Wall time of the profiled block in µs (None before it ended)."""
        return self._session.wall_us if self._session is not None else None

    @property
    def torch_profile(self) -> Any:
        """The underlying ``torch.profiler.profile`` (``key_averages()`` and torch's own tools).

        kineto writes a cycle's chrome trace once: after ``prof.export_chrome_trace()``, torch's
        own ``export_chrome_trace(path)`` needs ``use_python_export=True`` (torchprof's export
        works before and after torch's, any number of times)."""
        return self._session.torch_profile if self._session is not None else None

    #: Whether a stop names the chosen ``steps=`` the block never reached (a trainer's window
    #: names them itself, in its trainer's numbering).
    _name_unreached_steps = True

    def _unreached_steps(self) -> str | None:
        """The chosen steps that were not recorded, as a note (warned now), when the block ended
        before them; None otherwise, and after an exception (its "stopped by" says why)."""
        schedule, builder, session = self.options.schedule, self._builder, self._session
        if not isinstance(schedule, StepSchedule) or builder is None or session is None:
            return None
        if self.interrupted is not None or not self._name_unreached_steps:
            return None
        recorded = {step["step"] for step in builder.steps}
        missing = [s for s in schedule.steps if s not in recorded]
        if not missing:
            return None
        marked = session.step_times()
        ended = f"the block ended after step {marked[-1][0]}" if marked else "the block marked no step"
        note = (f"step{'s' if len(missing) > 1 else ''} {describe_steps(missing)} {'were' if len(missing) > 1 else 'was'} "
                f"not recorded: {ended} (prof.step() marks each)")  # fmt: skip
        warnings.warn(f"torchprof: {note}", ProfilerWarning, stacklevel=_stacklevel_outside_torchprof())
        return note

    def _make_result(self, session: CaptureSession) -> Result:
        opts = self.options
        meta: dict[str, Any] = {"source": "torchprof.Profiler", "shapes": opts.shapes, "record_shapes": opts.record_shapes,
                                "flops": opts.flops}
        rank = distributed_info()
        if rank is not None:
            meta["distributedInfo"] = rank
        if self.interrupted is not None:
            meta["interrupted"] = ": ".join(filter(None, (type(self.interrupted).__name__, str(self.interrupted))))
        if self._facts is not None:
            # Facts for MFU and the insights: never worth losing the profile over.
            with contextlib.suppress(Exception):
                meta.update(self._facts.finish(session.root_modules(), session.autocast_dtypes(), opts.cuda, session.root_dtype_bytes()))
        folded = self._builder
        recording = Recording(modules=folded.modules if folded is not None else {}, wall_us=session.wall_us,
                              label=self.name or "profile", meta=meta, compiled=folded.compiled.graphs if folded is not None else {},
                              step_times=_step_columns(session.step_times()))  # fmt: skip
        block_wall_us = session.wall_us
        unreached = self._unreached_steps()
        buckets = session.ddp_buckets()  # read now: the tree is built later, maybe after the job ended
        if buckets:
            meta["ddp_buckets"] = buckets

        def build() -> Any:
            if opts.schedule is None:
                # The one cycle is read only now, into a fresh builder each time: a read that was
                # interrupted (Ctrl-C while a big profile is read) is simply repeated.
                builder = self._new_builder()
                events = session.cycle_columns()
                # Graphs compiled before the block get their layer maps now (outside it).
                graphs = session.compiled_graphs(events.name if events is not None else ())
                builder.modules.update(session.module_infos(bool(graphs)))
                builder.compiled.graphs.update(graphs)
                builder.comm.ddp = buckets
                if events is not None:
                    builder.add(events)
            else:
                assert self._builder is not None
                builder = self._builder  # its cycles were folded in as they completed
                builder.modules.update(session.modules)
            recording.modules = builder.modules
            recording.compiled = builder.compiled.graphs
            recording.tensors = builder.tensors = session.known_tensors()
            builder.peak_flops = choose_peak(meta, self.peak_flops, opts.cuda)  # (its inputs are complete at the stop)
            if opts.schedule is not None and block_wall_us is not None:
                # The tree holds only the recorded steps: their wall time is what its totals (and
                # FLOP/s) refer to; the whole block, waits and warm-ups included, stays in meta.
                meta["block_wall_us"] = block_wall_us
                # No step recorded: the wall time is unknown, not a run of 0 µs.
                recording.wall_us = sum(s["wall_us"] for s in builder.steps) if builder.steps else None
            tree = builder.finish()
            notes = session.coverage_notes(None if opts.schedule is not None else _module_calls(tree),
                                           interrupted=self.interrupted is not None)
            notes += [f"FLOPs of {path} are unknown: {why}." for path, why in builder.flop_count.problems.items()]
            notes += _unmapped_notes(builder, session.unmapped_compiled())
            notes += [note for note in (comm_note(builder.comm), unreached) if note]
            notes += _unexplained_unknown_flops(tree, notes) if builder.want_flops else []
            if notes:
                meta["warnings"] = notes
            return tree

        return Result(build, recording, trace_files=session.trace_files)

    # -- the result -------------------------------------------------------------------------------
    @property
    def result(self) -> Result:
        """The profile of the finished run."""
        if self._result is None:
            if self._session is not None and self._session.running:
                raise ProfilerError("the profile is still running: read results after the with block")
            raise ProfilerError("nothing was profiled yet: use the Profiler in a with block first")
        return self._result

    def __getattr__(self, name: str) -> Any:
        # Only reached for names the Profiler itself lacks: the result's public API.
        if name in RESULT_API:
            return getattr(self.result, name)
        raise AttributeError(f"'Profiler' object has no attribute {name!r}")

    def _ipython_display_(self) -> None:
        if self._result is None:  # not run yet, or still running: say so rather than raise
            from IPython.display import display

            display({"text/plain": repr(self)}, raw=True)
            return
        self._result._ipython_display_()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        if self._result is None:
            return {"text/plain": repr(self)}
        return self._result._repr_mimebundle_(include, exclude)

    def __str__(self) -> str:
        return str(self.result)

    def __repr__(self) -> str:
        if self._result is None:
            state = "running" if self._session is not None and self._session.running else "not started"
            return f"<torchprof.Profiler ({state})>"
        return repr(self._result)


def _unmapped_notes(builder: TreeBuilder, reasons: dict[str, str]) -> list[str]:
    """What the user reads when compiled graphs ran whose layers torchprof could not learn."""
    ids = sorted({key.rsplit(" ", 1)[0] for key in builder.compiled.unmapped})
    return [f"torch.compile'd graph {cid} has no layer map ({reasons.get(cid, 'compiled with no layer map kept')}): "
            "its time stays on the module that ran it and its FLOPs are unknown (NaN)" for cid in ids]  # fmt: skip


def _unexplained_unknown_flops(tree: Any, notes: list[str]) -> list[str]:
    """FLOPs read NaN only with a note saying why: where no note above speaks of FLOPs (those name
    the cause torchprof knows), one naming the ops of unknown cost, or saying that some are."""
    ops = sorted(tree.unsupported_ops.items(), key=lambda item: (-item[1], item[0]))
    if any("FLOPs" in note for note in notes) or (notes and not ops):  # (a note says why the profile is short)
        return []
    flops = tree.columns.get("flops") or []
    if len(flops) <= 1 or not any(value != value for value in flops):  # nothing ran, or no NaN (NaN != NaN)
        return []
    if ops:  # the note every view writes under its table (one text, so each says it once)
        return [unknown_flops_note(dict(ops))]
    return ["FLOPs are unknown (NaN) where ops ran that torchprof could not count: the rows that hold them, and the rows "
            "above those, read NaN; every other row keeps its count."]


def _step_columns(rows: list[tuple[int, float, bool]]) -> dict[str, list[Any]]:
    """The steps a session marked, column-wise as ``Recording.step_times`` keeps them."""
    if not rows:
        return {}
    return {name: list(values) for name, values in zip(STEP_TIME_COLUMNS[1:], zip(*rows))}  # all but rank


def _module_calls(tree: Any) -> int:
    """Module calls the profile recorded: every module row's calls, and the recomputations of
    activation checkpointing (a module's range inside backward lands in its "(recompute)" row)."""
    module = NodeKind.MODULE.label
    cols = tree.columns
    return sum(calls for kind, name, calls in zip(cols["kind"], cols["name"], cols["calls"])
               if kind == module or name == RECOMPUTE)  # fmt: skip


def profile(model: torch.nn.Module | None = None, use_cuda: bool | None = None, **options: Any) -> Profiler:
    """The 2020 torchprof entry point: ``with torchprof.profile(model, use_cuda=True) as prof``."""
    return Profiler(model, cuda=use_cuda, **options)


#: The opcodes that call ``__enter__`` for a ``with`` statement (3.11-3.13; 3.10's SETUP_WITH).
_WITH_OPS = frozenset(dis.opmap[name] for name in ("BEFORE_WITH", "SETUP_WITH") if name in dis.opmap)


def _with_statement_frame(frame: FrameType) -> FrameType | None:
    """``frame`` when it is calling ``__enter__`` from a ``with`` statement (not ``ExitStack``, not
    a direct call): the block whose end must stop the Profiler."""
    code = frame.f_code.co_code
    lasti = frame.f_lasti
    return frame if 0 <= lasti < len(code) and code[lasti] in _WITH_OPS else None
