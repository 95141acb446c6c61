"""Two runs side by side (``torchprof.compare``): the union of their trees, each row with its base,
new and delta figures, and the same per op or kernel name (HTA's TraceDiff)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .._vocab import COLUMN, COMPARE_COLUMNS, COMPARE_METRICS, COMPARE_VIEW_EXTRA, NodeKind, Status, is_missing
from .tree import Columns, Tree
from .union import preorder, summed, unite

NAN = float("nan")
#: Which side of a union each run is: the new run first, so the union has its shape.
NEW, BASE = 0, 1


@dataclass(frozen=True)
class Diff:
    """A finished comparison: its rows as a tree, and how the runs were scaled."""

    tree: Tree
    """Rows in pre-order (siblings by the size of their change), with every column of
    :data:`~torchprof._vocab.COMPARE_COLUMNS` and :data:`~torchprof._vocab.COMPARE_VIEW_EXTRA`."""
    base_steps: int
    new_steps: int
    per_step: bool
    """The runs recorded different numbers of ``ProfilerStep``s, so every figure is per step."""
    metric: str
    """The time the change is measured in by default: ``cuda_us`` when both runs have a device,
    else ``cpu_us``."""
    roots: dict[str, str] = field(default_factory=dict)
    """Root modules matched across different labels: the base run's label -> the new run's."""
    layers: int = 0
    """Module nodes of the union (layers of either run)."""
    matched: int = 0
    """Of those, the ones both runs have."""


def _sides(base: Tree, new: Tree) -> tuple[bool, int, int]:
    bs, ns = len(base.steps), len(new.steps)
    return bool(bs and ns and bs != ns), bs, ns


def _metric(base: Tree, new: Tree) -> str:
    return "cuda_us" if base.has_cuda and new.has_cuda else "cpu_us"


def compare_trees(base: Tree, new: Tree, label: str) -> Diff:
    """The comparison of two finished trees.

    Rows are the union of both trees' nodes (:func:`~torchprof._tree.union.unite`, every
    ``ProfilerStep#N`` folded into one ``ProfilerStep#*`` row, so layers are compared over all
    steps): a row only one run has is ``added`` or ``removed`` and counts 0 in the other. When
    both runs recorded steps, but not as many, every figure is divided by its run's steps. A
    figure a run did not record at all (device time on a CPU run) is NaN, and so is its delta.
    O(rows of both trees + columns x union nodes).
    """
    per_step, base_steps, new_steps = _sides(base, new)
    roots = match_roots(base, new)
    union = unite([new, base], fold_steps=True, relabel=[{}, roots])
    n = len(union)
    scale = [1.0 / new_steps if per_step else 1.0, 1.0 / base_steps if per_step else 1.0]
    values: dict[str, list[float]] = {}
    for m in COMPARE_METRICS:
        total = COLUMN[m].rollup == "total"
        sides: list[list[float]] = []
        for source, tree in ((NEW, new), (BASE, base)):
            column = tree.columns[m]
            if not column or is_missing(column[0]):
                sides.append([NAN] * n)
            else:
                k = scale[source]
                sides.append([v * k for v in summed(union, source, column, total)])
        values[f"{m}_new"], values[f"{m}_base"] = sides
        values[f"{m}_delta"] = [a - b for a, b in zip(*sides)]
    metric = _metric(base, new)
    change = [0.0 if is_missing(v) else abs(v) for v in values[f"{metric}_delta"]]
    order, depth = preorder(union.parent, change)
    row_of = {u: row for row, u in enumerate(order)}
    in_new, in_base = union.in_source(NEW), union.in_source(BASE)
    sources = (new, base)

    def first(column: str) -> list[Any]:
        return [sources[union.first[u][0]].columns[column][union.first[u][1]] for u in order]

    cols: dict[str, list[Any]] = {
        "name": [union.name[u] for u in order],
        "kind": [union.kind[u] for u in order],
        "type": first("type"),
        "depth": [depth[u] for u in order],
        "status": [Status.BOTH if in_new[u] and in_base[u] else Status.ADDED if in_new[u] else Status.REMOVED for u in order],
    }
    cols["name"][0] = label
    for name in (c.name for c in COMPARE_COLUMNS):
        if name in values:
            cols[name] = [values[name][u] for u in order]
    cols["cpu_us"] = [_larger(a, b) for a, b in zip(cols["cpu_us_base"], cols["cpu_us_new"])]
    cols["abs_cpu_us_delta"] = [abs(v) for v in cols["cpu_us_delta"]]
    cols["abs_cuda_us_delta"] = [abs(v) for v in cols["cuda_us_delta"]]
    for extra in COMPARE_VIEW_EXTRA:
        if extra.name not in cols:
            cols[extra.name] = first(extra.name)
    parent_index = [row_of[union.parent[u]] if union.parent[u] >= 0 else -1 for u in order]
    tree = Tree(
        columns=Columns(cols, union.paths(order, label), parent_index, ["path", *cols]),
        parent_index=parent_index,
        unsupported_ops={},
        steps=[],
        peak_cpu_mem=NAN,
        peak_cuda_mem=NAN,
        has_cuda=base.has_cuda or new.has_cuda,
        has_memory=False,
        has_flops=base.has_flops or new.has_flops,
        event_count=base.event_count + new.event_count,
    )
    module = NodeKind.MODULE.label
    layers = [u for u in range(n) if union.kind[u] == module]
    matched = sum(1 for u in layers if in_new[u] and in_base[u])
    return Diff(tree, base_steps, new_steps, per_step, metric, roots, len(layers), matched)


def root_modules_of(tree: Tree) -> dict[str, str | None]:
    """The root modules of a tree (modules with no module above them): their label (their
    module path) and type, in the order they first appear."""
    cols = tree.columns
    kinds, modules, types, parent = cols["kind"], cols["module"], cols["type"], tree.parent_index
    module = NodeKind.MODULE.label
    under_module = [False] * len(tree)
    out: dict[str, str | None] = {}
    for r in range(1, len(tree)):
        p = parent[r]
        under_module[r] = kinds[r] == module or (p > 0 and under_module[p])
        if kinds[r] == module and not (p > 0 and under_module[p]) and isinstance(modules[r], str):
            out.setdefault(modules[r], types[r])
    return out


def match_roots(base: Tree, new: Tree) -> dict[str, str]:
    """The base run's root labels to read as the new run's: a notebook names its root module by
    its variable (``model``), a script by its class (``ResNet``). A base root whose label the new
    run lacks matches the new run's one root of the same type that the base lacks; with one root
    each, the two match whatever their types."""
    b, n = root_modules_of(base), root_modules_of(new)
    only_b = {k: t for k, t in b.items() if k not in n}
    only_n = {k: t for k, t in n.items() if k not in b}
    if not only_b or not only_n:
        return {}
    if len(b) == 1 and len(n) == 1:
        return {next(iter(only_b)): next(iter(only_n))}
    out: dict[str, str] = {}
    for label, kind in only_b.items():
        same = [k for k, t in only_n.items() if t == kind and k not in out.values()]
        if len(same) == 1:
            out[label] = same[0]
    return out


def _larger(a: float, b: float) -> float:
    if is_missing(a):
        return b
    if is_missing(b):
        return a
    return max(a, b)


def by_name(base: Tree, new: Tree, kinds: Sequence[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """One row per op or kernel name (of ``kinds``) in either run, with each figure's base, new
    and delta summed over every row of that name (HTA's TraceDiff, one line per name), the rows
    ordered by the size of their change; and the figure columns, in order. A total counts only
    the outermost row of a name (an op inside an op of its own name is in that op's total
    already); per step as :func:`compare_trees`."""
    per_step, base_steps, new_steps = _sides(base, new)
    sums = (_name_sums(new, kinds, 1.0 / new_steps if per_step else 1.0),
            _name_sums(base, kinds, 1.0 / base_steps if per_step else 1.0))  # fmt: skip
    keys = list(sums[NEW]) + [k for k in sums[BASE] if k not in sums[NEW]]
    rows: list[dict[str, Any]] = []
    figures: list[str] = []
    for m in COMPARE_METRICS:
        figures += [f"{m}_base", f"{m}_new", f"{m}_delta"]
    recorded = {(source, m): not is_missing(tree.columns[m][0]) for source, tree in ((NEW, new), (BASE, base)) for m in COMPARE_METRICS}
    for kind, name in keys:
        row: dict[str, Any] = {"name": name, "kind": kind}
        for m in COMPARE_METRICS:
            got = []
            for source in (NEW, BASE):
                if not recorded[(source, m)]:
                    got.append(NAN)
                else:
                    got.append(sums[source].get((kind, name), {}).get(m, 0.0))
            row[f"{m}_new"], row[f"{m}_base"] = got
            row[f"{m}_delta"] = got[0] - got[1]
        rows.append(row)
    metric = _metric(base, new)
    rows.sort(key=lambda r: -(0.0 if is_missing(r[f"{metric}_delta"]) else abs(r[f"{metric}_delta"])))
    return rows, figures


def _name_sums(tree: Tree, kinds: Sequence[str], scale: float) -> dict[tuple[str, str], dict[str, float]]:
    """Per (kind, name): each figure summed, totals over the outermost rows of that name. One
    pre-order pass with the names on the path from the root counted."""
    cols = tree.columns
    names, kinds_col, parent = cols["name"], cols["kind"], tree.parent_index
    wanted = frozenset(kinds)
    others = [m for m in COMPARE_METRICS if COLUMN[m].rollup != "total"]
    out: dict[tuple[str, str], dict[str, float]] = {}
    on_path: dict[tuple[str, str], int] = {}
    stack: list[int] = []
    for r in range(len(tree)):
        p = parent[r]
        while stack and stack[-1] != p:
            top = stack.pop()
            on_path[(kinds_col[top], names[top])] -= 1
        key = (kinds_col[r], names[r])
        if key[0] in wanted:
            sums = out.get(key)
            if sums is None:
                sums = out[key] = dict.fromkeys(COMPARE_METRICS, 0.0)
            inner = on_path.get(key, 0) > 0
            for m in others if inner else COMPARE_METRICS:  # an inner row's totals are in the outer one's
                v = cols[m][r]
                if not is_missing(v):
                    sums[m] += v * scale
        on_path[key] = on_path.get(key, 0) + 1
        stack.append(r)
    return out
