"""Which rows a view shows, in which order, with which values: the rules every view shares
(terminal table, static HTML, the widget's ``view_df``). ``js/src/rows.js`` implements the same rules
for the browser; tests/js/crosscheck.test.mjs holds the two together."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .._tree.tree import Tree
from .._vocab import COLUMN, DEFAULT_SORT, LAYER_KINDS, SORT_ALIASES, SORTABLE, STEP_PREFIX, NodeKind, is_missing

#: Sort keys that are text (everything else sortable is a number).
TEXT_SORT = tuple(c for c in SORTABLE if not COLUMN[c].numeric)
#: What the min-percent threshold compares, whatever the sort: the viewed root's CPU total. (A
#: threshold on the sort column hid the optimizer's 780 ms when sorting by backward time.)
THRESHOLD_COLUMN = "cpu_us"
#: A search that starts with this matches paths instead of names.
PATH_SEARCH = "path:"
_REGION = NodeKind.REGION.label


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
    """The column whose values a view shows for ``column`` when either every op row shows or none
    does: with operator rows hidden, a layer's self time includes its ops
    (:attr:`~torchprof._vocab.Column.layer_alt`). :func:`shown_values` is the exact rule."""
    if show_ops:
        return column
    spec = COLUMN.get(column)
    return spec.layer_alt if spec is not None and spec.layer_alt else column


def threshold_column(sort_key: str) -> str:
    """What the min-percent threshold compares: CPU total, whatever ``sort_key`` is."""
    return THRESHOLD_COLUMN


def _glob_test(pattern: str) -> Callable[[str], bool]:
    return lambda text: fnmatch.fnmatchcase(text, pattern)


def text_test(pattern: str) -> Callable[[str], bool]:
    """One lower-cased pattern against one lower-cased name: a pattern with ``*?[`` is a glob of
    the whole name (``conv?``), anything else a substring (``conv`` finds ``conv1``)."""
    if any(ch in pattern for ch in "*?["):
        return _glob_test(pattern)
    return lambda text: pattern in text


def type_test(pattern: str) -> Callable[[str], bool]:
    """One lower-cased pattern against one lower-cased module class: a glob of the whole class
    (``batchnorm*``), anything else the whole class (``conv2d``; ``conv2`` finds layers named
    conv2, not every ``Conv2d``)."""
    if any(ch in pattern for ch in "*?["):
        return _glob_test(pattern)
    return lambda text: text == pattern


_PATH_PARTS = re.compile(r"[./]")


def path_test(pattern: str) -> Callable[[str], bool]:
    """One lower-cased pattern against one lower-cased path: a glob matches the whole path or any
    tail of it that starts after a ``.`` or ``/`` (``layer4.*.conv?`` finds
    ``resnet.layer4.0.conv1``); anything else is a substring."""
    if not any(ch in pattern for ch in "*?["):
        return lambda text: pattern in text
    whole = _glob_test(pattern)

    def test(text: str) -> bool:
        return whole(text) or any(whole(text[m.end() :]) for m in _PATH_PARTS.finditer(text))

    return test


def row_matcher(search: str | Iterable[str] | None) -> Callable[..., bool] | None:
    """The search rule: ``(name, path, type=None) -> matches`` (either case), or None when nothing
    is searched. A pattern matches names (:func:`text_test`) and a module's whole class (``type``,
    :func:`type_test`: ``Conv2d`` finds every convolution); one starting ``path:`` matches paths
    (:func:`path_test`).
    Several patterns: any."""
    if isinstance(search, str):
        search = [search] if search.strip() else []
    tests: list[tuple[bool, Callable[[str], bool], Callable[[str], bool]]] = []
    for pattern in search or ():
        p = pattern.lower()
        if p.startswith(PATH_SEARCH):
            on_path = path_test(p[len(PATH_SEARCH) :].strip())
            tests.append((True, on_path, on_path))
        else:
            tests.append((False, text_test(p), type_test(p)))
    if not tests:
        return None

    def matches(name: str, path: str, type: str | None = None) -> bool:
        n, p = name.lower(), path.lower()
        t = type.lower() if type else None
        return any(test(p) if on_path else test(n) or (t is not None and of_type(t)) for on_path, test, of_type in tests)

    return matches


def subtree_end(tree: Tree, root: int) -> int:
    """One past the last row of ``root``'s subtree (rows are in pre-order, so a subtree is the
    contiguous run of rows deeper than ``root`` after it). O(subtree)."""
    depth = tree.columns["depth"]
    end = root + 1
    n = len(tree)
    while end < n and depth[end] > depth[root]:
        end += 1
    return end


def select_rows(
    tree: Tree,
    *,
    min_pct: float = 0.0,
    sort_by: str | Sequence[str] | None = DEFAULT_SORT,
    show_ops: bool = False,
    search: str | Iterable[str] | None = None,
    max_depth: int | None = None,
    keep: Sequence[bool] | None = None,
    root: int = 0,
) -> list[bool]:
    """The selection half of :func:`visible_rows`: True for rows of ``root``'s subtree the filters
    keep (kind, threshold on CPU total, search, depth, and ``keep``: a mask of rows that may be
    selected at all) and for their ancestors up to ``root``, before expansion and sorting.
    ``sort_by`` is accepted for callers of the old rule and plays no part. O(n)."""
    cols = tree.columns
    n = len(tree)
    shown = [False] * n
    if n == 0:
        return shown
    kinds, depth, names = cols["kind"], cols["depth"], cols["name"]
    values = cols[THRESHOLD_COLUMN]
    base = values[root]
    use_pct = min_pct > 0 and not is_missing(base) and base != 0
    match = row_matcher(search)
    paths = cols["path"] if match is not None else []  # full paths only when a search reads them
    types = cols["type"]
    module = NodeKind.MODULE.label
    end = subtree_end(tree, root)

    shown[root] = True
    for i in range(root + 1, end):
        if keep is not None and not keep[i]:
            continue
        if not show_ops and kinds[i] not in LAYER_KINDS:
            continue
        if max_depth is not None and depth[i] > max_depth:
            continue
        if use_pct:
            v = values[i]
            if is_missing(v) or 100.0 * abs(v) / abs(base) < min_pct:
                continue
        if match is not None and not match(names[i], paths[i], types[i] if kinds[i] == module else None):
            continue
        shown[i] = True
    # Ancestors of shown rows: parents precede children in pre-order, so one backward sweep.
    parent = tree.parent_index
    for i in range(end - 1, root, -1):
        if shown[i]:
            shown[parent[i]] = True
    return shown


def shown_values(tree: Tree, column: str, shown: Sequence[bool]) -> list[Any]:
    """The values a view shows for ``column`` given the rows it shows.

    A self column (one with :attr:`~torchprof._vocab.Column.subtree`) counts, on each row, the op
    and kernel children the view does not show: their subtree value folds into the row's self, so
    a number only changes when a row appears or disappears beside it (ticking "aten ops" while a
    threshold hides every op row changes nothing). Where no op child shows this is exactly the
    layer column (:attr:`~torchprof._vocab.Column.layer_alt`), where all show exactly the self
    column; in between, self plus each hidden child in row order. Other columns are returned as
    they are. O(n)."""
    spec = COLUMN.get(column)
    values = tree.columns[column]
    if spec is None or spec.subtree is None or spec.layer_alt is None:
        return values
    cols = tree.columns
    layer, sub, kinds = cols[spec.layer_alt], cols[spec.subtree], cols["kind"]
    parent = tree.parent_index
    n = len(tree)
    op_kids = [0] * n
    shown_kids = [0] * n
    hidden_sum = [0.0] * n
    for i in range(1, n):
        if kinds[i] in LAYER_KINDS:
            continue
        p = parent[i]
        op_kids[p] += 1
        if shown[i]:
            shown_kids[p] += 1
        elif not is_missing(sub[i]):
            hidden_sum[p] += sub[i]
    out = list(values)
    for i in range(n):
        if op_kids[i] == 0 or shown_kids[i] == 0:
            out[i] = layer[i]
        elif shown_kids[i] < op_kids[i] and not is_missing(values[i]):
            out[i] = values[i] + hidden_sum[i]
    return out


def is_step_row(kind: str, name: str) -> bool:
    """A ``ProfilerStep#N`` region: steps keep their chronological order in every sort."""
    return kind == _REGION and name.startswith(STEP_PREFIX)


def visible_rows(
    tree: Tree,
    *,
    min_pct: float = 0.0,
    sort_by: str | Sequence[str] | None = DEFAULT_SORT,
    ascending: bool = False,
    show_ops: bool = False,
    search: str | Iterable[str] | None = None,
    expanded: set[str] | None = None,
    max_depth: int | None = None,
    keep: Sequence[bool] | None = None,
    root: int = 0,
) -> list[int]:
    """Row indices to show, in display order, starting at ``root`` (a step being viewed).

    A row is *selected* when its kind is shown (modules and regions, plus ops and kernels with
    ``show_ops``), its CPU total is at least ``min_pct`` percent of ``root``'s, and it matches
    ``search`` (:func:`row_matcher`). Ancestors of selected rows are shown too, so the hierarchy
    never breaks. ``expanded`` (paths) hides the children of collapsed rows; ``max_depth`` cuts
    deeper rows; ``keep`` (one bool per row) limits which rows can be selected. Siblings are
    ordered by ``sort_by`` (as :func:`shown_values` gives it; missing values last, text in natural
    order) after any ``ProfilerStep#N`` rows among them, which stay in the order they ran. O(n)
    plus the sibling sorts.
    """
    n = len(tree)
    if n == 0:
        return []
    shown = select_rows(tree, min_pct=min_pct, show_ops=show_ops, search=search, max_depth=max_depth, keep=keep,
                        root=root)  # fmt: skip
    children: list[list[int]] = [[] for _ in range(n)]
    parent = tree.parent_index
    for i in range(root + 1, subtree_end(tree, root)):
        if shown[i]:
            children[parent[i]].append(i)
    key = resolve_sort(sort_by)
    cols = tree.columns
    order_kids = sibling_order(shown_values(tree, key, shown), key in TEXT_SORT, ascending)
    kinds, names, exec_order = cols["kind"], cols["name"], cols["exec_order"]
    paths = tree.paths  # a row's path is built only when ``expanded`` asks (linear at any depth)
    out: list[int] = []
    stack = [root]
    while stack:
        i = stack.pop()
        out.append(i)
        if expanded is not None and i != root and paths[i] not in expanded:
            continue
        kids = children[i]
        if kids:
            steps = [k for k in kids if is_step_row(kinds[k], names[k])]
            if steps:
                steps.sort(key=lambda k: exec_order[k])
                rest = [k for k in kids if not is_step_row(kinds[k], names[k])]
                kids = steps + order_kids(rest)
            else:
                kids = order_kids(kids)
            stack.extend(reversed(kids))
    return out


_DIGITS = re.compile(r"([0-9]+)")  # ASCII digits only, as in JS


def natural_key(text: str) -> list[tuple[int, int, str]]:
    """Sort key of a text in natural order, case-insensitively: runs of digits compare as numbers
    (``layer2`` before ``layer10``; ``0, 1, 2, ..., 10``, not ``0, 1, 10, 100``), at any length
    (by digit count, then digits, so no precision is lost). A digit run sorts before text at
    the same place. ``naturalKey`` in widget.js is the same function."""
    out: list[tuple[int, int, str]] = []
    for k, part in enumerate(_DIGITS.split(text.lower())):
        if not part:
            continue
        if k % 2:
            digits = part.lstrip("0") or "0"
            out.append((0, len(digits), digits))
        else:
            out.append((1, 0, part))
    return out


def sibling_order(values: list[Any], text: bool, ascending: bool) -> Callable[[list[int]], list[int]]:
    """Sorts siblings by ``values``: stable (ties keep tree order), missing values last in either
    direction, text in natural order."""

    def sort_key(i: int) -> tuple[bool, Any]:
        v = values[i]
        missing = is_missing(v)
        return (missing, 0.0 if missing else (v if ascending else -v))

    def order(kids: list[int]) -> list[int]:
        if text:
            # reverse=True keeps ties in tree order; missing values still go last.
            present = [i for i in kids if values[i] is not None]
            present.sort(key=lambda i: natural_key(str(values[i])), reverse=not ascending)
            return present + [i for i in kids if values[i] is None]
        return sorted(kids, key=sort_key)

    return order
