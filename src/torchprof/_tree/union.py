"""Several finished trees as one: every row of every tree matched to a node of their union, the
shared stage of comparing two runs (``diff.py``) and merging the ranks of a job (``ranks.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .._vocab import LAYER_KINDS, STEP_FOLDED, STEP_PREFIX, NodeKind
from .tree import PathColumn, PathTrie, Tree

REGION = NodeKind.REGION.label
MODULE = NodeKind.MODULE.label


@dataclass
class Union:
    """The union of several trees' nodes, in creation order (a parent before its children)."""

    parent: list[int] = field(default_factory=list)
    kind: list[str] = field(default_factory=list)
    name: list[str] = field(default_factory=list)
    path_scope: list[int] = field(default_factory=list)
    """Each node's path as a :class:`~torchprof._tree.tree.PathColumn` holds it: the node whose
    path comes first (an ancestor, so created before it), or -1, and the label after it."""
    path_label: list[str] = field(default_factory=list)
    first: list[tuple[int, int]] = field(default_factory=list)
    """``(source, row)`` that brought each node in: its type, shapes and source line come from there."""
    node_of: list[list[int]] = field(default_factory=list)
    """Per source, the union node of each of its rows."""
    outer: list[list[bool]] = field(default_factory=list)
    """Per source, whether a row is the outermost of its node on its way from the root: a node's
    total is the sum of its outermost rows' totals (a row inside another row of the same node is
    already in that row's total)."""

    def __len__(self) -> int:
        return len(self.parent)

    def paths(self, order: Sequence[int], root_label: str) -> PathColumn:
        """The nodes' paths in ``order`` (a pre-order: scopes come first), the root's labelled
        ``root_label``; built only when asked, so deep trees stay linear."""
        row_of = {u: row for row, u in enumerate(order)}
        scope = [row_of[self.path_scope[u]] if self.path_scope[u] >= 0 else -1 for u in order]
        label = [self.path_label[u] for u in order]
        if order:
            scope[0], label[0] = -1, root_label
        return PathColumn(scope, label)

    def in_source(self, source: int) -> list[bool]:
        """Which union nodes ``source`` has a row in."""
        out = [False] * len(self)
        for u in self.node_of[source]:
            out[u] = True
        return out


def _step_number(name: str) -> bool:
    return name.startswith(STEP_PREFIX) and name[len(STEP_PREFIX) :].isdigit()


def layer_paths(tree: Tree, fold_steps: bool) -> list[str | None]:
    """The path of each layer row (module or region; None for any other row) as a key that names
    the same layer in another run: without the `` #2`` a path gets when it is met twice in one
    tree (which of two gets it depends on their times), and with ``fold_steps`` every
    ``ProfilerStep#N`` segment written ``ProfilerStep#*``.

    A row's path extends its nearest step ancestor's (or does not mention it at all), so each
    row's folded path is its step's folded path plus its own tail. Only layer rows' paths are
    built (each from the tree's compact paths): an op chain however deep costs nothing here."""
    cols = tree.columns
    paths, names, kinds, modules = tree.paths, cols["name"], cols["kind"], cols["module"]
    parent = tree.parent_index
    n = len(tree)
    layer_kinds = frozenset(LAYER_KINDS)
    fold = fold_steps and bool(tree.steps)
    step_of = [-1] * n  # nearest step region at or above each row
    folded_step: dict[int, str] = {}  # folded path of each step region
    step_path: dict[int, str] = {}  # unfolded path of each step region
    out: list[str | None] = []
    for r in range(n):
        p = parent[r]
        anchor = step_of[p] if p >= 0 else -1
        if kinds[r] not in layer_kinds:
            step_of[r] = anchor
            out.append(None)
            continue
        path = paths[r]
        own = modules[r] if kinds[r] == MODULE and modules[r] else names[r]
        if not path.endswith(own) and " #" in path:
            path = path[: path.rfind(" #")]  # a repeated path's number
        if fold:
            if anchor >= 0 and path.startswith(step_path[anchor]):
                path = folded_step[anchor] + path[len(step_path[anchor]) :]
            if kinds[r] == REGION and _step_number(names[r]) and path.endswith(names[r]):
                step_path[r] = paths[r]
                path = path[: len(path) - len(names[r])] + STEP_FOLDED
                folded_step[r] = path
                anchor = r
        step_of[r] = anchor
        out.append(path)
    return out


def relabel_key(key: str, labels: dict[str, str]) -> str:
    """A layer path with a root module's label replaced where it starts the path or a part of it
    after a region (``model.layer1`` -> ``ResNet.layer1``, ``ProfilerStep#*/model`` ->
    ``ProfilerStep#*/ResNet``)."""
    for old, new in labels.items():
        at = 0
        while at >= 0:
            end = at + len(old)
            if key.startswith(old, at) and (end == len(key) or key[end] in "./ "):
                return key[:at] + new + key[end:]
            at = key.find("/", at)
            at = at + 1 if at >= 0 else -1
    return key


def unite(trees: Sequence[Tree], fold_steps: bool = False, relabel: Sequence[dict[str, str]] | None = None) -> Union:
    """Match the rows of ``trees`` into one union of nodes.

    A module or a region matches by its path (:func:`layer_paths`: a layer is the same layer
    wherever the run called it from), an op or a kernel by its kind and name under its parent's
    node. Rows of one tree with the same key become one node (a shared module called from two
    places; with ``fold_steps`` the same layer in every step). The roots are one node. Sources are
    taken in order and each in pre-order, so a node's parent always exists before it and the
    union is a tree; a node's place (its parent) is where the first source that has it put it.
    ``relabel`` (per source, old root label -> new) makes root modules named differently in two
    runs (a notebook's ``model``, a script's ``ResNet``) one layer. O(rows) dictionary work over
    all trees.
    """
    union = Union()
    index: dict[Any, int] = {}
    layer_kinds = frozenset(LAYER_KINDS)
    for source, tree in enumerate(trees):
        cols = tree.columns
        kinds, names = cols["kind"], cols["name"]
        keys = layer_paths(tree, fold_steps)
        labels = relabel[source] if relabel is not None and source < len(relabel) else {}
        if labels:
            keys = [relabel_key(k, labels) if k is not None else k for k in keys]
        parent = tree.parent_index
        n = len(tree)
        node_of = [0] * n
        outer = [True] * n
        on_path: dict[int, int] = {}  # union nodes of the rows from the root to the current row's parent
        stack: list[int] = []
        for r in range(n):
            p = parent[r]
            while stack and stack[-1] != p:
                gone = node_of[stack.pop()]
                on_path[gone] -= 1
            if p < 0:
                key: Any = ("root",)
            elif kinds[r] in layer_kinds:
                key = (kinds[r], keys[r])
            else:
                key = (kinds[r], node_of[p], names[r])
            u = index.get(key)
            if u is None:
                u = index[key] = len(union.parent)
                pu = node_of[p] if p >= 0 else -1
                union.parent.append(pu)
                union.kind.append(kinds[r])
                folded = kinds[r] == REGION and fold_steps and _step_number(names[r])
                union.name.append(STEP_FOLDED if folded else names[r])
                if kinds[r] in layer_kinds or pu < 0:
                    union.path_scope.append(-1)
                    union.path_label.append(keys[r] if pu >= 0 else names[r])  # type: ignore[arg-type]
                else:
                    union.path_scope.append(pu if pu > 0 else -1)
                    union.path_label.append(names[r])
                union.first.append((source, r))
            node_of[r] = u
            if on_path.get(u, 0) > 0:
                outer[r] = False
            on_path[u] = on_path.get(u, 0) + 1
            stack.append(r)
        union.node_of.append(node_of)
        union.outer.append(outer)
    _unique_paths(union)
    return union


def _unique_paths(union: Union) -> None:
    """Paths of different nodes can meet (a key made of a name under a parent, another of a
    path): the later ones get `` #2``, `` #3``, as in one tree (:class:`PathTrie`: the paths are
    never built)."""
    trie = PathTrie()
    at: list[int] = []  # each node's trie node
    for u, label in enumerate(union.path_label):
        scope = union.path_scope[u]
        union.path_label[u], key = trie.claim(at[scope] if scope >= 0 else -1, label)
        at.append(key)


def preorder(parent: list[int], weight: Sequence[float]) -> tuple[list[int], list[int]]:
    """Union nodes in pre-order with siblings by descending ``weight`` (ties in creation order),
    and each node's depth. An explicit stack."""
    n = len(parent)
    children: list[list[int]] = [[] for _ in range(n)]
    for u in range(1, n):
        children[parent[u]].append(u)
    depth = [0] * n
    order: list[int] = []
    stack = [0] if n else []
    while stack:
        u = stack.pop()
        order.append(u)
        kids = children[u]
        if kids:
            kids.sort(key=lambda c: -weight[c])
            for c in kids:
                depth[c] = depth[u] + 1
            stack.extend(reversed(kids))
    return order, depth


def summed(union: Union, source: int, values: Sequence[Any], total: bool) -> list[float]:
    """``values`` (one per row of ``source``) summed per union node: every row for self values
    and counts, only a node's outermost rows for totals. Missing values count 0."""
    out = [0.0] * len(union)
    node_of, outer = union.node_of[source], union.outer[source]
    for r, v in enumerate(values):
        if v is None or v != v or (total and not outer[r]):
            continue
        out[node_of[r]] += v
    return out
