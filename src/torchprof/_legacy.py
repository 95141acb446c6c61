"""The 2020 torchprof API (``torchprof.Profile``, PyPI's ``torchprof`` by awwong1) on top of
:class:`~torchprof.Profiler`, so code written for it runs unchanged::

    with torchprof.Profile(model, use_cuda=True, profile_memory=True, paths=paths) as prof:
        model(x)
    print(prof)                               # the layer table
    print(prof.display(show_events=True))     # with the ops inside each layer
    traces, events = prof.raw()

What differs, because the data is richer: every layer has its figures (2020's left parents
blank), backward time is attributed to layers, and the table is torchprof's (types, forward and
backward columns). ``paths`` selects the rows shown instead of the layers hooked: everything is
recorded either way, and :attr:`Profiler.result` holds all of it.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from ._errors import ProfilerError
from ._profiler import Profiler
from ._result import Result
from ._vocab import NodeKind

if TYPE_CHECKING:
    import pandas as pd
    import torch

_DISABLED = "<torchprof.Profile: enabled=False, nothing was profiled>"


class Trace(NamedTuple):
    """A module of the profiled model as the 2020 ``raw()`` listed it."""

    path: tuple[str, ...]
    """Names from the model's class name down: ``("AlexNet", "features", "3")``."""
    leaf: bool
    """The module has no children."""
    module: Any
    """The ``torch.nn.Module`` itself."""


class TableText(str):
    """A table as the 2020 ``display()`` returned it: a string (``print(prof.display())``) that
    also shows as the table, not as a quoted string, when it ends a notebook cell."""

    def __repr__(self) -> str:
        return str(self)


class Profile(Profiler):
    """The 2020 torchprof context manager: ``with torchprof.Profile(model, use_cuda=True) as prof``.

    A :class:`~torchprof.Profiler` attributing ``model``'s layers (every attribute of the result,
    ``prof.df``, ``prof.summary``, the widget, works on it too), with the 2020 arguments and
    methods. The result of a run is a :class:`~torchprof.Result`; ``torchprof.Profile`` is only
    this entry point.

    Args:
        model: the ``torch.nn.Module`` to profile layer by layer.
        enabled: False runs the block unprofiled; ``print(prof)`` then says nothing was.
        use_cuda: record the GPU kernels (2020 default: off).
        profile_memory: record memory allocated per layer.
        paths: module paths as name tuples from the model's class name, ``("AlexNet",
            "features", "3")`` (or dotted, ``"AlexNet.features.3"``): the table shows these layers
            (with their ancestors, and with ``show_events`` what runs inside them) instead of
            every layer; ``raw()`` returns their rows instead of the leaves'.
        options: any other :class:`~torchprof.Profiler` option (``shapes=``, ``stack=``, ...).
    """

    def __init__(self, model: torch.nn.Module, enabled: bool = True, use_cuda: bool = False, profile_memory: bool = False,
                 paths: Iterable[Sequence[str] | str] | None = None, **options: Any) -> None:  # fmt: skip
        import torch

        if not isinstance(model, torch.nn.Module):
            raise TypeError(
                f"torchprof.Profile(model, ...) profiles a torch.nn.Module (the 2020 API), not a {type(model).__name__}; "
                "the profile of a run, a trace or a saved file is a torchprof.Result"
            )
        self.enabled = bool(enabled)
        self.use_cuda = bool(use_cuda)
        self.profile_memory = bool(profile_memory)
        # A disabled profile never starts, so it must not fail for want of a GPU either.
        super().__init__(model, cuda=self.use_cuda and self.enabled, memory=self.profile_memory, **options)
        self._model = model
        self.paths: list[tuple[str, ...]] | None = _checked_paths(model, paths)

    # -- the run --------------------------------------------------------------------------------
    def __enter__(self) -> Profile:
        if self.enabled:
            super().__enter__()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]:
        if self.enabled:
            super().__exit__(exc_type, exc, tb)
        return False

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the model (``prof(x)`` inside the block, as in 2020)."""
        return self._model(*args, **kwargs)

    @property
    def result(self) -> Result:
        if not self.enabled:
            raise ProfilerError("this torchprof.Profile has enabled=False: nothing was profiled")
        return super().result

    # -- the 2020 views ---------------------------------------------------------------------------
    def display(self, show_events: bool = False, *, color: bool = False, **options: Any) -> TableText:
        """The layer table as a string, as in 2020: ``print(prof.display(show_events=True))``.

        Every layer is listed (``min_pct=0``; pass ``min_pct=1`` to hide the small ones), or only
        the ``paths`` given to the constructor. ``show_events`` adds the aten ops (and kernels)
        inside each layer. ``color`` colours names by depth; ``options`` are those of
        :meth:`Result.table` (``sort_by``, ``min_pct``, ``max_depth``, ``width``, ...)."""
        from ._views.table import render_table

        if not self.enabled:
            return TableText(_DISABLED)
        options.setdefault("min_pct", 0)
        tree = self.result.tree
        return TableText(render_table(tree, show_ops=show_events, colour=color, keep=self._keep(show_events), **options))

    def raw(self) -> tuple[tuple[Trace, ...], dict[tuple[str, ...], list[pd.DataFrame]]] | None:
        """``(traces, events)`` as in 2020: every module of the model as a :class:`Trace` (path,
        leaf, module), and for each profiled one (the ``paths`` given, else the leaves) a list
        holding one DataFrame: its rows of ``prof.df`` with everything that ran inside it (ops
        and kernels included), all calls together. None when nothing was profiled."""
        if not self.enabled or self._result is None:
            return None
        traces = walk_modules(self._model)
        wanted = set(self.paths) if self.paths is not None else {t.path for t in traces if t.leaf}
        tree = self.result.tree
        rows = _subtree_rows(tree, {".".join(p) for p in wanted})
        df = self.result.df
        events = {t.path: [df.iloc[rows.get(".".join(t.path), [])]] for t in traces if t.path in wanted}
        return traces, events

    def _keep(self, show_events: bool) -> list[bool] | None:
        """The rows ``paths`` lets the table show: the chosen layers, and with ``show_events``
        everything inside them (their ancestors are added by the row selection)."""
        if self.paths is None:
            return None
        chosen = {".".join(p) for p in self.paths}
        tree = self.result.tree
        module, kind, parent = tree.columns["module"], tree.columns["kind"], tree.parent_index
        keep = [False] * len(tree)
        for i in range(1, len(tree)):  # pre-order: a parent's flag is set before its children's
            is_chosen = kind[i] == NodeKind.MODULE.label and module[i] in chosen
            keep[i] = is_chosen or (show_events and keep[parent[i]])
        return keep

    def __str__(self) -> str:
        return str(self.display())

    def __repr__(self) -> str:
        return _DISABLED if not self.enabled else super().__repr__()

    def _ipython_display_(self) -> None:
        if not self.enabled:
            from IPython.display import display

            display({"text/plain": _DISABLED}, raw=True)
            return
        super()._ipython_display_()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        if not self.enabled:
            return {"text/plain": _DISABLED}
        return super()._repr_mimebundle_(include, exclude)


def walk_modules(model: Any) -> tuple[Trace, ...]:
    """Every module of ``model`` in pre-order (children in definition order), each path starting
    with the model's class name, as the 2020 ``raw()`` listed them. An explicit stack: models can
    be thousands of modules deep."""
    out: list[Trace] = []
    stack: list[tuple[tuple[str, ...], Any]] = [((type(model).__name__,), model)]
    while stack:
        path, module = stack.pop()
        children = list(module.named_children())
        out.append(Trace(path, not children, module))
        stack.extend(((*path, name), child) for name, child in reversed(children))
    return tuple(out)


def _checked_paths(model: Any, paths: Iterable[Sequence[str] | str] | None) -> list[tuple[str, ...]] | None:
    """``paths`` as name tuples, each naming a module of ``model``; a ValueError naming the ones
    that do not (with the closest real paths), instead of the 2020 silence."""
    if paths is None:
        return None
    if isinstance(paths, str) or (isinstance(paths, tuple) and all(isinstance(p, str) for p in paths)):
        raise TypeError("paths must be a list of module paths, e.g. [('AlexNet', 'features', '3')] or ['AlexNet.features.3']")
    known = {t.path for t in walk_modules(model)}
    out = [tuple(p.split(".")) if isinstance(p, str) else tuple(str(name) for name in p) for p in paths]
    unknown = [p for p in out if p not in known]
    if unknown:
        dotted = sorted(".".join(p) for p in known)
        hints = []
        for p in unknown:
            close = difflib.get_close_matches(".".join(p), dotted, n=3)
            hints.append(".".join(p) + (f" (did you mean {', '.join(close)}?)" if close else ""))
        raise ValueError(f"paths name no module of the {type(model).__name__}: {'; '.join(hints)}")
    return out


def _subtree_rows(tree: Any, modules: set[str]) -> dict[str, list[int]]:
    """For each module path in ``modules``, the tree rows of its calls (in every context it ran
    in) and of everything under them, in tree order. Pre-order keeps a subtree contiguous: it
    ends at the next row no deeper than its top."""
    cols = tree.columns
    module, kind, depth = cols["module"], cols["kind"], cols["depth"]
    out: dict[str, list[int]] = {}
    n = len(tree)
    for i in range(n):
        if kind[i] == NodeKind.MODULE.label and module[i] in modules:
            end = i + 1
            while end < n and depth[end] > depth[i]:
                end += 1
            out.setdefault(module[i], []).extend(range(i, end))
    # A module that calls itself has rows inside its own subtree: each row once.
    return {m: list(dict.fromkeys(rows)) for m, rows in out.items()}
