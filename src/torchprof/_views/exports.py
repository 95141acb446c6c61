"""Exports: chrome traces (Perfetto, chrome://tracing, ``load_trace``) and folded stacks
(flamegraph.pl, speedscope, inferno)."""

from __future__ import annotations

import os
from typing import Any

from .._files import write_atomic
from .._records import Recording
from .._traces.rewrite import write_with_block
from .._tree.tree import Tree
from .._vocab import TRACE_META_KEY, is_missing


def meta_block(tree: Tree, recording: Recording) -> dict[str, Any]:
    """What a trace needs besides its events to reopen as the same profile."""
    meta = recording.meta
    # A profile read from a trace keeps what that trace said it recorded; a live one says itself.
    recorded = meta.get("recorded")
    earlier: dict[str, Any] = recorded if isinstance(recorded, dict) else {}
    shapes = meta["shapes"] if "shapes" in meta else earlier.get("shapes", any(tree.columns["input_shapes"]))
    return {
        "version": 1,
        "label": recording.label,
        "wall_us": recording.wall_us,
        "modules": {path: m.to_json() for path, m in recording.modules.items()},
        "compiled": {key: graph.to_json() for key, graph in recording.compiled.items()},
        "recorded": {
            "shapes": bool(shapes),
            "memory": tree.has_memory,
            "cuda": tree.has_cuda,
            "flops": tree.has_flops or bool(meta.get("flops", False)),
        },
    }


def write_chrome_trace(source: str | None, tree: Tree, recording: Recording, path: str) -> str:
    """The run as a chrome trace: the events of ``source`` (a trace file torch or the user wrote)
    with torchprof's block added, so module calls are named spans (``nn.Module: <path> [<Type>]``)
    around their ops in Perfetto, and ``torchprof.load_trace`` rebuilds the same DataFrame."""
    if source is None or not os.path.isfile(source):
        raise ValueError("this profile holds no trace events to export (it was reopened from prof.save())")
    return write_with_block(source, TRACE_META_KEY, meta_block(tree, recording), path)


# -- folded stacks ----------------------------------------------------------------------------------
_STACK_METRICS = {
    "self_cpu_us": "self_cpu_us",
    "self_cuda_us": "self_cuda_us",
    "self_cpu_time_total": "self_cpu_us",
    "self_cuda_time_total": "self_cuda_us",
    "cpu": "self_cpu_us",
    "cuda": "self_cuda_us",
    "self_cpu_mem": "self_cpu_mem",
    "self_cuda_mem": "self_cuda_mem",
}


def folded_stacks(tree: Tree, metric: str = "self_cpu_us") -> list[str]:
    """``frame;frame;frame value`` lines (flamegraph.pl, speedscope, inferno): one per node with
    a non-zero self value, frames from the root down, module frames as their full path."""
    column = _STACK_METRICS.get(metric)
    if column is None:
        raise ValueError(f"unknown metric {metric!r}; choose one of: {', '.join(sorted(_STACK_METRICS))}")
    cols = tree.columns
    values = cols[column]
    if all(is_missing(v) for v in values):
        what = {"self_cpu_us": "CPU time", "self_cuda_us": "CUDA time"}.get(column, "memory (use memory=True)")
        raise ValueError(f"this profile has no {what} to export as stacks ({column} was not recorded)")
    parent = tree.parent_index
    frames: list[str] = []
    lines: list[str] = []
    for i in range(len(tree)):
        label = cols["path"][i] if cols["kind"][i] == "module" else cols["name"][i]
        frame = label.replace(";", ":").replace("\n", " ")
        frames.append(frame if parent[i] < 0 else frames[parent[i]] + ";" + frame)
        v = values[i]
        if is_missing(v):
            continue
        count = round(v)
        if count > 0:
            lines.append(f"{frames[i]} {count}")
    return lines


def write_stacks(tree: Tree, path: str, metric: str = "self_cpu_us") -> str:
    lines = folded_stacks(tree, metric)
    return write_atomic(path, ("\n".join(lines) + "\n").encode("utf-8"))
