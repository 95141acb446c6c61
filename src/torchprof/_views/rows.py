"""Which rows a view shows, in which order: the rules every view shares (terminal table, static
HTML, the widget's ``view_df``). ``js/widget.js`` implements the same rules for the browser."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .._tree.tree import Tree
from .._vocab import COLUMN, LAYER_KINDS, SORT_ALIASES, SORTABLE, is_missing

#: Sort keys that are text (everything else sortable is a number).
TEXT_SORT = tuple(c for c in SORTABLE if not COLUMN[c].numeric)


def resolve_sort(sort_by: str | Sequence[str] | None) -> str:
    """A column name for ``sort_by`` (accepts torch-style names and the seed's list form)."""
    if sort_by is None:
        return "cpu_us"
    if not isinstance(sort_by, str):
        if not sort_by:
            return "cpu_us"
        sort_by = sort_by[0]
    key = SORT_ALIASES.get(sort_by, sort_by)
    if key not in SORTABLE:
        choices = [c for c in SORTABLE if COLUMN[c].rollup != "none"] + [c for c in SORTABLE if COLUMN[c].rollup == "none"]
        raise ValueError(f"cannot sort by {sort_by!r}; choose one of: {', '.join(choices)}")
    return key


def value_column(column: str, show_ops: bool) -> str:
    """The column whose values a view shows for ``column``: with operator rows hidden, a layer's
    self time includes its ops (:attr:`~torchprof._vocab.Column.layer_alt`)."""
    if show_ops:
        return column
    spec = COLUMN.get(column)
    return spec.layer_alt if spec is not None and spec.layer_alt else column


def threshold_column(sort_key: str) -> str:
    """What the min-percent threshold compares: the sort column when it is a time, else CPU total."""
    spec = COLUMN.get(sort_key)
    return sort_key if spec is not None and spec.threshold else "cpu_us"


def _matcher(patterns: Iterable[str]) -> Callable[[str], bool]:
    compiled = []
    for pattern in patterns:
        p = pattern.lower()
        glob = any(ch in p for ch in "*?[")
        compiled.append((p, glob))

    def matches(text: str) -> bool:
        t = text.lower()
        for p, glob in compiled:
            if (fnmatch.fnmatchcase(t, p) or fnmatch.fnmatchcase(t.rsplit(".", 1)[-1], p)) if glob else p in t:
                return True
        return False

    return matches


def select_rows(
    tree: Tree,
    *,
    min_pct: float = 0.0,
    sort_by: str | Sequence[str] | None = "cpu_us",
    show_ops: bool = False,
    search: str | Iterable[str] | None = None,
    max_depth: int | None = None,
    keep: Sequence[bool] | None = None,
) -> list[bool]:
    """The selection half of :func:`visible_rows`: True for rows the filters keep (kind,
    threshold, search, depth, and ``keep``: a mask of rows that may be selected at all) and for
    their ancestors, before expansion and sorting. O(n)."""
    cols = tree.columns
    n = len(tree)
    kinds, depth, paths, names = cols["kind"], cols["depth"], cols["path"], cols["name"]
    values = cols[value_column(threshold_column(resolve_sort(sort_by)), show_ops)]
    base = values[0] if n else None
    use_pct = min_pct > 0 and base is not None and not is_missing(base) and base != 0
    if isinstance(search, str):
        search = [search] if search.strip() else []
    match = _matcher(search) if search else None

    shown = [False] * n
    if n:
        shown[0] = True
    for i in range(1, n):
        if keep is not None and not keep[i]:
            continue
        if not show_ops and kinds[i] not in LAYER_KINDS:
            continue
        if max_depth is not None and depth[i] > max_depth:
            continue
        if use_pct:
            v = values[i]
            if is_missing(v) or 100.0 * abs(v) / abs(base) < min_pct:  # type: ignore[arg-type]
                continue
        if match is not None and not (match(names[i]) or match(paths[i])):
            continue
        shown[i] = True
    # Ancestors of shown rows: parents precede children in pre-order, so one backward sweep.
    parent = tree.parent_index
    for i in range(n - 1, 0, -1):
        if shown[i]:
            shown[parent[i]] = True
    return shown


def visible_rows(
    tree: Tree,
    *,
    min_pct: float = 0.0,
    sort_by: str | Sequence[str] | None = "cpu_us",
    ascending: bool = False,
    show_ops: bool = False,
    search: str | Iterable[str] | None = None,
    expanded: set[str] | None = None,
    max_depth: int | None = None,
    keep: Sequence[bool] | None = None,
) -> list[int]:
    """Row indices to show, in display order.

    A row is *selected* when its kind is shown (modules and regions, plus ops and kernels with
    ``show_ops``), its value of the threshold metric is at least ``min_pct`` percent of the root's,
    and it matches ``search`` (a substring or glob of its name or path; several patterns = any).
    Ancestors of selected rows are shown too, so the hierarchy never breaks. ``expanded`` (paths)
    hides the children of collapsed rows; ``max_depth`` cuts deeper rows; ``keep`` (one bool per
    row) limits which rows can be selected. Siblings are ordered by
    ``sort_by`` (missing values last). O(n) plus the sibling sorts.
    """
    n = len(tree)
    if n == 0:
        return []
    shown = select_rows(tree, min_pct=min_pct, sort_by=sort_by, show_ops=show_ops, search=search, max_depth=max_depth,
                        keep=keep)  # fmt: skip
    children: list[list[int]] = [[] for _ in range(n)]
    parent = tree.parent_index
    for i in range(1, n):
        if shown[i]:
            children[parent[i]].append(i)
    key = resolve_sort(sort_by)
    order_kids = _sibling_order(tree.columns[value_column(key, show_ops)], key in TEXT_SORT, ascending)
    paths = tree.columns["path"]
    out: list[int] = []
    stack = [0]
    while stack:
        i = stack.pop()
        out.append(i)
        if expanded is not None and i != 0 and paths[i] not in expanded:
            continue
        kids = children[i]
        if kids:
            stack.extend(reversed(order_kids(kids)))
    return out


def _sibling_order(values: list[Any], text: bool, ascending: bool) -> Callable[[list[int]], list[int]]:
    """Sorts siblings by ``values``: stable (ties keep tree order), missing values last in either
    direction, text case-insensitively."""

    def sort_key(i: int) -> tuple[bool, Any]:
        v = values[i]
        if text:
            return (v is None, str(v).lower() if v is not None else "")
        missing = is_missing(v)
        return (missing, 0.0 if missing else (v if ascending else -v))

    def order(kids: list[int]) -> list[int]:
        if text and not ascending:
            # reverse=True keeps ties in tree order; missing values still go last.
            present = [i for i in kids if values[i] is not None]
            present.sort(key=lambda i: str(values[i]).lower(), reverse=True)
            return present + [i for i in kids if values[i] is None]
        return sorted(kids, key=sort_key)

    return order
