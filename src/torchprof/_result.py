"""A finished profile: the tree, its summary and the facts of its recording, and every view of it."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ._files import write_text
from ._records import Recording
from ._tree.summary import Summary, summarize
from ._tree.tree import Tree
from ._vocab import DEFAULT_MIN_PCT, DEFAULT_SORT, DEFAULT_WIDTH

if TYPE_CHECKING:
    import pandas as pd

    from ._views.insights import Finding
    from ._views.widget import ProfileWidget


class Result:
    """The result of a profiling run or of a loaded trace.

    Built from a tree (or a function that builds it on first use, so leaving a ``with Profiler()``
    block costs no more than leaving ``torch.profiler.profile``) and the recording's facts.
    """

    def __init__(
        self,
        tree: Tree | Callable[[], Tree],
        recording: Recording,
        trace_files: Callable[[], list[str]] | None = None,
    ) -> None:
        self._tree = tree if isinstance(tree, Tree) else None
        self._build = None if isinstance(tree, Tree) else tree
        self.recording = recording
        """Label, wall time, module facts and metadata (rank, device, options) of the source."""
        self._trace_files = trace_files
        self._df: pd.DataFrame | None = None
        self._summary: Summary | None = None
        self._found: list[Finding] | None = None

    # -- the data -----------------------------------------------------------------------------
    @property
    def tree(self) -> Tree:
        """The layer tree, column-wise in pre-order (built once, on first use)."""
        if self._tree is None:
            from ._gc import paused_gc

            assert self._build is not None
            with paused_gc():
                self._tree = self._build()
            self._build = None
        return self._tree

    @property
    def meta(self) -> dict[str, Any]:
        """Facts about the source: file, options recorded, device, distributed rank."""
        return self.recording.meta

    @property
    def df(self) -> pd.DataFrame:
        """One row per tree node (pre-order, siblings by descending ``cpu_us``), indexed by path.

        Times in µs (``cpu_us`` = forward + backward, ``bwd_*`` its backward part), memory in
        bytes, NaN where not recorded. ``self_*`` excludes every child row (ops included);
        ``layer_self_*`` is the self time with the layer's ops folded in.
        """
        if self._df is None:
            from ._views.frame import to_dataframe

            self._df = to_dataframe(self.tree)
        return self._df.copy()

    @property
    def unsupported_ops(self) -> dict[str, int]:
        """Ops that ran but have no FLOP formula (name -> calls): their FLOPs are unknown."""
        return dict(self.tree.unsupported_ops)

    @property
    def steps(self) -> pd.DataFrame:
        """Per-iteration figures (``ProfilerStep#N`` ranges), to see whether step time drifts."""
        from ._views.frame import steps

        return steps(self.tree)

    @property
    def step_times(self) -> pd.DataFrame:
        """The wall time of every step the run marked, recorded or not: ``step``, ``wall_us``
        (µs) and ``recorded`` (and ``rank`` first in a merged job). A profile of steps 100-102 of
        a 10,000-step run under a trainer integration (or ``Profiler(steps=...)`` around the
        whole loop) has all 10,000, so a slow step stands out; ``prof.steps`` has the recorded
        steps' figures. Empty when no step was marked."""
        from ._views.frame import step_times

        return step_times(self.recording.step_times)

    @property
    def ranks(self) -> list[int]:
        """The ranks of a distributed job this profile holds: every rank merged (``load_trace`` of
        several traces), the one rank a trace or a run under ``torchrun`` recorded, else none."""
        if self.tree.ranks:
            return list(self.tree.ranks)
        info = self.meta.get("distributedInfo")
        return [int(info["rank"])] if isinstance(info, dict) and isinstance(info.get("rank"), int) else []

    def by_rank(self) -> pd.DataFrame:
        """One row per rank and ``ProfilerStep`` (one per rank without steps): wall time, CPU
        total, device busy time, communication time (collectives in flight) and device idle
        time, in µs, so the straggler stands out."""
        from ._views.ranks import by_rank

        ranks = self.ranks
        return by_rank(self.tree, ranks[0] if ranks else None, self.recording.wall_us)

    def by_thread(self) -> pd.DataFrame:
        """One row per thread that recorded events, most CPU time first: its CPU time (µs, its
        outermost ranges: the root's CPU total is their sum), the part of it spent compiling
        ``torch.compile``'d graphs, its share of the total, and what it did (``compiling`` for
        a thread that only compiled, as Inductor's compile workers, else ``running``). ``thread``
        is the profiler's thread id."""
        import pandas as pd

        total = sum(t["cpu_us"] for t in self.tree.threads)
        rows = [{"thread": t["thread"], "did": "compiling" if t["cpu_us"] and t["compile_us"] >= 0.99 * t["cpu_us"] else "running",
                 "cpu_us": t["cpu_us"], "compile_us": t["compile_us"],
                 "share": t["cpu_us"] / total if total else float("nan")} for t in self.tree.threads]  # fmt: skip
        return pd.DataFrame(rows, columns=["thread", "did", "cpu_us", "compile_us", "share"])

    def by_type(self, depth: int | None = None) -> pd.DataFrame:
        """Module metrics aggregated by class; ``depth`` = module nesting level (root = 0). It
        prints as a table of the main figures in units; it holds every column."""
        from ._views.frame import by_type
        from ._views.printed import readable, type_table

        return readable(by_type(self.tree, depth), type_table)

    def memory_timeline(self, device: str | None = None) -> pd.DataFrame:
        """Allocated bytes over the run (``memory=True``): one row per allocation or free with
        ``device`` (``cpu``, ``cuda:0``), ``time_us`` since the run's first event, ``allocated``
        (the allocator's total after it), the deepest node running (``path``), the ``layer``
        around it and the ``phase`` (forward, backward, optimizer, other). Runs longer than
        50k events per device are thinned, keeping each time bucket's lowest and highest point."""
        from ._views.memory import timeline_frame

        return timeline_frame(self.tree, device)

    def memory_breakdown(self, by: str = "category", device: str | None = None) -> pd.DataFrame:
        """What was alive at the memory peak of ``device`` (default: the accelerator, else the
        host): ``by="category"`` (parameter, gradient, optimizer_state, activation, temporary,
        autograd_detail, other, with the source of each) or ``by="layer"`` (bytes per category
        for each layer that allocated them, or owns the parameter they belong to). ``attrs``
        names the peak, its phase and the node running then; ``summary["peak_at"]`` too."""
        from ._views.memory import breakdown_frame

        return breakdown_frame(self.tree, by, device)

    @property
    def summary(self) -> Summary:
        """Totals for the run: wall, CPU/CUDA time, forward/backward split, params, FLOPs, and
        with a device ``gpu_busy_us``/``gpu_idle_us``/``gpu_window_us`` (``cuda_us`` sums streams,
        so it can exceed wall time; busy is their union). See :func:`~torchprof._tree.summary.summarize`.
        Also the answers: ``headline`` (the costliest layer and module type, MFU), ``hot_path``,
        ``bottleneck``, ``costliest_type``, ``mfu``, ``peak_flops``, ``time_split`` and
        ``step_spread``."""
        if self._summary is None:
            from ._views.format import headline

            summary = summarize(self.tree, self.recording)
            summary["headline"] = headline(summary)
            self._summary = summary
        return self._summary.copy()

    @property
    def headline(self) -> str:
        """One line naming the costliest layer and the costliest module type with their shares,
        and the MFU where the device's peak is known."""
        return str(self.summary["headline"])

    def _findings(self, memory_limit: float | None = None) -> list[Finding]:
        from ._views.insights import find

        if memory_limit is None:
            if self._found is None:
                self._found = find(self.tree, self.summary, self.meta)
            return list(self._found)
        return find(self.tree, self.summary, self.meta, memory_limit)

    def insights(self, memory_limit: float | None = None) -> pd.DataFrame:
        """What to fix first: one finding per row, ranked by the time at stake, with the columns
        ``rule``, ``at_stake_us`` (the time of the work the finding names: an upper bound on what
        fixing it saves; NaN for memory findings), ``share`` (of the run), ``paths`` (the rows it
        points to), ``message`` (what was seen, with figures) and ``advice`` (what to try). Empty
        when no rule fires (it prints "no findings"); printed, the findings read as numbered
        sentences. Each rule and its threshold is listed in ``torchprof._views.insights``.
        ``memory_limit`` (bytes) replaces the device's memory the memory rules compare with."""
        from ._views.insights import insights_frame
        from ._views.printed import findings_text, readable

        return readable(insights_frame(self._findings(memory_limit)), findings_text)

    def to_markdown(self, path: str | os.PathLike[str] | None = None) -> str:
        """A summary to paste into an issue or a chat, at most 4 KB of Markdown: the headline, the
        run in one line, the costliest layers with their figures, the insights, MFU, what the
        memory peak is made of and the steps; the same sections in the same order every time.
        With ``path`` it is also written there."""
        from ._views.markdown import to_markdown

        text = to_markdown(self.tree, self.summary, self._findings(), self.recording.label)
        if path is not None:
            write_text(path, text)
        return text

    # -- terminal -------------------------------------------------------------------------------
    def table(
        self,
        min_pct: float = DEFAULT_MIN_PCT,
        sort_by: str | Sequence[str] | None = DEFAULT_SORT,
        show_ops: bool = False,
        filter: Iterable[str] | str | None = None,
        *,
        ascending: bool = False,
        max_depth: int | None = None,
        colour: bool = False,
        width: int | None = DEFAULT_WIDTH,
    ) -> str:
        """The tree table as a string (see :meth:`display`)."""
        from ._views.table import render_table

        if filter is not None and not isinstance(filter, str):
            filter = list(filter)
            if not filter:
                # The 2020 torchprof's ``filter=[]`` meant "do not hide low-level events".
                filter, show_ops = None, True
        return render_table(self.tree, min_pct=min_pct, sort_by=sort_by, ascending=ascending, show_ops=show_ops,
                            filter=filter, max_depth=max_depth, colour=colour, width=width, hot=True,
                            headline=self.headline, warnings=self.summary.get("warnings") or ())  # fmt: skip

    def display(
        self,
        min_pct: float = DEFAULT_MIN_PCT,
        sort_by: str | Sequence[str] | None = DEFAULT_SORT,
        show_ops: bool = False,
        filter: Iterable[str] | str | None = None,
        **options: Any,
    ) -> None:
        """Print the tree table.

        Args:
            min_pct: hide nodes below this percent of the root's total (ancestors of shown
                nodes stay).
            sort_by: column that orders siblings (the hierarchy is kept), e.g. ``"self_cpu_us"``.
            show_ops: also show the aten ops (and kernels) inside each layer.
            filter: patterns (one or a list) of rows to show, with their ancestors: a name or a
                module type, as a substring or a glob (``"conv"``, ``"layer4*"``, ``"Conv2d"``),
                or a path with ``path:`` (``"path:ResNet.layer4*"``: the rows under layer4 too).
                A filter that matches nothing says so under the table.
            options: ``ascending``, ``max_depth``, ``width`` (characters to fit, default 120,
                None for no limit) and ``colour`` (also spelt ``color``; default: on a terminal).
        """
        from ._views.table import wants_colour

        if "color" in options:  # the 2020 torchprof's spelling
            options["colour"] = options.pop("color")
        if options.get("colour") is None:
            options["colour"] = wants_colour(sys.stdout)
        print(self.table(min_pct, sort_by, show_ops, filter, **options))

    def summary_line(self, notes: bool = True, width: int | None = None) -> str:
        """The summary in one line, as the command line and the reports word it; with ``width``,
        in lines of at most that many characters; without ``notes``, the summary's notes (which
        a table prints under it) left out."""
        from ._views.format import summary_line

        return summary_line(self.summary, notes=notes, width=width)

    def __str__(self) -> str:
        from ._views.table import terminal_width, wants_colour

        return self.table(colour=wants_colour(sys.stdout), width=terminal_width())

    def __repr__(self) -> str:
        s = self.summary
        return f"<torchprof profile {s['name']!r}: {s['nodes']} nodes, CPU {s['cpu_us']:.0f} µs>"

    # -- notebook -------------------------------------------------------------------------------
    def widget(self, **state: Any) -> ProfileWidget:
        """The interactive widget; ``state`` sets ``min_pct``, ``sort_by``, ``show_ops``, ..."""
        from ._views.widget import ProfileWidget

        return ProfileWidget(self.tree, self.summary, self._findings(), **state)

    def _ipython_display_(self) -> None:
        """``display(prof)`` and ``prof`` ending a cell: the static table, and the widget where a
        kernel can run it (see :func:`torchprof._views.widget.show`)."""
        from ._views.widget import show

        show(self.tree, self.summary, findings=self._findings())

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        # For tools that ask for a rich repr themselves (IPython uses _ipython_display_).
        from ._views.widget import static_bundle

        return static_bundle(self.tree, self.summary)

    def to_html(self, path: str | os.PathLike[str] | None = None, **state: Any) -> str:
        """A self-contained interactive HTML report (no kernel, no network), opening with the
        view ``state`` (``min_pct``, ``sort_by``, ``expanded``, ...). With ``path`` it is written
        there and the path is returned (a notebook then shows the file name, not the page);
        without, the page is returned as a string."""
        from ._views.html import report_html

        html = report_html(self.tree, self.summary, self._findings(), **state)
        return html if path is None else write_text(path, html)

    # -- exports ----------------------------------------------------------------------------------
    def export_stacks(self, path: str, metric: str = "self_cpu_us") -> str:
        """Folded stacks (flamegraph.pl / speedscope): one line per node with a non-zero
        ``metric`` (``self_cpu_us``, ``self_cuda_us``, ``self_cpu_mem``, ``self_cuda_mem``), its
        frames the names of the nodes from the root down, a module's being its own name
        (``conv1``; the frames above it spell its path). Gzipped when ``path`` ends in ``.gz``."""
        from ._views.exports import write_stacks

        return write_stacks(self.tree, path, metric)

    def export_chrome_trace(self, path: str) -> str:
        """Write the run as a chrome trace (Perfetto, chrome://tracing, ``load_trace``); gzipped
        when ``path`` ends in ``.gz``. Works any number of times; with a schedule the trace holds
        every recorded cycle."""
        from ._views.exports import write_chrome_trace

        if self._trace_files is None:
            raise ValueError("this profile holds no trace events of its own to export: it was reopened from "
                             "prof.save(), or merged from several ranks' traces (each rank's file is its trace)")
        tree = self.tree  # first: building it reads the real names of the events the trace gets back
        return write_chrome_trace(self._trace_files(), tree, self.recording, path)

    def save(self, path: str) -> str:
        """Save the profile (tree and summary) to reopen later with ``torchprof.load``."""
        from ._files import dumps, write_atomic
        from ._tree.storage import to_json

        return write_atomic(path, dumps(to_json(self.tree, self.recording)))
