"""Totals of a run: the arithmetic behind ``prof.summary``, on a finished tree and its recording."""

from __future__ import annotations

from typing import Any, TypedDict

from .._records import Recording
from .._vocab import is_missing
from .hotpath import hot_path, layer_key
from .modules import root_modules
from .steps import StepSpread, marked_steps, split_row, spread, step_splits
from .tree import Tree

#: The run's device time by what it did (:attr:`Tree.gpu_time_us`), in the order ``prof.summary`` lists it.
GPU_TIME_KEYS = ("gpu_compute_us", "gpu_comm_us", "gpu_memcpy_us", "gpu_comm_overlap_us")


class Summary(TypedDict, total=False):
    """``prof.summary``: the run's totals (see :func:`summarize`) and its answers. Keys after
    ``nodes`` are there only where they apply (threads, overruns, steps, memory, warnings)."""

    name: str
    wall_us: float
    cpu_us: float
    cuda_us: float
    gpu_busy_us: float
    gpu_idle_us: float
    gpu_window_us: float
    gpu_compute_us: float
    gpu_comm_us: float
    gpu_memcpy_us: float
    gpu_comm_overlap_us: float
    forward_cpu_us: float
    backward_cpu_us: float
    other_cpu_us: float
    backward_cuda_us: float
    params: float
    param_bytes: float
    macs: float
    flops: float
    flops_per_s: float
    peak_cpu_mem: float
    peak_cuda_mem: float
    overrun_us: float
    steps: int
    events: int
    nodes: int
    threads: int
    threads_at_once: bool
    compile_cpu_us: float
    overrun_top: dict[str, Any]
    mfu: float
    mfu_wall: float
    peak_flops: dict[str, Any]
    mfu_note: str
    hot_metric: str
    hot_path: list[str]
    bottleneck: dict[str, Any]
    costliest_type: dict[str, Any]
    time_split: dict[str, float]
    step_spread: StepSpread
    peak_at: dict[str, dict[str, Any]]
    interrupted: Any
    allocator_peaks: dict[str, float]
    warnings: list[str]
    unknown_flop_ops: dict[str, int]
    """Where the root's FLOPs are unknown: the ops of unknown cost that make them so (calls by name)."""
    shapes_recorded: bool
    headline: str
    """Added by ``prof.summary`` (``_views.format.headline``): one line of the above."""


def summarize(tree: Tree, recording: Recording) -> Summary:
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
    ``gpu_comm_us``). All NaN without device events. ``overrun_us`` is the time ranges ran past the
    end of the range they ran in (async collectives), which every total leaves out
    (:attr:`Tree.overruns`), and ``overrun_top`` names the row that holds most of it.
    """
    c = tree.columns
    nan = float("nan")
    wall = recording.wall_us if recording.wall_us is not None else nan
    flops = c["flops"][0]
    params = c["params"][0]
    roots = root_modules(recording.modules, {m for m in c["module"] if m is not None})
    param_bytes = float(sum(recording.modules[r].param_bytes for r in roots)) if roots else nan
    marked = marked_steps(recording.step_times)  # (steps prof.step() marked: for a run without step rows)
    out: Summary = {
        "name": c["name"][0],
        "wall_us": wall,
        "cpu_us": c["cpu_us"][0],
        "cuda_us": c["cuda_us"][0],
        "gpu_busy_us": tree.gpu_busy_us,
        "gpu_idle_us": tree.gpu_window_us - tree.gpu_busy_us,
        "gpu_window_us": tree.gpu_window_us,
        "gpu_compute_us": tree.gpu_time_us.get("gpu_compute_us", nan),
        "gpu_comm_us": tree.gpu_time_us.get("gpu_comm_us", nan),
        "gpu_memcpy_us": tree.gpu_time_us.get("gpu_memcpy_us", nan),
        "gpu_comm_overlap_us": tree.gpu_time_us.get("gpu_comm_overlap_us", nan),
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
        "overrun_us": sum(r[2] for r in tree.overruns),
        # (step rows; else the steps prof.step() marked in a run without a schedule: one count
        # for step_times, the summary and the Markdown)
        "steps": len(tree.steps) or len(marked),
        "events": tree.event_count,
        "nodes": len(tree),
    }
    if tree.threads:
        out["threads"] = len(busy_threads(tree))
        out["threads_at_once"] = threads_at_once(tree)
        out["compile_cpu_us"] = sum(t["compile_us"] for t in tree.threads)
    if tree.overruns:
        row, ranges, _ = tree.overruns[0]
        out["overrun_top"] = {"name": c["name"][row], "ranges": ranges, "rows": len(tree.overruns)}
    out.update(mfu_summary(tree, out["flops_per_s"]))
    out.update(headline_facts(tree))
    if len(tree):
        out["time_split"] = split_row(tree, 0)  # data, forward, backward, optimizer, comm, other (µs)
        steps = spread(step_splits(tree)) or spread(marked)
        if steps:
            out["step_spread"] = steps
    if tree.has_memory:
        out["peak_at"] = peak_at(tree)
    if "interrupted" in recording.meta:
        out["interrupted"] = recording.meta["interrupted"]
    if tree.unsupported_ops and is_missing(flops):
        # What makes the root's FLOPs unknown, for the views that show the root alone (the
        # Markdown summary, the widget's header); the tables say it under their rows.
        out["unknown_flop_ops"] = dict(tree.unsupported_ops)
        out["shapes_recorded"] = any(tree.columns.get("input_shapes") or [])
    warnings = list(recording.meta.get("warnings") or [])  # what the profile is known to miss
    checked = allocator_check(tree, recording.meta)
    if checked:
        out["allocator_peaks"], notes = checked
        warnings += notes
    if warnings:
        out["warnings"] = warnings
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


def allocator_check(tree: Tree, meta: dict[str, Any]) -> tuple[dict[str, float], list[str]] | None:
    """The CUDA allocator's own high-water mark inside the block, where the live capture read
    ``torch.cuda.max_memory_allocated`` before and after it and the block set a new high (else
    that figure is an earlier one's), and a note for each device whose profiled peak differs
    from it: allocations torch's profiler did not see (another thread's)."""
    figures = meta.get("cuda_allocator")
    if not isinstance(figures, dict) or not tree.memory:
        return None
    peaks: dict[str, float] = {}
    notes: list[str] = []
    devices = tree.memory.get("devices", {})
    for device, f in figures.items():
        if not isinstance(f, dict) or not f.get("max_end", 0) > f.get("max_start", 0):
            continue
        peaks[device] = float(f["max_end"])
        seen = devices.get(device, {}).get("peak")
        if seen is not None and abs(seen - f["max_end"]) > 0.001 * f["max_end"]:
            notes.append(f"the {device} peak the profile saw ({seen:.0f} bytes) differs from the allocator's own "
                         f"({f['max_end']} bytes, torch.cuda.max_memory_allocated): allocations torch's profiler did not "
                         "record (other threads)")  # fmt: skip
    return (peaks, notes) if peaks else None


def peak_at(tree: Tree) -> dict[str, dict[str, Any]]:
    """Per device (``cpu``, ``cuda:0``, ...): where the run's memory peaked. ``path`` is the
    deepest node running at that moment (often the op that allocated), ``layer`` the layer
    around it (a module, or a region such as ``Optimizer.step#AdamW.step``; None outside every
    layer), ``phase`` forward, backward, optimizer or other, ``bytes`` the peak, ``time_us``
    since the run's first event."""
    paths = tree.paths
    out: dict[str, dict[str, Any]] = {}
    for device, peak in tree.memory.get("devices", {}).items():
        layer = peak.get("layer_row")
        out[device] = {"path": paths[peak["row"]], "layer": paths[layer] if layer is not None else None,
                       "phase": peak["phase"], "bytes": peak["peak"], "time_us": peak["time_us"]}  # fmt: skip
    return out


def mfu_summary(tree: Tree, flops_per_s: float) -> Summary:
    """``mfu``: the root's (its FLOPs over its device time, or CPU time without a device, against
    the peak); ``mfu_wall``: the run's FLOP/s over its wall time against the peak (the usual
    "model FLOPs utilisation" of a training step); ``peak_flops``: the peak, the device, the data
    type and where the figure came from (or why there is none). ``mfu_note`` says when a layer
    measured above 100%: the peak is too low for what ran (TF32 or a lower precision)."""
    nan = float("nan")
    peak = dict(tree.peak_flops) if tree.peak_flops else {"flops_per_s": None, "device": None, "dtype": None, "source": ""}
    value = peak.get("flops_per_s")
    mfu = tree.columns["mfu"][0] if len(tree) and "mfu" in tree.columns else nan
    out: Summary = {
        "mfu": mfu,
        "mfu_wall": flops_per_s / value if isinstance(value, (int, float)) and not is_missing(flops_per_s) else nan,
        "peak_flops": peak,
    }
    over = [i for i, v in enumerate(tree.columns.get("mfu", [])) if not is_missing(v) and v > 1.0]
    if over:
        out["mfu_note"] = (f"{len(over)} rows measure above 100% of {peak.get('dtype') or 'the given'} peak: what ran used a faster "
                           "path than that peak counts (TF32 or lower precision); pass peak_flops= for it")  # fmt: skip
    return out


def headline_facts(tree: Tree) -> Summary:
    """The hot path and the headline's figures (:mod:`~torchprof._tree.hotpath`): ``hot_path``
    (paths from the root down), ``bottleneck`` (the costliest layer: the ``path`` of its costliest
    row, ``layer`` (that path without its ``ProfilerStep#N/``), ``type``, its own time ``us`` over
    every step and its ``share`` of the run) and ``costliest_type`` (``type``, ``share``, ``modules``),
    all by ``hot_metric`` (``cuda_us`` with device time, else ``cpu_us``)."""
    if not len(tree):
        return {}
    path = hot_path(tree)
    cols = tree.columns
    paths = tree.paths
    out: Summary = {"hot_metric": path.metric, "hot_path": [paths[r] for r in path.rows]}
    if path.layer >= 0:
        out["bottleneck"] = {"path": paths[path.layer], "layer": layer_key(tree, path.layer),
                             "name": cols["name"][path.layer],
                             "type": cols["type"][path.layer] if cols["kind"][path.layer] == "module" else None,
                             "us": path.layer_share * cols[path.metric][0], "share": path.layer_share}  # fmt: skip
    if path.type is not None:
        out["costliest_type"] = {"type": path.type, "share": path.type_share, "modules": path.type_modules}
    return out
