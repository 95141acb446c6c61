"""Aggregations of a finished tree that views show as tables of their own (``prof.by_type()``)."""

from __future__ import annotations

from typing import Any

from .._vocab import ADDITIVE, COLUMN, NodeKind, is_missing
from .tree import Tree

MODULE = NodeKind.MODULE.label


def by_type(tree: Tree, depth: int | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """Module metrics summed per class (DeepSpeed's "top modules at depth N"): one dict per class,
    slowest first, and the summed columns.

    ``depth`` counts module nesting (a root module is 0, its children 1, ...); None takes every
    module. Totals come from the outermost module of each class only, so a ``Sequential`` inside
    a ``Sequential`` is not counted twice; self values and calls add up everywhere. ``modules`` is
    how many tree nodes were aggregated. A column missing from the whole tree stays NaN.
    """
    cols = tree.columns
    parent = tree.parent_index
    kinds = cols["kind"]
    n = len(tree)
    module_depth = [-1] * n
    for i in range(n):
        if kinds[i] == MODULE:
            p = parent[i]
            module_depth[i] = module_depth[p] + 1 if p >= 0 and kinds[p] == MODULE else 0
    groups: dict[str, dict[str, Any]] = {}
    for i in range(n):
        if kinds[i] != MODULE or (depth is not None and module_depth[i] != depth):
            continue
        t = cols["type"][i]
        g = groups.setdefault(t, {"type": t, "modules": 0, **dict.fromkeys(ADDITIVE, 0.0)})
        g["modules"] += 1
        nested = depth is None and _inside_same_type(tree, i)
        for c in ADDITIVE:
            if nested and COLUMN[c].rollup == "total":
                continue
            v = cols[c][i]
            g[c] = g[c] + (0.0 if is_missing(v) else v)
    for c in ADDITIVE:
        if all(is_missing(v) for v in cols[c][1:]):
            for g in groups.values():
                g[c] = float("nan")
    rows = sorted(groups.values(), key=lambda g: -g["cpu_us"])
    return rows, list(ADDITIVE)


def _inside_same_type(tree: Tree, i: int) -> bool:
    cols, parent = tree.columns, tree.parent_index
    t = cols["type"][i]
    p = parent[i]
    while p >= 0 and cols["kind"][p] == MODULE:
        if cols["type"][p] == t:
            return True
        p = parent[p]
    return False
