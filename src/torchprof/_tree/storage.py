"""A finished tree and its recording as plain JSON values (what ``prof.save()`` writes) and back.

A saved profile is one JSON object. Every per-row field is a flat list with one value per row
(row 0 the root, rows in pre-order), so each can be checked on its own:

- ``columns``: the registry's columns (:data:`~torchprof._vocab.COLUMNS`) by name, NaN as null,
  but ``path``, ``parent`` and ``module``, which are derived from the fields below;
- ``parent_index``: the parent's row, -1 for the root;
- ``path_scope`` and ``path_label``: a row's path is ``<path of row path_scope>/<path_label>``, or
  ``path_label`` alone when ``path_scope`` is -1; a scope is an earlier row, and a null label
  stands for the row's module path (module rows) or its name (any other row);
- ``module_base`` and ``module_tail``: a module row's module path is ``<module of row
  module_base>.<module_tail>`` (an earlier module row), or ``module_tail`` alone when the base is
  -1; a null tail stands for the row's name; -2 marks a row that is not a module (no module path);
- ``capture.modules``: ``base``, ``tail`` and ``info`` lists, one entry per module the run
  named: its path is ``<path of entry base>.<tail>`` (an earlier entry) or ``tail`` alone for -1,
  ``info`` its ``[type, params, param_bytes, root, replica]``.

So a file grows with the rows, not with their depth: a deep model's paths repeat their parents'
(a 3,000-deep chain's full paths alone are 27 MB each column).
"""

from __future__ import annotations

import re
from typing import Any, cast

from .._errors import TraceError
from .._records import ModuleInfo, Recording, checked_step_times
from .._vocab import COLUMNS, FLOAT_COLUMNS, is_missing
from .tree import Columns, PathColumn, RankRow, StepTotals, Tree
from .validate import validate_saved

SAVE_FORMAT = "torchprof-profile"
#: 2: paths and module paths stored as each row's scope and its own part (see above), so a file
#: grows linearly with the rows at any depth; 1 (still read): full ``path``, ``parent`` and
#: ``module`` columns and modules by full path.
SAVE_VERSION = 2
#: Columns the other fields give (see above).
_DERIVED = frozenset({"path", "parent", "module"})
#: ``module_base`` of a row that is not a module.
NOT_A_MODULE = -2
#: How a saved profile's file begins (its first key is the format), whichever JSON writer wrote it.
SAVED_PROFILE_START = re.compile(rb'\s*\{\s*"format"\s*:\s*"' + SAVE_FORMAT.encode() + rb'"')
_FLOATS = frozenset(FLOAT_COLUMNS)


def to_json(tree: Tree, recording: Recording) -> dict[str, Any]:
    """The tree column-wise (NaN as null) with the recording's label, wall time, modules and the
    plain facts of its metadata. Every per-row field is a flat list with one value per row:
    the registry's columns but ``path`` and ``parent``, ``parent_index`` (the parent's row, -1
    for the root), and the path as ``path_scope`` (the row whose path comes first, an earlier row,
    or -1) and ``path_label`` (what follows it after a "/"): see
    :class:`~torchprof._tree.tree.PathColumn`."""
    paths = tree.paths
    cols = tree.columns
    stored = cols.stored() if isinstance(cols, Columns) else ((c, v) for c, v in cols.items() if c not in Columns.LAZY)
    module_base, module_tail = _module_parts(cols["module"], cols["name"], tree.parent_index)
    names, modules = cols["name"], cols["module"]
    labels = [None if lab == (modules[i] if modules[i] is not None else names[i]) else lab
              for i, lab in enumerate(paths.label)]  # fmt: skip
    return {
        "format": SAVE_FORMAT,
        "version": SAVE_VERSION,
        "columns": {c: list(map(_jsonable, v)) if c in _FLOATS else v for c, v in stored if c not in _DERIVED},
        "parent_index": tree.parent_index,
        "path_scope": paths.scope,
        "path_label": labels,
        "module_base": module_base,
        "module_tail": module_tail,
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
        "threads": [{k: _jsonable(v) for k, v in row.items()} for row in tree.threads],
        "cpu_union_us": _jsonable(tree.cpu_union_us),
        "overruns": tree.overruns,
        "peak_flops": tree.peak_flops,
        "capture": {
            "label": recording.label,
            "wall_us": recording.wall_us,
            "modules": _modules_table(recording.modules),
            "meta": {k: v for k, v in recording.meta.items() if _plain(v)},
            "step_times": recording.step_times,
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
    validate_saved(data, where)  # every index, kind, type and range, before any view reads them
    try:
        saved = data["columns"]
        parent_index = [int(p) for p in data["parent_index"]]
        n = len(parent_index)
        columns: dict[str, list[Any]] = {}
        names = _row_field(saved, "name", n)
        if version >= 2:
            modules = _module_paths(_row_field(data, "module_base", n), _row_field(data, "module_tail", n), names)
            labels = [(modules[i] if modules[i] is not None else names[i]) if lab is None else lab
                      for i, lab in enumerate(_row_field(data, "path_label", n))]  # fmt: skip
            paths = PathColumn(_earlier_rows(_row_field(data, "path_scope", n), "path_scope"), _texts(labels, "path_label"))
        else:
            modules = _row_field(saved, "module", n)
            paths = PathColumn.from_paths(_row_field(saved, "path", n), parent_index)
        columns["module"] = modules
        for col in COLUMNS:
            if col.name in _DERIVED:
                continue
            values = saved.get(col.name)
            if values is None:
                # An int column a newer torchprof added (exec_order) reads 0 everywhere: ties,
                # so sorts by it keep the saved order.
                values = [float("nan") if col.dtype == "float" else 0 if col.dtype == "int" else None] * n
            elif len(values) != n:
                raise ValueError(f"column {col.name!r} has {len(values)} values for {n} rows")
            columns[col.name] = list(map(_from_json, values)) if col.name in _FLOATS else list(values)
        tree = Tree(
            columns=Columns(columns, paths, parent_index, [c.name for c in COLUMNS]),
            parent_index=parent_index,
            unsupported_ops=dict(data.get("unsupported_ops", {})),
            steps=[cast(StepTotals, {k: _from_json(v) for k, v in s.items()}) for s in data.get("steps", [])],
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
            by_rank=[cast(RankRow, {k: _from_json(v) for k, v in row.items()}) for row in data.get("by_rank", [])],
            memory=_memory(data.get("memory"), n),
            threads=[{k: _from_json(v) for k, v in dict(row).items()} for row in data.get("threads", [])],
            cpu_union_us=float(_from_json(data.get("cpu_union_us"))),
            overruns=_overruns(data.get("overruns", []), n),
            peak_flops=dict(data.get("peak_flops") or {}),
        )
        c = data.get("capture", {})
        recording = Recording(
            modules=_modules_from(c.get("modules", {})),
            wall_us=c.get("wall_us"),
            label=c.get("label", "profile"),
            meta={**c.get("meta", {}), "saved": where},
            step_times=checked_step_times(c.get("step_times") or {}),
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


def _row_field(data: dict[str, Any], key: str, rows: int) -> list[Any]:
    values = data[key]
    if not isinstance(values, list) or len(values) != rows:
        raise ValueError(f"{key!r} must be a list of {rows} values, one per row")
    return values


def _texts(values: list[Any], key: str) -> list[str]:
    for i, v in enumerate(values):
        if not isinstance(v, str):
            raise ValueError(f"{key!r} of row {i} must be text, not {v!r}")
    return values


def _earlier_rows(rows: list[Any], key: str) -> list[int]:
    for i, r in enumerate(rows):
        if type(r) is not int or not -1 <= r < i:
            raise ValueError(f"{key!r} of row {i} must be -1 or an earlier row, not {r!r}")
    return rows


def _module_parts(modules: list[str | None], names: list[str], parent: list[int]) -> tuple[list[int], list[str | None]]:
    """Each row's module path as a base row and a tail (see the module docstring): the base is
    the nearest module row above whose path and a "." begin the row's, the tail null where it is
    the row's name. O(rows x the rows walked up to a module row)."""
    base: list[int] = []
    tail: list[str | None] = []
    for i, module in enumerate(modules):
        if module is None:
            base.append(NOT_A_MODULE)
            tail.append(None)
            continue
        a = parent[i]
        while a >= 0 and modules[a] is None:
            a = parent[a]
        outer = modules[a] if a >= 0 else None
        if outer is not None and len(module) > len(outer) + 1 and module[len(outer)] == "." and module.startswith(outer):
            own = module[len(outer) + 1 :]
        else:
            a, own = -1, module
        base.append(a)
        tail.append(None if own == names[i] else own)
    return base, tail


def _module_paths(base: list[Any], tail: list[Any], names: list[Any]) -> list[str | None]:
    """The module column from :func:`_module_parts`'s fields."""
    out: list[str | None] = []
    for i, b in enumerate(base):
        if b == NOT_A_MODULE:
            out.append(None)
            continue
        if type(b) is not int or not -1 <= b < i or (b >= 0 and out[b] is None):
            raise ValueError(f"'module_base' of row {i} must be -2, -1 or an earlier module row, not {b!r}")
        own = names[i] if tail[i] is None else tail[i]
        if not isinstance(own, str):
            raise ValueError(f"the module path of row {i} must be text, not {own!r}")
        out.append(own if b < 0 else f"{out[b]}.{own}")
    return out


def _modules_table(modules: dict[str, ModuleInfo]) -> dict[str, list[Any]]:
    """The run's modules by path as three lists (see the module docstring): each path as the
    entry of its longest dotted prefix named before it and the rest."""
    index: dict[str, int] = {}
    base: list[int] = []
    tail: list[str] = []
    info: list[Any] = []
    for path, module in modules.items():
        b, own = -1, path
        head = path
        while "." in head:
            head = head.rpartition(".")[0]
            found = index.get(head)
            if found is not None:
                b, own = found, path[len(head) + 1 :]
                break
        index[path] = len(base)
        base.append(b)
        tail.append(own)
        info.append(module.to_json())
    return {"base": base, "tail": tail, "info": info}


def _modules_from(value: Any) -> dict[str, ModuleInfo]:
    """The run's modules from :func:`_modules_table`'s lists, or from the dict by path of format 1."""
    if isinstance(value, dict) and set(value) == {"base", "tail", "info"} and isinstance(value["base"], list):
        base, tail, info = value["base"], value["tail"], value["info"]
        if not len(base) == len(tail) == len(info):
            raise ValueError("the modules' base, tail and info lists differ in length")
        paths: list[str] = []
        out: dict[str, ModuleInfo] = {}
        for i, b in enumerate(base):
            if type(b) is not int or not -1 <= b < i or not isinstance(tail[i], str):
                raise ValueError(f"module entry {i} must have an earlier base (or -1) and a text tail")
            path = tail[i] if b < 0 else f"{paths[b]}.{tail[i]}"
            paths.append(path)
            out[path] = ModuleInfo.from_json(info[i])
        return out
    return {p: ModuleInfo.from_json(m) for p, m in value.items()}


def _overruns(value: Any, rows: int) -> list[list[Any]]:
    """The saved ``Tree.overruns`` (``[row, ranges, overrun_us]`` each), checked."""
    out: list[list[Any]] = []
    for entry in value:
        row, ranges, us = entry
        if type(row) is not int or not 0 <= row < rows or type(ranges) is not int or ranges < 1 or not us >= 0:
            raise ValueError(f"overrun {entry!r} is not [a row, ranges, µs]")
        out.append([row, ranges, float(us)])
    return out
