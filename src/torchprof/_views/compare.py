"""Views of a comparison of two runs: ``cmp.df``, ``cmp.by_name()``, the diff tree table
(``print(cmp)``) and the report page. The widget (``compare_widget.py``) and the page run the
profile's own front end, fed a payload whose vocabulary is the comparison's columns
(:data:`~torchprof._vocab.COMPARE_COLUMNS`); its rules are the profile's (:mod:`.rows`), with the
row's size as the threshold and any comparison column as the sort."""

from __future__ import annotations

import html
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .._tree.diff import Diff
from .._tree.summary import Summary
from .._tree.tree import Columns, Tree
from .._vocab import (
    COMPARE_COLUMNS,
    COMPARE_FLAME_COLOURS,
    COMPARE_FLAME_METRICS,
    COMPARE_NARROW_DROP_ORDER,
    COMPARE_VIEW_COLUMNS,
    COMPARE_VIEW_EXTRA,
    COMPARE_VIEWS,
    DEFAULT_MIN_PCT,
    DEFAULT_WIDTH,
    Column,
    Status,
    is_missing,
)
from . import format as fmt
from .html import FALLBACK_CLASS, FALLBACK_CSS, report_page
from .payload import payload, payload_json
from .rows import is_step_row, select_rows, sibling_order
from .state import ViewState, check_choice, check_state
from .table import DEPTH_COLOURS, ELIDED, MAX_GUIDES, NAME_MIN, NAME_SOFT_LIMIT, RESET, clip_middle

if TYPE_CHECKING:
    import pandas as pd

#: Everything a comparison's views carry: ``cmp.df``'s columns and the view-only ones.
REGISTRY: tuple[Column, ...] = COMPARE_COLUMNS + COMPARE_VIEW_EXTRA
SPEC: dict[str, Column] = {c.name: c for c in REGISTRY}
SORTABLE: tuple[str, ...] = tuple(c.name for c in REGISTRY if c.sortable)
#: The size column: the front end falls back to ``cpu_us`` for the threshold, as in a profile.
SIZE = "cpu_us"
_GREEN, _RED = "\x1b[32m", "\x1b[31m"


def default_sort(diff: Diff) -> str:
    """The absolute change of the time the comparison is measured in (:attr:`Diff.metric`)."""
    return f"abs_{diff.metric}_delta"


def resolve_sort(sort_by: str | Sequence[str] | None, default: str) -> str:
    """A comparison column to sort by (``None``: ``default``); ValueError naming the choices."""
    if sort_by is not None and not isinstance(sort_by, str):
        sort_by = sort_by[0] if sort_by else None
    if sort_by is None:
        return default
    if sort_by not in SORTABLE:
        raise ValueError(f"cannot sort a comparison by {sort_by!r}; choose one of: {', '.join(SORTABLE)}")
    return sort_by


# -- DataFrames ------------------------------------------------------------------------------------
def compare_frame(tree: Tree, rows: Sequence[int] | None = None) -> pd.DataFrame:
    """``cmp.df``: one row per node of the union, indexed by path, the columns of
    :data:`~torchprof._vocab.COMPARE_COLUMNS`; ``rows`` picks and orders a subset."""
    import pandas as pd

    names = [c.name for c in COMPARE_COLUMNS]
    cols = tree.columns
    data = {c: cols[c] if rows is None else [cols[c][i] for i in rows] for c in names}
    df = pd.DataFrame(data, columns=names)
    df["depth"] = df["depth"].astype("int64")
    df.index = pd.Index(list(data["path"]))
    return df


def by_name_frame(rows: list[dict[str, Any]], figures: list[str]) -> pd.DataFrame:
    """``cmp.by_name()``: one row per op or kernel name, indexed by name."""
    import pandas as pd

    df = pd.DataFrame(rows, columns=["name", "kind", *figures])
    return df.set_index("name")


# -- rows ----------------------------------------------------------------------------------------------
def view_tree(diff: Diff) -> Tree:
    """The comparison's tree as the tables show it: a row only one run has says so in its name
    (``conv3 (added)``), so it reads as such in every view and a search for "added" finds it."""
    source = diff.tree.columns
    names = [name if status == Status.BOTH else f"{name} ({status})" for name, status in zip(source["name"], source["status"])]
    if isinstance(source, Columns):  # the paths stay compact (built only when asked)
        cols: dict[str, list[Any]] = Columns({**dict(source.stored()), "name": names}, source.paths, source.parent_index, source.order)
    else:
        cols = {**source, "name": names}
    return replace(diff.tree, columns=cols)


def compare_rows(
    tree: Tree,
    *,
    sort_by: str,
    min_pct: float = 0.0,
    ascending: bool = False,
    show_ops: bool = False,
    search: str | Iterable[str] | None = None,
    expanded: set[str] | None = None,
    max_depth: int | None = None,
) -> list[int]:
    """Row indices to show, in display order: a profile's rules (:func:`~.rows.visible_rows`,
    what the front end applies to a comparison's payload too) with the row's size as the
    threshold and ``sort_by`` any comparison column."""
    n = len(tree)
    if n == 0:
        return []
    shown = select_rows(tree, min_pct=min_pct, sort_by=SIZE, show_ops=show_ops, search=search, max_depth=max_depth)
    children: list[list[int]] = [[] for _ in range(n)]
    parent = tree.parent_index
    for i in range(1, n):
        if shown[i]:
            children[parent[i]].append(i)
    order_kids = sibling_order(tree.columns[sort_by], not SPEC[sort_by].numeric, ascending)
    paths, kinds, names = tree.paths, tree.columns["kind"], tree.columns["name"]
    out: list[int] = []
    stack = [0]
    while stack:
        i = stack.pop()
        out.append(i)
        if expanded is not None and i != 0 and paths[i] not in expanded:
            continue
        kids = children[i]
        if kids:
            # The folded ProfilerStep#* row first among its siblings, as a profile's steps are.
            steps = [k for k in kids if is_step_row(kinds[k], names[k])]
            rest = [k for k in kids if not is_step_row(kinds[k], names[k])] if steps else kids
            stack.extend(reversed(steps + order_kids(rest)))
    return out


def check_compare_state(tree: Tree, state: dict[str, Any], default: str) -> ViewState:
    """Complete, checked view state for a comparison (a profile's checks, its own sort keys)."""
    checked = check_state(tree, {**{k: v for k, v in state.items() if k not in ("flame_colour", "metric")}, "sort_by": SIZE})
    checked["sort_by"] = resolve_sort(state.get("sort_by"), default)
    checked["flame_colour"] = check_choice("flame_colour", state.get("flame_colour", COMPARE_FLAME_COLOURS[0]), COMPARE_FLAME_COLOURS)
    checked["metric"] = check_choice("metric", state.get("metric", COMPARE_FLAME_METRICS[0]), COMPARE_FLAME_METRICS)
    if checked["view"] not in COMPARE_VIEWS:
        raise ValueError(f"view must be one of {', '.join(COMPARE_VIEWS)} for a comparison; got {checked['view']!r}")
    return checked


def view_columns(tree: Tree) -> list[Column]:
    """The comparison's table columns that hold something below the root (not all missing, not
    all zero), as the front end's ``columnsFor`` picks them."""
    return [SPEC[name] for name in COMPARE_VIEW_COLUMNS if any(not is_missing(v) and v != 0 for v in tree.columns[name][1:])]


# -- text ----------------------------------------------------------------------------------------------
def signed(spec: Column, value: float) -> str:
    """A delta as the tables write it: ``+1.20ms``, ``-830µs``."""
    text = fmt.value_text(spec.unit, value)
    return "+" + text if value > 0 else text


def cell_text(tree: Tree, spec: Column, row: int, percent: bool = True) -> str:
    """A base or new value, or a delta with its sign and (unless ``percent`` is False) its share of
    the base run's total (``+1.20ms (+3.1%)``); empty for a missing value and for zero."""
    v = tree.columns[spec.name][row]
    if is_missing(v) or v == 0:
        return ""
    if not spec.name.endswith("_delta"):
        return fmt.value_text(spec.unit, v)
    text = signed(spec, v)
    whole = tree.columns[spec.percent_of][0] if spec.percent_of else None
    if percent and whole and not is_missing(whole):
        pct = fmt.percent(v, whole)
        text += f" ({'+' if v > 0 else ''}{pct})"
    return text


def _change(base: float, new: float) -> str:
    if is_missing(base) or is_missing(new):
        return ""
    d = new - base
    if d == 0:
        return f"{fmt.time_us(base)} → {fmt.time_us(new)} (no change)"
    pct = f", {'+' if d > 0 else ''}{fmt.percent(d, base)}" if base else ""
    return f"{fmt.time_us(base)} → {fmt.time_us(new)} ({'+' if d > 0 else ''}{fmt.time_us(d)}{pct})"


def summary_items(diff: Diff, labels: tuple[str, str], summaries: tuple[Summary, Summary]) -> list[tuple[str, str, str]]:
    """The comparison's headline, as ``(label, value, explanation)``: what is compared with what,
    each total before and after, and whether figures are per step."""
    cols = diff.tree.columns
    base_s, new_s = summaries
    per = [1.0 / diff.base_steps, 1.0 / diff.new_steps] if diff.per_step else [1.0, 1.0]
    items = [("base", labels[0], "The run compared against"), ("new", labels[1], "The run whose change is measured")]
    if diff.per_step:
        items.append(("per step", f"base {diff.base_steps} steps, new {diff.new_steps} steps",
                      "The runs recorded different numbers of ProfilerSteps: every figure is per step"))  # fmt: skip
    nan = float("nan")
    for label, base, new, about in (("wall", base_s.get("wall_us", nan), new_s.get("wall_us", nan), "Wall time of each run"),
                                    ("GPU busy", base_s.get("gpu_busy_us", nan), new_s.get("gpu_busy_us", nan), "Time any device stream was busy")):  # fmt: skip
        text = _change(base * per[0], new * per[1])
        if text:
            items.append((label, text, about))
    for label, key, about in (("CPU", "cpu_us", "CPU total of each run"), ("CUDA", "cuda_us", "Device time of each run, summed over streams")):
        text = _change(cols[f"{key}_base"][0], cols[f"{key}_new"][0])
        if text:
            items.append((label, text, about))
    changed = sum(1 for s in cols["status"] if s != Status.BOTH)
    if changed:
        added = sum(1 for s in cols["status"] if s == Status.ADDED)
        items.append(("rows", f"{added} added, {changed - added} removed", "Rows only one of the runs has"))
    if diff.roots:
        items.append(("matched roots", ", ".join(f"{b} = {n}" for b, n in diff.roots.items()),
                      "Root modules named differently in the two runs (a notebook's variable, a script's class), compared as one"))  # fmt: skip
    if diff.layers and diff.matched < LITTLE_MATCHED * diff.layers:
        items.append(("little matched", f"only {diff.matched} of {diff.layers} layers are in both runs",
                      "The runs share few layers: a different model, or layers named otherwise; their figures are compared as added and removed"))  # fmt: skip
    return items


#: A comparison in which fewer than this share of the layers are in both runs says so.
LITTLE_MATCHED = 0.5


def summary_line(items: list[tuple[str, str, str]]) -> str:
    return fmt.printable(" · ".join(f"{label} {value}" for label, value, _ in items))


def render_table(
    diff: Diff,
    items: list[tuple[str, str, str]],
    *,
    min_pct: float = DEFAULT_MIN_PCT,
    sort_by: str | Sequence[str] | None = None,
    ascending: bool = False,
    show_ops: bool = False,
    filter: Iterable[str] | str | None = None,
    max_depth: int | None = None,
    colour: bool = False,
    max_name: int = 60,
    width: int | None = DEFAULT_WIDTH,
) -> str:
    """``print(cmp)``: the summary line and the diff tree, siblings by the size of their change
    (``sort_by``), guides as in a profile's table; with ``colour`` a faster time is green, a
    slower one red. ``width`` (characters, None: no limit) is met as a profile's table meets it:
    long names lose their middle, then the deltas their percentages, then columns of
    :data:`~torchprof._vocab.COMPARE_NARROW_DROP_ORDER` go, and a line under the table says which."""
    tree = view_tree(diff)
    key = resolve_sort(sort_by, default_sort(diff))
    rows = compare_rows(tree, sort_by=key, min_pct=min_pct, ascending=ascending, show_ops=show_ops, search=filter,
                        max_depth=max_depth)  # fmt: skip
    cols = tree.columns
    spec = view_columns(tree)
    parent = tree.parent_index
    shown_children: dict[int, list[int]] = {}
    for r in rows[1:]:
        shown_children.setdefault(parent[r], []).append(r)
    last = {kids[-1] for kids in shown_children.values()}
    prefix_of: dict[int, str] = {rows[0]: ""}
    guides = [""]
    names = [fmt.printable(cols["name"][rows[0]])]
    deepest = 2 * MAX_GUIDES
    for r in rows[1:]:
        base = prefix_of[parent[r]]
        is_last = r in last
        prefix = base + ("  " if is_last else "│ ")
        prefix_of[r] = prefix if len(prefix) <= deepest else ELIDED + prefix[len(prefix) - deepest + len(ELIDED) :]
        guides.append(base + ("└──" if is_last else "├──"))
        names.append(fmt.printable(cols["name"][r]))
    spec, limit, percent, dropped = _fit(tree, rows, spec, guides, names, key, max_name, width)
    labels = [g + clip_middle(n, limit) for g, n in zip(guides, names)]
    header = ["Node"] + [c.label for c in spec]
    body = [[cell_text(tree, c, r, percent) for c in spec] for r in rows]
    widths = [max(len(header[0]), *(len(s) for s in labels))]
    for j in range(len(spec)):
        widths.append(max(len(header[j + 1]), *(len(row[j]) for row in body)))
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    line = summary_line(items)
    out = [*(textwrap.wrap(line, width, break_long_words=False, break_on_hyphens=False) if width else [line]), rule,
           "| " + " | ".join([header[0].ljust(widths[0])] + [h.rjust(w) for h, w in zip(header[1:], widths[1:])]) + " |",
           "|" + "+".join("-" * (w + 2) for w in widths) + "|"]  # fmt: skip
    for r, label, cells in zip(rows, labels, body):
        name_cell = label.ljust(widths[0])
        texts = [c.rjust(w) for c, w in zip(cells, widths[1:])]
        if colour:
            name_cell = DEPTH_COLOURS[cols["depth"][r] % len(DEPTH_COLOURS)] + name_cell + RESET
            for j, c in enumerate(spec):
                v = cols[c.name][r]
                if c.delta and not is_missing(v) and v != 0:
                    texts[j] = (_GREEN if v < 0 else _RED) + texts[j] + RESET
        out.append("| " + " | ".join([name_cell, *texts]) + " |")
    out.append(rule)
    if dropped:
        note = f"left out to fit {width} characters: {', '.join(SPEC[c].label for c in dropped)}"
        out += textwrap.wrap(note, width, break_long_words=False) if width else [note]
    return "\n".join(out)


def _fit(tree: Tree, rows: list[int], spec: list[Column], guides: list[str], names: list[str], sort_key: str,
         max_name: int, width: int | None) -> tuple[list[Column], int, bool, list[str]]:  # fmt: skip
    """What the table keeps to fit ``width``: its columns, the longest name, whether deltas keep
    their percentages, and the columns left out (in the order they went). Each step gives up what
    a reader misses least: long names' middles down to a soft limit, the call counts, the deltas'
    percentages, the other columns of :data:`~torchprof._vocab.COMPARE_NARROW_DROP_ORDER`, then
    names down to the floor."""
    widths = {True: {c.name: max([len(c.label)] + [len(cell_text(tree, c, r)) for r in rows]) for c in spec},
              False: {c.name: max([len(c.label)] + [len(cell_text(tree, c, r, False)) for r in rows]) for c in spec}}  # fmt: skip
    columns, limit, percent, dropped = list(spec), max_name, True, []

    def total() -> int:
        name = max([len("Node")] + [len(g) + min(len(n), limit) for g, n in zip(guides, names)])
        cells = [name] + [widths[percent][c.name] for c in columns]
        return sum(cells) + 3 * len(cells) + 1

    def fits() -> bool:
        return width is None or total() <= width

    def shorten(floor: int) -> None:
        nonlocal limit
        while not fits() and limit > floor:
            limit -= 1

    def drop(names: Sequence[str]) -> None:
        nonlocal columns
        for name in names:
            if fits():
                return
            if name == sort_key or all(c.name != name for c in columns):
                continue
            columns = [c for c in columns if c.name != name]
            dropped.append(name)

    shorten(NAME_SOFT_LIMIT)
    drop([c for c in COMPARE_NARROW_DROP_ORDER if c.startswith("calls_")])  # call counts rarely change
    if not fits():
        percent = False
    drop(COMPARE_NARROW_DROP_ORDER)
    shorten(NAME_MIN)
    return columns, limit, percent, dropped


# -- the front end ------------------------------------------------------------------------------------
def compare_payload(diff: Diff, items: list[tuple[str, str, str]], label: str) -> dict[str, Any]:
    """The comparison as the widget's payload: the profile's wire format with the comparison's
    columns as its vocabulary (delta columns flagged for colouring) and its summary items. Its views
    are the Table and the Flame (sized by each row's larger CPU total): the Top view ranks self
    times, which a comparison does not have."""
    return payload(view_tree(diff), {"name": label}, columns=REGISTRY, view_columns=COMPARE_VIEW_COLUMNS,
                   views=COMPARE_VIEWS, flame_colours=COMPARE_FLAME_COLOURS, items=items)  # fmt: skip


def report_html(diff: Diff, items: list[tuple[str, str, str]], label: str, **state: Any) -> str:
    """``cmp.to_html()``: one self-contained page with the comparison's interactive view, built as
    a profile's report (:func:`~.html.report_html`: inlined module, escaped data, a
    Content-Security-Policy allowing only the page's own code)."""
    tree = view_tree(diff)
    spec = {"state": check_compare_state(tree, state, default_sort(diff)),
            "payload": payload_json(compare_payload(diff, items, label))}  # fmt: skip
    return report_page(spec, label)


def static_html(text: str) -> str:
    """Where no widget can run (nbconvert, GitHub): the diff table as preformatted text."""
    return (f"<style>{FALLBACK_CSS}</style><div class=\"{FALLBACK_CLASS}\">"
            f"<pre class=\"torchprof-static\" style=\"font-size:12px\">{html.escape(text)}</pre></div>")
