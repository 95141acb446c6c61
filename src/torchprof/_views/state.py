"""The view state (what rows are open, the threshold, the sort, the search): defaults and checks,
shared by the widget, the report page and ``prof.widget(**state)``."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, TypedDict

from .._tree.aggregate import StepsTree, step_rows
from .._tree.hotpath import hot_path, opened
from .._tree.tree import Tree
from .._vocab import ALL_STEPS, COLUMN, COLUMNS, FLAME_COLOURS, LAYER_KINDS, STATE, STATE_KEYS, STEP_PREFIX, VIEW_COLUMNS, VIEWS
from .rows import resolve_sort

_DEFAULTS = {k.name: k.default for k in STATE}


class ViewState(TypedDict):
    """A complete, checked view state (:func:`check_state`): the keys of ``_vocab.STATE``, which
    says what each means (a test keeps the two the same)."""

    min_pct: float
    sort_by: str
    ascending: bool
    show_ops: bool
    search: str
    expanded: list[str]
    view: str
    step: str
    selected: str
    metric: str
    flame_colour: str
    zoom: str


def default_expanded(tree: Tree, show_ops: bool = False, root: int = 0) -> list[str]:
    """Rows open by default: every layer (module or region) one level below ``root`` with
    children, so rows down to two levels below it show; with ops shown also the layers two levels
    below that hold only ops (so their ops are visible). The same rule as ``defaultExpanded`` in
    widget.js."""
    cols = tree.columns
    n = len(tree)
    kinds, depth, paths = cols["kind"], cols["depth"], tree.paths
    has_child = [False] * n
    has_layer_child = [False] * n
    for i in range(1, n):
        p = tree.parent_index[i]
        has_child[p] = True
        if kinds[i] in LAYER_KINDS:
            has_layer_child[p] = True
    out = []
    top = depth[root] if n else 0
    end = root + 1
    while end < n and depth[end] > top:
        end += 1
    for i in range(root + 1, end):
        d = depth[i] - top
        if (d == 1 and kinds[i] in LAYER_KINDS and has_child[i]) or (show_ops and d == 2 and kinds[i] in LAYER_KINDS and has_child[i] and not has_layer_child[i]):
            out.append(paths[i])
    return out


def opening_expanded(tree: Tree, show_ops: bool = False, root: int = 0) -> list[str]:
    """Rows open when a view opens: the default expansion (:func:`default_expanded`) and every row
    above the end of the hot path (:mod:`~torchprof._tree.hotpath`), so the bottleneck shows with
    no click."""
    out = default_expanded(tree, show_ops, root)
    have = set(out)
    out += [p for p in opened(tree, hot_path(tree, root)) if p not in have]
    return out


def step_root(tree: Tree, step: str) -> int:
    """The row a ``step`` state value views: 0 for the whole run, else the ``ProfilerStep#<step>``
    row (``ValueError`` naming the recorded steps when there is none)."""
    if not step or step == ALL_STEPS:
        return 0
    names = tree.columns["name"]
    for row in step_rows(tree):
        if names[row] == STEP_PREFIX + step:
            return row
    recorded = ", ".join(names[r][len(STEP_PREFIX) :] for r in step_rows(tree)) or "none"
    raise ValueError(f"no step {step!r} in this profile (steps: {recorded}; or {ALL_STEPS!r}, or '' for the whole run)")


def expanded_to_depth(tree: Tree, depth: int) -> list[str]:
    """Every row above ``depth`` that has children, so rows down to ``depth`` show."""
    has_children = [False] * len(tree)
    for p in tree.parent_index[1:]:
        has_children[p] = True
    cols = tree.columns
    paths = tree.paths
    return [paths[i] for i in range(len(tree)) if has_children[i] and cols["depth"][i] < depth]


def check_state(tree: Tree, state: Mapping[str, Any], folded: StepsTree | None = None) -> ViewState:
    """Complete, checked view state from user keywords (unknown keys and bad values raise).
    ``folded`` is the profile's steps folded into one tree, for ``step="all"``."""
    unknown = set(state) - set(STATE_KEYS)
    if unknown:
        raise TypeError(f"unknown view option(s) {', '.join(sorted(unknown))}; choose from {', '.join(STATE_KEYS)}")
    min_pct = float(state.get("min_pct", _DEFAULTS["min_pct"]))
    if math.isnan(min_pct) or not 0 <= min_pct <= 100:
        raise ValueError(f"min_pct must be between 0 and 100, got {state.get('min_pct')!r}")
    show_ops = bool(state.get("show_ops", _DEFAULTS["show_ops"]))
    search = state.get("search") or ""
    if not isinstance(search, str):
        raise TypeError(f"search must be a string (a name, a glob such as 'layer*', or 'path:' and a path), got {search!r}")
    step = str(state.get("step") or "")
    if step == ALL_STEPS and folded is None:
        raise ValueError(f"step={ALL_STEPS!r} needs at least two recorded steps")
    root = step_root(tree, step)  # raises for an unknown step
    expanded = state.get("expanded")
    if expanded is None:
        expanded = opening_expanded(folded.tree, show_ops) if step == ALL_STEPS and folded else opening_expanded(tree, show_ops, root)
    elif isinstance(expanded, str):
        raise TypeError("expanded must be a list of paths, not a string")
    return {
        "min_pct": min_pct,
        "sort_by": resolve_sort(state.get("sort_by", _DEFAULTS["sort_by"])),
        "ascending": bool(state.get("ascending", _DEFAULTS["ascending"])),
        "show_ops": show_ops,
        "search": search,
        "expanded": [str(p) for p in expanded],
        "view": _check_view(tree, state.get("view", _DEFAULTS["view"])),
        "step": step,
        "selected": str(state.get("selected") or ""),
        "metric": check_metric(state.get("metric", _DEFAULTS["metric"])),
        "flame_colour": check_choice("flame_colour", state.get("flame_colour", _DEFAULTS["flame_colour"]), FLAME_COLOURS),
        "zoom": str(state.get("zoom") or ""),
    }


def _check_view(tree: Tree, value: Any) -> str:
    view = check_choice("view", value, VIEWS)
    if view == "memory" and (not tree.has_memory or not tree.memory.get("timeline")):
        raise ValueError("view='memory' needs a profile recorded with memory=True")
    if view == "steps" and not tree.steps:
        raise ValueError("view='steps' needs a profile with steps (a schedule and prof.step(), or a trainer's steps)")
    return view


def check_choice(key: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ValueError(f"{key} must be one of {', '.join(choices)}; got {value!r}")
    return str(value)


def is_metric(name: str) -> bool:
    """A column the Flame view can size bars by (``flameMetrics`` in widget.js): one of the
    table's times or a FLOP count that adds up over a subtree, or one of its self times (sized by
    its subtree column)."""
    spec = COLUMN.get(name)
    if spec is None or not (name in VIEW_COLUMNS or (spec.unit == "count" and spec.threshold)):
        return False
    if spec.rollup == "total":
        return spec.unit == "time" or (spec.unit == "count" and spec.threshold)
    return spec.rollup == "self" and spec.subtree is not None


def check_metric(value: Any) -> str:
    if not is_metric(str(value)):
        choices = [c.name for c in COLUMNS if is_metric(c.name)]
        raise ValueError(f"metric must be one of {', '.join(choices)}; got {value!r}")
    return str(value)
