"""Memory over time: what each layer keeps for backward, the highest total while each node ran,
the run's peak (when, in which node, what it is made of) and the timeline of allocated bytes.

Pure Python, fed by the builder's memory stage one cycle at a time (:meth:`MemoryLedger.add_cycle`)
and read once the tree is finished. Nothing per raw event is kept across cycles except the
timeline, which is thinned to :data:`TIMELINE_CAP` points per device.

Where each figure comes from:

- the allocator's running total after each event (``Total Allocated``; the running sum of what
  the profile saw where a source has none) gives the peaks and the timeline;
- the block address of each event (``Addr``) pairs a free with its allocation, which tells how
  long each allocation lived: what a forward keeps, and what is alive at the peak;
- the ranges around an allocation tell where it was made (a layer's forward, backward work, an
  optimizer step), and the capture's known tensors (parameters, gradients and optimizer state by
  address, :class:`~torchprof._records.KnownTensor`) name the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .._records import EventColumns, KnownTensor
from .._vocab import (
    BEFORE_PROFILING,
    HOST_RANGE_KINDS,
    MEMORY_CATEGORIES,
    OPTIMIZER_PREFIX,
    OPTIMIZER_STEP_PREFIX,
    PHASES,
    ZERO_GRAD_PREFIX,
    EventKind,
)
from .nodes import Nodes

MODULE, REGION = int(EventKind.MODULE), int(EventKind.REGION)
_HOST = frozenset(int(k) for k in HOST_RANGE_KINDS)
#: Device key of host memory (device memory is keyed by its device index).
CPU = -1
#: The free time of a block not freed within its cycle.
NEVER = 1 << 62
#: Timeline points kept per device; a longer run is thinned, each time bucket keeping its lowest
#: and its highest point, so the peak and the troughs survive.
TIMELINE_CAP = 50_000
FORWARD, BACKWARD, OPTIMIZER, OTHER = (PHASES.index(p) for p in ("forward", "backward", "optimizer", "other"))


def device_name(key: int) -> str:
    """``cpu`` for host memory, ``cuda:N`` for device N (any accelerator, as the ``cuda_`` columns)."""
    return "cpu" if key == CPU else f"cuda:{key}"


def minmax_thin(times: Sequence[float], values: Sequence[float], buckets: int) -> list[int]:
    """Indices of the points to keep so that at most ``2 * buckets`` remain: the time span is cut
    into ``buckets`` equal parts and each keeps its lowest and its highest point (in time order),
    so the highest point of all, the peak, always survives. The first and last points stay.
    ``times`` must be sorted. O(points)."""
    n = len(times)
    if n <= 2 * buckets or buckets < 1:
        return list(range(n))
    t0, span = times[0], (times[-1] - times[0]) or 1
    keep: list[int] = [0]
    lo = hi = -1
    current = 0
    for i in range(1, n - 1):
        b = min(buckets - 1, int((times[i] - t0) * buckets / span))
        if b != current:
            keep.extend(sorted({lo, hi}) if lo >= 0 else ())
            lo = hi = -1
            current = b
        v = values[i]
        if lo < 0 or v < values[lo]:
            lo = i
        if hi < 0 or v > values[hi]:
            hi = i
    if lo >= 0:
        keep.extend(sorted({lo, hi}))
    keep.append(n - 1)
    return keep


@dataclass
class PeakSnapshot:
    """The highest total one device reached, and what was alive at that moment, kept until a
    later cycle goes higher. Known tensors are applied at the end (:func:`breakdown`), when all
    of them are known."""

    device: int
    bytes: int
    time_ns: int
    node: int
    """The deepest node running: the node of the memory event that reached the peak."""
    live: list[tuple[int, int, int, int, str, int]] | None
    """Allocations of the cycle alive at the peak: ``(address, bytes, allocated at, freed at or
    NEVER, category from where it was made, layer node or -1)``; None when the source records no
    addresses (then nothing can be said of what the peak is made of)."""
    before: int
    """Bytes alive at the peak allocated before the cycle (the total minus ``live``)."""
    first_alloc: dict[int, int]
    """Address -> time of its first allocation in the cycle."""
    orphan_free: dict[int, int]
    """Address -> time a block allocated before the cycle was freed at it."""
    span: tuple[int, int]
    """First and last memory event of the cycle."""


class MemoryLedger:
    """The memory facts of a run, cycle after cycle, per node and per device."""

    def __init__(self, nodes: Nodes) -> None:
        self.nodes = nodes
        self.act: tuple[dict[int, int], dict[int, int]] = ({}, {})
        """Host and device bytes each forward layer node kept at the end of its forward."""
        self.node_peak: tuple[dict[int, int], dict[int, int]] = ({}, {})
        """Highest host and device total while each node's own ranges ran (children not rolled up)."""
        self.peaks: dict[int, PeakSnapshot] = {}
        self.has_addresses = False
        self.devices: set[int] = set()
        self.timeline: dict[int, tuple[list[int], list[int], list[int]]] = {}
        """Per device: times (ns), totals after each event, node running."""
        self.origin: int | None = None
        self._running: dict[int, int] = {}  # running sums where the source records no totals
        self._forward_layer: dict[int, bool] = {}
        self.baseline: dict[int, int] = {}
        """Per device: bytes alive at the peak that the allocator's total does not count, set by
        :meth:`settle` (host tensors from before the profiler started, known by address: torch's
        host total counts only blocks allocated while it records memory)."""

    # -- facts of nodes ---------------------------------------------------------------------------
    def is_forward_layer(self, nid: int) -> bool:
        """A module's forward call, or a user region inside one: the ranges whose kept bytes count."""
        known = self._forward_layer.get(nid)
        if known is None:
            nodes = self.nodes
            kind = nodes.kind[nid]
            known = not nodes.bwd[nid] and nid > 0 and (
                kind == MODULE or (kind == REGION and nodes.owner[nid] == nid and nodes.nearest_module(nodes.parent[nid]) >= 0))  # fmt: skip
            self._forward_layer[nid] = known
        return known

    def _in_zero_grad(self, nid: int) -> bool:
        nodes = self.nodes
        while nid >= 0:
            if nodes.kind[nid] == REGION and nodes.label[nid].startswith(ZERO_GRAD_PREFIX):
                return True
            nid = nodes.parent[nid]
        return False

    # -- one cycle --------------------------------------------------------------------------------
    def add_cycle(self, ev: EventColumns, mem_events: list[int], node_of: list[int]) -> None:
        """Fold one cycle's memory events in, in two passes.

        1. Memory events in time order: each device's total after each event, the free that
           ends each allocation (same device and address), the cycle's highest total per device
           and the timeline.
        2. A sweep over CPU ranges and memory events by time, with one stack of open ranges per
           thread (ranges nest by time on their thread): a range opens with the device's current
           total, every memory event raises the total of the innermost open range of each
           thread, and a closing range hands its maximum to the range around it; so each range
           ends up with the highest total while it was open, in O(1) per event and thread.
           Each allocation also credits the forward layers around it that end before it is
           freed (walking its thread's stack from the top, stopping at the first range still
           open when it is freed), which is what each layer keeps.

        Cost: one sort of the cycle's ranges, O(events * threads) for the sweep plus the stack
        depth per long-lived allocation; a cycle that sets a new peak also lists what is alive then.
        """
        starts, ends = ev.start, ev.end
        n = len(ev)
        if not mem_events:
            return
        mem = sorted(mem_events, key=starts.__getitem__)
        keys, totals, free_of, first_alloc, orphan_free, best, init = self._pair(ev, mem, node_of)
        if not keys:
            return
        kinds = ev.kind
        ranges = [i for i in range(n) if kinds[i] in _HOST and node_of[i] >= 0]
        ranges.sort(key=lambda i: (starts[i], -ends[i]))
        if self.origin is None:
            self.origin = min(starts[mem[0]], starts[ranges[0]]) if ranges else starts[mem[0]]
        beats = {key: (v, k) for key, (v, k) in best.items() if key not in self.peaks or v > self.peaks[key].bytes}
        alive_at: dict[int, list[int]] = {}  # device -> allocation events alive at the new peak
        if beats:
            position = {i: k for k, i in enumerate(mem)}
            for key, (_, at) in beats.items():
                alive_at[key] = [i for i in mem[: at + 1] if keys.get(i) == key and ev.nbytes[i] > 0
                                 and (free_of.get(i, -1) < 0 or position[free_of[i]] > at)]  # fmt: skip
        wanted = {i for alive in alive_at.values() for i in alive}
        # Tensors seen until the cycle's last range ends belong to it: an optimizer step's state
        # is read right after the step, often after the cycle's last allocation.
        cycle_end = max([starts[mem[-1]], *(ends[i] for i in ranges)])
        context = self._sweep(ev, mem, ranges, node_of, keys, totals, free_of, init, wanted, bool(first_alloc))
        for key, (v, at) in beats.items():
            i = mem[at]
            self.peaks[key] = self._snapshot(ev, key, v, i, alive_at[key] if first_alloc else None, node_of, free_of, context,
                                             first_alloc.get(key, {}), orphan_free.get(key, {}),
                                             (starts[mem[0]], cycle_end))  # fmt: skip

    def _pair(self, ev: EventColumns, mem: list[int], node_of: list[int]) -> tuple[Any, ...]:
        """Pass 1: device key, total and timeline point of each event; frees paired with
        allocations; each device's highest total in the cycle and its total before the cycle."""
        starts, nbytes, on_cuda = ev.start, ev.nbytes, ev.on_cuda
        n = len(ev)
        addrs = ev.mem_addr if ev.mem_addr else None
        devs = ev.mem_device if ev.mem_device else None
        recorded = ev.mem_total if len(ev.mem_total) == n and any(ev.mem_total[i] for i in mem) else None
        keys: dict[int, int] = {}
        totals: dict[int, int] = {}
        free_of: dict[int, int] = {}
        open_blocks: dict[tuple[int, int], int] = {}
        first_alloc: dict[int, dict[int, int]] = {}
        orphan_free: dict[int, dict[int, int]] = {}
        best: dict[int, tuple[int, int]] = {}
        init: dict[int, int] = {}
        running = self._running
        for k, i in enumerate(mem):
            b = nbytes[i]
            if not b:
                continue
            if on_cuda[i]:
                key = devs[i] if devs is not None and i < len(devs) and devs[i] >= 0 else 0
            else:
                key = CPU
            if recorded is not None:
                v = recorded[i]
            else:
                v = running.get(key, 0) + b
                running[key] = v
            if key not in init:
                init[key] = v - b
                if key not in self.timeline:
                    self.timeline[key] = ([], [], [])
                    self.devices.add(key)
            keys[i] = key
            totals[i] = v
            addr = addrs[i] if addrs is not None and i < len(addrs) else 0
            if addr:
                t = starts[i]
                if b > 0:
                    open_blocks[(key, addr)] = i
                    first_alloc.setdefault(key, {}).setdefault(addr, t)
                else:
                    j = open_blocks.pop((key, addr), -1)
                    if j >= 0:
                        free_of[j] = i
                    elif addr not in first_alloc.get(key, ()):
                        orphan_free.setdefault(key, {}).setdefault(addr, t)
            if key not in best or v > best[key][0]:
                best[key] = (v, k)
        if first_alloc:
            self.has_addresses = True
        self._add_timeline(ev, mem, keys, totals, node_of)
        return keys, totals, free_of, first_alloc, orphan_free, best, init

    def _add_timeline(self, ev: EventColumns, mem: list[int], keys: dict[int, int], totals: dict[int, int],
                      node_of: list[int]) -> None:  # fmt: skip
        starts = ev.start
        for i in mem:
            key = keys.get(i)
            if key is None:
                continue
            times, values, where = self.timeline[key]
            times.append(starts[i])
            values.append(totals[i])
            where.append(node_of[i])
        for key, (times, values, where) in self.timeline.items():
            if len(times) > TIMELINE_CAP:
                keep = minmax_thin(times, values, TIMELINE_CAP // 2)
                self.timeline[key] = ([times[j] for j in keep], [values[j] for j in keep], [where[j] for j in keep])

    def _sweep(self, ev: EventColumns, mem: list[int], ranges: list[int], node_of: list[int], keys: dict[int, int],
               totals: dict[int, int], free_of: dict[int, int], init: dict[int, int],
               wanted: set[int], addresses: bool) -> dict[int, tuple[int, int, int, int]]:  # fmt: skip
        """Pass 2 (see :meth:`add_cycle`): node peaks, kept bytes, and where each allocation in
        ``wanted`` was made: ``(innermost forward layer range, outermost backward range,
        innermost optimizer step range, outermost range)``, -1 for none."""
        starts, ends, tids, nbytes, names = ev.start, ev.end, ev.tid, ev.nbytes, ev.name
        nodes = self.nodes
        bwd = nodes.bwd
        forward_layer = self.is_forward_layer
        peak_cpu, peak_dev = self.node_peak
        act_cpu, act_dev = self.act
        n = len(ev)
        acc_cpu = [-1] * n
        acc_dev = [-1] * n
        device_totals = {key: v for key, v in init.items() if key != CPU}
        cur_cpu = init.get(CPU, -1)
        cur_dev = max(device_totals.values(), default=-1)
        stacks: dict[Any, list[int]] = {}
        context: dict[int, tuple[int, int, int, int]] = {}

        def close(stack: list[int], until: int) -> None:
            while stack and ends[stack[-1]] <= until:
                r = stack.pop()
                node = node_of[r]
                c, d = acc_cpu[r], acc_dev[r]
                if c > peak_cpu.get(node, -1):
                    peak_cpu[node] = c
                if d > peak_dev.get(node, -1):
                    peak_dev[node] = d
                if stack:
                    p = stack[-1]
                    if c > acc_cpu[p]:
                        acc_cpu[p] = c
                    if d > acc_dev[p]:
                        acc_dev[p] = d

        ri = mi = 0
        n_ranges, n_mem = len(ranges), len(mem)
        while ri < n_ranges or mi < n_mem:
            if mi >= n_mem or (ri < n_ranges and starts[ranges[ri]] <= starts[mem[mi]]):
                r = ranges[ri]
                ri += 1
                stack = stacks.get(tids[r])
                if stack is None:
                    stack = stacks[tids[r]] = []
                close(stack, starts[r])
                acc_cpu[r] = cur_cpu
                acc_dev[r] = cur_dev
                stack.append(r)
                continue
            i = mem[mi]
            mi += 1
            key = keys.get(i)
            if key is None:
                continue
            s = starts[i]
            for stack in stacks.values():
                if stack and ends[stack[-1]] <= s:
                    close(stack, s)
            v = totals[i]
            if key == CPU:
                cur_cpu = v
                for stack in stacks.values():
                    if stack and v > acc_cpu[stack[-1]]:
                        acc_cpu[stack[-1]] = v
            else:
                device_totals[key] = v
                cur_dev = max(device_totals.values())
                for stack in stacks.values():
                    if stack and v > acc_dev[stack[-1]]:
                        acc_dev[stack[-1]] = v
            b = nbytes[i]
            if b <= 0 or not addresses:
                continue
            stack = stacks.get(tids[i]) or []
            j = free_of.get(i, -1)
            freed = starts[j] if j >= 0 else NEVER
            act = act_cpu if key == CPU else act_dev
            for r in reversed(stack):
                if ends[r] >= freed:
                    break
                node = node_of[r]
                if forward_layer(node):
                    act[node] = act.get(node, 0) + b
            if i in wanted:
                layer = backward = step = -1
                for r in reversed(stack):
                    node = node_of[r]
                    if layer < 0 and forward_layer(node):
                        layer = r
                    if bwd[node]:
                        backward = r
                    if step < 0 and names[r].startswith(OPTIMIZER_STEP_PREFIX):
                        step = r
                context[i] = (layer, backward, step, stack[0] if stack else -1)
        for stack in stacks.values():
            close(stack, NEVER)
        return context

    def _snapshot(self, ev: EventColumns, key: int, total: int, at: int, alive: list[int] | None, node_of: list[int],
                  free_of: dict[int, int], context: dict[int, tuple[int, int, int, int]], first_alloc: dict[int, int],
                  orphan_free: dict[int, int], span: tuple[int, int]) -> PeakSnapshot:  # fmt: skip
        """What is alive at a new peak, each allocation with the category where it was made
        (the first rule that applies):

        - made in a layer's forward: ``activation`` if alive when that forward ends, else
          ``temporary``;
        - made in backward: ``temporary`` if freed before the backward node that made it ends;
          ``gradient`` if freed in ``Optimizer.zero_grad`` or never freed in the cycle (a leaf's
          ``.grad``); else ``autograd_detail`` (gradients passed from layer to layer);
        - made in an optimizer step: ``optimizer_state`` if alive when the step ends, else
          ``temporary``;
        - anything else: ``temporary`` if freed before the outermost range around it ends,
          else ``other``.

        Known tensors (parameters, gradients, optimizer state by address) override these in
        :func:`breakdown`.
        """
        starts, ends = ev.start, ev.end
        nodes = self.nodes
        if alive is None:  # no addresses in this cycle: what is alive cannot be told
            return PeakSnapshot(key, total, starts[at], node_of[at], None, 0, {}, {}, span)
        live: list[tuple[int, int, int, int, str, int]] = []
        held = 0
        addrs = ev.mem_addr
        for i in alive:
            j = free_of.get(i, -1)
            freed = starts[j] if j >= 0 else NEVER
            layer, backward, step, outer = context.get(i, (-1, -1, -1, -1))
            node = node_of[i]
            if layer >= 0:
                category = "activation" if freed > ends[layer] else "temporary"
            elif nodes.bwd[node]:
                if backward >= 0 and freed <= ends[backward]:
                    category = "temporary"
                elif j < 0 or self._in_zero_grad(node_of[j]):
                    category = "gradient"
                else:
                    category = "autograd_detail"
            elif step >= 0:
                category = "optimizer_state" if freed > ends[step] else "temporary"
            elif outer >= 0 and freed <= ends[outer]:
                category = "temporary"
            else:
                category = "other"
            b = ev.nbytes[i]
            held += b
            live.append((addrs[i], b, starts[i], freed, category, nodes.owner[node]))
        return PeakSnapshot(key, total, starts[at], node_of[at], live, max(0, total - held), first_alloc, orphan_free, span)

    # -- the finished figures ----------------------------------------------------------------------
    def settle(self, known: list[KnownTensor]) -> None:
        """With every known tensor at hand (the run is over): what each peak holds beyond the
        allocator's total (:attr:`baseline`). Only host memory has any: see :func:`breakdown`."""
        self.baseline = {}
        for key, snap in self.peaks.items():
            if key == CPU and snap.live is not None:
                extra = sum(b for _, counted, b in _from_before(snap, known) if counted == "beyond")
                if extra:
                    self.baseline[key] = extra

    def peak_pair(self) -> list[int]:
        """``[host peak, highest device peak]`` (0 where none), as the builder's ``peak``: the
        allocator's total at the peak plus what it does not count (:attr:`baseline`)."""
        host = self.peaks[CPU].bytes + self.baseline.get(CPU, 0) if CPU in self.peaks else 0
        device = max((p.bytes + self.baseline.get(k, 0) for k, p in self.peaks.items() if k != CPU), default=0)
        return [host, device]


def act_values(ledger: MemoryLedger, device: bool) -> list[float | None]:
    """Kept bytes per node id: a forward layer's own figure; above layers, the sum of the layers
    below (a parent that is not a layer itself); None where no forward layer is at or below."""
    nodes = ledger.nodes
    direct = ledger.act[1 if device else 0]
    parent = nodes.parent
    values: list[float | None] = [None] * len(nodes)
    forward_layer = ledger.is_forward_layer
    for nid in range(len(nodes) - 1, -1, -1):  # children have larger ids than their parent
        if forward_layer(nid):
            values[nid] = float(direct.get(nid, 0))
        v = values[nid]
        p = parent[nid]
        if v is not None and p >= 0 and not forward_layer(p):
            values[p] = (values[p] or 0.0) + v
    return values


def peak_values(ledger: MemoryLedger, device: bool) -> list[float | None]:
    """Highest total per node id: over the node's own ranges and everything below it (its
    backward work included, which sits under the layer); the root's is the run's peak."""
    nodes = ledger.nodes
    own = ledger.node_peak[1 if device else 0]
    parent = nodes.parent
    # What the allocator's total leaves out was alive the whole run (from before it to its end).
    extra = max((b for k, b in ledger.baseline.items() if (k != CPU) == device), default=0)
    if extra:
        own = {nid: v + extra for nid, v in own.items() if v >= 0}
    values = [-1] * len(nodes)
    for nid in range(len(nodes) - 1, -1, -1):
        v = max(values[nid], own.get(nid, -1))
        values[nid] = v
        p = parent[nid]
        if p >= 0 and v > values[p]:
            values[p] = v
    peaks = [p.bytes + ledger.baseline.get(k, 0) for k, p in ledger.peaks.items() if (k != CPU) == device]
    if peaks and values:
        values[0] = max(values[0], *peaks)
    return [float(v) if v >= 0 else None for v in values]


def phases(nodes: Nodes) -> list[int]:
    """Each node's phase code (:data:`~torchprof._vocab.PHASES`): backward work, inside a module's
    forward, inside an ``Optimizer.`` region, else other. One sweep: parents come first."""
    out = [OTHER] * len(nodes)
    parent, kind, bwd, label = nodes.parent, nodes.kind, nodes.bwd, nodes.label
    for nid in range(1, len(nodes)):
        if bwd[nid]:
            out[nid] = BACKWARD
        elif kind[nid] == MODULE:
            out[nid] = FORWARD
        elif kind[nid] == REGION and label[nid].startswith(OPTIMIZER_PREFIX) and out[parent[nid]] != FORWARD:
            out[nid] = OPTIMIZER
        else:
            out[nid] = out[parent[nid]]
    return out


def _from_before(snap: PeakSnapshot, known: list[KnownTensor]) -> list[tuple[KnownTensor, str, int]]:
    """Known tensors (parameters, gradients, optimizer state) whose blocks were allocated before
    the peak's cycle and were not freed before the peak, each block once, with how their bytes
    count: ``"inside"`` the allocator's total before the cycle (as far as it has room for them:
    a device's total counts every block), ``"beyond"`` it (host blocks: torch's host total counts
    only blocks allocated while a profiler recorded memory, so those from before are added to
    the peak) or ``"outside"`` (a device block the device's total has no room for: not alive)."""
    lo, hi = snap.span
    mine = [k for k in known if k.device == snap.device and (k.seen_ns is None or lo <= k.seen_ns <= hi)]
    counted: set[int] = set()
    room = snap.before
    out: list[tuple[KnownTensor, str, int]] = []
    for k in sorted(mine, key=lambda k: MEMORY_CATEGORIES.index(k.category)):
        if k.addr in counted:
            continue
        first = snap.first_alloc.get(k.addr)
        seen = k.seen_ns
        if first is not None and (seen is None or first <= seen):
            continue  # its block was allocated in the cycle: counted among the allocations if alive at the peak
        if seen is not None and seen < snap.time_ns:
            gone = snap.orphan_free.get(k.addr)
            if gone is not None and seen < gone <= snap.time_ns:
                continue
        counted.add(k.addr)
        inside = min(room, k.nbytes)
        room -= inside
        if inside:
            out.append((k, "inside", inside))
        if inside < k.nbytes:
            out.append((k, "beyond" if snap.device == CPU else "outside", k.nbytes - inside))
    return out


def breakdown(snap: PeakSnapshot, known: list[KnownTensor], layer_of_node: Callable[[int], str | None],
              layer_of_module: Callable[[str], str]) -> list[tuple[str, str | None, int, bool]] | None:  # fmt: skip
    """``(category, layer, bytes, in the peak)`` alive at the peak, summed per category and layer;
    the rows in the peak add up to it exactly (the allocator's total plus, for host memory, the
    known tensors it does not count). None when the source recorded no addresses.

    1. Allocations of the peak's cycle alive at the peak: a known tensor at the same address,
       seen while the allocation was alive (a gradient or optimizer state at an optimizer step's
       end, a parameter or gradient when the profiler stopped), names its category and layer
       (the module of its parameter); the rest keep the category of where they were made.
    2. Known tensors allocated before the cycle and not freed before the peak, each block once
       (:func:`_from_before`): first as part of what the allocator counted from before the cycle;
       what does not fit is, for host memory, added to the peak (torch's host total counts only
       blocks allocated while a profiler recorded memory: parameters, gradients and optimizer
       state made before are alive but not in it), and for a device not in the peak (its total
       counts every block).
    3. What the allocator counted from before the cycle besides (``other``, allocated before
       profiling).
    """
    if snap.live is None:
        return None
    lo, hi = snap.span
    mine = [k for k in known if k.device == snap.device and (k.seen_ns is None or lo <= k.seen_ns <= hi)]
    by_addr: dict[int, list[KnownTensor]] = {}
    for k in mine:
        by_addr.setdefault(k.addr, []).append(k)
    sums: dict[tuple[str, str | None, bool], int] = {}

    def add(category: str, layer: str | None, nbytes: int, counted: bool = True) -> None:
        sums[(category, layer, counted)] = sums.get((category, layer, counted), 0) + nbytes

    for addr, nbytes, allocated, freed, category, layer_node in snap.live:
        layer = layer_of_node(layer_node) if layer_node >= 0 else None
        for k in by_addr.get(addr, ()):
            if (allocated <= k.seen_ns < freed) if k.seen_ns is not None else freed == NEVER:
                category = k.category
                if k.module is not None:
                    layer = layer_of_module(k.module)
                break
        add(category, layer, nbytes)
    inside_before = 0
    for k, how, nbytes in _from_before(snap, known):
        layer = layer_of_module(k.module) if k.module is not None else None
        add(k.category, layer, nbytes, how != "outside")
        if how == "inside":
            inside_before += nbytes
    rest = snap.before - inside_before
    if rest > 0:
        add("other", BEFORE_PROFILING, rest)
    return [(c, layer, b, inside) for (c, layer, inside), b in sums.items()]


def memory_report(ledger: MemoryLedger, known: list[KnownTensor], order: list[int], path_of: Callable[[int], str],
                  module_column: list[str | None]) -> dict[str, Any]:  # fmt: skip
    """The finished tree's ``memory``: per device name, the peak (``peak`` bytes, ``time_us``
    since the run's first event, the ``row`` of the deepest node running then, the ``layer_row``
    of the layer around it, ``phase``, and ``breakdown``: ``[category, layer path, bytes, in the
    peak]`` alive then (see :func:`breakdown`), None without addresses); and the timeline per device name
    (``time_us``, ``allocated`` bytes after each event, ``row`` of the node running, ``phase``
    code into :data:`~torchprof._vocab.PHASES`)."""
    nodes = ledger.nodes
    row_of = {nid: row for row, nid in enumerate(order)}
    phase = phases(nodes)
    origin = ledger.origin or 0
    module_row: dict[str, int] = {}
    for row, module in enumerate(module_column):
        if module is not None and module not in module_row:
            module_row[module] = row

    def layer_of_module(module: str) -> str:
        row = module_row.get(module)
        return path_of(order[row]) if row is not None else module

    rank = {c: i for i, c in enumerate(MEMORY_CATEGORIES)}
    devices: dict[str, Any] = {}
    for key in sorted(ledger.peaks):
        snap = ledger.peaks[key]
        owner = nodes.owner[snap.node]
        parts = breakdown(snap, known, path_of, layer_of_module)
        devices[device_name(key)] = {
            "peak": float(snap.bytes + ledger.baseline.get(key, 0)),
            "allocator_peak": float(snap.bytes),
            "before_block": float(ledger.baseline.get(key, 0)),
            "time_us": (snap.time_ns - origin) / 1000.0,
            "row": row_of[snap.node],
            "layer_row": row_of[owner] if owner >= 0 else None,
            "phase": PHASES[phase[snap.node]],
            "breakdown": None if parts is None else [
                [c, layer, b, inside] for c, layer, b, inside in
                sorted(parts, key=lambda x: (not x[3], rank.get(x[0], len(rank)), -x[2], x[1] or ""))],
        }  # fmt: skip
    timeline: dict[str, Any] = {}
    for key in sorted(ledger.timeline):
        times, values, where = ledger.timeline[key]
        extra = ledger.baseline.get(key, 0)
        timeline[device_name(key)] = {
            "time_us": [(t - origin) / 1000.0 for t in times],
            "allocated": [v + extra for v in values] if extra else list(values),
            "row": [row_of[w] for w in where],
            "phase": [phase[w] for w in where],
        }
    return {"devices": devices, "timeline": timeline}
