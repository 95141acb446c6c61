"""The view state (what rows are open, the threshold, the sort, the search): defaults and checks,
shared by the widget, the report page and ``prof.widget(**state)``."""

from __future__ import annotations

import math
from typing import Any

from .._tree.tree import Tree
from .._vocab import LAYER_KINDS, STATE, STATE_KEYS
from .rows import resolve_sort

_DEFAULTS = {k.name: k.default for k in STATE}


def default_expanded(tree: Tree, show_ops: bool = False) -> list[str]:
    """Rows open by default: every depth-1 layer (module or region) with children, so rows down
    to depth 2 show; with ops shown also the depth-2 layers that hold only ops (so their ops are
    visible). The same rule as ``defaultExpanded`` in widget.js."""
    cols = tree.columns
    n = len(tree)
    kinds, depth, paths = cols["kind"], cols["depth"], cols["path"]
    has_child = [False] * n
    has_layer_child = [False] * n
    for i in range(1, n):
        p = tree.parent_index[i]
        has_child[p] = True
        if kinds[i] in LAYER_KINDS:
            has_layer_child[p] = True
    out = []
    for i in range(1, n):
        if (depth[i] == 1 and kinds[i] in LAYER_KINDS and has_child[i]) or (show_ops and depth[i] == 2 and kinds[i] in LAYER_KINDS and has_child[i] and not has_layer_child[i]):
            out.append(paths[i])
    return out


def expanded_to_depth(tree: Tree, depth: int) -> list[str]:
    """Every row above ``depth`` that has children, so rows down to ``depth`` show."""
    has_children = [False] * len(tree)
    for p in tree.parent_index[1:]:
        has_children[p] = True
    cols = tree.columns
    return [cols["path"][i] for i in range(len(tree)) if has_children[i] and cols["depth"][i] < depth]


def check_state(tree: Tree, state: dict[str, Any]) -> dict[str, Any]:
    """Complete, checked view state from user keywords (unknown keys and bad values raise)."""
    unknown = set(state) - set(STATE_KEYS)
    if unknown:
        raise TypeError(f"unknown view option(s) {', '.join(sorted(unknown))}; choose from {', '.join(STATE_KEYS)}")
    min_pct = float(state.get("min_pct", _DEFAULTS["min_pct"]))
    if math.isnan(min_pct) or not 0 <= min_pct <= 100:
        raise ValueError(f"min_pct must be between 0 and 100, got {state.get('min_pct')!r}")
    show_ops = bool(state.get("show_ops", _DEFAULTS["show_ops"]))
    search = state.get("search") or ""
    if not isinstance(search, str):
        raise TypeError(f"search must be a string (a substring or a glob such as 'layer1*'), got {search!r}")
    expanded = state.get("expanded")
    if expanded is None:
        expanded = default_expanded(tree, show_ops)
    elif isinstance(expanded, str):
        raise TypeError("expanded must be a list of paths, not a string")
    return {
        "min_pct": min_pct,
        "sort_by": resolve_sort(state.get("sort_by", _DEFAULTS["sort_by"])),
        "ascending": bool(state.get("ascending", _DEFAULTS["ascending"])),
        "show_ops": show_ops,
        "search": search,
        "expanded": [str(p) for p in expanded],
    }
