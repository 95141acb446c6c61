"""The terminal tree table (``print(prof)``, ``prof.display()``)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from .._tree.tree import Tree
from .cells import cell_text, view_columns
from .format import printable
from .rows import visible_rows

_DEPTH_COLOURS = ("\x1b[1;37m", "\x1b[36m", "\x1b[32m", "\x1b[33m", "\x1b[35m", "\x1b[34m", "\x1b[31m")
_RESET = "\x1b[0m"
#: Levels of tree guides drawn before a row's name; deeper rows show the innermost ones.
MAX_GUIDES = 24
ELIDED = "… "


def wants_colour(stream: Any = None) -> bool:
    """Colour on an interactive terminal, plain text when piped, redirected or ``NO_COLOR``."""
    stream = stream or sys.stdout
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def render_table(
    tree: Tree,
    *,
    min_pct: float = 1.0,
    sort_by: str | Sequence[str] | None = "cpu_us",
    ascending: bool = False,
    show_ops: bool = False,
    filter: Iterable[str] | str | None = None,
    max_depth: int | None = None,
    colour: bool = False,
    max_name: int = 60,
) -> str:
    """The seed's table: ``├──`` guides, ``value (pct%)`` cells, one row per shown node."""
    rows = visible_rows(tree, min_pct=min_pct, sort_by=sort_by, ascending=ascending, show_ops=show_ops,
                        search=filter, max_depth=max_depth)  # fmt: skip
    cols = tree.columns
    spec = view_columns(tree, show_ops)
    parent = tree.parent_index

    # Tree guides: a row's prefix is built from whether each of its ancestors is a last child.
    # Only the innermost MAX_GUIDES levels are drawn ("… " stands for the ones further out), so
    # a row costs the same at depth 3000 as at depth 3 and the table stays readable.
    shown_children: dict[int, list[int]] = {}
    for r in rows[1:]:
        shown_children.setdefault(parent[r], []).append(r)
    last = {kids[-1] for kids in shown_children.values()}
    prefix_of: dict[int, str] = {rows[0]: ""}  # what a row's children put before their branch
    labels: list[str] = [printable(cols["name"][rows[0]])]
    width = 2 * MAX_GUIDES
    for r in rows[1:]:
        base = prefix_of[parent[r]]
        is_last = r in last
        prefix = base + ("  " if is_last else "│ ")
        prefix_of[r] = prefix if len(prefix) <= width else ELIDED + prefix[len(prefix) - width + len(ELIDED) :]
        labels.append(base + ("└──" if is_last else "├──") + _clip(printable(cols["name"][r]), max_name))

    header = ["Node"] + [c.spec.label for c in spec]
    body = [[cell_text(tree, c, r) for c in spec] for r in rows]

    widths = [max(len(header[0]), *(len(s) for s in labels))]
    for j in range(len(spec)):
        widths.append(max(len(header[j + 1]), *(len(row[j]) for row in body)))
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    head_rule = "|" + "+".join("-" * (w + 2) for w in widths) + "|"
    out = [rule, "| " + " | ".join([header[0].ljust(widths[0])] + [h.rjust(w) for h, w in zip(header[1:], widths[1:])]) + " |", head_rule]
    for r, label, cells in zip(rows, labels, body):
        name_cell = label.ljust(widths[0])
        if colour:
            name_cell = _DEPTH_COLOURS[cols["depth"][r] % len(_DEPTH_COLOURS)] + name_cell + _RESET
        out.append("| " + " | ".join([name_cell] + [c.rjust(w) for c, w in zip(cells, widths[1:])]) + " |")
    out.append(rule)
    return "\n".join(out)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
