"""Totals of a run: the arithmetic behind ``prof.summary``, on a finished tree and its recording."""

from __future__ import annotations

from typing import Any

from .._records import Recording
from .._vocab import is_missing
from .modules import root_modules
from .tree import Tree

#: The run's device time by what it did (:attr:`Tree.gpu_time_us`), in the order ``prof.summary`` lists it.
GPU_TIME_KEYS = ("gpu_compute_us", "gpu_comm_us", "gpu_memcpy_us", "gpu_comm_overlap_us")


def summarize(tree: Tree, recording: Recording) -> dict[str, Any]:
    """Wall, CPU and device time, the forward/backward split, params, FLOPs, FLOP/s, peak memory.

    ``cuda_us`` is the kernel-time sum over every stream (it can exceed the wall time when
    streams overlap); ``gpu_busy_us`` is the time any stream of any device was running work
    (their union); ``gpu_window_us`` runs from the first device start to the last device end
    within the profiled span (summed over a schedule's cycles), and ``gpu_idle_us`` is the
    window minus the busy time. ``gpu_compute_us``, ``gpu_comm_us`` and ``gpu_memcpy_us`` are the
    time each kind of device work ran (the union of its intervals per device, summed over devices;
    kinds by ``_vocab.DEVICE_WORK_PATTERNS``), so on one device ``gpu_busy_us - gpu_compute_us``
    is Holistic Trace Analysis's non-compute time; ``gpu_comm_overlap_us`` is the time
    communication ran beside compute on the same device (HTA's comm/comp overlap is it divided by
    ``gpu_comm_us``). All NaN without device events.
    """
    c = tree.columns
    nan = float("nan")
    wall = recording.wall_us if recording.wall_us is not None else nan
    flops = c["flops"][0]
    params = c["params"][0]
    roots = root_modules(recording.modules, {m for m in c["module"] if m is not None})
    param_bytes = float(sum(recording.modules[r].param_bytes for r in roots)) if roots else nan
    out = {
        "name": c["name"][0],
        "wall_us": wall,
        "cpu_us": c["cpu_us"][0],
        "cuda_us": c["cuda_us"][0],
        "gpu_busy_us": tree.gpu_busy_us,
        "gpu_idle_us": tree.gpu_window_us - tree.gpu_busy_us,
        "gpu_window_us": tree.gpu_window_us,
        **{key: tree.gpu_time_us.get(key, nan) for key in GPU_TIME_KEYS},
        "forward_cpu_us": c["fwd_cpu_us"][0],
        "backward_cpu_us": c["bwd_cpu_us"][0],
        "other_cpu_us": c["other_cpu_us"][0],
        "backward_cuda_us": c["bwd_cuda_us"][0],
        "params": params,
        "param_bytes": param_bytes,
        "macs": c["macs"][0],
        "flops": flops,
        "flops_per_s": flops / (wall / 1e6) if wall and not is_missing(wall) and not is_missing(flops) else nan,
        "peak_cpu_mem": tree.peak_cpu_mem,
        "peak_cuda_mem": tree.peak_cuda_mem,
        "steps": len(tree.steps),
        "events": tree.event_count,
        "nodes": len(tree),
    }
    if tree.threads:
        out["threads"] = len(busy_threads(tree))
        out["threads_at_once"] = threads_at_once(tree)
        out["compile_cpu_us"] = sum(t["compile_us"] for t in tree.threads)
    if tree.has_memory:
        out["peak_at"] = peak_at(tree)
    if "interrupted" in recording.meta:
        out["interrupted"] = recording.meta["interrupted"]
    if recording.meta.get("warnings"):
        out["warnings"] = list(recording.meta["warnings"])  # what the profile is known to miss
    return out


#: A thread counts as busy when it holds at least this share of the run's CPU time.
BUSY_THREAD_SHARE = 0.01


def busy_threads(tree: Tree) -> list[dict[str, Any]]:
    """The threads whose CPU time the root's total sums (those with a share of it worth naming)."""
    total = sum(t["cpu_us"] for t in tree.threads)
    return [t for t in tree.threads if total and t["cpu_us"] >= BUSY_THREAD_SHARE * total]


def threads_at_once(tree: Tree) -> bool:
    """Several threads ran at the same time for a share of the run worth naming, so the CPU
    total sums their work and can exceed the wall time (a hand-off, as a backward pass on
    autograd's thread while the caller waits, sums nothing twice)."""
    total = sum(t["cpu_us"] for t in tree.threads)
    union = tree.cpu_union_us
    return len(busy_threads(tree)) > 1 and not is_missing(union) and total - union > BUSY_THREAD_SHARE * union


def peak_at(tree: Tree) -> dict[str, dict[str, Any]]:
    """Per device (``cpu``, ``cuda:0``, ...): where the run's memory peaked. ``path`` is the
    deepest node running at that moment (often the op that allocated), ``layer`` the layer
    around it (a module, or a region such as ``Optimizer.step#AdamW.step``; None outside every
    layer), ``phase`` forward, backward, optimizer or other, ``bytes`` the peak, ``time_us``
    since the run's first event."""
    paths = tree.columns["path"]
    out: dict[str, dict[str, Any]] = {}
    for device, peak in tree.memory.get("devices", {}).items():
        layer = peak.get("layer_row")
        out[device] = {"path": paths[peak["row"]], "layer": paths[layer] if layer is not None else None,
                       "phase": peak["phase"], "bytes": peak["peak"], "time_us": peak["time_us"]}  # fmt: skip
    return out
