"""Exports: chrome trace (Perfetto), folded stacks (flamegraphs), and save/load of a profile."""

from __future__ import annotations

import gzip
import json
import math
import os
import tempfile
from typing import TYPE_CHECKING, Any

from ._records import Capture, ModuleInfo
from ._trace_file import META_KEY, read_json
from ._tree import COLUMNS, Tree

if TYPE_CHECKING:
    from ._profile import Profile

SAVE_FORMAT = "torchprof-profile"
SAVE_VERSION = 1


def _dumps(data: Any) -> bytes:
    try:
        import orjson

        return orjson.dumps(data, option=orjson.OPT_SERIALIZE_NUMPY)
    except ImportError:
        return json.dumps(data).encode("utf-8")


def _write(path: str, payload: bytes) -> str:
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"cannot write {path}: directory {directory} does not exist")
    if path.endswith(".gz"):
        payload = gzip.compress(payload, compresslevel=6)
    # Write next to the target and rename, so a failure never leaves half a file behind.
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".torchprof-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def meta_block(prof: Profile) -> dict[str, Any]:
    """What a trace needs besides its events to reopen as the same profile."""
    cap = prof.capture
    tree = prof.tree
    # A profile read from a trace keeps what that trace said it recorded; a live one says itself.
    earlier = cap.meta.get("recorded") if isinstance(cap.meta.get("recorded"), dict) else {}
    shapes = cap.meta["shapes"] if "shapes" in cap.meta else earlier.get("shapes", any(tree.columns["input_shapes"]))
    return {
        "version": 1,
        "label": cap.label,
        "wall_us": cap.wall_us,
        "modules": {path: [m.type, m.params, m.param_bytes] for path, m in cap.modules.items()},
        "recorded": {
            "shapes": bool(shapes),
            "memory": tree.has_memory,
            "cuda": tree.has_cuda,
            "flops": tree.has_flops or bool(cap.meta.get("flops", False)),
        },
    }


def write_chrome_trace(prof: Profile, path: str) -> str:
    """The profiled run as a chrome trace: module calls are named spans (``nn.Module: <path>
    [<Type>]``) around their ops, viewable in Perfetto or chrome://tracing and readable by
    ``torchprof.load_trace``, which rebuilds the same DataFrame."""
    source = _trace_source(prof)
    if source is None:
        raise ValueError("this profile holds no trace events to export (it was reopened from prof.save())")
    kind, obj = source
    if kind == "kineto":
        fd, tmp = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        try:
            from ._quiet import quiet_native_stderr

            with quiet_native_stderr():
                obj.save(tmp)
            data = read_json(tmp)
        finally:
            os.unlink(tmp)
    else:
        data = read_json(obj)
    if isinstance(data, list):
        data = {"traceEvents": data}
    data[META_KEY] = meta_block(prof)
    return _write(path, _dumps(data))


def _trace_source(prof: Profile) -> tuple[str, Any] | None:
    torch_prof = getattr(prof, "_torch_profile", None)
    if torch_prof is not None and getattr(torch_prof, "profiler", None) is not None:
        result = getattr(torch_prof.profiler, "kineto_results", None)
        if result is not None:
            return "kineto", result
    source = prof.capture.meta.get("source")
    if source and os.path.isfile(str(source)):
        return "file", source
    return None


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
    if not any(v is not None and not (isinstance(v, float) and math.isnan(v)) for v in values):
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
        if v is None or (isinstance(v, float) and math.isnan(v)):
            continue
        count = int(round(v))
        if count > 0:
            lines.append(f"{frames[i]} {count}")
    return lines


def write_stacks(prof: Profile, path: str, metric: str = "self_cpu_us") -> str:
    lines = folded_stacks(prof.tree, metric)
    return _write(path, ("\n".join(lines) + "\n").encode("utf-8"))


# -- save / load --------------------------------------------------------------------------------------
def save_profile(prof: Profile, path: str) -> str:
    tree, cap = prof.tree, prof.capture
    payload = {
        "format": SAVE_FORMAT,
        "version": SAVE_VERSION,
        "columns": {c: list(map(_jsonable, tree.columns[c])) if c in _FLOAT_COLUMNS else tree.columns[c] for c in tree.columns},
        "parent_index": tree.parent_index,
        "unsupported_ops": tree.unsupported_ops,
        "steps": [{k: _jsonable(v) for k, v in s.items()} for s in tree.steps],
        "peak_cpu_mem": _jsonable(tree.peak_cpu_mem),
        "peak_cuda_mem": _jsonable(tree.peak_cuda_mem),
        "has_cuda": tree.has_cuda,
        "has_memory": tree.has_memory,
        "has_flops": tree.has_flops,
        "event_count": tree.event_count,
        "capture": {
            "label": cap.label,
            "wall_us": cap.wall_us,
            "modules": {p: [m.type, m.params, m.param_bytes] for p, m in cap.modules.items()},
            "meta": {k: v for k, v in cap.meta.items() if isinstance(v, (str, int, float, bool))},
        },
    }
    return _write(path, _dumps(payload))


def load_profile(path: str | os.PathLike[str]) -> Profile:
    from ._profile import Profile
    from ._trace_file import TraceError

    data = read_json(path)
    if not isinstance(data, dict) or data.get("format") != SAVE_FORMAT:
        hint = " (a chrome trace? use torchprof.load_trace)" if isinstance(data, dict) and "traceEvents" in data else ""
        raise TraceError(f"{os.fspath(path)} is not a profile written by prof.save(){hint}")
    if data.get("version", 0) > SAVE_VERSION:
        raise TraceError(f"{os.fspath(path)} was written by a newer torchprof (format {data['version']})")
    try:
        columns = {c: list(map(_from_json, data["columns"][c])) if c in _FLOAT_COLUMNS else list(data["columns"][c]) for c in COLUMNS}
        tree = Tree(
            columns=columns,
            parent_index=list(data["parent_index"]),
            unsupported_ops=dict(data.get("unsupported_ops", {})),
            steps=[{k: _from_json(v) for k, v in s.items()} for s in data.get("steps", [])],
            peak_cpu_mem=_from_json(data.get("peak_cpu_mem")),
            peak_cuda_mem=_from_json(data.get("peak_cuda_mem")),
            has_cuda=bool(data.get("has_cuda")),
            has_memory=bool(data.get("has_memory")),
            has_flops=bool(data.get("has_flops")),
            event_count=int(data.get("event_count", 0)),
        )
        c = data.get("capture", {})
        cap = Capture(
            cycles=[],
            modules={p: ModuleInfo(type=m[0], params=int(m[1]), param_bytes=int(m[2])) for p, m in c.get("modules", {}).items()},
            wall_us=c.get("wall_us"),
            label=c.get("label", "profile"),
            meta={**c.get("meta", {}), "saved": os.fspath(path)},
        )
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise TraceError(f"{os.fspath(path)} is damaged: {exc!r}") from exc
    cap.meta.pop("source", None)
    prof = Profile()
    prof._tree, prof._cap = tree, cap
    return prof


_FLOAT_COLUMNS = frozenset(c for c in COLUMNS if c.endswith(("_us", "_mem")) or c in ("params", "macs", "flops"))


def _jsonable(v: Any) -> Any:
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def _from_json(v: Any) -> Any:
    return float("nan") if v is None else v
