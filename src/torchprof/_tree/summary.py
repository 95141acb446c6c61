"""Totals of a run: the arithmetic behind ``prof.summary``, on a finished tree and its recording."""

from __future__ import annotations

from typing import Any

from .._records import Recording
from .._vocab import NodeKind, is_missing
from .tree import Tree

MODULE = NodeKind.MODULE.label


def outermost_modules(tree: Tree) -> list[int]:
    """Rows of module nodes whose parent is not a module (the roots of each module subtree)."""
    kind, parent = tree.columns["kind"], tree.parent_index
    return [i for i, k in enumerate(kind) if k == MODULE and (parent[i] < 0 or kind[parent[i]] != MODULE)]


def summarize(tree: Tree, recording: Recording) -> dict[str, Any]:
    """Wall, CPU and device time, the forward/backward split, params, FLOPs, FLOP/s, peak memory.

    ``cuda_us`` is the kernel-time sum over every stream (it can exceed the wall time when
    streams overlap); ``gpu_busy_us`` is the time any stream of any device was running work
    (their union); ``gpu_window_us`` runs from the first device start to the last device end
    within the profiled span (summed over a schedule's cycles), and ``gpu_idle_us`` is the
    window minus the busy time. All NaN without device events.
    """
    c = tree.columns
    nan = float("nan")
    cpu, bwd = c["cpu_us"][0], c["bwd_cpu_us"][0]
    outer = outermost_modules(tree)
    module_fwd = sum(c["cpu_us"][i] - c["bwd_cpu_us"][i] for i in outer)
    wall = recording.wall_us if recording.wall_us is not None else nan
    flops = c["flops"][0]
    params = c["params"][0]
    param_bytes = nan
    if recording.modules and not is_missing(params):
        # A root module's label is the last part of its path (below a region the path is
        # "ProfilerStep#3/ResNet"); the same root under several steps counts once.
        seen = {}
        for i in outer:
            label = c["path"][i].rsplit("/", 1)[-1]
            info = recording.modules.get(label)
            if info is not None:
                seen[label] = info.param_bytes
        param_bytes = float(sum(seen.values())) if seen else nan
    out = {
        "name": c["name"][0],
        "wall_us": wall,
        "cpu_us": cpu,
        "cuda_us": c["cuda_us"][0],
        "gpu_busy_us": tree.gpu_busy_us,
        "gpu_idle_us": tree.gpu_window_us - tree.gpu_busy_us,
        "gpu_window_us": tree.gpu_window_us,
        "forward_cpu_us": module_fwd,
        "backward_cpu_us": bwd,
        "other_cpu_us": cpu - module_fwd - bwd,
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
    if "interrupted" in recording.meta:
        out["interrupted"] = recording.meta["interrupted"]
    return out
