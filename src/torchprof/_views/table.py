"""The terminal tree table (``print(prof)``, ``prof.display()``)."""

from __future__ import annotations

import os
import sys
import textwrap
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._tree.hotpath import hot_path
from .._tree.summary import busy_threads, threads_at_once
from .._tree.tree import Tree
from .._vocab import (
    COLUMN,
    DEFAULT_MIN_PCT,
    DEFAULT_SORT,
    DEFAULT_WIDTH,
    NARROW_DROP_ORDER,
    NARROW_DROP_TOGETHER,
    UNKNOWN_MARK,
    NodeKind,
)
from .cells import ViewColumn, cell_text, view_columns
from .format import printable, unknown_flops_note
from .rows import resolve_sort, threshold_column, visible_rows

DEPTH_COLOURS = ("\x1b[1;37m", "\x1b[36m", "\x1b[32m", "\x1b[33m", "\x1b[35m", "\x1b[34m", "\x1b[31m")
RESET = "\x1b[0m"
#: Levels of tree guides drawn before a row's name; deeper rows show the innermost ones.
MAX_GUIDES = 24
ELIDED = "… "
#: How far names and module types are shortened (in the middle) before the table gives up on a width.
NAME_SOFT_LIMIT = 32
NAME_MIN = 16
TYPE_MIN = 10
CLIP = "…"
#: What follows a row on the hot path, after the table's right edge (so every cell reads as it
#: would without it: a name copied from the table is the name).
HOT_MARK = " ◀"


def wants_colour(stream: Any = None) -> bool:
    """Colour on an interactive terminal, plain text when piped, redirected or ``NO_COLOR``."""
    stream = stream or sys.stdout
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def terminal_width() -> int:
    """The width a table fits in by default: the terminal's (``$COLUMNS``, else the terminal
    standard output is), else :data:`~torchprof._vocab.DEFAULT_WIDTH` (piped, a notebook)."""
    import shutil

    return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns or DEFAULT_WIDTH


def render_table(
    tree: Tree,
    *,
    min_pct: float = DEFAULT_MIN_PCT,
    sort_by: str | Sequence[str] | None = DEFAULT_SORT,
    ascending: bool = False,
    show_ops: bool = False,
    filter: Iterable[str] | str | None = None,
    max_depth: int | None = None,
    colour: bool = False,
    max_name: int = 60,
    width: int | None = DEFAULT_WIDTH,
    keep: Sequence[bool] | None = None,
    hot: bool = False,
    headline: str | None = None,
    warnings: Sequence[str] = (),
) -> str:
    """The seed's table: ``├──`` guides, the module type, ``value (pct%)`` cells, one row per
    shown node; under it a one-line legend and, when rows or columns were left out, what was.

    ``width`` (characters, None: no limit) is met by dropping, in turn, the percentages of
    columns other than the totals and the sort column, long names' middles, the columns of
    :data:`~torchprof._vocab.NARROW_DROP_ORDER`, the type, and the remaining percentages.

    With ``hot``, rows on the hot path (:mod:`~torchprof._tree.hotpath`) have a ``◀`` after the
    table's right edge and a legend line says so, after ``headline`` (the costliest layer and type)
    when given; the marks count in the width. ``warnings`` (``prof.summary["warnings"]``: what
    the figures leave out, a root whose FLOPs are unknown and why) are said last.
    """
    if filter is not None and not isinstance(filter, str):
        filter = list(filter)

    def shown(pct: float) -> list[int]:
        return visible_rows(tree, min_pct=pct, sort_by=sort_by, ascending=ascending, show_ops=show_ops, search=filter,
                            max_depth=max_depth, keep=keep)  # fmt: skip

    rows = shown(min_pct)
    hidden = len(shown(0)) - len(rows) if min_pct > 0 else 0  # what the threshold alone hid
    cols = tree.columns
    sort_key = resolve_sort(sort_by)
    prefixes, names = tree_guides(tree, rows)
    on_path = set(hot_path(tree).rows[1:]) if hot and len(tree) else set()
    marked = [k for k, r in enumerate(rows) if r in on_path]
    types = [_type_text(cols, r) for r in rows]
    room = width - len(HOT_MARK) if width is not None and marked else width
    layout = _fit(tree, rows, view_columns(tree, show_ops), sort_key, prefixes, names, types,
                  max_name=max_name, width=room)  # fmt: skip

    header = [COLUMN["name"].label] + ([COLUMN["type"].label] if layout.show_type else []) + [c.label for c in layout.columns]
    labels = [p + clip_middle(n, layout.name_limit) for p, n in zip(prefixes, names)]
    body = []
    for k, r in enumerate(rows):
        line = [labels[k]] + ([clip_middle(types[k], layout.type_limit)] if layout.show_type else [])
        line += [cell_text(tree, c, r, percent=c.spec.name in layout.percent) for c in layout.columns]
        body.append(line)
    widths = [max(len(header[j]), *(len(line[j]) for line in body)) for j in range(len(header))]
    left = 2 if layout.show_type else 1  # name and type read left to right, numbers line up right
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    head_rule = "|" + "+".join("-" * (w + 2) for w in widths) + "|"

    def line_of(cells: list[str], depth: int | None = None) -> str:
        texts = [c.ljust(w) if j < left else c.rjust(w) for j, (c, w) in enumerate(zip(cells, widths))]
        if depth is not None:
            texts[0] = DEPTH_COLOURS[depth % len(DEPTH_COLOURS)] + texts[0] + RESET
        return "| " + " | ".join(texts) + " |"

    out = [rule, line_of(header), head_rule]
    hot_rows = {rows[k] for k in marked}
    out += [line_of(line, cols["depth"][r] if colour else None) + (HOT_MARK if r in hot_rows else "") for r, line in zip(rows, body)]
    out.append(rule)
    unknown = any(cell == UNKNOWN_MARK for line in body for cell in line[left:])
    notes = [legend for legend in (_legend(layout, unknown),) if legend]
    if marked or headline:
        path = f"{HOT_MARK.strip()} hot path" if marked else ""
        notes.append(" · ".join(p for p in (headline, path) if p))
    if filter is not None and len(rows) <= 1 and len(tree) > 1:
        wanted = filter if isinstance(filter, str) else ", ".join(filter)
        notes.append(f"no row matches filter={wanted!r}: a pattern matches names and module types (a substring or a glob: "
                     "'layer4*'), or paths after 'path:' ('path:ResNet.layer4*')")
    if hidden:
        base = COLUMN[threshold_column(sort_key)].label
        notes.append(f"{hidden} row{'s' if hidden != 1 else ''} under {min_pct:g}% of {base} hidden (min_pct=0 shows them)")
    if layout.dropped:
        notes.append(f"left out to fit {width} characters: {', '.join(layout.dropped)}")
    if tree.unsupported_ops and any(c.spec.unknown for c in layout.columns):
        notes.append(unknown_flops_note(tree.unsupported_ops))
    if threads_at_once(tree):
        notes.append(f"CPU times are summed over {len(busy_threads(tree))} threads that ran at once (prof.by_thread() gives each)")
    notes += [text for text in map(str, warnings) if text not in notes]  # (the note on unknown FLOPs is one of them)
    for note in notes:  # the table's own width, so a narrow terminal does not wrap them anywhere
        out += wrap_parts(note, width) if width else [note]
    return "\n".join(out)


def wrap_parts(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` characters, broken between its `` · ``-separated
    parts where it can (a part such as ``◀ hot path`` stays whole), inside a part only where it
    is longer than a line."""
    lines: list[str] = []
    for part in text.split(" · "):
        if lines and len(lines[-1]) + 3 + len(part) <= width:
            lines[-1] += " · " + part
        elif len(part) <= width:
            lines.append(part)
        else:
            lines += textwrap.wrap(part, width, break_long_words=False, break_on_hyphens=False)
    return lines


def tree_guides(tree: Tree, rows: list[int]) -> tuple[list[str], list[str]]:
    """Each row's tree guides (``│ ├──``) and its printable name.

    A row's prefix is built from whether each of its ancestors is a last child. Only the
    innermost MAX_GUIDES levels are drawn ("… " stands for the ones further out), so a row costs
    the same at depth 3000 as at depth 3 and the table stays readable."""
    cols = tree.columns
    parent = tree.parent_index
    shown_children: dict[int, list[int]] = {}
    for r in rows[1:]:
        shown_children.setdefault(parent[r], []).append(r)
    last = {kids[-1] for kids in shown_children.values()}
    prefix_of: dict[int, str] = {rows[0]: ""}  # what a row's children put before their branch
    prefixes, names = [""], [printable(cols["name"][rows[0]])]
    width = 2 * MAX_GUIDES
    for r in rows[1:]:
        base = prefix_of[parent[r]]
        is_last = r in last
        prefix = base + ("  " if is_last else "│ ")
        prefix_of[r] = prefix if len(prefix) <= width else ELIDED + prefix[len(prefix) - width + len(ELIDED) :]
        prefixes.append(base + ("└──" if is_last else "├──"))
        names.append(printable(cols["name"][r]))
    return prefixes, names


def _type_text(cols: dict[str, list[Any]], row: int) -> str:
    """A module row's class (``Sequential``, ``Conv2d``); blank for regions, ops and kernels."""
    value = cols["type"][row]
    return printable(value) if cols["kind"][row] == NodeKind.MODULE.label and isinstance(value, str) else ""


@dataclass
class _Layout:
    """What a table shows to fit its width."""

    columns: list[ViewColumn]
    percent: set[str]
    """Columns whose cells keep their ``(x%)``."""
    name_limit: int
    show_type: bool
    type_limit: int
    dropped: list[str] = field(default_factory=list)
    """The headers of the columns left out, in the order they went."""


# Fitting a width: each step gives up something, in order of what a reader misses least, until
# the table fits. The widths of every column are measured once, with and without percentages, so
# a step costs O(rows) at most (re-measuring the name column at a new limit).
def _fit(tree: Tree, rows: list[int], columns: list[ViewColumn], sort_key: str, prefixes: list[str],
         names: list[str], types: list[str], *, max_name: int, width: int | None) -> _Layout:  # fmt: skip
    with_pct = {c.spec.name: max([len(c.label)] + [len(cell_text(tree, c, r)) for r in rows]) for c in columns}
    without = {c.spec.name: max([len(c.label)] + [len(cell_text(tree, c, r, percent=False)) for r in rows]) for c in columns}
    type_width = max(len(t) for t in types)
    layout = _Layout(columns=list(columns), percent={c.spec.name for c in columns}, name_limit=max_name,
                     show_type=type_width > 0, type_limit=type_width)  # fmt: skip
    name_header = len(COLUMN["name"].label)
    type_header = len(COLUMN["type"].label)

    def name_width(limit: int) -> int:
        return max([name_header] + [len(p) + min(len(n), limit) for p, n in zip(prefixes, names)])

    def total() -> int:
        cells = [name_width(layout.name_limit)] + [(with_pct if c.spec.name in layout.percent else without)[c.spec.name]
                                                   for c in layout.columns]  # fmt: skip
        if layout.show_type:
            cells.append(max(type_header, min(type_width, layout.type_limit)))
        return sum(cells) + 3 * len(cells) + 1

    def fits() -> bool:
        return width is None or total() <= width

    def keep_percent_of_totals() -> None:
        layout.percent = {c.spec.name for c in layout.columns if c.spec.name in (c.spec.percent_of, sort_key)}

    def shorten_names(floor: int) -> None:
        # The largest limit at or above ``floor`` that fits (the floor when none does): the
        # table's width only grows with the limit, so a bisection finds it.
        lo, hi = floor, min(layout.name_limit, max(map(len, names)))
        if hi <= lo:
            return
        while lo < hi:
            layout.name_limit = (lo + hi + 1) // 2
            if fits():
                lo = layout.name_limit
            else:
                hi = layout.name_limit - 1
        layout.name_limit = lo

    def drop_columns(order: Sequence[str]) -> None:
        for name in order:
            if fits():
                return
            if name == sort_key or all(c.spec.name != name for c in layout.columns):
                continue
            together = {other for group in NARROW_DROP_TOGETHER if name in group for other in group if other != sort_key}
            gone = {name} | together
            gone |= {c.spec.name for c in layout.columns if c.spec.needs in gone}
            layout.dropped += [c.label for c in layout.columns if c.spec.name in gone]
            layout.columns = [c for c in layout.columns if c.spec.name not in gone]

    def shorten_or_drop_type() -> None:
        layout.type_limit = min(type_width, max(TYPE_MIN, type_width - (total() - (width or 0))))
        if not fits():
            layout.show_type = False

    def no_percent() -> None:
        layout.percent = set()

    rest = [c.spec.name for c in reversed(columns) if c.spec.name not in NARROW_DROP_ORDER and c.spec.name != "cpu_us"]
    steps: list[Callable[[], None]] = [
        keep_percent_of_totals, lambda: shorten_names(NAME_SOFT_LIMIT), lambda: drop_columns(NARROW_DROP_ORDER),
        lambda: shorten_names(NAME_MIN), shorten_or_drop_type, no_percent, lambda: drop_columns(rest),
    ]  # fmt: skip
    for step in steps:
        if fits():
            break
        step()
    return layout


def _legend(layout: _Layout, unknown: bool = False) -> str:
    """One line saying what the ``(x%)`` in the cells is a share of, and what blank and (where a
    cell holds one) the unknown mark stand for."""
    bases: list[str] = []
    for c in layout.columns:
        base = c.spec.percent_of
        if c.spec.name in layout.percent and base is not None and base not in bases:
            bases.append(base)
    marks = f" · {UNKNOWN_MARK} = unknown (said below)" if unknown else ""
    if not bases:
        return marks[3:]
    of = " or ".join(COLUMN[b].label for b in bases)
    which = " (the column's own)" if len(bases) > 1 else ""
    return f"(x%) = share of the root's {of}{which} · blank = zero or not recorded{marks}"


def clip_middle(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters in the middle (``autograd::en…AddmmBackward0``), so
    both the start of a name and its distinctive end stay."""
    if len(text) <= limit:
        return text
    head = (limit - len(CLIP) + 1) // 2
    tail = limit - len(CLIP) - head
    return text[:head] + CLIP + (text[len(text) - tail :] if tail > 0 else "")
