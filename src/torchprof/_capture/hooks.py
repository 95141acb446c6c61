"""Global ``nn.Module`` forward hooks that wrap every module call in a named profiler range.

The range name carries the module's path and class (``nn.Module: ResNet.layer1.0.conv1 [Conv2d]``),
so the trace alone says which layer issued each op, in our tree and in Perfetto alike.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .._records import ModuleInfo, module_range_name

if TYPE_CHECKING:
    import torch


class ModuleTracker:
    """Installs the hooks, names module calls by path, and always takes the hooks away again.

    Paths follow ``named_modules()``: a module is named relative to the innermost module being
    run that contains it (so a module shared by two parents appears under the one that called
    it); a module with no running ancestor is named relative to a known root, and otherwise
    becomes a root itself, labelled by ``labels`` (e.g. its variable name) or its class name
    (``Linear``, then ``Linear#2`` for another root of that class).

    Cost: each distinct (caller, module) pair is named once, then looked up in O(1). Naming
    reads the :class:`ModuleGraph`'s parent links, so a module that its caller holds as a
    child or grandchild is named in O(1) however deep or wide the model is.
    """

    def __init__(
        self,
        model: torch.nn.Module | None = None,
        labels: Mapping[Any, str] | Callable[[Any], str | None] | None = None,
        record_inputs: bool = False,
    ) -> None:
        self.model = model
        self._graph = ModuleGraph()
        self.only: set[int] | None = None
        if model is not None:
            self._graph.add(model)
            self.only = set(self._graph.modules)
        # A callable is asked when a root is first seen, so modules created inside the profiled
        # block itself (a notebook cell) can still be named after their variable.
        if callable(labels):
            self._label_of: Callable[[Any], str | None] = labels
        else:
            by_id = {id(m): name for m, name in (labels or {}).items()}
            self._label_of = lambda module: by_id.get(id(module))
        self.record_inputs = record_inputs
        self.modules: dict[str, ModuleInfo] = {}
        self._objects: dict[str, Any] = {}  # path -> module, for parameter counts at the end
        self._local = threading.local()
        self._names: dict[tuple[int, int], tuple[str, str]] = {}  # (id(caller), id(module)) -> (path, range name)
        # id(root) -> (root, label, order added); holding the root keeps its id unique
        self._roots: dict[int, tuple[Any, str, int]] = {}
        self._taken: set[str] = set()  # root labels in use
        self._handles: list[Any] = []
        self._op_args: dict[str, dict[str, Any] | None] = {}
        if model is not None:
            self._add_root(model)

    # -- install / remove ---------------------------------------------------------------------
    def install(self) -> None:
        import torch
        from torch._C._profiler import _RecordFunctionFast
        from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

        self._range = _RecordFunctionFast
        self._tensor = torch.Tensor
        try:
            self._handles.append(register_module_forward_pre_hook(self._enter))
            self._handles.append(register_module_forward_hook(self._exit, always_call=True))
        except BaseException:
            self.remove()
            raise

    def remove(self) -> None:
        """Remove the hooks and close any range left open (a module that raised mid-forward)."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        stack = getattr(self._local, "stack", None)
        while stack:
            _, _, rf = stack.pop()
            rf.__exit__(None, None, None)
        self._collect_infos()

    @property
    def installed(self) -> bool:
        return bool(self._handles)

    # -- the hooks (hot path) -----------------------------------------------------------------
    def _enter(self, module: Any, args: Any) -> None:
        if self.only is not None and id(module) not in self.only:
            return
        try:
            stack = self._local.stack
        except AttributeError:
            stack = self._local.stack = []
        parent = stack[-1][0] if stack else None
        key = (id(parent), id(module))
        named = self._names.get(key)
        if named is None:
            named = self._name(module, stack, args)
        rf = self._range(named[1], recordable(args, self._tensor)) if self.record_inputs else self._range(named[1])
        rf.__enter__()
        stack.append((module, named[0], rf))

    def _exit(self, module: Any, args: Any, output: Any) -> None:
        if self.only is not None and id(module) not in self.only:
            return
        stack = getattr(self._local, "stack", None)
        if not stack:
            return
        # A child that raised may have been skipped by torch (hooks registered after the call
        # started, or an exception swallowed above it): unwind to this module.
        if stack[-1][0] is not module and not any(entry[0] is module for entry in stack):
            return
        while stack:
            entry = stack.pop()
            entry[2].__exit__(None, None, None)
            if entry[0] is module:
                break

    # -- naming -------------------------------------------------------------------------------
    def _name(self, module: Any, stack: list, args: Any = ()) -> tuple[str, str]:
        graph = self._graph
        if not graph.knows(module):
            # Not in any model seen so far: a child its caller created during the run, or a
            # module of its own (a root to be).
            for entry in reversed(stack):
                graph.refresh(entry[0])
        path = self._path_in_stack(module, stack)
        if path is None:
            path = self._path_under_root(module)
        if path is None:
            path = self._add_root(module)
        named = (path, module_range_name(path, type(module).__name__))
        self._names[(id(stack[-1][0]) if stack else id(None), id(module))] = named
        self._objects.setdefault(path, module)
        if path not in self._op_args:
            self._op_args[path] = layer_op_args(module, args)
        return named

    def _path_in_stack(self, module: Any, stack: list) -> str | None:
        """The path under the innermost running module that contains ``module``, else None."""
        if not stack:
            return None
        graph = self._graph
        caller, caller_path, _ = stack[-1]
        rel = graph.path_between(caller, module)  # the common case: a child or grandchild of its caller
        if rel is not None:
            return f"{caller_path}.{rel}"
        ancestors = graph.ancestors(module)
        if not ancestors:
            return None
        for container, container_path, _ in reversed(stack):
            if id(container) in ancestors:
                return f"{container_path}.{graph.relative_name(container, module)}"
        return None

    def _path_under_root(self, module: Any) -> str | None:
        """A root's label, or the path under the first root added that contains ``module``."""
        roots = self._roots
        found = [rid for rid in self._graph.ancestors(module) if rid in roots]
        if id(module) in roots:
            found.append(id(module))
        if not found:
            return None
        root, label, _ = roots[min(found, key=lambda rid: roots[rid][2])]
        return label if root is module else f"{label}.{self._graph.relative_name(root, module)}"

    def _add_root(self, module: Any) -> str:
        label = self._label_of(module) or type(module).__name__
        if label in self._taken:
            n = 2
            while f"{label}#{n}" in self._taken:
                n += 1
            label = f"{label}#{n}"
        self._taken.add(label)
        self._roots[id(module)] = (module, label, len(self._roots))
        self._graph.add(module)
        self._objects.setdefault(label, module)
        return label

    def _collect_infos(self) -> None:
        new = [(path, module) for path, module in self._objects.items() if path not in self.modules]
        if not new:
            return
        sizes = parameter_sizes([module for _, module in new])
        for path, module in new:
            params, nbytes = sizes[id(module)]
            self.modules[path] = ModuleInfo(type=type(module).__name__, params=params, param_bytes=nbytes,
                                            op_args=self._op_args.get(path))  # fmt: skip

    def collect(self) -> dict[str, ModuleInfo]:
        """Module facts gathered so far (also mid-run, for a schedule's completed cycle)."""
        self._collect_infos()
        return self.modules


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

    def knows(self, module: Any) -> bool:
        return id(module) in self.modules

    def add(self, module: Any) -> None:
        """Index ``module`` and every module below it not indexed yet. O(new modules)."""
        stack = [module]
        while stack:
            m = stack.pop()
            if id(m) in self.modules:
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
        self._todo: list[tuple[Any, int, str]] = [(child, id(root), name) for name, child in reversed(root._modules.items()) if child is not None]

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
    """``(parameters, bytes)`` of each module and everything below it, each tensor counted once
    (what ``sum(p.numel() for p in module.parameters())`` gives), by ``id(module)``.

    ``parameters()`` walks the whole subtree of every module (quadratic in the depth, through
    recursive generators). Here the module graph is walked once, children before parents, and
    each module's set of tensors is its largest child's set, taken over when no other parent
    needs it, joined by the smaller ones ("small to large"): O(modules + tensors * log depth)
    for a tree, plus a copy of a shared module's set for each extra parent.
    """
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


_SCALARS = (bool, int, float, str, type(None))


def recordable(args: tuple, tensor: type) -> tuple:
    """A module's arguments as the profiler may record them (``shapes=True``): tensors, lists of
    tensors and plain scalars as they are, anything else as None.

    The profiler turns every recorded input into a TorchScript value, and for an object of the
    user's own class (torchvision's ``ImageList``) that means compiling the class with
    TorchScript: 10 ms inside the profile, a stray ``defaults`` op (the function TorchScript runs
    to evaluate default arguments) and the class registered as a script class. Such an object
    has no shape to show anyway. All-tensor arguments, the common case, pass unchanged.
    """
    if all(isinstance(a, tensor) for a in args):
        return args
    return tuple(a if isinstance(a, (tensor, *_SCALARS))
                 or (isinstance(a, (list, tuple)) and all(isinstance(t, tensor) for t in a)) else None
                 for a in args)  # fmt: skip


def layer_op_args(module: Any, args: Any) -> dict[str, Any] | None:
    """The arguments a convolution or pooling layer passes to its aten op, in aten's order.

    The live profiler's op records keep tensors and scalars but drop int lists (stride,
    padding), which FLOP counting needs; the module knows them. The padding is the one the aten
    op receives: none when the layer pads the input itself (``padding_mode`` other than zeros),
    and for ``padding="same"`` the left part torch passes on (it pads an odd remainder itself).
    For a convolution also which gradients backward computes (``output_mask``): the input's only
    if it requires grad, which only a call in grad mode can tell (otherwise it is left unknown,
    and taken from the profiler's complete record).
    """
    import torch
    from torch import nn

    if isinstance(module, nn.modules.conv._ConvNd):
        first = args[0] if args else None
        weight, bias = module.weight, module.bias
        spatial = len(module.kernel_size)
        padding: Any = module.padding
        if module.padding_mode != "zeros":
            padding = [0] * spatial
        elif padding == "same":
            padding = [d * (k - 1) // 2 for d, k in zip(module.dilation, module.kernel_size)]
        elif padding == "valid":
            padding = [0] * spatial
        mask = None
        if torch.is_grad_enabled() and isinstance(first, torch.Tensor):
            mask = [first.requires_grad, bool(weight is not None and weight.requires_grad),
                    bool(bias is not None and bias.requires_grad)]  # fmt: skip
        return {
            "convolution": [None, None, None, list(module.stride), list(padding), list(module.dilation),
                            bool(module.transposed), list(module.output_padding), module.groups],
            "output_mask": mask,
        }  # fmt: skip
    if isinstance(module, (nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d)):
        stride = module.stride if module.stride is not None else module.kernel_size
        return {"max_pool": [None, module.kernel_size, stride, module.padding, module.dilation, module.ceil_mode]}
    if isinstance(module, (nn.AvgPool1d, nn.AvgPool2d, nn.AvgPool3d)):
        stride = module.stride if module.stride is not None else module.kernel_size
        return {"avg_pool": [None, module.kernel_size, stride, module.padding, module.ceil_mode, module.count_include_pad]}
    return None
