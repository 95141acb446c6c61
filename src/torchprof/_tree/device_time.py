"""Where device time goes, for one cycle's device activities: what each one does (compute,
communication, memcpy/memset), how much of each communication kernel ran beside compute, and which
activity ended each idle gap of the device.

What "idle while a layer ran" means here. The device is idle when no stream of any device runs
anything; inside the device window (first device start to last device end, clipped to the
profiled span as for ``gpu_busy_us``) each such gap ends when some activity starts, and the gap
goes to that activity, so to the node that launched it: the device was waiting for that launch (a
host that had not issued it yet, or work it depended on). Every idle nanosecond of the window then
belongs to exactly one activity, so the nodes' idle times add up (``total = self + children``)
and the root's is the run's idle time, the figure Holistic Trace Analysis reports. The other
readings considered add up to nothing: a layer's own device window (its first kernel's start to
its last kernel's end) overlaps the windows of the layers beside it on other streams, and its
host range mapped to the device timeline counts a gap once per thread that had a range open
(forward and backward threads) and charges the host code of layer N for the device still running
layer N-1's queued kernels.

Overlap is per device: a communication kernel on GPU 0 is hidden only by compute on GPU 0, on any
of its streams; a trace file names the device of each activity (its ``pid``), a live capture
records one device's streams.

Pure Python, no torch; O(k log k) for k activities (sorting), nothing kept but the results.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._vocab import DEVICE_WORK_PATTERNS, DeviceWork

COMPUTE, COMM, MEMCPY = int(DeviceWork.COMPUTE), int(DeviceWork.COMM), int(DeviceWork.MEMCPY)
WORKS = len(DeviceWork)
#: Fields of a node's device-time row (``TreeBuilder.device_split``), after the ns of each
#: DeviceWork: the comm ns that compute on the same device hid, and the idle ns the node's work
#: ended. The run's totals (``TreeBuilder.device_union_ns``) are the DeviceWork unions, then the
#: comm/compute overlap at ``OVERLAP``.
OVERLAP, IDLE = WORKS, WORKS + 1
ROW = WORKS + 2
_PATTERNS = tuple((int(work), re.compile(pattern)) for work, pattern in DEVICE_WORK_PATTERNS)


def work_of(name: str) -> int:
    """The :class:`~torchprof._vocab.DeviceWork` of a device activity, from its name."""
    for work, pattern in _PATTERNS:
        if pattern.match(name):
            return work
    return COMPUTE


def device_of(tid: Any) -> Any:
    """The device of a device activity: a trace file's ``(pid, stream)`` gives its pid; a live
    capture's bare stream id, one device for all."""
    return tid[0] if type(tid) is tuple else None


@dataclass
class DeviceTime:
    """One cycle's device time, per activity (in the order given) and for the cycle."""

    work: list[int]
    """The :class:`~torchprof._vocab.DeviceWork` of each activity."""
    overlap_ns: list[int]
    """For a communication kernel, the ns of it during which compute ran on its device; else 0."""
    idle_ns: list[int]
    """The device idle gap (ns) that ended when the activity started; 0 for most."""
    union_ns: list[int]
    """Per :class:`~torchprof._vocab.DeviceWork`: the time that kind of work ran, as the union of
    its intervals per device, summed over devices, within the profiled span."""
    comm_overlap_ns: int
    """The time communication and compute ran together on a device, summed over devices, within
    the profiled span (HTA's comm/comp overlap, before dividing by the communication time)."""


def device_time(names: Sequence[str], starts: Sequence[int], ends: Sequence[int], devices: Sequence[Any],
                span: tuple[int, int] | None) -> DeviceTime:  # fmt: skip
    """Classify the activities by name, measure each communication kernel against the compute of
    its device, and give each idle gap of the window (clipped to ``span``, as ``gpu_busy_us`` is)
    to the activity that ended it. Unions and overlaps are taken over intervals that may touch:
    touching intervals merge, so they leave no gap."""
    k = len(names)
    known = {name: work_of(name) for name in set(names)}
    work = list(map(known.__getitem__, names))
    raw: dict[tuple[Any, int], list[tuple[int, int]]] = {}
    for key, s, e in zip(zip(devices, work), starts, ends):
        spans = raw.get(key)
        if spans is None:
            spans = raw[key] = []
        spans.append((s, e))
    unions = {key: union_intervals(spans) for key, spans in raw.items()}

    overlap = [0] * k
    if COMM in known.values():
        compute_starts = {key: [lo for lo, _ in spans] for key, spans in unions.items() if key[1] == COMPUTE}
        for i, w in enumerate(work):
            if w == COMM:
                compute = unions.get((devices[i], COMPUTE))
                if compute:
                    overlap[i] = covered(compute, compute_starts[(devices[i], COMPUTE)], starts[i], ends[i])

    union_ns = [0] * WORKS
    comm_overlap = 0
    clipped = {key: _clip(spans, span) for key, spans in unions.items()}
    for (dev, w), spans in clipped.items():
        union_ns[w] += sum(e - s for s, e in spans)
        if w == COMM:
            comm_overlap += _intersection(spans, clipped.get((dev, COMPUTE), []))
    return DeviceTime(work, overlap, _idle_gaps(starts, ends, span), union_ns, comm_overlap)


def _idle_gaps(starts: Sequence[int], ends: Sequence[int], span: tuple[int, int] | None) -> list[int]:
    """Per activity, the gap in which no activity ran that ended when it started. Activities are
    swept by start (ties: the one recorded first takes the gap) with the latest end seen so far;
    the gaps are exactly the idle time of the window, as ``TreeBuilder._add_busy`` counts it (the
    same clipping, the same intervals dropped)."""
    k = len(starts)
    if span is not None:
        lo, hi = span
        s_of = [max(s, lo) for s in starts]
        e_of = [min(e, hi) for e in ends]
        order = sorted((i for i in range(k) if e_of[i] > s_of[i]), key=s_of.__getitem__)
    else:
        s_of, e_of = list(starts), list(ends)
        order = sorted(range(k), key=s_of.__getitem__)  # a stable sort: ties keep recorded order
    idle = [0] * k
    if not order:
        return idle
    last = e_of[order[0]]
    for i in order:
        s = s_of[i]
        if s > last:
            idle[i] = s - last
        if e_of[i] > last:
            last = e_of[i]
    return idle


def union_intervals(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Disjoint sorted intervals covering ``spans`` (touching ones merged; sorts ``spans``)."""
    if not spans:
        return []
    spans.sort()
    out: list[tuple[int, int]] = []
    cur_s, cur_e = spans[0]
    for s, e in spans:
        if s > cur_e:
            out.append((cur_s, cur_e))
            cur_s, cur_e = s, e
        elif e > cur_e:
            cur_e = e
    out.append((cur_s, cur_e))
    return out


def _clip(spans: list[tuple[int, int]], span: tuple[int, int] | None) -> list[tuple[int, int]]:
    if span is None:
        return spans
    lo, hi = span
    return [(max(s, lo), min(e, hi)) for s, e in spans if min(e, hi) > max(s, lo)]


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


def _intersection(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    """Length of the intersection of two disjoint sorted interval lists (a merge walk)."""
    i = j = total = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total
