"""``torchprof.compare(base, new)``: two runs side by side, layer by layer (:class:`Comparison`)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ._files import write_text
from ._result import Result
from ._tree.diff import Diff, by_name, compare_trees
from ._vocab import DEFAULT_MIN_PCT, DEFAULT_WIDTH, NodeKind

if TYPE_CHECKING:
    import pandas as pd

    from ._views.compare_widget import CompareWidget

Source = Any  # a Result, a finished Profiler, or the path of a chrome trace or a saved profile
_NAME_KINDS = (NodeKind.OP.label, NodeKind.KERNEL.label)


def _profile(run: Source, what: str) -> Result:
    if isinstance(run, Result):
        return run
    if isinstance(run, (str, os.PathLike)):
        from ._load import open_profile_file

        return open_profile_file(run)[0]
    result = getattr(run, "result", None)  # a torchprof.Profiler after its with block
    if isinstance(result, Result):
        return result
    raise TypeError(f"compare: {what} must be a torchprof profile, a Profiler or the path of a trace or saved profile, "
                    f"not {type(run).__name__}")  # fmt: skip


def compare(base: Source, new: Source) -> Comparison:
    """Compare two runs: ``new`` against ``base``. Each is a profile, a finished
    ``Profiler``, or the path of a chrome trace or of a profile saved with ``prof.save()``.

    >>> cmp = torchprof.compare("before.json.gz", "after.json.gz")
    >>> print(cmp)            # the diff tree, biggest changes first
    >>> cmp.df                # one row per layer, op and kernel of either run
    >>> cmp.by_name("kernel") # one row per kernel name
    """
    return Comparison(_profile(base, "base"), _profile(new, "new"))


class Comparison:
    """Two runs side by side: every layer, region, op and kernel of either, with each figure in
    the base run, in the new run and their difference (new - base).

    Layers and regions are matched by path, ops and kernels by name under a matched parent;
    every ``ProfilerStep#N`` is folded into one ``ProfilerStep#*`` row. Runs that recorded
    different numbers of steps are compared per step (:attr:`per_step`; the summary says so).
    """

    def __init__(self, base: Result, new: Result) -> None:
        self.base = base
        """The run compared against."""
        self.new = new
        """The run whose change is measured."""
        b, n = str(base.summary["name"]), str(new.summary["name"])
        self.labels = (b, n) if b != n else (f"{b} (base)", f"{n} (new)")
        self.label = f"{self.labels[0]} → {self.labels[1]}"
        self._diff: Diff = compare_trees(base.tree, new.tree, self.label)
        self._items: list[tuple[str, str, str]] | None = None

    # -- the data -------------------------------------------------------------------------------
    @property
    def per_step(self) -> bool:
        """True when the runs recorded different numbers of ``ProfilerStep``s: every figure of the
        comparison is then divided by its run's steps."""
        return self._diff.per_step

    @property
    def df(self) -> pd.DataFrame:
        """One row per node of the union of both trees (pre-order, siblings by the size of their
        change), indexed by path: ``path, name, kind, type, depth, status`` (``both``, ``added``,
        ``removed``) and ``<col>_base``, ``<col>_new``, ``<col>_delta`` for ``cpu_us,
        self_cpu_us, cuda_us, self_cuda_us, bwd_cpu_us, bwd_cuda_us, flops, calls``. A row one
        run lacks counts 0 there; a figure a run did not record is NaN."""
        from ._views.compare import compare_frame

        return compare_frame(self._diff.tree)

    def by_name(self, kind: str | None = None) -> pd.DataFrame:
        """One row per op or kernel name (``kind``: ``"op"``, ``"kernel"``, None for both) with the
        same base/new/delta columns, each summed over every place the name ran, indexed by name,
        biggest change first: Holistic Trace Analysis's TraceDiff in one line."""
        from ._views.compare import by_name_frame

        if kind is not None and kind not in _NAME_KINDS:
            raise ValueError(f"kind must be one of {', '.join(_NAME_KINDS)} or None, not {kind!r}")
        rows, figures = by_name(self.base.tree, self.new.tree, _NAME_KINDS if kind is None else (kind,))
        return by_name_frame(rows, figures)

    @property
    def summary_items(self) -> list[tuple[str, str, str]]:
        """The headline as ``(label, value, explanation)``: the runs, their totals before and
        after, whether figures are per step, how many rows only one run has."""
        if self._items is None:
            from ._views.compare import summary_items

            self._items = summary_items(self._diff, self.labels, (self.base.summary, self.new.summary))
        return list(self._items)

    def summary_line(self) -> str:
        from ._views.compare import summary_line

        return summary_line(self.summary_items)

    # -- terminal -------------------------------------------------------------------------------
    def table(
        self,
        min_pct: float = DEFAULT_MIN_PCT,
        sort_by: str | Sequence[str] | None = None,
        show_ops: bool = False,
        filter: Iterable[str] | str | None = None,
        *,
        ascending: bool = False,
        max_depth: int | None = None,
        colour: bool = False,
        width: int | None = DEFAULT_WIDTH,
    ) -> str:
        """The diff tree as text: the summary line, then rows whose size (their larger CPU total)
        is at least ``min_pct`` percent of the root's, siblings by the size of their change
        (``sort_by``: any column of ``df``, or ``abs_cpu_us_delta``/``abs_cuda_us_delta``), fit in
        ``width`` characters (None: no limit) as a profile's table."""
        from ._views.compare import render_table

        filter = filter if filter is None or isinstance(filter, str) else list(filter)
        return render_table(self._diff, self.summary_items, min_pct=min_pct, sort_by=sort_by, ascending=ascending,
                            show_ops=show_ops, filter=filter, max_depth=max_depth, colour=colour, width=width)  # fmt: skip

    def display(self, *args: Any, **options: Any) -> None:
        """Print :meth:`table` (coloured on a terminal)."""
        from ._views.table import wants_colour

        options.setdefault("colour", wants_colour(sys.stdout))
        print(self.table(*args, **options))

    def __str__(self) -> str:
        from ._views.table import wants_colour

        return self.table(colour=wants_colour(sys.stdout))

    def __repr__(self) -> str:
        return f"<torchprof comparison {self.label!r}: {len(self._diff.tree)} rows>"

    # -- notebook -------------------------------------------------------------------------------
    def widget(self, **state: Any) -> CompareWidget:
        """The interactive diff tree: a profile's widget with base, new and delta columns (a faster
        time green, a slower red), sorted by the size of the change; ``state`` as a profile's."""
        from ._views.compare_widget import CompareWidget

        return CompareWidget(self._diff, self.summary_items, self.label, **state)

    def _ipython_display_(self) -> None:
        """``display(cmp)`` and ``cmp`` ending a cell: the diff table, and the widget where a
        kernel can run it."""
        from ._views.compare_widget import show

        show(self._diff, self.summary_items, self.label, self.table())

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        # For tools that ask for a rich repr themselves (IPython uses _ipython_display_).
        from ._views.compare_widget import static_bundle

        return static_bundle(self.table())

    def to_html(self, path: str | os.PathLike[str] | None = None, **state: Any) -> str:
        """A self-contained interactive HTML page of the comparison (no kernel, no network), as a
        profile's: with ``path`` it is written there and the path is returned (a notebook then
        shows the file name, not the page); without, the page is returned as a string."""
        from ._views.compare import report_html

        page = report_html(self._diff, self.summary_items, self.label, **state)
        return page if path is None else write_text(path, page)
