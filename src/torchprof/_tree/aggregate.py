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
    nested = _inside_same_type(tree) if depth is None else [False] * n
    groups: dict[str, dict[str, Any]] = {}
    for i in range(n):
        if kinds[i] != MODULE or (depth is not None and module_depth[i] != depth):
            continue
        t = cols["type"][i]
        g = groups.setdefault(t, {"type": t, "modules": 0, **dict.fromkeys(ADDITIVE, 0.0)})
        g["modules"] += 1
        for c in ADDITIVE:
            if nested[i] and COLUMN[c].rollup == "total":
                continue
            v = cols[c][i]
            g[c] = g[c] + (0.0 if is_missing(v) else v)
    for c in ADDITIVE:
        if all(is_missing(v) for v in cols[c][1:]):
            for g in groups.values():
                g[c] = float("nan")
    rows = sorted(groups.values(), key=lambda g: -g["cpu_us"])
    return rows, list(ADDITIVE)


def _inside_same_type(tree: Tree) -> list[bool]:
    """For each row: a module inside a module of its own class, with only modules between them.

    One pre-order pass with the path from the root as a stack; each run of modules on it (cut
    by a region or an op) counts its classes, so a row asks in O(1) however deep it is.
    """
    cols, parent = tree.columns, tree.parent_index
    kinds, types = cols["kind"], cols["type"]
    n = len(tree)
    out = [False] * n
    path: list[int] = []  # rows from the root down to the current row's parent
    runs: list[dict[str, int]] = [{}]  # class counts of each run of modules on the path
    for i in range(n):
        while path and path[-1] != parent[i]:
            top = path.pop()
            if kinds[top] == MODULE:
                runs[-1][types[top]] -= 1
            else:
                runs.pop()
        if kinds[i] == MODULE:
            counts = runs[-1]
            out[i] = counts.get(types[i], 0) > 0
            counts[types[i]] = counts.get(types[i], 0) + 1
        else:
            runs.append({})
        path.append(i)
    return out
