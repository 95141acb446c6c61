"""Names of module calls: the dotted path of each module under its caller or a root, as
``named_modules()`` gives it, and the facts each named module records for the profile.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from .._records import ModuleInfo, module_range_name, safe_text
from .call_args import input_shapes
from .module_graph import ModuleGraph, named_modules, parameter_sizes, parameter_stats


class ModuleNames:
    """Names module calls by path and gathers what each named module is (its :class:`ModuleInfo`).

    Paths follow ``named_modules()``: a module is named as the outermost running module that
    contains it names it (a module shared by two parents has its one ``named_modules()`` name,
    whichever parent calls it: the tree places its row under the nearest running module its path
    is under); a module with no running ancestor is named relative to a known root, and
    otherwise becomes a root itself, labelled by ``labels`` (e.g. its variable name) or its class
    name (``Linear``, then ``Linear#2`` for another root of that class).

    Cost: each distinct (caller, module) pair is named once (:attr:`cache`), then looked up in
    O(1). Naming reads the :class:`ModuleGraph`'s parent links, so a module that its caller holds
    as a child or grandchild is named in O(1) however deep or wide the model is.
    """

    def __init__(
        self,
        labels: Mapping[Any, str] | Callable[[Any], str | None] | None = None,
        record_inputs: bool = False,
    ) -> None:
        self.graph = ModuleGraph()
        # A callable is asked when a root is first seen, so modules created inside the profiled
        # block itself (a notebook cell) can still be named after their variable.
        if callable(labels):
            self._label_of: Callable[[Any], str | None] = labels
        else:
            by_id = {id(m): name for m, name in (labels or {}).items()}
            self._label_of = lambda module: by_id.get(id(module))
        self.record_inputs = record_inputs
        self.lock = threading.RLock()
        """Held to name a new (caller, module) pair, from any thread."""
        self.cache: dict[tuple[int, int], tuple[str, str]] = {}
        """(id(caller), id(module)) -> (path, range name)"""
        self.modules: dict[str, ModuleInfo] = {}
        self._objects: dict[str, Any] = {}  # path -> module, for parameter counts at the end
        # id(root) -> (root, label, order added); holding the root keeps its id unique
        self.roots_by_id: dict[int, tuple[Any, str, int]] = {}
        self._taken: set[str] = set()  # root labels in use
        self._input_shapes: dict[str, list] = {}
        self._made: list[Any] = []  # modules named where they were made (see _made_in_call)
        self.wrapper_of: dict[int, Any] = {}
        """id(model) -> the torch.compile wrapper around it (whose label the model takes)."""
        self.transformed: set[str] = set()
        """Root paths called inside a torch.func transform."""
        self.dtype_bytes: dict[int, dict[Any, int]] = {}
        """id(module) -> its parameters' bytes by dtype, where its parameters were counted alone."""
        self.problems: list[str] = []
        """What went wrong naming modules (a labels= callable that raised), for the profile's warnings."""

    def name(self, module: Any, stack: list, args: Any = ()) -> tuple[str, str]:
        """``(path, range name)`` of ``module`` called from the innermost call on ``stack``, kept for
        the next call from there."""
        graph = self.graph
        graph.read_unread()  # a root's own call names it without this; anything below it needs it
        if not graph.knows(module):
            # Not in any model seen so far: a child its caller created during the run, or a
            # module of its own (a root to be).
            for entry in reversed(stack):
                graph.refresh(entry[0])
        path = self._path_in_stack(module, stack)
        if path is None:
            path = self._path_under_root(module)
            if path is None:
                path = self._made_in_call(module, stack) or self.add_root(module)
            path = safe_text(path)
        path = _as_eager(path)
        named = (path, module_range_name(path, safe_text(type(module).__name__)))
        self.cache[(id(stack[-1][0]) if stack else id(None), id(module))] = named
        self._objects.setdefault(path, module)
        if self.record_inputs and path not in self._input_shapes:
            self._input_shapes[path] = input_shapes(args)
        return named

    def _path_in_stack(self, module: Any, stack: list) -> str | None:
        """The path under the outermost running module that contains ``module`` (the root, as
        ``named_modules()`` names it from there), else None. A module held by one parent has one
        path whichever running module is asked; a shared one (held by two blocks, called by
        each) has its ``named_modules()`` name, the same whichever block calls it, so it is one
        row. Made safe (:func:`safe_text`) part by part: the caller's path is already, and
        checking it again would cost its length per call (the square of the depth over a deep
        chain)."""
        if not stack:
            return None
        graph = self.graph
        caller, caller_path = stack[-1][0], stack[-1][1]
        rel = graph.path_between(caller, module)  # the common case: the only way to it is through its caller
        if rel is not None:
            return f"{caller_path}.{safe_text(rel)}"
        ancestors = graph.ancestors(module)
        if not ancestors:
            return None
        for entry in stack:
            if id(entry[0]) in ancestors:
                return f"{entry[1]}.{safe_text(graph.relative_name(entry[0], module))}"
        return None

    def _path_under_root(self, module: Any) -> str | None:
        """A root's label, or the path under the first root added that contains ``module``."""
        roots = self.roots_by_id
        found = [rid for rid in self.graph.ancestors(module) if rid in roots]
        if id(module) in roots:
            found.append(id(module))
        if not found:
            return None
        root, label, _ = roots[min(found, key=lambda rid: roots[rid][2])]
        return label if root is module else f"{label}.{self.graph.relative_name(root, module)}"

    def _made_in_call(self, module: Any, stack: list) -> str | None:
        """The path of a module no model holds, called inside a running module's call, where it
        was made (a loss's ``CrossEntropyLoss()(logits, labels)`` or ``nn.ReLU()(x)`` inside a
        forward: a fresh one per call): its caller's path and its class, ``Net.(CrossEntropyLoss)``.
        Each new one is that row again (it was a root per instance, ``CrossEntropyLoss#2`` for the
        second micro-batch). A module the user labelled stays a root."""
        if not stack or self.label(module) is not None or _is_replica(module):
            return None
        self._made.append(module)  # held, as a root is: names are kept by id, which must stay its
        return f"{stack[-1][1]}.({safe_text(type(module).__name__)})"

    def label(self, module: Any) -> str | None:
        """The ``labels=`` name of a root module; None (its class name is used) when there is none,
        it is not text, or the user's callable raised (said once, never raised into the forward)."""
        try:
            label = self._label_of(module)
        except Exception as exc:  # noqa: BLE001 - the user's labels callable: its failure is theirs to see, not to crash
            self._say(f"labels= raised {type(exc).__name__}: {exc} (for a {type(module).__name__}): its class name is used")
            return None
        return label if isinstance(label, str) and label else None

    def unnamed(self, module: Any, exc: Exception) -> None:
        self._say(f"a {type(module).__name__} module could not be named ({type(exc).__name__}: {exc}): "
                  "its calls are not in the profile")  # fmt: skip

    def _say(self, text: str) -> None:
        if text not in self.problems:
            self.problems.append(text)

    def add_root(self, module: Any) -> str:
        """Make ``module`` a root; returns its label, unique among the roots."""
        wrapper = self.wrapper_of.get(id(module))
        label = self.label(module) or (self.label(wrapper) if wrapper is not None else None) or type(module).__name__
        if _is_replica(module):
            # nn.DataParallel runs a copy of the model per device on its own thread: show it as
            # a replica of its class (its parameters are the original's, never counted again).
            label = f"{type(module).__name__} (replica)"
        if label in self._taken:
            n = 2
            while f"{label}#{n}" in self._taken:
                n += 1
            label = f"{label}#{n}"
        self._taken.add(label)
        self.roots_by_id[id(module)] = (module, label, len(self.roots_by_id))
        self.graph.add_unread(module)
        self._objects.setdefault(label, module)
        return label

    def _collect_infos(self) -> None:
        # list(): a worker thread may still be adding
        new = [(path, module) for path, module in list(self._objects.items()) if path not in self.modules]
        if not new:
            return
        if len(new) == 1:  # a compiled model's root, the only module called: one walk, dtypes too
            module = new[0][1]
            n, nbytes, self.dtype_bytes[id(module)] = parameter_stats(module)
            sizes = {id(module): (n, nbytes)}
        else:
            sizes = parameter_sizes([module for _, module in new])
        for path, module in new:
            params, nbytes = sizes.get(id(module), (0, 0))
            root = self.roots_by_id.get(id(module))
            self.modules[path] = ModuleInfo(type=safe_text(type(module).__name__), params=params, param_bytes=nbytes,
                                            input_shapes=self._input_shapes.get(path),
                                            root=root is not None and root[1] == path,
                                            replica=_is_replica(module),
                                            transformed=path in self.transformed)  # fmt: skip

    def roots(self) -> list[tuple[Any, str]]:
        """The root modules seen so far and their labels (the first part of their paths)."""
        return [(module, label) for module, label, _ in list(self.roots_by_id.values())]

    def collect(self, submodules: bool = False) -> dict[str, ModuleInfo]:
        """Module facts gathered so far (also mid-run, for a schedule's completed cycle); with
        ``submodules``, also of every submodule of the roots, called or not (a compiled region
        runs its layers without calling them)."""
        if submodules:
            for root, label, _ in list(self.roots_by_id.values()):
                for name, module in named_modules(root):
                    if name:
                        self._objects.setdefault(_as_eager(safe_text(f"{label}.{name}")), module)
        self._collect_infos()
        return self.modules


def _as_eager(path: str) -> str:
    """``path`` as eager names it: a submodule compiled in place (``model.enc =
    torch.compile(model.enc)``) is held by torch.compile's wrapper as ``_orig_mod``, no layer
    of its own (its compiled graphs' kernels are named without it too)."""
    if "_orig_mod" not in path:
        return path
    return ".".join(part for part in path.split(".") if part != "_orig_mod")


def _is_replica(module: Any) -> bool:
    """A copy ``nn.DataParallel`` made (``replicate`` sets the flag as a plain attribute: read from
    the instance's dict, a module's ``__getattr__`` is not asked for a flag most never have)."""
    return bool(getattr(module, "__dict__", {}).get("_is_replica", False))
