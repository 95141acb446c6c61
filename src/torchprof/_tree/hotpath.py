"""Where the time goes, as one path and one line: the hot path every view opens on, the costliest
layer and the costliest module type (the headline).

The hot path, from a root row (the whole run, or one step), in two parts:

1. **The heaviest child, repeatedly.** From the root, step into the heaviest layer child (a module
   or a region; ops and kernels are shown under their layers), as long as that child holds at
   least :data:`DOMINANT_SHARE` (half) of its parent's time: a chain of layers each holding most
   of the one above it.
2. **Where cost branches, on to the costliest layer.** Where no child holds half of its parent
   (several children share the cost), the chain stops, and the path goes on from there to the
   costliest layer below that row: the layer with the largest own time with its ops folded in
   (what the Top view ranks first; one layer's time in every ``ProfilerStep#N`` added up), through
   its ancestors. A row that holds most of its own time
   itself (its self time is at least half of its total) ends the path there: nothing below it
   explains its cost.

So the path always ends at a concrete layer, every row above it is opened by the views, and it
never follows a child holding less than :data:`MIN_SHARE` of the root (nothing that small is a
bottleneck), and it is at most :data:`MAX_ROWS` rows long. Time is device time where the
profile has any (``cuda_us``), else CPU time.
Cost: O(rows of the root's subtree).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .._vocab import LAYER_KINDS, STEP_PREFIX, NodeKind, is_missing
from .tree import Tree

#: A child holding at least this share of its parent continues the chain of the heaviest child.
DOMINANT_SHARE = 0.5
#: A row whose own time (ops folded in) is at least this share of its total ends the path.
SELF_SHARE = 0.5
#: The path never steps into a row holding less than this share of the root.
MIN_SHARE = 0.01
#: The most rows the path opens: a chain of layers thousands deep is opened this far (its rows'
#: paths are what the views keep open, and each is as long as its depth).
MAX_ROWS = 64

_MODULE = NodeKind.MODULE.label
_REGION = NodeKind.REGION.label


@dataclass(frozen=True)
class HotPath:
    """The hot path of one root row and the headline's figures (rows index the tree)."""

    metric: str
    """The total it follows: ``cuda_us`` (device time) where the profile has any, else ``cpu_us``."""
    rows: list[int] = field(default_factory=list)
    """From the root down to the layer it ends at."""
    branch: int = -1
    """The row where the chain of dominant children ended (cost branches there); -1 for none."""
    layer: int = -1
    """The costliest layer of the whole root (largest own time, ops folded in, summed over the
    steps it ran in): its row with the most own time; -1 for none."""
    layer_share: float = float("nan")
    """That layer's own time (over every step) as a share of the root's total."""
    type: str | None = None
    """The costliest module type: the class whose layers' own times add up to the most."""
    type_share: float = float("nan")
    type_modules: int = 0
    """How many modules of that type ran."""


def metric_of(tree: Tree) -> str:
    """``cuda_us`` when the profile has device time, else ``cpu_us``."""
    total = tree.columns["cuda_us"][0] if len(tree) else float("nan")
    return "cuda_us" if tree.has_cuda and not is_missing(total) and total > 0 else "cpu_us"


def self_column(metric: str) -> str:
    """The own-time column of ``metric`` with ops folded in (what the Top view ranks)."""
    return _self_column(metric)


def _self_column(metric: str) -> str:
    return "layer_self_cuda_us" if metric == "cuda_us" else "layer_self_cpu_us"


def _value(v: Any) -> float:
    return 0.0 if v is None or v != v else float(v)  # None or NaN: nothing recorded


def is_candidate(kind: str, name: str, row: int, root: int) -> bool:
    """A row the headline may name as the costliest layer: a module, or a user region (not a
    ``ProfilerStep#N``, not one of torchprof's own grouping rows such as ``(backward, no module)``)."""
    if row == root:
        return False
    if kind == _MODULE:
        return True
    return kind == _REGION and not name.startswith(STEP_PREFIX) and not name.startswith("(")


def layer_key(tree: Tree, row: int) -> str:
    """One layer's key, the same in every step: a module's path (the same in every step and
    context: the ``module`` column), else the row's path without its ``ProfilerStep#N/``. Reads
    one path (O(its depth)), never the whole column."""
    module = tree.columns["module"][row]
    return module if isinstance(module, str) and module else fold_steps(tree.paths[row])


def fold_steps(path: str) -> str:
    """A row's path with its ``ProfilerStep#N/`` prefix taken off, so the same layer in every step
    is one key (``ProfilerStep#3/ResNet.layer1`` -> ``ResNet.layer1``)."""
    if path.startswith(STEP_PREFIX):
        cut = path.find("/")
        if cut > 0:
            return path[cut + 1 :]
    return path


@dataclass(frozen=True)
class Ranked:
    """One layer's own time over every step it ran in."""

    key: str
    """Its path without a ``ProfilerStep#N/`` prefix."""
    row: int
    """Its row with the most own time."""
    own_us: float
    """Own time summed over its rows (one per step)."""
    rows: int
    """How many rows (steps) it has."""


def fold_ids(tree: Tree) -> list[int]:
    """A small integer per row naming its layer in every step: rows whose paths are the same once
    their ``ProfilerStep#N/`` is taken off get the same number, and modules the same number
    wherever they run (their ``module`` path). One pass over the compact paths (each row's scope
    row and label), O(rows), no path string built."""
    cols = tree.columns
    paths = tree.paths
    scope = getattr(paths, "scope", None)
    label = getattr(paths, "label", None)
    modules, kinds = cols["module"], cols["kind"]
    n = len(tree)
    if scope is None or label is None:  # a tree of plain path strings: key them directly
        table: dict[Any, int] = {}
        return [table.setdefault(layer_key(tree, i), len(table)) for i in range(n)]
    ids = [0] * n
    seen: dict[Any, int] = {}
    for i in range(n):
        m = modules[i]
        if kinds[i] == _MODULE and isinstance(m, str) and m:
            key: Any = ("module", m)  # the module path is a stored column: no new string
        elif scope[i] < 0:
            lab = label[i]
            key = (-1, STEP_PREFIX if lab.startswith(STEP_PREFIX) else lab)  # every step is one place
        else:
            key = (ids[scope[i]], label[i])
        ids[i] = seen.setdefault(key, len(seen))
    return ids


def ranked_layers(tree: Tree, root: int, end: int, own: list[Any], named: int | None = None,
                  ids: list[int] | None = None) -> list[Ranked]:  # fmt: skip
    """The layers among the rows after ``root`` up to ``end``, costliest first: each layer's own
    time (``own``, a column) summed over the steps it ran in (:func:`fold_ids`). Only the first
    ``named`` (all: None) get their ``key`` (the path without a step), which costs a path each.
    O(rows + layers log layers)."""
    cols = tree.columns
    kinds, names = cols["kind"], cols["name"]
    ids = ids if ids is not None else fold_ids(tree)
    sums: dict[int, float] = {}
    best_row: dict[int, int] = {}
    counts: dict[int, int] = {}
    for i in range(root + 1, end):
        if not is_candidate(kinds[i], names[i], i, root):
            continue
        v = _value(own[i])
        key = ids[i]
        sums[key] = sums.get(key, 0.0) + v
        counts[key] = counts.get(key, 0) + 1
        if key not in best_row or v > _value(own[best_row[key]]):
            best_row[key] = i
    keys = sorted(sums, key=lambda k: (-sums[k], best_row[k]))
    return [Ranked(layer_key(tree, best_row[k]) if named is None or n < named else "", best_row[k], sums[k], counts[k])
            for n, k in enumerate(keys)]  # fmt: skip


def costliest(tree: Tree, root: int, end: int, own: list[Any], ids: list[int] | None = None,
              modules_first: bool = False) -> tuple[int, float]:  # fmt: skip
    """The costliest layer among the rows after ``root`` up to ``end`` (:func:`ranked_layers`):
    its row with the most own time and its own time over every step; ``(-1, 0.0)`` when no layer
    took time. ``modules_first``: a module where any took time (the headline's layer is a layer;
    a region as costly as an optimizer step is an insight of its own), else a region."""
    ranked = ranked_layers(tree, root, end, own, named=0, ids=ids)
    if modules_first:
        kinds = tree.columns["kind"]
        modules = [r for r in ranked if kinds[r.row] == _MODULE and r.own_us > 0]
        ranked = modules or ranked
    if not ranked or ranked[0].own_us <= 0:
        return -1, 0.0
    return ranked[0].row, ranked[0].own_us


def hot_path(tree: Tree, root: int = 0) -> HotPath:
    """The hot path under ``root`` and the headline's figures (see the module's docstring)."""
    n = len(tree)
    if n == 0 or "layer_self_cpu_us" not in tree.columns:  # no tree of a profile (a comparison's rows)
        return HotPath("cpu_us", [root] if n else [])
    metric = metric_of(tree)
    cols = tree.columns
    total, own = cols[metric], cols[_self_column(metric)]
    kinds, parent, depth = cols["kind"], tree.parent_index, cols["depth"]

    def end_of(row: int) -> int:
        end = row + 1
        while end < n and depth[end] > depth[row]:
            end += 1
        return end

    kids: dict[int, list[int]] = {}
    for i in range(root + 1, end_of(root)):
        if kinds[i] in LAYER_KINDS:
            kids.setdefault(parent[i], []).append(i)
    base = _value(total[root])
    ids = fold_ids(tree)
    layer, layer_own = costliest(tree, root, end_of(root), own, ids, modules_first=True)

    rows = [root]
    node = root
    branch = -1
    while len(rows) < MAX_ROWS:
        children = kids.get(node, [])
        if not children or base <= 0:
            break
        if node != root and _value(own[node]) >= SELF_SHARE * _value(total[node]):
            break  # the row holds most of its own time itself
        heaviest = max(children, key=lambda c: _value(total[c]))
        if _value(total[heaviest]) < MIN_SHARE * base:
            break
        if _value(total[heaviest]) >= DOMINANT_SHARE * _value(total[node]):
            rows.append(heaviest)
            node = heaviest
            continue
        branch = node
        target, _ = costliest(tree, node, end_of(node), own, ids)
        if target >= 0 and _value(own[target]) >= MIN_SHARE * base:
            chain = []
            r = target
            while r != node:
                chain.append(r)
                r = parent[r]
            rows.extend(reversed(chain))
            del rows[MAX_ROWS:]
        break
    type_name, type_share, type_modules = _costliest_type(tree, metric, base) if root == 0 else (None, float("nan"), 0)
    return HotPath(
        metric=metric,
        rows=rows,
        branch=branch,
        layer=layer,
        layer_share=layer_own / base if layer >= 0 and base > 0 else float("nan"),
        type=type_name,
        type_share=type_share,
        type_modules=type_modules,
    )


def _costliest_type(tree: Tree, metric: str, base: float) -> tuple[str | None, float, int]:
    """The module class whose layers' own times (ops folded in) add up to the most, its share of
    the root and how many of its modules ran (as the Top view's per-type table)."""
    if base <= 0:
        return None, float("nan"), 0
    cols = tree.columns
    own = cols[_self_column(metric)]
    sums: dict[str, float] = {}
    for k, t, v in zip(cols["kind"], cols["type"], own):
        if k == _MODULE and isinstance(t, str):  # own times add up: no module is counted twice
            sums[t] = sums.get(t, 0.0) + _value(v)
    if not sums:
        return None, float("nan"), 0
    name = max(sums, key=lambda t: sums[t])
    # Modules, not rows: one module runs in every step (a row per step) and maybe several times.
    modules = {m for m, k, t in zip(cols["module"], cols["kind"], cols["type"]) if k == _MODULE and t == name}
    return name, sums[name] / base, len(modules)


def opened(tree: Tree, path: HotPath) -> list[str]:
    """Paths of the rows a view opens to show the hot path: every row on it between its root
    (always open) and its last row."""
    paths = tree.paths
    return [paths[r] for r in path.rows[1:-1]]
