"""The widget's wire format: the tree column-wise, as ``decodePayload`` in ``js/src/payload.js`` reads it.

The payload is one JSON-able dict: a few per-node arrays (parent index, a flag byte, the path as
a tail of the parent's path) and one array per numeric column, never a list of per-row dicts. It
also carries the vocabulary (column specs, kind codes, state keys), so the front end keeps no list
of its own. The widget sends it packed in binary (float64 and int32 buffers behind a JSON header,
zlib compressed); the report embeds it as JSON.
"""

from __future__ import annotations

import json
import math
import struct
import sys
import zlib
from array import array
from collections.abc import Sequence
from typing import Any

from .._tree.aggregate import StepsTree, across_steps
from .._tree.hotpath import hot_path, opened
from .._tree.steps import step_splits
from .._tree.summary import Summary
from .._tree.tree import Tree
from .._vocab import (
    ALL_STEPS,
    BACKWARD_PREFIX,
    COLUMN_ROLES,
    COLUMNS,
    CSV_FORMULA_START,
    FLAME_COLOURS,
    INSIGHT_COLUMNS,
    LAYER_KINDS,
    MEMORY_CATEGORIES,
    NODE_KIND_LABELS,
    SHAPE_ROLES,
    SORT_ALIASES,
    STATE,
    STEP_EXTRA,
    STEP_PARTS,
    STEP_PREFIX,
    UNKNOWN_MARK,
    VIEW_COLUMNS,
    VIEWS,
    Column,
    NodeKind,
)
from .format import summary_items
from .insights import Finding, insights_payload
from .memory import memory_payload
from .rows import PATH_SEARCH, THRESHOLD_COLUMN

FORMAT = "torchprof-1"
MAGIC = b"TPF1"
KIND_CODE = {k.label: int(k) for k in NodeKind}
FLAG_KIND = 3  # bits 0-1: the kind code
FLAG_BACKWARD = 4
FLAG_ABSOLUTE_PATH = 8  # the path does not extend the parent's path: the tail is all of it
FLAG_NAME_IN_TAIL = 16  # name == tail without its separator ("/name" or ".name")
#: Columns the tree's shape gives the front end (parents, flag bytes, path tails): never sent as columns.
SHAPE_COLUMNS = frozenset(COLUMN_ROLES[r] for r in SHAPE_ROLES)


def number_columns(columns: Sequence[Column]) -> tuple[str, ...]:
    """Numeric columns a payload of these columns carries (``depth`` the front end derives from the parents)."""
    return tuple(c.name for c in columns if c.numeric and c.name not in SHAPE_COLUMNS)


def text_columns(columns: Sequence[Column]) -> tuple[str, ...]:
    """Text columns a payload of these columns carries (path, name, kind and parent come from the tree's shape)."""
    return tuple(c.name for c in columns if c.dtype == "str" and c.name not in SHAPE_COLUMNS)


#: Numeric columns the payload of a profile carries.
NUMBER_COLUMNS = number_columns(COLUMNS)
#: Text columns the payload of a profile carries.
TEXT_COLUMNS = text_columns(COLUMNS)


def vocabulary(columns: Sequence[Column] = COLUMNS, view_columns: Sequence[str] = VIEW_COLUMNS,
               views: Sequence[str] = VIEWS, flame_colours: Sequence[str] = FLAME_COLOURS) -> dict[str, Any]:  # fmt: skip
    """What the front end must know of the registry, so that it spells none of it: every column's
    spec in ``prof.df`` order, the table's columns, the numeric and text columns the payload
    carries, the columns' roles, kind codes, which kinds are layers, modules and steps, sort
    aliases, the state keys with their types and defaults, the flag bits, the characters a CSV text
    cell must not start with, the views, the Flame colourings, the step and backward-node name
    prefixes and the search and threshold rules' constants. Another table of the same shape (a
    comparison of two runs) sends its own ``columns``, ``view_columns``, ``views`` and
    ``flame_colours``. New keys may be added; the front end ignores those it does not read."""
    return {
        "columns": [c.spec() for c in columns],
        "view_columns": list(view_columns),
        "number_columns": list(NUMBER_COLUMNS if columns is COLUMNS else number_columns(columns)),
        "text_columns": list(TEXT_COLUMNS if columns is COLUMNS else text_columns(columns)),
        "roles": COLUMN_ROLES,
        "kinds": list(NODE_KIND_LABELS),
        "layer_kinds": list(LAYER_KINDS),
        "module_kind": NodeKind.MODULE.label,
        "step_kind": NodeKind.REGION.label,
        "sort_aliases": SORT_ALIASES,
        "state": [{"name": k.name, "type": k.type, "default": k.default} for k in STATE],
        "flags": {"kind": FLAG_KIND, "backward": FLAG_BACKWARD, "absolute_path": FLAG_ABSOLUTE_PATH,
                  "name_in_tail": FLAG_NAME_IN_TAIL},
        "csv_formula_start": CSV_FORMULA_START,
        "views": list(views),
        "flame_colours": list(flame_colours),
        "all_steps": ALL_STEPS,
        "step_prefix": STEP_PREFIX,
        "backward_prefix": BACKWARD_PREFIX,
        "path_search": PATH_SEARCH,
        "threshold_column": THRESHOLD_COLUMN,
        "insight_columns": list(INSIGHT_COLUMNS),
        "step_parts": list(STEP_PARTS),
        "step_extra": list(STEP_EXTRA),
        "memory_categories": list(MEMORY_CATEGORIES),
        "unknown_mark": UNKNOWN_MARK,
    }  # fmt: skip


def _clean(value: Any) -> Any:
    """JSON-safe: NaN and infinities become null (JSON has neither)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def table_payload(tree: Tree, columns: Sequence[Column] = COLUMNS) -> dict[str, Any]:
    """One tree column-wise: parents, flag bytes, path tails, name exceptions, text and numeric
    columns (what ``decodeTable`` in js/src/payload.js reads).

    Paths are sent as the part that extends the parent's path (``.conv1``, ``/aten::addmm``) and
    names, when they are that tail minus its separator, not at all: a path costs about as much as
    its name. A column whose values are all equal (all NaN without CUDA, all 0 without backward)
    is sent as one constant. ``columns`` are the registry's unless a view of another table (a
    comparison) gives its own.
    """
    numbers = NUMBER_COLUMNS if columns is COLUMNS else number_columns(columns)
    texts = TEXT_COLUMNS if columns is COLUMNS else text_columns(columns)
    cols = tree.columns
    n = len(tree)
    parent = tree.parent_index
    names, kinds, backward = cols["name"], cols["kind"], cols["is_backward"]
    # A compact path column gives each tail without building the paths (linear at any depth).
    paths = tree.paths
    flags = bytearray(n)
    tails: list[str] = []
    name_exceptions: list[list[Any]] = []
    for i in range(n):
        f = KIND_CODE[kinds[i]] | (FLAG_BACKWARD if backward[i] else 0)
        p = parent[i]
        tail = paths.tail(i, p) if p >= 0 else None
        if tail is None:
            tail = paths[i]
            f |= FLAG_ABSOLUTE_PATH
        if len(tail) > 1 and tail[0] in "./" and tail[1:] == names[i]:
            f |= FLAG_NAME_IN_TAIL
        else:
            name_exceptions.append([i, names[i]])
        flags[i] = f
        tails.append(tail)
    return {
        "n": n,
        "parent": list(parent),
        "flags": flags,
        "tail": tails,
        "names": name_exceptions,
        # Text columns other than those the tree shape gives (path, name, kind, parent); one that
        # is empty everywhere (source without stack=True) is sent as an empty list.
        "text": {c: list(cols[c]) if any(v is not None for v in cols[c]) else [] for c in texts},
        "num": _numbers({c: cols[c] for c in numbers}),
    }


def _numbers(columns: dict[str, list[Any]]) -> dict[str, Any]:
    """Numeric columns as float lists, or ``{"const": v}`` for a column of one value."""
    num: dict[str, Any] = {}
    for c, column in columns.items():
        values = [float(v) for v in column]
        first = values[0] if values else math.nan
        if all(v == first or (v != v and first != first) for v in values):
            num[c] = {"const": _clean(first)}
        else:
            num[c] = values
    return num


def steps_payload(folded: StepsTree) -> dict[str, Any]:
    """Every step folded into one tree (:func:`~torchprof._tree.aggregate.across_steps`): its
    table, each time column's least and most value of any step, and how many steps ran each node."""
    return {
        **table_payload(folded.tree),
        "low": _numbers(folded.low),
        "high": _numbers(folded.high),
        "runs": folded.runs,
        "count": folded.steps,
    }


def payload(
    tree: Tree,
    summary: Summary,
    folded: StepsTree | None = None,
    *,
    columns: Sequence[Column] = COLUMNS,
    view_columns: Sequence[str] = VIEW_COLUMNS,
    views: Sequence[str] = VIEWS,
    flame_colours: Sequence[str] = FLAME_COLOURS,
    items: list[tuple[str, str, str]] | None = None,
    findings: list[Finding] | None = None,
) -> dict[str, Any]:
    """The profile column-wise, as ``decodePayload`` in js/src/payload.js reads it: the tree's table, the
    vocabulary, the summary, the steps, memory over time and, with two steps or more, every step
    folded into one tree (``folded``, computed here when not given). ``columns``, ``view_columns``
    and the summary's ``items`` are the registry's and the profile's unless a view of another
    table (a comparison, which folds its steps itself) gives its own.

    For the views that answer (the front end's to build on): ``hot_path`` (:func:`hot_path_payload`),
    ``insights`` (``findings``, one dict per finding, :data:`~torchprof._vocab.INSIGHT_COLUMNS`),
    each step's time split and slow flag in ``steps`` (:data:`~torchprof._vocab.STEP_PARTS`), and
    what the memory peak is made of in ``memory`` (``makeup`` per device)."""
    if folded is None and columns is COLUMNS:
        folded = across_steps(tree)
    profile = columns is COLUMNS
    return {
        "format": FORMAT,
        **table_payload(tree, columns),
        "vocab": vocabulary(columns, view_columns, views, flame_colours),
        "summary": _clean(summary),
        "summary_items": summary_items(summary) if items is None else items,
        "steps": _clean(steps_with_splits(tree) if profile else tree.steps),
        "memory": _clean(memory_payload(tree)),
        "all_steps": steps_payload(folded) if folded is not None else None,
        "hot_path": hot_path_payload(tree) if profile else None,
        "insights": _clean(insights_payload(findings)) if findings is not None else [],
    }


def hot_path_payload(tree: Tree) -> dict[str, Any]:
    """The hot path of the whole run (:mod:`~torchprof._tree.hotpath`): its ``rows`` from the root
    down, the ``open`` paths a view expands to show it, the ``metric`` it follows, the ``branch``
    row where cost branches (-1: none) and the costliest ``layer`` row (-1: none)."""
    path = hot_path(tree)
    return {"rows": list(path.rows), "open": opened(tree, path), "metric": path.metric, "branch": path.branch,
            "layer": path.layer}  # fmt: skip


def steps_with_splits(tree: Tree) -> list[dict[str, Any]]:
    """``tree.steps`` with each step's time split, device idle time and slow flag
    (:func:`~torchprof._tree.steps.step_splits`)."""
    splits = {str(s["step"]): s for s in step_splits(tree)}
    return [{**s, **{k: v for k, v in splits.get(str(s["step"]), {}).items() if k not in ("step", "wall_us")}} for s in tree.steps]


#: Keys of a table that hold numeric columns (sent as float64 buffers in the binary form).
_NUMERIC_TABLES = ("num", "low", "high")


def _json_table(table: dict[str, Any]) -> dict[str, Any]:
    out = dict(table)
    out["flags"] = list(table["flags"])
    for key in _NUMERIC_TABLES:
        if key in table:
            out[key] = {c: v if isinstance(v, dict) else _clean(v) for c, v in table[key].items()}
    return out


def payload_json(data: dict[str, Any]) -> dict[str, Any]:
    """The payload with plain lists everywhere (NaN -> null), for JSON."""
    out = _json_table(data)
    if data.get("all_steps") is not None:
        out["all_steps"] = _json_table(data["all_steps"])
    return out


def payload_bytes(data: dict[str, Any], level: int = 6) -> bytes:
    """The payload packed for the widget: ``TPF1``, the JSON header's length (uint32 LE), the
    header, then 8-byte aligned little-endian buffers (int32 parents, flag bytes, float64
    columns, of the tree and of the folded steps) that the header points into; all
    zlib-compressed."""
    buffers: list[bytes] = []
    offset = 0

    def put(raw: bytes, length: int) -> dict[str, int]:
        nonlocal offset
        ref = {"offset": offset, "length": length}
        pad = -len(raw) % 8
        buffers.append(raw + b"\0" * pad)
        offset += len(raw) + pad
        return ref

    def typed(code: str, values: Any) -> bytes:
        arr = array(code, values)
        if sys.byteorder == "big":
            arr.byteswap()
        return arr.tobytes()

    def pack(table: dict[str, Any]) -> dict[str, Any]:
        header = dict(table)
        header["parent"] = put(typed("i", table["parent"]), table["n"])
        header["flags"] = put(bytes(table["flags"]), table["n"])
        for key in _NUMERIC_TABLES:
            if key in table:
                header[key] = {c: v if isinstance(v, dict) else put(typed("d", v), table["n"]) for c, v in table[key].items()}
        return header

    header = pack(data)
    if data.get("all_steps") is not None:
        header["all_steps"] = pack(data["all_steps"])
    head = json.dumps(header, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")
    start = 8 + len(head)
    blob = b"".join([MAGIC, struct.pack("<I", len(head)), head, b"\0" * (-start % 8), *buffers])
    return zlib.compress(blob, level)
