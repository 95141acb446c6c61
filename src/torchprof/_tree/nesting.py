"""Nesting: which CPU range each event sits in, for sources that do not say (trace files)."""

from __future__ import annotations

from typing import Any

from .._records import EventColumns, is_user_frame
from .._vocab import HOST_RANGE_KINDS, EventKind

MEMORY, PYFRAME = int(EventKind.MEMORY), int(EventKind.PYFRAME)
#: Events that take part in nesting: CPU ranges, memory events (which are never parents) and
#: Python frames (which are never nodes).
NESTED = frozenset(int(k) for k in HOST_RANGE_KINDS) | {MEMORY, PYFRAME}
_OUTER_FIRST = {int(EventKind.MODULE): 0, int(EventKind.REGION): 1}
_END_BOUND = 2**63


def nest(ev: EventColumns) -> tuple[list[int], list[int], list[int]]:
    """Order CPU ranges and memory events by (start, longer first, modules and regions first) and
    find each one's parent:
    the innermost range of the same thread that is still open when it starts.

    One nesting rule holds for ranges that outlive their parent (an async collective such as
    ``hccl:all_to_all`` opened inside ``c10d::alltoall_base_`` and ending long after it): a range
    ends, for the tree, no later than its parent (returned as the third list, each event's end
    clipped to its parent's clipped end; ``ev.end`` keeps the recorded ends). So what starts after
    the parent ended is not inside it, no total exceeds the time its parent covered, and the cut
    part (the overrun) is counted apart by the builder, never in a total.

    Python frames (``with_stack`` traces) nest like ranges but are not parents (nor clip what
    outlives them): each stack entry
    carries the nearest real range and the nearest user-code frame at or below it, so both are
    found in O(1) and written to ``ev.frame``. Cost: one sort plus O(1) amortised per event.
    """
    kinds, tids, starts, ends, names = ev.kind, ev.tid, ev.start, ev.end, ev.name
    order = [i for i, k in enumerate(kinds) if k in NESTED]
    # Equal spans nest by kind: a module outside a region outside anything else (in a trace of
    # whole µs, a layer and its only op can share both ends). One integer per key, not a tuple of
    # three (a sort holds every key at once): start, then the end backward (2**63 - end is in
    # [0, 2**64): times are int64), then the kind's rank in the two lowest bits.
    rank = _OUTER_FIRST
    order.sort(key=lambda i: (starts[i] << 66) + ((_END_BOUND - ends[i]) << 2) + rank.get(kinds[i], 2))
    n = len(kinds)
    parent = [-1] * n
    clipped = ends  # copied at the first range that outlives its parent
    has_frames = PYFRAME in kinds
    frame: list[str | None] = [None] * n if has_frames else []
    real = list(range(n)) if has_frames else []  # nearest non-frame range at or above each entry
    stacks: dict[Any, list[int]] = {}
    last_tid: Any = object()
    stack: list[int] = []
    for i in order:
        tid = tids[i]
        if tid != last_tid:
            stack = stacks.setdefault(tid, [])
            last_tid = tid
        s = starts[i]
        while stack and clipped[stack[-1]] <= s:
            stack.pop()
        k = kinds[i]
        if stack:
            # Python frames are not parents: a range outliving the frame it opened in (a module
            # range its hook opened) is clipped only by the range around that frame.
            outer = real[stack[-1]] if has_frames else stack[-1]
            if outer >= 0 and ends[i] > clipped[outer]:
                if clipped is ends:
                    clipped = list(ends)
                clipped[i] = clipped[outer]
        if has_frames:
            top = stack[-1] if stack else -1
            parent[i] = real[top] if top >= 0 else -1
            inherited = frame[top] if top >= 0 else None
            if k == PYFRAME:
                real[i] = parent[i]
                frame[i] = names[i] if is_user_frame(names[i]) else inherited
            else:
                frame[i] = inherited
        elif stack:
            parent[i] = stack[-1]
        if k != MEMORY:
            stack.append(i)
    if has_frames:
        ev.frame = frame
        order = [i for i in order if kinds[i] != PYFRAME]
    return order, parent, clipped
