"""Aggregations of a finished tree that views show as tables of their own (``prof.by_type()``,
every step folded into one tree)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._vocab import ADDITIVE, COLUMN, COLUMNS, LARGEST, STEP_PREFIX, NodeKind, is_missing
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


# -- every step folded into one tree -----------------------------------------------------------------
REGION = NodeKind.REGION.label
#: Columns whose per-step spread (min and max) the folded tree keeps: the times.
SPREAD: tuple[str, ...] = tuple(c.name for c in COLUMNS if c.unit == "time" and c.rollup in ("total", "self"))
#: Label and path of the folded tree's root.
ALL_STEPS_LABEL = "all steps"


@dataclass
class StepsTree:
    """Every recorded step folded into one tree: each node's value is its mean over the steps (a
    step it did not run in counts 0, so children still add up to their parent), with the least
    and the most of any step for the time columns. ``calls`` counts every call of every step;
    ``calls_per_step`` is their mean."""

    tree: Tree
    steps: int
    """How many steps were folded."""
    low: dict[str, list[float]]
    """:data:`SPREAD` column -> the least value of any step, per row (0 where a step lacks the node)."""
    high: dict[str, list[float]]
    """:data:`SPREAD` column -> the most of any step, per row."""
    runs: list[int]
    """Per row: in how many steps the node ran."""


def step_rows(tree: Tree) -> list[int]:
    """Rows of the ``ProfilerStep#N`` regions that are not inside another step, in the order they
    ran (chronological)."""
    cols = tree.columns
    kinds, names, depth = cols["kind"], cols["name"], cols["depth"]
    out: list[int] = []
    inside_until = -1  # rows up to here are inside the last step found
    n = len(tree)
    i = 0
    while i < n:
        if kinds[i] == REGION and names[i].startswith(STEP_PREFIX):
            out.append(i)
            inside_until = i + 1
            while inside_until < n and depth[inside_until] > depth[i]:
                inside_until += 1
            i = inside_until
            continue
        i += 1
    return sorted(out, key=lambda r: cols["exec_order"][r])


def across_steps(tree: Tree) -> StepsTree | None:
    """The steps of ``tree`` folded into one tree, or None with fewer than two steps.

    Nodes are matched by their place: the same kind and name under the same folded parent, so
    ``ProfilerStep#3/ResNet.layer1`` and ``ProfilerStep#4/ResNet.layer1`` are one node (whose path
    is ``ResNet.layer1``). Additive columns are means over all steps; others (text, depth,
    execution order, backward) come from the node's first step. One pass over each step's rows
    (pre-order, parents before children), O(rows of the steps x columns).
    """
    steps = step_rows(tree)
    if len(steps) < 2:
        return None
    cols = tree.columns
    parent, kinds, names, paths = tree.parent_index, cols["kind"], cols["name"], cols["path"]
    depth = cols["depth"]
    count = len(steps)
    # calls_per_step is a count per step under a step's row: its mean is the calls per step.
    additive = [c.name for c in COLUMNS if c.name in ADDITIVE or c.name == "calls_per_step"]
    # Folded node -> its first row, parent, path; per column the sum, per spread column a list per step.
    first: list[int] = [steps[0]]
    folded_parent: list[int] = [-1]
    folded_path: list[str] = [ALL_STEPS_LABEL]
    key_of: dict[tuple[int, str, str], int] = {}
    sums: dict[str, list[float]] = {c: [0.0] for c in additive}
    present: dict[str, list[bool]] = {c: [False] for c in additive}
    nan = float("nan")
    largest: dict[str, list[float]] = {c: [nan] for c in LARGEST}  # the highest of any step
    per_step: dict[str, list[list[float]]] = {c: [[0.0] * count] for c in SPREAD}
    runs = [count]
    used_paths = {ALL_STEPS_LABEL}
    for s, step in enumerate(steps):
        prefix = paths[step] + "/"
        node_of = {step: 0}
        end = step + 1
        while end < len(tree) and depth[end] > depth[step]:
            end += 1
        for r in range(step, end):
            if r == step:
                node = 0
            else:
                p = node_of[parent[r]]
                key = (p, kinds[r], names[r])
                node = key_of.get(key, -1)
                if node < 0:
                    node = len(first)
                    key_of[key] = node
                    first.append(r)
                    folded_parent.append(p)
                    path = paths[r][len(prefix) :] if paths[r].startswith(prefix) else paths[r]
                    while path in used_paths:  # a name that only differs by the step prefix elsewhere
                        path += "#"
                    used_paths.add(path)
                    folded_path.append(path)
                    for c in additive:
                        sums[c].append(0.0)
                        present[c].append(False)
                    for c in LARGEST:
                        largest[c].append(nan)
                    for c in SPREAD:
                        per_step[c].append([0.0] * count)
                    runs.append(0)
                runs[node] += 1
            node_of[r] = node
            for c in additive:
                v = cols[c][r]
                if not is_missing(v):
                    sums[c][node] += v
                    present[c][node] = True
            for c in SPREAD:
                v = cols[c][r]
                per_step[c][node][s] = 0.0 if is_missing(v) else v
            for c in LARGEST:
                v = cols[c][r]
                if not is_missing(v) and not v <= largest[c][node]:
                    largest[c][node] = v
    size = len(first)
    # Pre-order of the folded tree: children in the order they were first seen, then as the
    # tree sorts siblings (by CPU total, largest first), so row order means what it means in a tree.
    kids: list[list[int]] = [[] for _ in range(size)]
    for node in range(1, size):
        kids[folded_parent[node]].append(node)
    cpu = [v / count for v in sums["cpu_us"]]
    order: list[int] = []
    stack = [0]
    while stack:
        node = stack.pop()
        order.append(node)
        mine = sorted(kids[node], key=lambda k: -cpu[k])
        stack.extend(reversed(mine))
    row_of = {node: row for row, node in enumerate(order)}
    columns: dict[str, list[Any]] = {}
    for name in (column.name for column in COLUMNS):
        if name in largest:
            columns[name] = [largest[name][node] for node in order]
        elif name in sums:
            columns[name] = [sums[name][node] / count if present[name][node] else nan for node in order]
        elif name == "path":
            columns[name] = [folded_path[node] for node in order]
        elif name == "parent":
            columns[name] = [folded_path[folded_parent[node]] if node else None for node in order]
        elif name == "depth":
            columns[name] = [depth[first[node]] - depth[steps[0]] for node in order]
        else:
            columns[name] = [cols[name][first[node]] for node in order]
    columns["name"][0] = ALL_STEPS_LABEL
    columns["kind"][0] = REGION
    # Calls stay a count: every call of every step (calls_per_step holds the mean).
    columns["calls"] = [round(sums["calls"][node]) for node in order]
    folded = Tree(
        columns=columns,
        parent_index=[row_of[folded_parent[node]] if node else -1 for node in order],
        unsupported_ops={},
        steps=[],
        peak_cpu_mem=tree.peak_cpu_mem,
        peak_cuda_mem=tree.peak_cuda_mem,
        has_cuda=tree.has_cuda,
        has_memory=tree.has_memory,
        has_flops=tree.has_flops,
        event_count=0,
    )
    low = {c: [min(per_step[c][node]) for node in order] for c in SPREAD}
    high = {c: [max(per_step[c][node]) for node in order] for c in SPREAD}
    return StepsTree(folded, count, low, high, [runs[node] for node in order])
