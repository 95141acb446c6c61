"""What a run did in time, beyond the tree: per ``ProfilerStep``, how long any device stream was busy
and how long collective communication was in flight (``prof.by_rank()``), read from one cycle's
events before they are dropped."""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

from .._records import EventColumns
from .._vocab import COMM_KERNEL_PREFIXES, COMM_RANGE_PREFIXES, HOST_RANGE_KINDS, EventKind

DEVICE = int(EventKind.DEVICE)
_HOST = frozenset(int(k) for k in HOST_RANGE_KINDS)


def is_communication(name: str, kind: int) -> bool:
    """A collective: an NCCL/RCCL kernel on the device, a c10d range on the host."""
    if kind == DEVICE:
        return name.lower().startswith(COMM_KERNEL_PREFIXES)
    return kind in _HOST and name.startswith(COMM_RANGE_PREFIXES)


def merge_intervals(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The union of ``spans`` as sorted, disjoint intervals. O(k log k)."""
    out: list[tuple[int, int]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def covered(merged: list[tuple[int, int]], starts: list[int], lo: int, hi: int) -> int:
    """How much of ``[lo, hi)`` the disjoint sorted intervals ``merged`` (``starts`` their starts)
    cover. O(log k + the intervals inside)."""
    total = 0
    j = max(0, bisect_right(starts, lo) - 1)
    while j < len(merged) and merged[j][0] < hi:
        s, e = merged[j]
        if e > lo:
            total += min(e, hi) - max(s, lo)
        j += 1
    return total


def cycle_activity(ev: EventColumns, steps: list[dict[str, Any]]) -> int:
    """Adds ``gpu_busy_ns`` (the union of device intervals inside the step, every stream and
    device) and ``comm_ns`` (the union of communication intervals inside it, host ranges and
    kernels alike: on a CPU backend the data moves on c10d's worker thread, on a GPU in NCCL's
    kernels) to each step of this cycle. Returns the cycle's communication time within its
    profiled span. Names are tested once each; sorting costs O(k log k) for k intervals, each
    step O(log k) plus the intervals inside it."""
    names, kinds, starts, ends = ev.name, ev.kind, ev.start, ev.end
    is_comm: dict[tuple[str, int], bool] = {}
    device: list[tuple[int, int]] = []
    comm: list[tuple[int, int]] = []
    for i, k in enumerate(kinds):
        if k != DEVICE and k not in _HOST:
            continue
        key = (names[i], k)
        c = is_comm.get(key)
        if c is None:
            c = is_comm[key] = is_communication(names[i], k)
        if k == DEVICE:
            device.append((starts[i], ends[i]))
        if c:
            comm.append((starts[i], ends[i]))
    busy = merge_intervals(device)
    talk = merge_intervals(comm)
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
