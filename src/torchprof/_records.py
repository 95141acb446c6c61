"""Plain records: what capture and trace loading hand to the tree builder.

Both sources (a live ``torch.profiler`` run and a chrome-trace file) are reduced to the same
column-wise :class:`EventColumns`, so the tree never knows where its events came from and a trace
exported by torchprof and read back yields the same profile.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ._vocab import MODULE_PREFIX


def is_user_frame(name: str) -> bool:
    """A Python frame in the user's code, not in torch or another installed package."""
    return not (
        name.startswith(("torch/", "torchprof/", "<", MODULE_PREFIX, "threading.py", "runpy.py"))
        or "site-packages/" in name
        or "/torch/" in name
        or "/torchprof/" in name
        or "/lib/python3" in name
    )


def module_range_name(path: str, type_name: str) -> str:
    """The record_function name torchprof uses for one module call."""
    return f"{MODULE_PREFIX}{path} [{type_name}]"


def parse_module_range(name: str) -> tuple[str, str] | None:
    """``(path, type)`` of a torchprof module range, or None for any other name.

    torch's own python tracer emits ``nn.Module: Conv2d_0`` (no ``[Type]``); those are handled by
    the trace loader, which only uses them when a trace has no torchprof ranges.
    """
    if not name.startswith(MODULE_PREFIX) or not name.endswith("]"):
        return None
    start = len(MODULE_PREFIX)
    cut = name.rfind(" [", start, len(name) - 1)
    if cut <= start:
        return None
    return name[start:cut], name[cut + 2 : -1]  # one copy of the path, however deep it is


@dataclass
class ModuleInfo:
    """What the hooks learnt about one module path (not in the trace events themselves)."""

    type: str
    params: int
    """Parameters of the module and its children, each tensor counted once."""
    param_bytes: int
    op_args: dict[str, Any] | None = None
    """Hyper-parameters of a convolution or pooling layer (stride, padding, ...), which the live
    profiler's op records omit, and which gradients its backward computes."""


@dataclass
class EventColumns:
    """One profiling cycle's events, column-wise: index ``i`` is one event in every list.

    Times are integer nanoseconds on the profiler's clock. ``tid`` groups CPU events by thread;
    for device events it is the stream. ``link`` joins device and runtime events to the operator
    that was innermost when they were issued (kineto's linked correlation / "External id");
    ``corr`` joins a device event to its runtime call (the CUPTI correlation id).
    """

    name: list[str] = field(default_factory=list)
    kind: list[int] = field(default_factory=list)
    tid: list[Any] = field(default_factory=list)
    start: list[int] = field(default_factory=list)
    end: list[int] = field(default_factory=list)
    seq: list[int] | None = field(default_factory=list)
    """Autograd sequence number, -1 when none. None when only ``seq_of`` can tell (lazily)."""
    seq_of: Callable[[int], int] | None = None
    fwd_tid: list[int] = field(default_factory=list)
    """0 for forward ops; for backward ops the (profiler) id of the thread that ran forward."""
    ext_id: list[int] = field(default_factory=list)
    """The event's own correlation id (CPU ops) - what ``link`` of device events points at."""
    link: list[int] = field(default_factory=list)
    corr: list[int] = field(default_factory=list)
    nbytes: list[int] = field(default_factory=list)
    """Memory events: bytes allocated (positive) or freed (negative)."""
    on_cuda: list[bool] = field(default_factory=list)
    """Memory events: True for device memory, False for host memory."""
    mem_total: list[int] = field(default_factory=list)
    """Memory events: bytes allocated on that device right after the event (for the peak)."""
    parent: list[int] | None = None
    """Index of each event's enclosing range, when the source already knows the nesting. Then
    the events are in pre-order with roots by start time and need no sorting."""
    frame: list[str | None] | None = None
    """With Python stacks recorded: the innermost user-code frame (``file.py(12): fn``) each
    event ran under; None without stacks."""
    inputs: Callable[[int], tuple[list, list] | None] = lambda i: None
    """``(shapes, concrete values)`` of event ``i``'s arguments, read lazily (it is the slow part):
    a tensor gives its sizes and ``None``, anything else ``[]`` and its value."""
    full_concrete: Callable[[int], list | None] | None = None
    """Slow but complete concrete values of event ``i`` (int lists included), for the rare op
    whose FLOPs need them and whose module does not say (a functional convolution)."""

    def __len__(self) -> int:
        return len(self.name)


@dataclass
class Recording:
    """Everything one source (a live run, a trace file) tells besides the tree's events."""

    cycles: list[EventColumns] = field(default_factory=list)
    """Events not yet folded into a tree (a trace file's one cycle); emptied once folded."""
    modules: dict[str, ModuleInfo] = field(default_factory=dict)
    """Keyed by module path as it appears in the module range names."""
    wall_us: float | None = None
    """Wall time of the profiled block (the trace span when loading a file)."""
    label: str = "profile"
    meta: dict[str, Any] = field(default_factory=dict)
    """Facts about the source (device names, distributed rank, file name, options recorded)."""
