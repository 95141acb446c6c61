"""The structure of a saved profile (``prof.save()``'s JSON), checked before any of it becomes a
tree: every index in range, every kind known, every value of the type and range its views read.

A damaged or hostile file used to load and then fail in a view (an IndexError for a parent out of
range, a KeyError for an unknown kind, a TypeError for a name that is not text) or to show a
wrong number (``calls: 1e30`` read as -9.2e18). Here it is a :class:`~torchprof._files.TraceError`
naming the field and the row. The checks are tables of field -> (test, what is expected), read
generically; the column checks come from the column registry (:data:`~torchprof._vocab.COLUMNS`),
so a column added there is checked too. Each check runs at C speed where it can (``map``,
``set``, ``min``/``max``) and looks for the culprit row only once something is wrong.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

from .._errors import TraceError
from .._vocab import COLUMNS, MEMORY_CATEGORIES, NODE_KIND_LABELS, PHASES

#: The largest whole number a count column holds (int64: pandas' integer columns).
INT_MAX = 2**63 - 1

Test = Callable[[Any], bool]
Check = tuple[Test, str]


def _number(v: Any) -> bool:
    return v is None or (type(v) in (int, float) and math.isfinite(v))


def _count(v: Any) -> bool:
    return type(v) is int and 0 <= v <= INT_MAX


def _whole(v: Any) -> bool:
    return type(v) is int and -INT_MAX <= v <= INT_MAX


NUMBER: Check = (_number, "a finite number or null")
COUNT: Check = (_count, f"a whole number from 0 to {INT_MAX}")
WHOLE: Check = (_whole, "a whole number")
BOOL: Check = (lambda v: type(v) is bool, "true or false")
#: A step's number: ``ProfilerStep#N``'s N, or its text where that is not a whole number (``#x``).
STEP_NUMBER: Check = (lambda v: _whole(v) or type(v) is str, "a whole number or text")
TEXT: Check = (lambda v: type(v) is str, "text")
TEXT_OR_NULL: Check = (lambda v: v is None or type(v) is str, "text or null")
OBJECT: Check = (lambda v: type(v) is dict, "an object")
LIST: Check = (lambda v: type(v) is list, "a list")

#: The fields outside the columns, checked when present (a file of an older torchprof lacks some).
FIELDS: dict[str, Check] = {
    "columns": OBJECT,
    "parent_index": LIST,
    "unsupported_ops": OBJECT,
    "steps": LIST,
    "peak_cpu_mem": NUMBER,
    "peak_cuda_mem": NUMBER,
    "has_cuda": BOOL,
    "has_memory": BOOL,
    "has_flops": BOOL,
    "event_count": COUNT,
    "gpu_busy_us": NUMBER,
    "gpu_window_us": NUMBER,
    "gpu_time_us": OBJECT,
    "comm_us": NUMBER,
    "ranks": LIST,
    "by_rank": LIST,
    "memory": OBJECT,
    "threads": LIST,
    "capture": OBJECT,
}
CAPTURE: dict[str, Check] = {"label": TEXT, "wall_us": NUMBER, "modules": OBJECT, "meta": OBJECT}
#: The run's facts (``capture.meta``) a view reads, when present: any other fact is kept as it is.
META: dict[str, Check] = {
    "warnings": (lambda v: type(v) is list and all(type(x) is str for x in v), "a list of texts"),
    "interrupted": TEXT,
    "compute_dtype": TEXT,
    "host_memory": NUMBER,
}
FINITE: Check = (lambda v: type(v) in (int, float) and math.isfinite(v), "a finite number")
#: A thread's row of ``threads``: every key is read.
THREAD: dict[str, Check] = {"thread": (lambda v: _whole(v) or type(v) is str or (type(v) is list and all(_whole(x) or type(x) is str for x in v)),
                                       "a whole number, text, or a list of them"),
                            "cpu_us": FINITE, "compile_us": FINITE}  # fmt: skip
#: Columns without which no view can show a row (the others are filled in when missing: a file of
#: an older torchprof lacks the newer ones).
REQUIRED_COLUMNS = ("name", "kind")
#: A module's facts: ``[type, params, param_bytes, root, replica]`` (the first three alone in older files).
MODULE_FIELDS: tuple[Check, ...] = (TEXT, COUNT, COUNT, (lambda v: v is None or type(v) is bool, "true, false or null"), BOOL)
#: A device's memory peak: every key is read (``layer_row`` may be absent).
PEAK: dict[str, Check] = {"peak": NUMBER, "time_us": NUMBER, "phase": (lambda v: v in PHASES, f"one of {', '.join(PHASES)}"),
                          "breakdown": (lambda v: v is None or type(v) is list, "a list or null")}  # fmt: skip
#: A part of a peak's breakdown: ``[category, layer path, bytes, counted in the peak]``.
PART: tuple[Check, ...] = ((lambda v: v in MEMORY_CATEGORIES, f"one of {', '.join(MEMORY_CATEGORIES)}"), TEXT_OR_NULL, WHOLE, BOOL)
#: Each column's check by its registry dtype; some columns say more.
DTYPES: dict[str, Check] = {"float": NUMBER, "int": WHOLE, "str": TEXT_OR_NULL, "bool": BOOL}
SPECIAL: dict[str, Check] = {
    "name": TEXT,
    "path": TEXT,
    "kind": (lambda v: v in NODE_KIND_LABELS, f"one of {', '.join(NODE_KIND_LABELS)}"),
    "depth": COUNT,
    "exec_order": COUNT,
    "calls": COUNT,
}


class _Damage(Exception):
    def __init__(self, field: str, value: Any, expected: str, *, described: str | None = None) -> None:
        shown = repr(value)
        what = described or f"is {shown if len(shown) <= 60 else shown[:57] + '...'}"
        super().__init__(f"{field} {what}: expected {expected}")


def validate_saved(data: dict[str, Any], where: str) -> None:
    """Raise :class:`TraceError` (``<where> is damaged: <field>[<row>] is <value>: expected ...``)
    unless ``data`` has a saved profile's structure."""
    try:
        _check(data)
    except _Damage as exc:
        raise TraceError(f"{where} is damaged: {exc}") from None


def _check(data: dict[str, Any]) -> None:
    _fields(data, FIELDS, "")
    parents = data.get("parent_index", [])
    n = len(parents)
    if n == 0:
        raise _Damage("parent_index", parents, "a parent for each row (a profile has at least its root row)")
    _each(parents, WHOLE, "parent_index")
    if parents[0] != -1:
        raise _Damage("parent_index[0]", parents[0], "-1 (row 0 is the root)")
    if n > 1 and (min(parents[1:]) < 0 or not all(map(operator.lt, parents[1:], range(1, n)))):
        row = next(i for i in range(1, n) if not 0 <= parents[i] < i)
        raise _Damage(f"parent_index[{row}]", parents[row], f"a row before row {row} (rows are in tree order)")
    _columns(data.get("columns", {}), parents)
    for op, calls in data.get("unsupported_ops", {}).items():
        _value(calls, COUNT, f"unsupported_ops[{op!r}]")
    for i, step in enumerate(data.get("steps", [])):
        _value(step, OBJECT, f"steps[{i}]")
        _required(step, ("step",), f"steps[{i}]")
        for key, value in step.items():
            _value(value, STEP_NUMBER if key == "step" else NUMBER, f"steps[{i}].{key}")
    for key, value in data.get("gpu_time_us", {}).items():
        _value(value, NUMBER, f"gpu_time_us.{key}")
    _each(data.get("ranks", []), WHOLE, "ranks")
    for i, row in enumerate(data.get("by_rank", [])):
        _value(row, OBJECT, f"by_rank[{i}]")
        for key, value in row.items():
            _value(value, NUMBER, f"by_rank[{i}].{key}")
    for i, row in enumerate(data.get("threads", [])):
        _value(row, OBJECT, f"threads[{i}]")
        _required(row, tuple(THREAD), f"threads[{i}]")
        _fields(row, THREAD, f"threads[{i}].")
    _memory(data.get("memory") or {}, n)
    capture = data.get("capture", {})
    _fields(capture, CAPTURE, "capture.")
    _fields(capture.get("meta", {}), META, "capture.meta.")
    modules = capture.get("modules", {})
    if set(modules) == {"base", "tail", "info"} and type(modules["info"]) is list:
        # format 2: the modules as base/tail/info lists (paths checked as they are rebuilt)
        entries: Any = ((f"capture.modules.info[{k}]", facts) for k, facts in enumerate(modules["info"]))
    else:
        entries = ((f"capture.modules[{path!r}]", facts) for path, facts in modules.items())
    for field, facts in entries:
        _value(facts, (lambda v: type(v) is list and 3 <= len(v) <= len(MODULE_FIELDS), "a list of 3 to 5 facts"), field)
        for k, value in enumerate(facts):
            _value(value, MODULE_FIELDS[k], f"{field}[{k}]")


def _required(obj: dict[str, Any], keys: tuple[str, ...], field: str) -> None:
    for key in keys:
        if key not in obj:
            raise _Damage(field, None, f"a {key!r}", described=f"has no {key!r}")


def _fields(obj: dict[str, Any], table: dict[str, Check], prefix: str) -> None:
    for key, check in table.items():
        if key in obj:
            _value(obj[key], check, prefix + key)


def _value(value: Any, check: Check, field: str) -> None:
    test, expected = check
    if not test(value):
        raise _Damage(field, value, expected)


def _each(values: list[Any], check: Check, field: str) -> None:
    test, expected = check
    if not all(map(test, values)):
        row = next(i for i, v in enumerate(values) if not test(v))
        raise _Damage(f"{field}[{row}]", values[row], expected)


def _columns(saved: dict[str, Any], parents: list[int]) -> None:
    n = len(parents)
    _required(saved, REQUIRED_COLUMNS, "columns")
    for col in COLUMNS:
        if col.name not in saved:
            continue  # a column a newer torchprof added: missing in older files, filled in on load
        values = saved[col.name]
        field = f"columns.{col.name}"
        if type(values) is not list or len(values) != n:
            raise _Damage(field, values, f"a list of {n} values, one per row",
                          described=f"has {len(values)} values" if type(values) is list else None)
        _column(values, SPECIAL.get(col.name) or DTYPES[col.dtype], field)
    depth = saved.get("depth")
    if depth is not None and (depth[0] != 0 or not all(map(operator.eq, depth[1:], (depth[p] + 1 for p in parents[1:])))):
        row = 0 if depth[0] != 0 else next(i for i in range(1, n) if depth[i] != depth[parents[i]] + 1)
        raise _Damage(f"columns.depth[{row}]", depth[row], "its parent's depth + 1 (the root's is 0)")
    paths = saved.get("path")
    if paths is not None and len(set(paths)) != n:
        first: dict[str, int] = {}
        for row, path in enumerate(paths):
            if path in first:
                raise _Damage(f"columns.path[{row}]", path, f"a path of its own (row {first[path]} has it)")
            first[path] = row


def _column(values: list[Any], check: Check, field: str) -> None:
    """One column: the common cases decided for the whole list at once, the culprit found after."""
    kinds = set(map(type, values))
    if check is NUMBER and kinds <= {float, int, type(None)} and bool not in kinds:
        try:
            if math.isfinite(math.fsum(filter(None, values))):  # inf or nan anywhere makes the sum so
                return
        except OverflowError:  # finite values too large to add: look at each
            pass
    elif check in (COUNT, WHOLE) and kinds == {int}:
        low = 0 if check is COUNT else -INT_MAX
        if low <= min(values) and max(values) <= INT_MAX:
            return
    elif check in (TEXT, TEXT_OR_NULL) and (kinds == {str} or (check is TEXT_OR_NULL and kinds <= {str, type(None)})):
        return
    _each(values, check, field)


def _memory(memory: dict[str, Any], rows: int) -> None:
    """``Tree.memory``: each device's peak (rows in range, a known phase, its breakdown's parts)
    and timeline (equal lengths, rows in range, phase codes known)."""
    in_range: Check = (lambda v: type(v) is int and 0 <= v < rows, f"a row of the tree (0 to {rows - 1})")
    row_or_null: Check = (lambda v: v is None or in_range[0](v), f"a row of the tree (0 to {rows - 1}) or null")
    phase_code: Check = (lambda v: type(v) is int and 0 <= v < len(PHASES), f"a phase code (0 to {len(PHASES) - 1})")
    if memory:
        _required(memory, ("devices", "timeline"), "memory")
    for key in ("devices", "timeline"):
        _value(memory.get(key, {}), OBJECT, f"memory.{key}")
    for name, peak in memory.get("devices", {}).items():
        field = f"memory.devices[{name!r}]"
        _value(peak, OBJECT, field)
        _required(peak, ("peak", "time_us", "phase", "row"), field)
        _fields(peak, PEAK, field + ".")
        _value(peak.get("row"), in_range, field + ".row")
        _value(peak.get("layer_row"), row_or_null, field + ".layer_row")
        for i, part in enumerate(peak.get("breakdown") or []):
            _value(part, (lambda v: type(v) is list and len(v) == len(PART), f"a list of {len(PART)} values"), f"{field}.breakdown[{i}]")
            for k, value in enumerate(part):
                _value(value, PART[k], f"{field}.breakdown[{i}][{k}]")
    for name, line in memory.get("timeline", {}).items():
        field = f"memory.timeline[{name!r}]"
        _value(line, OBJECT, field)
        lengths = set()
        for key, check in (("time_us", FINITE), ("allocated", FINITE), ("row", in_range), ("phase", phase_code)):
            values = line.get(key)
            _value(values, LIST, f"{field}.{key}")
            _each(values, check, f"{field}.{key}")
            lengths.add(len(values))
        if len(lengths) > 1:
            raise _Damage(field, None, "time_us, allocated, row and phase of one length",
                          described=f"has columns of {' and '.join(map(str, sorted(lengths)))} values")
