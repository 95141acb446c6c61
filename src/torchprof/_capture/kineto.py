"""Reading torch's profiler results into plain records: the only code that touches kineto's
event objects. Everything after it works on :class:`~torchprof._records.EventColumns`.
"""

from __future__ import annotations

import functools
from typing import Any

from .._records import EventColumns
from .._traces.rewrite import mangled_by_kineto
from .._vocab import ATEN_PREFIX, CATEGORY_KIND, COMPILED_REGION_PREFIX, MEMORY_EVENT, MODULE_PREFIX, OOM_EVENT, EventKind

# Plain ints in the hot loops (an IntEnum member compares more slowly than an int).
OP, REGION, MODULE, RUNTIME, DEVICE, MEMORY, IGNORED, PYFRAME = map(int, (
    EventKind.OP, EventKind.REGION, EventKind.MODULE, EventKind.RUNTIME, EventKind.DEVICE,
    EventKind.MEMORY, EventKind.IGNORED, EventKind.PYFRAME))  # fmt: skip

# An event of the tree that is no op (kineto's own activity, seen by _kinds); never a node's kind.
_FOREIGN = -1

# Names of host calls into a device runtime or driver (cudaLaunchKernel, cuLaunchKernel, hipMemcpyAsync).
RUNTIME_NAME_PREFIXES = ("cuda", "cu", "hip")


def event_category(ev: Any) -> str:
    """The chrome-trace category of one of kineto's events (``kernel``, ``cuda_runtime``, ``cpu_op``...).

    ``_KinetoEvent.activity_type()`` says it where it exists; torch releases before it (2.11 has
    none) are read as their own parser reads them: work on a device is a kernel (memcpys and memsets
    too; their names tell them apart later) unless it is a user annotation; a host event linked to
    an op, or named as a runtime call, is a runtime call; anything else on the host is an op.
    """
    try:
        return str(ev.activity_type())
    except AttributeError:
        pass
    annotation = ev.is_user_annotation()
    if ev.device_type() != _cpu_device():
        return "gpu_user_annotation" if annotation else "kernel"
    if annotation:
        return "user_annotation"
    if ev.linked_correlation_id() > 0 or ev.name().startswith(RUNTIME_NAME_PREFIXES):
        return "cuda_runtime"
    return "cpu_op"


@functools.cache
def _cpu_device() -> Any:
    from torch._C._autograd import DeviceType

    return DeviceType.CPU


def result_columns(result: Any, *, device: bool = False, python_frames: bool = False, shapes: bool = True) -> EventColumns:
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
    import torch._C._profiler as profiler_types
    from torch._C._profiler import _ExtraFields_Allocation, _ExtraFields_TorchOp

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
    cols.kind, memory = _kinds(flat, names, python_frames)
    kineto_type = getattr(profiler_types, "_ExtraFields_Kineto", None)
    if not device and not python_frames and kineto_type is not None and _FOREIGN in cols.kind:
        # This torch (2.11) put kineto's own activities (kernels, runtime calls) into the tree;
        # without the device they are no one's: the tree is walked again without them (this
        # costs a read per event, paid only where such activities are there).
        flat, cols.parent = _flatten(roots, None, drop=kineto_type)
        if not flat:
            return EventColumns(parent=[])
        names = list(map(pe.name.fget, flat))
        cols.kind, memory = _kinds(flat, names, python_frames)
    n = len(flat)
    cols.name = names
    cols.kind = [IGNORED if k == _FOREIGN else k for k in cols.kind] if _FOREIGN in cols.kind else cols.kind
    cols.start = list(map(pe.start_time_ns.fget, flat))
    cols.end = list(map(pe.end_time_ns.fget, flat))
    zeros = [0] * n
    cols.fwd_tid = cols.ext_id = cols.link = cols.corr = cols.nbytes = cols.mem_total = zeros
    # Each event's thread (torch's own small thread ids): backward ownership is looked up per
    # thread, as autograd numbers forward ops per thread.
    cols.tid = list(map(pe.start_tid.fget, flat))
    cols.on_cuda = [False] * n
    if memory:
        _read_memory(cols, flat, memory)
    _read_arguments_lazily(cols, flat, result, shapes)
    if device:
        _add_device_events(cols, result, flat)
    return cols


def save_trace(result: Any, path: str) -> None:
    """kineto's chrome trace of one profiling cycle, written to ``path``.

    kineto writes a result once ("Trace is already saved" after that, e.g. when the user called
    torch's own ``export_chrome_trace`` first): then torch's Python exporter, which reads the
    same activities, writes it, where this torch has one.
    """
    try:
        result.save(path)
        return
    except RuntimeError as exc:
        if "already saved" not in str(exc):
            raise
        try:
            from torch.profiler._chrome_trace_export import export_chrome_trace
        except ImportError:
            raise RuntimeError("torch's own export_chrome_trace() already wrote this trace, and this torch can write "
                               "it only once: export with torchprof first") from exc  # fmt: skip
    export_chrome_trace(result, path)


def _kinds(flat: list[Any], names: list[str], python_frames: bool) -> tuple[list[int], list[int]]:
    """Each event's kind, and the indices of memory events. A module range is one torchprof's
    hooks opened (a function-scope range with our prefix): a user's ``record_function`` with the
    same name stays a region, so an ordinary region name cannot pass for a module.

    Reading an event's scope builds a Python object of all its fields (the costliest read here),
    so it is read once per distinct name, except for names with the module prefix, where a
    user's region of the same name must stay a region: those are read per event."""
    from torch._C._profiler import RecordScope, _ExtraFields_PyCall, _ExtraFields_PyCCall

    kinds = [OP] * len(flat)
    memory: list[int] = []
    user_scope = RecordScope.USER_SCOPE
    frame_at: set[int] = set()
    if python_frames:
        frame_types = (_ExtraFields_PyCall, _ExtraFields_PyCCall)
        for i, ef in enumerate(map(type(flat[0]).extra_fields.fget, flat)):
            if isinstance(ef, frame_types):
                kinds[i] = PYFRAME
                frame_at.add(i)
    by_name: dict[str, int] = {}
    for i, name in enumerate(names):
        if name[:6] == ATEN_PREFIX:
            continue
        if frame_at and i in frame_at:
            continue
        kind = by_name.get(name)
        if kind is None:
            if name == MEMORY_EVENT:
                kind = MEMORY
            elif name == OOM_EVENT:
                kind = IGNORED
            elif name.startswith(COMPILED_REGION_PREFIX):
                kind = REGION
            else:
                # Only an op has a scope: another kineto activity in the tree (a kernel or a
                # runtime call, which torch 2.11 puts there) is read from the event list, if at all.
                scope = getattr(flat[i].extra_fields, "scope", None)
                if scope is None:
                    kind = _FOREIGN
                elif name.startswith(MODULE_PREFIX):
                    kinds[i] = REGION if scope == user_scope else MODULE
                    continue  # not kept: the next event of this name may be the other kind
                else:
                    kind = REGION if scope == user_scope else OP
            by_name[name] = kind
        if kind != OP:
            kinds[i] = kind
            if kind == MEMORY:
                memory.append(i)
    return kinds, memory


def _read_memory(cols: EventColumns, flat: list[Any], memory: list[int]) -> None:
    n = len(flat)
    cols.nbytes, cols.mem_total, cols.mem_addr, cols.mem_device = [0] * n, [0] * n, [0] * n, [0] * n
    for i in memory:
        ef = flat[i].extra_fields
        cols.nbytes[i] = ef.alloc_size
        cols.mem_total[i] = ef.total_allocated
        cols.mem_addr[i] = ef.ptr
        device = ef.device
        on_device = device.type != "cpu"
        cols.on_cuda[i] = on_device
        cols.mem_device[i] = (device.index or 0) if on_device else -1


def _read_arguments_lazily(cols: EventColumns, flat: list[Any], result: Any, shapes: bool) -> None:
    """Sequence numbers, shapes and scalar arguments are read per event, only when asked; without
    ``shapes`` (torch recorded none) no event has arguments to read."""
    from torch._C._profiler import _ExtraFields_TorchOp, _TensorMetadata

    op_fields: Any = _ExtraFields_TorchOp  # pybind properties (typed as plain values in torch's stubs)
    # The properties' getters, called directly: no attribute lookup per event.
    seq_of_fields = op_fields.sequence_number.fget
    inputs_of_fields = op_fields.inputs.fget
    fields_of = type(flat[0]).extra_fields.fget
    cols.seq = None
    cols.seq_of = lambda i: seq_of_fields(fields_of(flat[i]))
    tensor = _TensorMetadata

    def inputs(i: int) -> tuple[list, list] | None:
        ef = fields_of(flat[i])
        if type(ef) is not op_fields:
            return None
        values = inputs_of_fields(ef)
        # A tensor list (cat, _foreach_*) gives the sizes of each tensor, as a chrome trace does.
        shapes = [v.sizes if type(v) is tensor else [t.sizes if type(t) is tensor else [] for t in v]
                  if type(v) is list else [] for v in values]  # fmt: skip
        concrete = [None if type(v) is tensor or type(v) is list else v for v in values]
        return shapes, concrete

    if shapes:
        cols.inputs = inputs
    by_name: dict[str, list[Any]] | None = None
    by_id: dict[str, dict[int, Any]] = {}
    names = cols.name

    def full_concrete(i: int) -> list | None:
        # kineto's event list is the only place that keeps int-list arguments (a convolution's
        # stride and padding, which gradients its backward computed): built once, when the first
        # op that needs them is counted (a few µs per event), and searched by name.
        nonlocal by_name
        if by_name is None:
            by_name = {}
            for ev in result.events():
                by_name.setdefault(ev.name(), []).append(ev)
        name = names[i]
        table = by_id.get(name)
        if table is None:
            table = by_id[name] = {ev.correlation_id(): ev for ev in by_name.get(name, ())}
        match = table.get(flat[i].correlation_id)
        return match.concrete_inputs() if match is not None else None

    cols.full_concrete = full_concrete
    fwd_by_id: dict[int, int] | None = None

    def fwd_tid_of(i: int) -> int:
        # The event tree does not keep a backward op's forward thread; kineto's event list does
        # (in the same thread ids as the tree's). Only asked when several threads ran forward
        # ops, whose sequence numbers then collide.
        nonlocal fwd_by_id
        if fwd_by_id is None:
            fwd_by_id = {ev.correlation_id(): ev.fwd_thread_id() for ev in result.events()
                         if event_category(ev) == "cpu_op" and ev.sequence_nr() >= 0}  # fmt: skip
        return fwd_by_id.get(flat[i].correlation_id, 0) if i < len(flat) else 0

    cols.fwd_tid_of = fwd_tid_of


def _flatten(roots: list[Any], keep: tuple[type, ...] | None, drop: type | None = None) -> tuple[list[Any], list[int]]:
    """Pre-order list of a profiler event tree and each event's parent index.

    An explicit stack (trees can be 100k nodes wide or deep) of iterators over each open event's
    children, so children come out in start order and no list of pending events is copied or
    reversed. With ``keep``, events of other kinds (device activities) are dropped and their
    children handed to the nearest kept ancestor; with ``drop``, events of that kind are. Cost:
    one read of ``children`` per event (and of its fields with either).
    """
    if not roots:
        return [], []
    flat: list[Any] = []
    parent: list[int] = []
    add, add_parent = flat.append, parent.append
    children_of = type(roots[0]).children.fget
    stack: list[tuple[Any, int]] = [(iter(roots), -1)]
    push = stack.append
    while stack:
        events, p = stack[-1]
        for e in events:
            if (keep is not None and not isinstance(e.extra_fields, keep)) or (drop is not None and isinstance(e.extra_fields, drop)):
                me = p
            else:
                me = len(flat)
                add(e)
                add_parent(p)
            children = children_of(e)
            if children:
                push((iter(children), me))
                break  # descend first: pre-order
        else:
            stack.pop()
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
    assert seq_of is not None
    cols.seq_of = lambda i: seq_of(i) if i < n else -1
    for ev in result.events():
        kind = CATEGORY_KIND.get(event_category(ev), IGNORED)
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


def device_times(result: Any) -> dict[tuple[bool, int], tuple[int, int]]:
    """``(is device work, correlation id) -> (start, end)`` in ns of a result's device work and
    runtime calls, as kineto's event list has them (for a trace file written without them)."""
    times: dict[tuple[bool, int], tuple[int, int]] = {}
    for ev in result.events():
        kind = CATEGORY_KIND.get(event_category(ev), IGNORED)
        if kind in (DEVICE, RUNTIME):
            times[(kind == DEVICE, ev.correlation_id())] = (ev.start_ns(), ev.end_ns())
    return times


def names_kineto_mangles(cols: EventColumns) -> dict[tuple[int, int], str]:
    """``(start, end) -> name`` of the events whose names kineto's JSON writer would change
    (non-ASCII, control characters, quotes, backslashes), for the exported trace to get them back.
    Checks each distinct name once; empty (and cheap) in the usual all-ASCII case."""
    bad = {name for name in set(cols.name) if mangled_by_kineto(name)}
    if not bad:
        return {}
    return {(s, e): name for name, s, e in zip(cols.name, cols.start, cols.end) if name in bad}


def event_names(result: Any) -> EventColumns:
    """Only the names and times of a result's host events (Python calls included), for
    :func:`names_kineto_mangles` when the full columns were not read."""
    flat, _ = _flatten(sorted(result.experimental_event_tree(), key=lambda e: e.start_time_ns), None)
    cols = EventColumns()
    if flat:
        pe = type(flat[0])
        cols.name = list(map(pe.name.fget, flat))
        cols.start = list(map(pe.start_time_ns.fget, flat))
        cols.end = list(map(pe.end_time_ns.fget, flat))
    return cols
