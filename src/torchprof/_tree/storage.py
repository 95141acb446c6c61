"""A finished tree and its recording as plain JSON values (what ``prof.save()`` writes) and back."""

from __future__ import annotations

import re
from typing import Any

from .._files import TraceError
from .._records import ModuleInfo, Recording
from .._vocab import COLUMNS, FLOAT_COLUMNS, is_missing
from .tree import Tree

SAVE_FORMAT = "torchprof-profile"
SAVE_VERSION = 1
#: How a saved profile's file begins (its first key is the format), whichever JSON writer wrote it.
SAVED_PROFILE_START = re.compile(rb'\s*\{\s*"format"\s*:\s*"' + SAVE_FORMAT.encode() + rb'"')
_FLOATS = frozenset(FLOAT_COLUMNS)


def to_json(tree: Tree, recording: Recording) -> dict[str, Any]:
    """The tree column-wise (NaN as null) with the recording's label, wall time, modules and the
    plain facts of its metadata."""
    return {
        "format": SAVE_FORMAT,
        "version": SAVE_VERSION,
        "columns": {c: list(map(_jsonable, v)) if c in _FLOATS else v for c, v in tree.columns.items()},
        "parent_index": tree.parent_index,
        "unsupported_ops": tree.unsupported_ops,
        "steps": [{k: _jsonable(v) for k, v in s.items()} for s in tree.steps],
        "peak_cpu_mem": _jsonable(tree.peak_cpu_mem),
        "peak_cuda_mem": _jsonable(tree.peak_cuda_mem),
        "has_cuda": tree.has_cuda,
        "has_memory": tree.has_memory,
        "has_flops": tree.has_flops,
        "event_count": tree.event_count,
        "gpu_busy_us": _jsonable(tree.gpu_busy_us),
        "gpu_window_us": _jsonable(tree.gpu_window_us),
        "gpu_time_us": {k: _jsonable(v) for k, v in tree.gpu_time_us.items()},
        "comm_us": _jsonable(tree.comm_us),
        "ranks": tree.ranks,
        "by_rank": [{k: _jsonable(v) for k, v in row.items()} for row in tree.by_rank],
        "memory": tree.memory,
        "peak_flops": tree.peak_flops,
        "capture": {
            "label": recording.label,
            "wall_us": recording.wall_us,
            "modules": {p: m.to_json() for p, m in recording.modules.items()},
            "meta": {k: v for k, v in recording.meta.items() if _plain(v)},
        },
    }


def from_json(data: Any, where: str) -> tuple[Tree, Recording]:
    """The tree and recording :func:`to_json` wrote; :class:`TraceError` naming ``where`` when the
    data is not such a profile. Columns a newer torchprof added are missing (NaN/None) in an older
    file, not an error."""
    if not isinstance(data, dict) or data.get("format") != SAVE_FORMAT:
        hint = " (a chrome trace? use torchprof.load_trace)" if isinstance(data, dict) and "traceEvents" in data else ""
        raise TraceError(f"{where} is not a profile written by prof.save(){hint}")
    version = data.get("version", 0)
    if not isinstance(version, int) or version > SAVE_VERSION:
        raise TraceError(f"{where} was written by a newer torchprof (format {version!r})")
    try:
        saved = data["columns"]
        n = len(data["parent_index"])
        columns: dict[str, list[Any]] = {}
        for col in COLUMNS:
            values = saved.get(col.name)
            if values is None:
                # An int column a newer torchprof added (exec_order) reads 0 everywhere: ties,
                # so sorts by it keep the saved order.
                values = [float("nan") if col.dtype == "float" else 0 if col.dtype == "int" else None] * n
            elif len(values) != n:
                raise ValueError(f"column {col.name!r} has {len(values)} values for {n} rows")
            columns[col.name] = list(map(_from_json, values)) if col.name in _FLOATS else list(values)
        tree = Tree(
            columns=columns,
            parent_index=[int(p) for p in data["parent_index"]],
            unsupported_ops=dict(data.get("unsupported_ops", {})),
            steps=[{k: _from_json(v) for k, v in s.items()} for s in data.get("steps", [])],
            peak_cpu_mem=_from_json(data.get("peak_cpu_mem")),
            peak_cuda_mem=_from_json(data.get("peak_cuda_mem")),
            has_cuda=bool(data.get("has_cuda")),
            has_memory=bool(data.get("has_memory")),
            has_flops=bool(data.get("has_flops")),
            event_count=int(data.get("event_count", 0)),
            gpu_busy_us=float(_from_json(data.get("gpu_busy_us"))),
            gpu_window_us=float(_from_json(data.get("gpu_window_us"))),
            gpu_time_us={str(k): float(_from_json(v)) for k, v in dict(data.get("gpu_time_us", {})).items()},
            comm_us=float(_from_json(data.get("comm_us"))),
            ranks=list(data.get("ranks", [])),
            by_rank=[{k: _from_json(v) for k, v in row.items()} for row in data.get("by_rank", [])],
            memory=_memory(data.get("memory"), n),
            peak_flops=dict(data.get("peak_flops") or {}),
        )
        c = data.get("capture", {})
        recording = Recording(
            modules={p: ModuleInfo.from_json(m) for p, m in c.get("modules", {}).items()},
            wall_us=c.get("wall_us"),
            label=c.get("label", "profile"),
            meta={**c.get("meta", {}), "saved": where},
        )
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise TraceError(f"{where} is damaged: {exc!r}") from exc
    recording.meta.pop("source", None)
    return tree, recording


def _memory(value: Any, rows: int) -> dict[str, Any]:
    """The saved ``Tree.memory`` (empty from files of an older torchprof); its rows checked."""
    if value is None:
        return {}
    memory = dict(value)
    for peak in memory.get("devices", {}).values():
        for key in ("row", "layer_row"):
            row = peak.get(key)
            if row is not None and not 0 <= int(row) < rows:
                raise ValueError(f"memory peak row {row!r} is not a row of the tree")
    for line in memory.get("timeline", {}).values():
        if not all(0 <= r < rows for r in line["row"]):
            raise ValueError("a memory timeline row is not a row of the tree")
        if not len(line["time_us"]) == len(line["allocated"]) == len(line["row"]) == len(line["phase"]):
            raise ValueError("the memory timeline's columns differ in length")
    return memory


def _plain(v: Any) -> bool:
    """A metadata value saved with the profile: a scalar, a list of strings (its warnings), or an
    object of scalars (its rank: ``distributedInfo``)."""
    scalar = (str, int, float, bool, type(None))
    return (isinstance(v, scalar[:-1]) or (isinstance(v, list) and all(isinstance(x, str) for x in v))
            or (isinstance(v, dict) and all(isinstance(x, scalar) for x in v.values())))  # fmt: skip


def _jsonable(v: Any) -> Any:
    return None if is_missing(v) else v


def _from_json(v: Any) -> Any:
    return float("nan") if v is None else v
