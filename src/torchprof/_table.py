"""The terminal tree table (``print(prof)``, ``prof.display()``)."""

from __future__ import annotations

import math
import os
import sys
from typing import Callable, Iterable, Sequence

from . import _format as fmt
from ._tree import Tree
from ._view import value_column, visible_rows

_DEPTH_COLOURS = ("\x1b[1;37m", "\x1b[36m", "\x1b[32m", "\x1b[33m", "\x1b[35m", "\x1b[34m", "\x1b[31m")
_RESET = "\x1b[0m"


def wants_colour(stream=None) -> bool:
    """Colour on an interactive terminal, plain text when piped, redirected or ``NO_COLOR``."""
    stream = stream or sys.stdout
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _columns(tree: Tree, show_ops: bool) -> list[tuple[str, str, Callable[[float], str], str | None]]:
    """(header, column, formatter, percent-of column) for the data this profile has."""
    cols = tree.columns
    has_bwd = any(cols["is_backward"])
    spec: list[tuple[str, str, Callable[[float], str], str | None]] = [
        ("Self CPU", value_column("self_cpu_us", show_ops), fmt.time_us, "cpu_us"),
        ("CPU total", "cpu_us", fmt.time_us, "cpu_us"),
    ]
    if has_bwd:
        spec += [("CPU fwd", "fwd_cpu_us", fmt.time_us, "cpu_us"), ("CPU bwd", "bwd_cpu_us", fmt.time_us, "cpu_us")]
    if tree.has_cuda:
        spec += [
            ("Self CUDA", value_column("self_cuda_us", show_ops), fmt.time_us, "cuda_us"),
            ("CUDA total", "cuda_us", fmt.time_us, "cuda_us"),
        ]
        if has_bwd:
            spec.append(("CUDA bwd", "bwd_cuda_us", fmt.time_us, "cuda_us"))
    if tree.has_memory:
        spec.append(("CPU Mem", "cpu_mem", fmt.nbytes, None))
        if tree.has_cuda:
            spec.append(("CUDA Mem", "cuda_mem", fmt.nbytes, None))
    if tree.has_flops:
        spec.append(("FLOPs", "flops", fmt.count, None))
    if any(not math.isnan(v) for v in cols["params"]):
        spec.append(("Params", "params", fmt.count, None))
    spec.append(("Calls", "calls", lambda v: str(int(v)), None))
    return spec


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
    derived = {"fwd_cpu_us": [c - b for c, b in zip(cols["cpu_us"], cols["bwd_cpu_us"])]}
    spec = _columns(tree, show_ops)
    parent = tree.parent_index

    # Tree guides: a row's prefix is built from whether each of its ancestors is a last child.
    shown_children: dict[int, list[int]] = {}
    for r in rows[1:]:
        shown_children.setdefault(parent[r], []).append(r)
    last = {kids[-1] for kids in shown_children.values()}
    prefix_of: dict[int, str] = {rows[0]: ""}  # what a row's children put before their branch
    labels: list[str] = [cols["name"][rows[0]]]
    for r in rows[1:]:
        base = prefix_of[parent[r]]
        is_last = r in last
        prefix_of[r] = base + ("  " if is_last else "│ ")
        labels.append(base + ("└──" if is_last else "├──") + _clip(cols["name"][r], max_name))

    header = ["Node"] + [h for h, *_ in spec]
    body: list[list[str]] = []
    for r in rows:
        cells = []
        for _, col, f, pct_of in spec:
            v = derived[col][r] if col in derived else cols[col][r]
            if fmt.is_missing(v):
                cells.append("")
                continue
            if v == 0 and col != "calls":
                cells.append("")  # an empty cell reads faster than "0.00µs (0%)"
                continue
            text = f(v)
            if pct_of is not None:
                text += f" ({fmt.percent(v, cols[pct_of][0])})" if cols[pct_of][0] else ""
            cells.append(text)
        body.append(cells)

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
    text = text.replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"
