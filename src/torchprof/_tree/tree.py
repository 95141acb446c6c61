"""The finished tree: plain columns in pre-order, what every view reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Tree:
    """A finished profile tree, column-wise, in pre-order (parent before children, siblings by
    descending ``cpu_us``). Row 0 is the root; ``parent_index[i]`` is -1 for it. ``columns`` holds
    every column of the registry (:data:`torchprof._vocab.COLUMNS`) by name."""

    columns: dict[str, list[Any]]
    parent_index: list[int]
    unsupported_ops: dict[str, int]
    """Ops that ran but have no FLOP formula (name -> calls): their FLOPs are unknown."""
    steps: list[dict[str, Any]]
    """One dict per ``ProfilerStep#N``: ``step``, ``wall_us``, ``cpu_us``, ``cuda_us``, ``bwd_cpu_us``."""
    peak_cpu_mem: float
    """Highest host bytes allocated during the run (NaN without ``memory=True``)."""
    peak_cuda_mem: float
    has_cuda: bool
    has_memory: bool
    has_flops: bool
    event_count: int
    gpu_busy_us: float = float("nan")
    """Time any device stream was running work: the union of device intervals over every stream
    and device (NaN without device events)."""
    gpu_window_us: float = float("nan")
    """First device start to last device end (within the profiled span, summed over the cycles
    of a schedule): busy plus idle."""
    gpu_time_us: dict[str, float] = field(default_factory=dict)
    """The run's device time by what it did, as ``prof.summary`` names it: ``gpu_compute_us``,
    ``gpu_comm_us``, ``gpu_memcpy_us`` (the time each kind ran: the union of its intervals per
    device, summed over devices) and ``gpu_comm_overlap_us`` (communication beside compute on the
    same device); empty in profiles saved before they existed."""
    comm_us: float = float("nan")
    """Time collective communication was in flight (c10d ranges on the host, NCCL kernels on the
    device; their union), within the profiled span."""
    ranks: list[Any] = field(default_factory=list)
    """The ranks a profile of a distributed job merged (``load_trace`` of several traces); empty
    for one source."""
    by_rank: list[dict[str, Any]] = field(default_factory=list)
    """Those ranks' figures, one dict per rank and step (:data:`~torchprof._vocab.BY_RANK_COLUMNS`)."""
    memory: dict[str, Any] = field(default_factory=dict)
    """Memory over time (with ``memory=True``; see :func:`~torchprof._tree.memory.memory_report`):
    ``devices`` (per device name: the peak, when, in which row and phase, and what was alive
    then) and ``timeline`` (per device name: ``time_us``, ``allocated``, ``row``, ``phase``)."""

    peak_flops: dict[str, Any] = field(default_factory=dict)
    """The peak the ``mfu`` column is measured against (:meth:`~torchprof._tree.devices.Peak.to_json`:
    ``flops_per_s``, ``device``, ``dtype``, ``source``); empty where none was looked for."""

    def __len__(self) -> int:
        return len(self.parent_index)

    def children(self) -> list[list[int]]:
        """Row indices of each row's children, in tree order."""
        out: list[list[int]] = [[] for _ in self.parent_index]
        for i, p in enumerate(self.parent_index):
            if p >= 0:
                out[p].append(i)
        return out
