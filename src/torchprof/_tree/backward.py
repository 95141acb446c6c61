"""Backward ownership: which layer ran the forward op behind each autograd sequence number."""

from __future__ import annotations

from bisect import bisect_right
from typing import Any


class _ThreadForward:
    """One forward thread's layer-level ops: exact by sequence number, and sorted for bisect."""

    __slots__ = ("exact", "ordered", "owners", "seqs")

    def __init__(self) -> None:
        self.exact: dict[int, int] = {}
        self.seqs: list[int] = []
        self.owners: list[int] = []
        self.ordered = True

    def add(self, seq: int, owner: int) -> None:
        self.exact[seq] = owner
        if self.seqs and seq < self.seqs[-1]:
            # Numbers only grow on one thread; a smaller one means the source merged threads
            # (events with no thread id): only exact matches are safe from here on.
            self.seqs.clear()
            self.owners.clear()
            self.ordered = False
        if self.ordered:
            self.seqs.append(seq)
            self.owners.append(owner)

    def owner(self, seq: int) -> int:
        owner = self.exact.get(seq)
        if owner is not None:
            return owner
        j = bisect_right(self.seqs, seq) - 1
        return self.owners[j] if j >= 0 else -1


class ForwardIndex:
    """Forward ops that sit directly in a layer, looked up by backward ops.

    torch links a backward op to its forward op by (sequence number, forward thread): the numbers
    come from a per-thread counter, so two threads reuse them. Forward ops are recorded per thread
    in time order. A backward op asks with the forward thread it names - in a trace file the
    "Fwd thread id", which is not one of the trace's thread ids, so the first match that only one
    thread can give teaches which thread it means - or with none (the live capture), and then the
    thread that recorded that number is used, preferring the backward op's own thread.

    Within one thread, numbers only grow, and every autograd node an op creates (its nested ops
    included) gets a number from that op's own up to the next layer-level op's: so the latest
    layer-level op at or below a backward op's number ran its forward (exact match first, then a
    bisect). Cost: O(1) per forward op, O(log n) per backward root (O(threads) when several
    threads recorded forward ops).

    ``fwd_ids_are_tids``: the forward-thread ids backward ops name are this source's own thread
    ids (the live capture), so they are looked up directly.
    """

    def __init__(self, fwd_ids_are_tids: bool = False) -> None:
        self._threads: dict[Any, _ThreadForward] = {}
        self._alias: dict[Any, Any] = {}  # a backward op's forward-thread id -> our thread key
        self._direct = fwd_ids_are_tids

    @property
    def several_threads(self) -> bool:
        """Whether more than one thread recorded forward ops (their numbers may then collide)."""
        return len(self._threads) > 1

    def add(self, thread: Any, seq: int, owner: int) -> None:
        forward = self._threads.get(thread)
        if forward is None:
            forward = self._threads[thread] = _ThreadForward()
        forward.add(seq, owner)

    def owner(self, seq: int, fwd_thread: Any = 0, thread: Any = None) -> int:
        """The layer node that ran forward op ``seq``; -1 when none is known."""
        if seq < 0:
            return -1
        threads = self._threads
        if len(threads) <= 1:
            for forward in threads.values():
                return forward.owner(seq)
            return -1
        if fwd_thread and self._direct:
            named = threads.get(fwd_thread)
            return named.owner(seq) if named is not None else -1
        if fwd_thread:
            known = self._alias.get(fwd_thread)
            if known is not None:
                return threads[known].owner(seq)
        candidates = [t for t, forward in threads.items() if seq in forward.exact]
        if len(candidates) == 1:
            if fwd_thread:
                self._alias[fwd_thread] = candidates[0]
            return threads[candidates[0]].exact[seq]
        if thread in threads and (not candidates or thread in candidates):
            return threads[thread].owner(seq)
        return threads[candidates[0]].exact[seq] if candidates else -1
