"""Moving placed events to other rows, with exact splits: what :mod:`~torchprof._tree.comm` uses to
put communication on the layers it serves.

An event moves with everything it ran: the ranges inside it, the allocations in them and the device
work they launched. Each lands on a copy of its row under the target (the copy of the moved
event's row becomes the target's child, and the rows below it follow), made once and then
reused. Each figure of each event (self CPU ns, device ns and its compute/comm/memcpy, overlapped
and idle parts, allocated bytes, exposed ns) is split over the targets by their weights in whole
units (:func:`shares`), so the parts add up exactly to what the event had; the part of a weight
that stays (``stay``) stays on the event's own rows. Calls are counted once: each moved range or
kernel counts its call on the part with the largest weight (the first of equal ones), so calls
summed by name stay the numbers of calls torch recorded, and a row whose parts were all smaller
shows time with no call of its own.

The self time of a moved range is recomputed as the builder computed it (its duration minus the
parts of its direct children inside it), and device work is found as the builder placed it (by
the correlation id of a runtime call inside the range, else by its External id), so a move takes
away exactly what the event added. Cost: O(events moved x targets), plus one sort of the cycle's
device activities when device work moves (its overlap and idle split, as the builder measured it).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from itertools import compress
from typing import TYPE_CHECKING, Any

from .._records import EventColumns
from .._vocab import EventKind
from .device_time import IDLE, OVERLAP, ROW, device_of, device_time
from .nodes import TAG_KERNEL

if TYPE_CHECKING:
    from .built import BuildState

OP, REGION, MODULE, RUNTIME, DEVICE, MEMORY = map(int, (
    EventKind.OP, EventKind.REGION, EventKind.MODULE, EventKind.RUNTIME, EventKind.DEVICE, EventKind.MEMORY))  # fmt: skip
#: The key of a backward copy of a row placed under a forward row, apart from a forward one.
_KEY_BACKWARD = "\x0e"


def shares(value: int, weights: list[int]) -> list[int]:
    """``value`` split in proportion to ``weights`` in whole units that add up to it exactly:
    each part rounded down, the rest handed out one by one to the largest remainders (the first
    of equal ones first)."""
    total = sum(weights)
    if total <= 0:
        return [value] + [0] * (len(weights) - 1)
    parts = [value * w // total for w in weights]
    left = value - sum(parts)
    if left:
        by_remainder = sorted(range(len(weights)), key=lambda k: (-(value * weights[k] % total), k))
        for k in by_remainder[:left]:
            parts[k] += 1
    return parts


@dataclass
class Target:
    """Where a part of an event goes: under ``parent`` (a layer's node) as ``bwd`` work."""

    parent: int
    weight: int
    bwd: bool


class EventMover:
    """Moves events of one placed cycle (see the module's docstring).

    ``events`` are the events that may move or lie inside one that does; ``exposed`` the node
    accumulator of exposed communication ns, ``exposed_of`` each event's own exposed ns."""

    def __init__(self, builder: BuildState, ev: EventColumns, parent_ev: list[int], node_of: list[int],
                 events: list[int], exposed: dict[int, int]) -> None:  # fmt: skip
        self.builder = builder
        self.nodes = builder.nodes
        self.ev = ev
        self.parent_ev = parent_ev
        self.node_of = node_of
        self.exposed = exposed
        self.exposed_of: dict[int, int] = {}
        kinds = ev.kind
        # Every event directly inside one of them, wherever the builder put it (a backward function
        # goes to its layer): its time is not its parent's self time.
        self.children: dict[int, list[int]] = {}
        inside = set(events)
        for i in compress(range(len(parent_ev)), map(inside.__contains__, parent_ev)):
            if kinds[i] != DEVICE:
                self.children.setdefault(parent_ev[i], []).append(i)
        self._device: Any = None
        self._key_of: dict[int, str] = {}
        self._mirror: dict[tuple[int, int, bool], int] = {}
        self.touched: set[int] = set()
        self.moved: set[int] = set()
        """The events moved (not those inside them): their exposed ns went with them."""

    def move(self, i: int, targets: list[Target], stay: int) -> None:
        """Move event ``i`` with everything it ran to copies of their rows under each target,
        each figure split by the targets' weights (``stay``: the weight of the part that stays).
        A whole move (one target, nothing staying) also puts the events on their new rows
        (``node_of``)."""
        ev, nodes, node_of = self.ev, self.nodes, self.node_of
        root = node_of[i]
        weights = [stay] + [t.weight for t in targets]
        owner = max(range(len(weights)), key=lambda k: (weights[k], -k))  # the part that counts the call
        whole = stay == 0 and len(targets) == 1
        starts, ends, kinds = ev.start, ev.end, ev.kind
        for j in self._subtree(i):
            node = node_of[j]
            if kinds[j] == MEMORY:
                column = nodes.cuda_mem if ev.on_cuda[j] else nodes.cpu_mem
                self._spread(node, root, targets, weights, column, ev.nbytes[j], -1)
                continue
            own = ends[j] - starts[j]
            for c in self.children.get(j, ()):
                if kinds[c] != MEMORY:
                    own -= min(ends[c], ends[j]) - starts[c]
            mirrors = self._spread(node, root, targets, weights, nodes.cpu_ns, own, owner)
            for d in self._kernels(j):
                self._move_kernel(d, node, root, targets, weights, owner)
            if whole and mirrors:
                node_of[j] = mirrors[0]
        self.moved.add(i)
        x = self.exposed_of.get(i, 0)
        if x:
            exposed = self.exposed
            parts = shares(x, weights)
            for mirror, part in zip(self._mirrors(root, root, targets), parts[1:]):
                exposed[mirror] = exposed.get(mirror, 0) + part
            if parts[0]:
                exposed[root] = exposed.get(root, 0) + parts[0]

    def _spread(self, node: int, root: int, targets: list[Target], weights: list[int], column: list[int], value: int,
                owner: int) -> list[int]:  # fmt: skip
        """``value`` of ``column`` at ``node`` shared out to its copies under the targets; the
        call moves to part ``owner`` (-1: no call, an allocation)."""
        mirrors = self._mirrors(node, root, targets)
        if not mirrors:
            return []
        parts = shares(value, weights)
        column[node] -= value - parts[0]
        for mirror, part in zip(mirrors, parts[1:]):
            column[mirror] += part
        if owner > 0:
            self.nodes.calls[node] -= 1
            self.nodes.calls[mirrors[owner - 1]] += 1
        self.touched.add(node)
        return mirrors

    def _mirrors(self, node: int, root: int, targets: list[Target]) -> list[int]:
        """``node``'s copy under each target, ``root`` (an ancestor of it, or itself) becoming the
        target's child; none when ``node`` is not below ``root``."""
        chain = [node]
        parent = self.nodes.parent
        while chain[-1] != root:
            p = parent[chain[-1]]
            if p < 0:
                return []
            chain.append(p)
        out = []
        for t in targets:
            at = t.parent
            for nid in reversed(chain):
                at = self._mirror_of(nid, at, t.bwd)
            out.append(at)
        return out

    def _mirror_of(self, nid: int, parent: int, bwd: bool) -> int:
        """The copy of row ``nid`` under ``parent``: backward work when ``bwd`` or its parent is.
        A backward copy under a forward row is keyed apart from a forward one of the same name."""
        key = (nid, parent, bwd)
        found = self._mirror.get(key)
        if found is not None:
            return found
        nodes = self.nodes
        backward = bwd or nodes.bwd[parent]
        child_key = self.key(nid)
        if backward and not nodes.bwd[parent]:
            child_key = _KEY_BACKWARD + child_key
        mirror = nodes.children[parent].get(child_key, -1)
        if mirror < 0:
            mirror = nodes.add(parent, nodes.kind[nid], nodes.label[nid], nodes.type[nid], backward, child_key)
            nodes.shapes[mirror] = nodes.shapes[nid]
            nodes.source[mirror] = nodes.source[nid]
            nodes.covered[mirror] = nodes.covered[mirror] or nodes.covered[nid]
        self._mirror[key] = mirror
        return mirror

    def key(self, nid: int) -> str:
        """The key of row ``nid`` among its parent's children."""
        key = self._key_of.get(nid)
        if key is None:
            for k, child in self.nodes.children[self.nodes.parent[nid]].items():
                self._key_of[child] = k
            key = self._key_of[nid]
        return key

    def _subtree(self, i: int) -> list[int]:
        out, stack = [], [i]
        while stack:
            j = stack.pop()
            out.append(j)
            stack.extend(self.children.get(j, ()))
        return out

    # -- device work launched inside moved events ------------------------------------------------------
    def _kernels(self, j: int) -> list[int]:
        """Device work the builder placed under event ``j``'s row because ``j`` launched it (as
        :meth:`~torchprof._tree.builder.TreeBuilder._add_device` places it): by the correlation
        id of a runtime call directly inside ``j``, else by ``j``'s own id (External id)."""
        ev = self.ev
        if not ev.corr or DEVICE not in ev.kind:
            return []
        by_corr, by_link = self._device_index()
        out: list[int] = []
        for c in self.children.get(j, ()):
            if ev.kind[c] == RUNTIME and ev.corr[c]:
                out += by_corr.get(ev.corr[c], ())
        if ev.ext_id and ev.ext_id[j] and ev.kind[j] in (OP, REGION, MODULE):
            out += by_link.get(ev.ext_id[j], ())
        return out

    def _device_index(self) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
        if self._device is None:
            ev = self.ev
            kinds, every = ev.kind, range(len(ev.kind))
            device = list(compress(every, map(DEVICE.__eq__, kinds)))
            # As the builder places device work: by the runtime call of its correlation id (under
            # the op around that call, if any), else by the op its External id names.
            runtime_corr = {ev.corr[i] for i in compress(every, map(RUNTIME.__eq__, kinds)) if ev.corr[i]}
            by_corr: dict[int, list[int]] = {}
            by_link: dict[int, list[int]] = {}
            for d in device:
                c = ev.corr[d]
                if c and c in runtime_corr:
                    by_corr.setdefault(c, []).append(d)
                elif ev.link[d]:
                    by_link.setdefault(ev.link[d], []).append(d)
            split = device_time([ev.name[d] for d in device], [ev.start[d] for d in device], [ev.end[d] for d in device],
                                [device_of(ev.tid[d]) for d in device], ev.span)  # fmt: skip
            self._device = (by_corr, by_link, {d: k for k, d in enumerate(device)}, split)
        return self._device[0], self._device[1]

    def _move_kernel(self, d: int, launcher: int, root: int, targets: list[Target], weights: list[int], owner: int) -> None:
        """Device activity ``d``, launched from row ``launcher`` that is moving, shared out with
        its device-time split (kind of work, overlapped comm, idle time it ended)."""
        ev, nodes = self.ev, self.nodes
        node = nodes.children[launcher].get(TAG_KERNEL + ev.name[d], -1)
        if node < 0:
            return
        dur = ev.end[d] - ev.start[d]
        mirrors = self._spread(node, root, targets, weights, nodes.cuda_ns, dur, owner)
        if not mirrors:
            return
        _, _, position, split = self._device
        k = position[d]
        values = [0] * ROW
        values[split.work[k]] = dur
        values[OVERLAP] = split.overlap_ns[k]
        values[IDLE] = split.idle_ns[k]
        per_node = self.builder.device_split
        row = per_node.setdefault(node, [0] * ROW)
        for f, value in enumerate(values):
            if value:
                parts = shares(value, weights)
                row[f] -= value - parts[0]
                for mirror, part in zip(mirrors, parts[1:]):
                    per_node.setdefault(mirror, [0] * ROW)[f] += part

    def finish(self) -> None:
        """Rows that every event left (no calls, no time, nothing below them) leave the tree,
        emptied parents after their children; not when memory over time may name them."""
        if self.builder.memory or not self.touched:
            return
        nodes, split, exposed = self.nodes, self.builder.device_split, self.exposed
        steps = {s["node"] for s in self.builder.steps}
        pending = [-nid for nid in self.touched]
        heapq.heapify(pending)
        seen = set(self.touched)
        while pending:
            nid = -heapq.heappop(pending)  # children (larger ids) before their parents
            p = nodes.parent[nid]
            if p < 0 or nid in steps or nodes.children[nid] or nodes.calls[nid] or nodes.cpu_ns[nid] or nodes.cuda_ns[nid]:
                continue
            if nodes.cpu_mem[nid] or nodes.cuda_mem[nid] or nodes.macs[nid] or nodes.flops[nid] or exposed.get(nid):
                continue
            if any(split.get(nid, ())):
                continue
            nodes.children[p].pop(self.key(nid), None)
            split.pop(nid, None)
            if p not in seen:
                seen.add(p)
                heapq.heappush(pending, -p)
