"""Walks of a model's module graph that never recurse (chains thousands deep walk too) and
stay near linear in the model's size: ``named_modules()``'s paths, the parent links that name a
module under its caller, and each module's parameter count.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def named_modules(root: Any) -> Iterator[tuple[str, Any]]:
    """``root.named_modules()``: ``root`` (named ``""``) and every module below it with its dotted
    name, each once, in the same order; torch's recurses, this walks an explicit stack, so a chain
    thousands deep walks too."""
    seen: set[int] = set()
    stack: list[tuple[str, Any]] = [("", root)]
    while stack:
        path, module = stack.pop()
        if id(module) in seen:
            continue
        seen.add(id(module))
        yield path, module
        for name, child in reversed(list(module._modules.items())):
            if child is not None:
                stack.append((f"{path}.{name}" if path else name, child))


def modules_below(root: Any) -> list[Any]:
    """``root`` and every module below it, each once (an explicit stack: a chain thousands deep
    needs no recursion, and no paths are built)."""
    out: list[Any] = []
    seen: set[int] = set()
    stack = [root]
    while stack:
        module = stack.pop()
        if id(module) in seen:
            continue
        seen.add(id(module))
        out.append(module)
        stack.extend(child for child in reversed(module._modules.values()) if child is not None)
    return out


class ModuleGraph:
    """Parent links of every module below the modules added, read from ``_modules`` with an
    explicit stack (``named_modules()`` and ``parameters()`` recurse, and rebuild every path as a
    full string, which made naming cost grow with the square of the depth).

    A module usually has one parent: its path under an ancestor is then the one chain of parent
    links (O(distance)). Where a module or one on its way up has several parents (a shared
    layer), the name is ``named_modules()``'s - the first in its depth-first order - found by a
    search of that ancestor that resumes where it stopped and is kept, so each ancestor's
    subtree is walked at most once.
    """

    def __init__(self) -> None:
        self.modules: dict[int, Any] = {}
        """Every module indexed, by id (holding them keeps the ids unique)."""
        self._parents: dict[int, list[tuple[Any, str]]] = {}
        self._children: dict[int, dict[str, Any]] = {}  # what was read of each module's _modules
        self._searches: dict[int, _FirstPaths] = {}
        self._unread: list[Any] = []  # known, their children not read yet (see add_unread)

    def knows(self, module: Any) -> bool:
        return id(module) in self.modules

    def add_unread(self, module: Any) -> None:
        """Know ``module`` without reading what is below it yet (:meth:`read_unread` does): a
        compiled model's call is its only module call, and reading the whole model at every
        Profiler's first call would cost its size each time."""
        if id(module) not in self.modules:
            self.modules[id(module)] = module
            self._unread.append(module)

    def read_unread(self) -> None:
        """Index what is below every module added by :meth:`add_unread`."""
        while self._unread:
            self.add(self._unread.pop())

    def add(self, module: Any) -> None:
        """Index ``module`` and every module below it not indexed yet. O(new modules)."""
        stack = [module]
        while stack:
            m = stack.pop()
            if id(m) in self._children:
                continue
            self.modules[id(m)] = m
            children = self._children[id(m)] = {}
            for name, child in m._modules.items():
                if child is not None:
                    children[name] = child
                    self._parents.setdefault(id(child), []).append((m, name))
                    stack.append(child)

    def refresh(self, module: Any) -> None:
        """Read ``module``'s children again (some may have been added since it was indexed)."""
        known = self._children.get(id(module))
        if known is None:
            self.add(module)
            self._searches.clear()
            return
        for name, child in module._modules.items():
            if child is not None and known.get(name) is not child:
                known[name] = child
                self._parents.setdefault(id(child), []).append((module, name))
                self.add(child)
                self._searches.clear()  # an ancestor's search may have passed this place already

    def path_between(self, ancestor: Any, module: Any, limit: int = 2) -> str | None:
        """``module``'s path under ``ancestor`` when it is the only way there, at most ``limit``
        levels up; None otherwise (another route, a shared module, or not below it)."""
        names = []
        m = module
        for _ in range(limit):
            parents = self._parents.get(id(m))
            if parents is None or len(parents) != 1:
                return None
            m, name = parents[0]
            names.append(name)
            if m is ancestor:
                return ".".join(reversed(names))
        return None

    def ancestors(self, module: Any) -> set[int]:
        """Ids of every module above ``module`` (through any of its parents). O(ancestors)."""
        seen: set[int] = set()
        stack = [module]
        while stack:
            m = stack.pop()
            for parent, _ in self._parents.get(id(m), ()):
                if id(parent) not in seen:
                    seen.add(id(parent))
                    stack.append(parent)
        return seen

    def relative_name(self, ancestor: Any, module: Any) -> str:
        """``module``'s path under ``ancestor`` as ``ancestor.named_modules()`` gives it (the
        caller knows ``module`` is below it)."""
        names = []
        m = module
        while True:
            parents = self._parents.get(id(m))
            if parents is None or len(parents) != 1:
                break
            m, name = parents[0]
            names.append(name)
            if m is ancestor:
                return ".".join(reversed(names))
        search = self._searches.get(id(ancestor))
        if search is None:
            search = self._searches[id(ancestor)] = _FirstPaths(ancestor)
        found = search.find(module)
        assert found is not None, "relative_name() of a module that is not below the ancestor"
        return found


class _FirstPaths:
    """``root.named_modules()``'s path of each module below ``root`` (the first met in its
    depth-first, children-in-order walk), found lazily: the walk stops at the module asked for
    and resumes from there for the next one. Paths are kept as parent links, not strings."""

    def __init__(self, root: Any) -> None:
        self._root = root
        self._link: dict[int, tuple[int, str]] = {id(root): (0, "")}  # id -> (id of parent on the first path, name)
        self._todo: list[tuple[Any, int, str]] = [
            (child, id(root), name) for name, child in reversed(root._modules.items()) if child is not None
        ]

    def find(self, module: Any) -> str | None:
        link, todo = self._link, self._todo
        target = id(module)
        while target not in link and todo:
            m, parent, name = todo.pop()
            if id(m) in link:
                continue  # met before: named_modules() names a module once, where it first meets it
            link[id(m)] = (parent, name)
            todo.extend((child, id(m), n) for n, child in reversed(m._modules.items()) if child is not None)
        if target not in link or target == id(self._root):
            return None
        names = []
        root = id(self._root)
        while target != root:
            target, name = link[target]
            names.append(name)
        return ".".join(reversed(names))


def parameter_sizes(modules: list[Any]) -> dict[int, tuple[int, int]]:
    """``(parameters, bytes)`` of each module asked about, with everything below it, each tensor
    counted once (what ``sum(p.numel() for p in module.parameters())`` gives), by ``id(module)``
    (some of the modules below may be in the answer too).

    ``parameters()`` walks the whole subtree of every module (quadratic in the depth, through
    recursive generators). Here the module graph is walked once, children before parents, and
    each module's set of tensors is its largest child's set, taken over when no other parent
    needs it, joined by the smaller ones ("small to large"): O(modules + tensors * log depth)
    for a tree, plus a copy of a shared module's set for each extra parent.
    """
    if len(modules) == 1:  # one module (a compiled model's root, the only one called): one walk
        return {id(modules[0]): _unique_size(modules[0])}
    tree = _tree_sizes(modules)
    if tree is not None:
        return tree
    # Children before parents (an iterative post-order of the graph below the modules asked about).
    order: list[Any] = []
    kids: dict[int, list[Any]] = {}
    users: dict[int, int] = {}  # how many parents will read a module's set
    stack: list[tuple[Any, bool]] = [(m, False) for m in modules]
    while stack:
        m, done = stack.pop()
        if done:
            order.append(m)
            continue
        if id(m) in kids:
            continue
        unique = list({id(c): c for c in m._modules.values() if c is not None}.values())
        kids[id(m)] = unique
        stack.append((m, True))
        for c in unique:
            users[id(c)] = users.get(id(c), 0) + 1
            if id(c) not in kids:
                stack.append((c, False))
    size: dict[int, tuple[int, int]] = {}  # id(tensor) -> (numel, bytes)
    sets: dict[int, tuple[set[int], list[int]]] = {}  # id(module) -> (tensor ids, [numel, bytes])
    out: dict[int, tuple[int, int]] = {}
    largest: Any
    for m in order:
        # A child still in progress is an ancestor too (a cycle): named_modules() skips it.
        children = [c for c in kids[id(m)] if id(c) in sets]
        if children:
            largest = max(children, key=lambda c: len(sets[id(c)][0]))
            ids, totals = sets[id(largest)]
            if users[id(largest)] > 1:  # another parent reads it too: copy
                ids, totals = set(ids), list(totals)
        else:
            largest, ids, totals = None, set(), [0, 0]
        for c in children:
            if c is not largest:
                for t in sets[id(c)][0]:
                    if t not in ids:
                        ids.add(t)
                        totals[0] += size[t][0]
                        totals[1] += size[t][1]
            users[id(c)] -= 1
            if users[id(c)] == 0:
                del sets[id(c)]
        for p in m._parameters.values():
            if p is not None and id(p) not in ids:
                n = p.numel()
                size[id(p)] = (n, n * p.element_size())
                ids.add(id(p))
                totals[0] += n
                totals[1] += size[id(p)][1]
        sets[id(m)] = (ids, totals)
        out[id(m)] = (totals[0], totals[1])
    return out


def _unique_size(root: Any) -> tuple[int, int]:
    """``(parameters, bytes)`` of ``root`` and everything below it, each tensor once."""
    n, nbytes, _ = parameter_stats(root)
    return n, nbytes


def parameter_stats(root: Any) -> tuple[int, int, dict[Any, int]]:
    """``(parameters, bytes, bytes by dtype)`` of ``root`` and everything below it, each tensor
    once (the bytes by dtype are what the run's compute dtype is judged by, in the same walk)."""
    seen: set[int] = set()
    n = nbytes = 0
    by_dtype: dict[Any, int] = {}
    for m in modules_below(root):
        for p in m._parameters.values():
            if p is not None and id(p) not in seen:
                seen.add(id(p))
                count = p.numel()
                size = count * p.element_size()
                n += count
                nbytes += size
                dtype = p.dtype
                by_dtype[dtype] = by_dtype.get(dtype, 0) + size
    return n, nbytes, by_dtype


def _tree_sizes(modules: list[Any]) -> dict[int, tuple[int, int]] | None:
    """:func:`parameter_sizes` where no module and no tensor below ``modules`` has two owners (the
    common case): each module's totals are its own tensors' plus its children's, in one walk.
    None where something is shared (tied weights, a layer used twice)."""
    order: list[Any] = []  # parents before children
    has_parent: set[int] = set()
    owned: set[int] = set()
    own: dict[int, tuple[int, int]] = {}
    stack = list(modules)
    while stack:
        m = stack.pop()
        if id(m) in own:
            continue
        n = nbytes = 0
        for p in m._parameters.values():
            if p is None:
                continue
            if id(p) in owned:
                return None
            owned.add(id(p))
            count = p.numel()
            n += count
            nbytes += count * p.element_size()
        own[id(m)] = (n, nbytes)
        order.append(m)
        for c in m._modules.values():
            if c is None:
                continue
            if id(c) in has_parent:
                return None
            has_parent.add(id(c))
            stack.append(c)
    out: dict[int, tuple[int, int]] = {}
    entered: set[int] = set()
    for start in order:
        walk: list[tuple[Any, bool]] = [(start, False)]
        while walk:
            m, done = walk.pop()
            if done:
                n, nbytes = own[id(m)]
                for c in m._modules.values():
                    if c is not None:
                        cn, cb = out[id(c)]
                        n += cn
                        nbytes += cb
                out[id(m)] = (n, nbytes)
            elif id(m) not in out:
                if id(m) in entered:
                    return None  # an ancestor is its own descendant (a cycle)
                entered.add(id(m))
                walk.append((m, True))
                walk.extend((c, False) for c in m._modules.values() if c is not None and id(c) not in out)
    return out
