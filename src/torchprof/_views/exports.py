"""Exports: chrome traces (Perfetto, chrome://tracing, ``load_trace``) and folded stacks
(flamegraph.pl, speedscope, inferno)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from .._files import dumps, parse_json, read_bytes, write_atomic, write_atomic_chunks
from .._records import Recording
from .._traces.rewrite import BASE_TIME_KEY, write_with_block
from .._tree.flops.trace_counts import counts_block
from .._tree.tree import Tree
from .._vocab import TRACE_META_KEY, is_missing
from .format import printable


def meta_block(tree: Tree, recording: Recording) -> dict[str, Any]:
    """What a trace needs besides its events to reopen as the same profile."""
    meta = recording.meta
    # A profile read from a trace keeps what that trace said it recorded; a live one says itself.
    recorded = meta.get("recorded")
    earlier: dict[str, Any] = recorded if isinstance(recorded, dict) else {}
    shapes = meta.get("record_shapes", meta.get("shapes")) if "shapes" in meta else earlier.get(
        "record_shapes", earlier.get("shapes", any(tree.columns["input_shapes"])))
    # A trace whose ops carry no shapes cannot count FLOPs again (one torchprof recorded before it
    # counted from them, read back): its counts go with it.
    counts = counts_block(tree) if not shapes else None
    extra: dict[str, Any] = {"flops_counts": counts} if counts is not None else {}
    if isinstance(meta.get("compute_dtype"), str):
        extra["compute_dtype"] = meta["compute_dtype"]
    if recording.tensors:  # parameters, gradients, optimizer state by address: what a memory peak holds
        extra["tensors"] = [[k.category, k.device, k.addr, k.nbytes, k.seen_ns, k.module] for k in recording.tensors]
    return {
        "version": 1,
        "label": recording.label,
        "wall_us": recording.wall_us,
        "modules": {path: m.to_json() for path, m in recording.modules.items()},
        "compiled": {key: graph.to_json() for key, graph in recording.compiled.items()},
        # The rank, for a trace torch wrote without it (the process group began after profiling).
        **({"distributedInfo": meta["distributedInfo"]} if isinstance(meta.get("distributedInfo"), dict) else {}),
        # How DDP bucketed the gradients: the all-reduces split over their layers again on reload.
        **({"ddp_buckets": meta["ddp_buckets"]} if meta.get("ddp_buckets") else {}),
        # Every step's wall time, recorded or not (a long run's outliers), for a merged job too.
        **({"step_times": recording.step_times} if recording.step_times else {}),
        "recorded": {
            "shapes": bool(meta.get("shapes", earlier.get("shapes", shapes))),
            "record_shapes": bool(shapes),
            "memory": tree.has_memory,
            "cuda": tree.has_cuda,
            "flops": tree.has_flops or bool(meta.get("flops", False)),
        },
        **extra,
    }


def write_chrome_trace(sources: list[str], tree: Tree, recording: Recording, path: str) -> str:
    """The run as a chrome trace: the events of ``sources`` (trace files torch or the user wrote,
    one per recorded cycle) with torchprof's block added, so module calls are named spans
    (``nn.Module: <path> [<Type>]``) around their ops in Perfetto, and ``torchprof.load_trace``
    rebuilds the same DataFrame. The sources are only read, so this works any number of times;
    every number keeps its digits (an epoch time written as a double would lose some)."""
    missing = [s for s in sources if not os.path.isfile(s)]
    if missing or not sources:
        raise ValueError(f"the trace events of this profile are gone ({missing[0] if missing else 'no trace file'}): nothing to export")
    block = meta_block(tree, recording)
    if len(sources) == 1:
        return write_with_block(sources[0], TRACE_META_KEY, block, path)
    data = _as_trace(parse_json(read_bytes(sources[0]), sources[0], exact=True))
    for source in sources[1:]:
        _append_cycle(data, _as_trace(parse_json(read_bytes(source), source, exact=True)))
    data[TRACE_META_KEY] = block
    return write_atomic(path, dumps(data))


def _as_trace(data: Any) -> dict[str, Any]:
    if isinstance(data, list):
        return {"traceEvents": data}
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise ValueError("a recorded cycle's trace file holds no 'traceEvents' list")
    return data


def _append_cycle(data: dict[str, Any], cycle: dict[str, Any]) -> None:
    """Add a later cycle's events to ``data``. Cycles of one run share kineto's clock and ids
    (correlation and external ids keep counting); times are moved only where the two files count
    from different base times. Metadata events (process and thread names) are kept once."""
    shift_ns = int(cycle.get(BASE_TIME_KEY, 0)) - int(data.get(BASE_TIME_KEY, 0))
    shift = Decimal(shift_ns).scaleb(-3)  # exact: µs with the ns as decimals
    seen = {(e.get("name"), e.get("pid"), e.get("tid"), str(e.get("args"))) for e in data["traceEvents"] if isinstance(e, dict) and e.get("ph") == "M"}
    events = data["traceEvents"]
    for e in cycle["traceEvents"]:
        if not isinstance(e, dict):
            continue
        if e.get("ph") == "M":
            key = (e.get("name"), e.get("pid"), e.get("tid"), str(e.get("args")))
            if key in seen:
                continue
            seen.add(key)
        if shift_ns and isinstance(e.get("ts"), (int, Decimal)):
            e["ts"] = Decimal(e["ts"]) + shift
        events.append(e)


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


def folded_stacks(tree: Tree, metric: str = "self_cpu_us") -> Iterator[str]:
    """``frame;frame;frame value`` lines (flamegraph.pl, speedscope, inferno): one per node with
    a non-zero self value, frames from the root down, each node's frame its own name (a module's
    attribute name, ``conv1``; the stack above it spells out the rest of its path).

    Lines are made one at a time from a stack of frames (rows are in pre-order). A line lists
    every frame above its node, as the format requires, so a line at depth d has d frames and
    the output grows with the sum of the depths; per line the work is O(d), nothing more.
    """
    column = _STACK_METRICS.get(metric)
    if column is None:
        raise ValueError(f"unknown metric {metric!r}; choose one of: {', '.join(sorted(_STACK_METRICS))}")
    cols = tree.columns
    values = cols[column]
    if all(is_missing(v) for v in values):
        what = {"self_cpu_us": "CPU time", "self_cuda_us": "CUDA time"}.get(column, "memory (use memory=True)")
        raise ValueError(f"this profile has no {what} to export as stacks ({column} was not recorded)")
    return _stack_lines(cols["name"], cols["depth"], values)


def _stack_lines(names: list[str], depths: list[int], values: list[float]) -> Iterator[str]:
    frames: list[str] = []
    for name, depth, v in zip(names, depths, values):
        del frames[depth:]
        # ";" separates frames; a control character (ESC, a newline, a bidi override) would act on
        # the terminal that shows the file, or break its line: written as visible escapes.
        frames.append(printable(name.replace(";", ":")))
        if is_missing(v):
            continue
        count = round(v)
        if count > 0:
            yield f"{';'.join(frames)} {count}"


def write_stacks(tree: Tree, path: str, metric: str = "self_cpu_us") -> str:
    lines = folded_stacks(tree, metric)  # raises here for a bad metric, before any file is made
    return write_atomic_chunks(path, (line.encode("utf-8") + b"\n" for line in lines))
