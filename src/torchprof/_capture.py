"""Capture: run code under ``torch.profiler`` with module ranges, hand out plain records.

The only module that touches torch profiler internals. Everything after it works on
:class:`~torchprof._records.EventColumns`.
"""

from __future__ import annotations

import time
import warnings
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ._gc import paused_gc
from ._hooks import ModuleTracker
from ._profile import Profile
from ._quiet import quiet_native_stderr
from ._records import (
    CATEGORY_KIND,
    DEVICE,
    IGNORED,
    MEMORY,
    MODULE,
    MODULE_PREFIX,
    OP,
    PYFRAME,
    REGION,
    RUNTIME,
    Capture,
    EventColumns,
)
from ._tree import TreeBuilder

if TYPE_CHECKING:
    import torch

_active: Profiler | None = None
_CYCLE_WARNING = "Warning: Profiler clears events at the end of each cycle"


class ProfilerError(RuntimeError):
    """A Profiler was used in a way that cannot work (nested, bad options, no GPU for cuda=True)."""


def result_columns(result: Any, *, device: bool = False, python_frames: bool = False) -> EventColumns:
    """Read one profiling cycle column-wise, parents included.

    ``prof.events()`` builds a Python ``FunctionEvent`` per event (about 100 µs each here), and
    even kineto's bare ``result.events()`` costs about 5 µs per event with shapes on. We walk the
    profiler's own C++ event tree instead: its nesting comes for free, each field is pulled for
    all events with one C-level ``map`` over the pybind accessors, and whatever only some events
    need (sequence numbers, shapes, scopes) is read lazily for those. Events are listed in
    pre-order with roots by start time, which puts every range after the ranges around it and
    every backward op after its forward op.

    With ``device`` (CUDA on), kernels, memcpys and runtime calls come from ``result.events()``,
    joined to the ops through kineto's correlation ids, as torch's own parser does.
    ``python_frames`` (``with_stack``): Python calls become frames that name each node's source
    line (the ``source`` column) and are not nodes themselves.
    """
    from torch._C._profiler import RecordScope, _ExtraFields_Allocation, _ExtraFields_TorchOp, _TensorMetadata

    from torch._C._profiler import _ExtraFields_PyCall, _ExtraFields_PyCCall

    roots = sorted(result.experimental_event_tree(), key=lambda e: e.start_time_ns)
    if python_frames:
        # With Python stacks, torch nests ops under Python calls by the interpreter's stack,
        # not by time, so a module's range would not contain its ops: keep the Python calls as
        # frames and let the tree nest everything by time, per thread (as for a trace file).
        flat, _ = _flatten(roots, None)
        cols = EventColumns(parent=None)
    else:
        keep = (_ExtraFields_TorchOp, _ExtraFields_Allocation) if device else None
        flat, parent = _flatten(roots, keep)
        cols = EventColumns(parent=parent)
    if not flat:
        return cols
    pe = type(flat[0])
    names = list(map(pe.name.fget, flat))
    n = len(flat)
    kinds = [OP] * n
    memory: list[int] = []
    user_scope = RecordScope.USER_SCOPE
    if python_frames:
        frame_types = (_ExtraFields_PyCall, _ExtraFields_PyCCall)
        for i, ef in enumerate(map(pe.extra_fields.fget, flat)):
            if isinstance(ef, frame_types):
                kinds[i] = PYFRAME
    for i, name in enumerate(names):
        if name[:6] != "aten::" and kinds[i] != PYFRAME:
            if name.startswith(MODULE_PREFIX):
                kinds[i] = MODULE
            elif name == "[memory]":
                kinds[i] = MEMORY
                memory.append(i)
            elif name == "[OutOfMemory]":
                kinds[i] = IGNORED
            elif flat[i].extra_fields.scope == user_scope:
                kinds[i] = REGION
    cols.name = names
    cols.kind = kinds
    cols.start = list(map(pe.start_time_ns.fget, flat))
    cols.end = list(map(pe.end_time_ns.fget, flat))
    zeros = [0] * n
    cols.tid = cols.fwd_tid = cols.ext_id = cols.link = cols.corr = cols.nbytes = cols.mem_total = zeros
    if python_frames:
        cols.tid = list(map(pe.start_tid.fget, flat))
    cols.on_cuda = [False] * n
    if memory:
        cols.nbytes, cols.mem_total = list(zeros), list(zeros)
        for i in memory:
            ef = flat[i].extra_fields
            cols.nbytes[i] = ef.alloc_size
            cols.mem_total[i] = ef.total_allocated
            cols.on_cuda[i] = ef.device.type != "cpu"
    op_fields = _ExtraFields_TorchOp
    seq_of_fields = op_fields.sequence_number.fget
    cols.seq = None
    cols.seq_of = lambda i: seq_of_fields(flat[i].extra_fields)
    tensor = _TensorMetadata

    def inputs(i: int) -> tuple[list, list] | None:
        ef = flat[i].extra_fields
        if type(ef) is not op_fields:
            return None
        values = ef.inputs
        # A tensor list (cat, _foreach_*) gives the sizes of each tensor, as a chrome trace does.
        shapes = [v.sizes if type(v) is tensor else [t.sizes if type(t) is tensor else [] for t in v]
                  if type(v) is list else [] for v in values]  # fmt: skip
        concrete = [None if type(v) is tensor or type(v) is list else v for v in values]
        return shapes, concrete

    cols.inputs = inputs
    by_id: dict[int, Any] | None = None

    def full_concrete(i: int) -> list | None:
        # kineto's event list is the only place that keeps int-list arguments; building it
        # costs several µs per event, so only a functional convolution or pooling pays for it.
        nonlocal by_id
        if by_id is None:
            by_id = {ev.correlation_id(): ev for ev in result.events() if ev.activity_type() == "cpu_op"}
        match = by_id.get(flat[i].correlation_id)
        return match.concrete_inputs() if match is not None else None

    cols.full_concrete = full_concrete
    if device:
        _add_device_events(cols, result, flat)
    return cols


def _flatten(roots: list[Any], keep: tuple[type, ...] | None) -> tuple[list[Any], list[int]]:
    """Pre-order list of a profiler event tree and each event's parent index.

    Explicit stacks (trees can be 100k nodes wide or deep); children are pushed reversed so they
    come out in start order. With ``keep``, events of other kinds (device activities) are
    dropped and their children handed to the nearest kept ancestor.
    """
    flat: list[Any] = []
    parent: list[int] = []
    events = list(reversed(roots))
    owners = [-1] * len(events)
    add, add_parent = flat.append, parent.append
    while events:
        e = events.pop()
        p = owners.pop()
        if keep is not None and not isinstance(e.extra_fields, keep):
            me = p
        else:
            me = len(flat)
            add(e)
            add_parent(p)
        children = e.children
        if children:
            events.extend(reversed(children))
            owners.extend([me] * len(children))
    return flat, parent


def _add_device_events(cols: EventColumns, result: Any, flat: list[Any]) -> None:
    """Append GPU activities and CUDA runtime calls from kineto's event list.

    A runtime call becomes a child of the op that issued it (kineto's linked correlation id is
    that op's correlation id); kernels keep both ids so the tree can place them under that op.
    """
    pe = type(flat[0])
    op_ids = list(map(pe.correlation_id.fget, flat))
    index_of_op = {c: i for i, c in enumerate(op_ids) if c}
    n = len(flat)
    cols.ext_id = op_ids
    tid_of_op = {c: cols.tid[i] for i, c in enumerate(op_ids) if c}
    cols.tid, cols.fwd_tid, cols.link, cols.corr = list(cols.tid), [0] * n, [0] * n, [0] * n
    cols.nbytes, cols.mem_total, cols.on_cuda = list(cols.nbytes), list(cols.mem_total), list(cols.on_cuda)
    seq_of = cols.seq_of
    cols.seq_of = lambda i: seq_of(i) if i < n else -1
    for ev in result.events():
        kind = CATEGORY_KIND.get(ev.activity_type(), IGNORED)
        if kind not in (RUNTIME, DEVICE):
            continue
        link = ev.linked_correlation_id()
        cols.name.append(ev.name())
        cols.kind.append(kind)
        cols.start.append(ev.start_ns())
        cols.end.append(ev.end_ns())
        # A runtime call runs on the thread of the op that issued it (nesting by time needs it).
        cols.tid.append(ev.device_resource_id() if kind == DEVICE else tid_of_op.get(link, 0))
        cols.fwd_tid.append(0)
        cols.ext_id.append(0)
        cols.link.append(link)
        cols.corr.append(ev.correlation_id())
        cols.nbytes.append(0)
        cols.on_cuda.append(False)
        cols.mem_total.append(0)
        if cols.parent is not None:
            cols.parent.append(index_of_op.get(link, -1) if kind == RUNTIME else -1)


class Profiler(Profile):
    """Profile a block of PyTorch code layer by layer.

    >>> with torchprof.Profiler() as prof:
    ...     loss = model(x).sum(); loss.backward(); opt.step()
    >>> prof.df          # one row per node of the layer tree
    >>> print(prof)      # the terminal tree table

    Args:
        model: attribute only this module's layers (paths rooted at it); default: every module.
        cuda: record GPU kernels; default: when CUDA is available.
        memory: record allocated bytes per layer.
        shapes: keep input shapes per node (FLOP counting records them anyway).
        stack: record Python source locations (slower).
        flops: count FLOPs and MACs from the recorded shapes.
        name: label of the tree's root (the profiled block).
        schedule, on_trace_ready: as in ``torch.profiler.profile`` for long runs; call
            :meth:`step` once per iteration. Each completed cycle is folded into the tree.
        labels: names for root modules (e.g. their variable names), used instead of class names:
            a mapping ``{module: name}``, or a callable asked the first time a root module runs.
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
        super().__init__()
        self.model = model
        self.cuda = bool(cuda)
        self.memory = bool(memory)
        self.shapes = bool(shapes)
        self.stack = bool(stack)
        self.flops = bool(flops)
        self.name = name
        self.schedule = schedule
        self.on_trace_ready = on_trace_ready
        self.labels = labels
        self._torch_profile: Any = None
        self._tracker: ModuleTracker | None = None
        self._builder: TreeBuilder | None = None
        self._pending: Any = None  # kineto result of the last cycle, read on first use
        self._started = False
        self._t0 = 0.0
        self.wall_us: float | None = None
        self.interrupted: BaseException | None = None

    # -- context manager ------------------------------------------------------------------------
    def __enter__(self) -> Profiler:
        self.start()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        if exc is not None:
            self.interrupted = exc
        self.stop()
        return False

    def start(self) -> Profiler:
        """Install the hooks and start torch's profiler (the ``with`` block does this for you)."""
        global _active
        import torch
        from torch.profiler import ProfilerActivity, profile

        if _active is not None:
            raise ProfilerError("a torchprof Profiler is already running; finish it before starting another")
        if torch.autograd.profiler._is_profiler_enabled:
            raise ProfilerError("another torch.profiler session is already running in this process")
        if self._torch_profile is not None:
            raise ProfilerError("this Profiler has already been used; create a new one")
        activities = [ProfilerActivity.CPU]
        if self.cuda:
            activities.append(ProfilerActivity.CUDA)
        self._tracker = ModuleTracker(self.model, self.labels, record_inputs=self.shapes)
        self._builder = TreeBuilder(
            label=self.name or "profile", modules=self._tracker.modules,
            flops=self.flops, shapes=self.shapes, memory=self.memory, cuda=self.cuda,
        )  # fmt: skip
        self._torch_profile = profile(
            activities=activities,
            record_shapes=self.shapes or self.flops,
            profile_memory=self.memory,
            with_stack=self.stack,
            schedule=self.schedule,
            # Without a schedule the events are read lazily after stop(); torch still calls
            # on_trace_ready once at the end, so a user's handler is passed through.
            on_trace_ready=self._cycle_ready if self.schedule is not None or self.on_trace_ready is not None else None,
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
        return self

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
                    if self.schedule is None and prof.profiler is not None:
                        self._pending = prof.profiler.kineto_results
            finally:
                _active = None

    def step(self) -> None:
        """Mark the end of one iteration, as ``torch.profiler.profile.step()``.

        With a ``schedule`` this drives its wait/warmup/active phases; each completed cycle is
        folded into the tree (and passed to ``on_trace_ready``) right away, so only the tree
        grows: by the nodes of each recorded ``ProfilerStep#N`` range, nothing per raw event.
        Without a schedule torch records no step ranges, so ``prof.steps`` stays empty.
        """
        if self._torch_profile is None or _active is not self:
            raise ProfilerError("step() needs a running Profiler: call it inside the with block, once per iteration")
        with quiet_native_stderr(), warnings.catch_warnings():
            # torch warns that each cycle replaces the last one's events; torchprof keeps every
            # cycle in its tree, so the warning would only mislead.
            warnings.filterwarnings("ignore", message=_CYCLE_WARNING)
            self._torch_profile.step()

    @property
    def step_num(self) -> int:
        """Iterations marked by :meth:`step` so far (torch's counter)."""
        return self._torch_profile.step_num if self._torch_profile is not None else 0

    def _cycle_ready(self, torch_prof: Any) -> None:
        """torch finished a cycle (a schedule's active phase, or the run without a schedule).

        With a schedule the cycle's events are folded into the tree now and the kineto result is
        left to torch, which drops it when the next cycle starts: nothing raw accumulates. The
        user's ``on_trace_ready`` runs afterwards, while ``torch_prof`` still holds this cycle
        (``key_averages()``, ``export_chrome_trace()`` work as with torch alone).
        """
        if self.schedule is not None:
            result = torch_prof.profiler.kineto_results if torch_prof.profiler is not None else None
            if result is not None and self._builder is not None:
                if self._tracker is not None:
                    self._tracker.collect()
                self._builder.add(result_columns(result, device=self.cuda, python_frames=self.stack))
        if self.on_trace_ready is not None:
            self.on_trace_ready(torch_prof)

    # -- results ----------------------------------------------------------------------------------
    def _capture(self) -> tuple[TreeBuilder, Capture]:
        if self._builder is None:
            raise ProfilerError("nothing was profiled yet: use the Profiler in a with block first")
        if _active is self:
            raise ProfilerError("the profile is still running: read results after the with block")
        if self._pending is not None:
            result, self._pending = self._pending, None
            self._builder.add(result_columns(result, device=self.cuda, python_frames=self.stack))
        meta: dict[str, Any] = {"source": "torchprof.Profiler", "shapes": self.shapes, "flops": self.flops}
        if self.interrupted is not None:
            meta["interrupted"] = f"{type(self.interrupted).__name__}: {self.interrupted}"
        wall_us = self.wall_us
        if self.schedule is not None and wall_us is not None:
            # The tree holds only the recorded steps: their wall time is what its totals (and
            # FLOP/s) refer to; the whole block, waits and warm-ups included, stays in meta.
            meta["block_wall_us"] = wall_us
            wall_us = sum(s["wall_us"] for s in self._builder.steps)
        cap = Capture(cycles=[], modules=self._tracker.modules if self._tracker else {}, wall_us=wall_us,
                      label=self.name or "profile", meta=meta)  # fmt: skip
        return self._builder, cap

    def export_chrome_trace(self, path: str) -> str:
        """Write the last cycle as a chrome trace (Perfetto, chrome://tracing, ``load_trace``)."""
        from ._exports import write_chrome_trace

        return write_chrome_trace(self, path)


def profile(model: torch.nn.Module | None = None, use_cuda: bool | None = None, **options: Any) -> Profiler:
    """The 2020 torchprof entry point: ``with torchprof.profile(model, use_cuda=True) as prof``."""
    return Profiler(model, cuda=use_cuda, **options)
