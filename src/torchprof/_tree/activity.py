"""What a run did in time, beyond the tree: per ``ProfilerStep``, how long any device stream was busy
and how long collective communication was in flight (``prof.by_rank()``), read from one cycle's
events before they are dropped."""

from __future__ import annotations

from itertools import compress
from typing import TYPE_CHECKING

from .._records import EventColumns
from .._vocab import COMM_RANGE_PREFIXES, HOST_RANGE_KINDS, DeviceWork, EventKind
from .device_time import covered, union_intervals, work_of

if TYPE_CHECKING:
    from .built import StepSpan

DEVICE = int(EventKind.DEVICE)
_HOST = frozenset(int(k) for k in HOST_RANGE_KINDS)


def is_communication(name: str, kind: int) -> bool:
    """A collective: a communication kernel on the device (as the GPU time split classes it), a
    c10d range on the host."""
    if kind == DEVICE:
        return work_of(name) == DeviceWork.COMM
    return kind in _HOST and name.startswith(COMM_RANGE_PREFIXES)


def cycle_activity(ev: EventColumns, steps: list[StepSpan], node_of: list[int], labels: list[str]) -> int:
    """Adds ``gpu_busy_ns`` (the union of device intervals inside the step, every stream and
    device) and ``comm_ns`` (the union of communication intervals inside it, host ranges and
    kernels alike: on a CPU backend the data moves on c10d's worker thread, on a GPU in NCCL's
    kernels) to each step of this cycle. Returns the cycle's communication time within its
    profiled span.

    ``node_of`` is the tree node of each host event and ``labels`` the nodes' names: a name is
    tested once per node, not once per event (testing 100k names costs more than this whole
    pass). Sorting costs O(k log k) for k intervals, each step O(log k) plus the intervals
    inside it."""
    names, kinds, starts, ends = ev.name, ev.kind, ev.start, ev.end
    comm_nodes = {nid for nid, label in enumerate(labels) if label.startswith(COMM_RANGE_PREFIXES)}
    # compress/map keep the per-event loops in C: this pass runs on every profile.
    device = list(compress(range(len(kinds)), map(DEVICE.__eq__, kinds)))
    kernel_comm = {name for name in {names[i] for i in device} if is_communication(name, DEVICE)}
    comm = [i for i in device if names[i] in kernel_comm]
    if comm_nodes:
        comm += [i for i in compress(range(len(node_of)), map(comm_nodes.__contains__, node_of)) if kinds[i] in _HOST]
    busy_spans = [(starts[i], ends[i]) for i in device]
    comm_spans = [(starts[i], ends[i]) for i in comm]
    busy = union_intervals(busy_spans)
    talk = union_intervals(comm_spans)
    busy_starts = [s for s, _ in busy]
    talk_starts = [s for s, _ in talk]
    for step in steps:
        lo = step["start_ns"]
        hi = lo + round(step["wall_us"] * 1000)
        step["gpu_busy_ns"] = covered(busy, busy_starts, lo, hi)
        step["comm_ns"] = covered(talk, talk_starts, lo, hi)
    if not talk:
        return 0
    lo, hi = ev.span if ev.span is not None else (talk[0][0], talk[-1][1])
    return covered(talk, talk_starts, lo, hi)
