"""A finished profile and every view of it (DataFrame, table, summary, widget, exports)."""

from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from ._records import Capture
from ._tree import Tree, TreeBuilder

if TYPE_CHECKING:
    import pandas as pd


class Profile:
    """The result of a profiling run or of a loaded trace.

    The tree is built on first use, so leaving a ``with Profiler()`` block costs no more than
    leaving ``torch.profiler.profile``.
    """

    def __init__(self) -> None:
        self._tree: Tree | None = None
        self._cap: Capture | None = None
        self._df: pd.DataFrame | None = None

    @classmethod
    def _from_parts(cls, builder: TreeBuilder, capture: Capture) -> Profile:
        prof = cls.__new__(cls)
        Profile.__init__(prof)
        prof._ready = (builder, capture)
        return prof

    def _capture(self) -> tuple[TreeBuilder, Capture]:
        ready = getattr(self, "_ready", None)
        if ready is None:
            raise RuntimeError("this profile holds no data")
        return ready

    # -- the data -----------------------------------------------------------------------------
    @property
    def tree(self) -> Tree:
        """The layer tree, column-wise in pre-order (built once, on first use)."""
        if self._tree is None:
            from ._gc import paused_gc

            with paused_gc():
                builder, cap = self._capture()
                self._tree = builder.finish()
            self._cap = cap
        return self._tree

    @property
    def capture(self) -> Capture:
        self.tree
        assert self._cap is not None
        return self._cap

    @property
    def df(self) -> pd.DataFrame:
        """One row per tree node (pre-order, siblings by descending ``cpu_us``), indexed by path.

        Times in µs (``cpu_us`` = forward + backward, ``bwd_*`` its backward part), memory in
        bytes, NaN where not recorded. ``self_*`` excludes every child row (ops included);
        ``layer_self_*`` is the self time with the layer's ops folded in.
        """
        if self._df is None:
            from ._frame import to_dataframe

            self._df = to_dataframe(self.tree)
        return self._df.copy()

    @property
    def unsupported_ops(self) -> dict[str, int]:
        """Ops that ran but have no FLOP formula (name -> calls): their FLOPs are unknown."""
        return dict(self.tree.unsupported_ops)

    @property
    def steps(self) -> pd.DataFrame:
        """Per-iteration figures (``ProfilerStep#N`` ranges), to see whether step time drifts."""
        import pandas as pd

        return pd.DataFrame(self.tree.steps, columns=["step", "wall_us", "cpu_us", "cuda_us", "bwd_cpu_us"])

    def by_type(self, depth: int | None = None) -> pd.DataFrame:
        """Module metrics aggregated by class; ``depth`` = module nesting level (root = 0)."""
        from ._frame import by_type

        return by_type(self.tree, depth)

    @property
    def summary(self) -> dict[str, Any]:
        """Totals for the run: wall, CPU/CUDA time, forward/backward split, params, FLOPs."""
        tree, cap = self.tree, self.capture
        c = tree.columns
        nan = float("nan")
        cpu, bwd = c["cpu_us"][0], c["bwd_cpu_us"][0]
        module_fwd = 0.0
        for i, kind in enumerate(c["kind"]):
            p = tree.parent_index[i]
            if kind == "module" and (p < 0 or c["kind"][p] != "module"):
                module_fwd += c["cpu_us"][i] - c["bwd_cpu_us"][i]
        wall = cap.wall_us if cap.wall_us is not None else nan
        flops = c["flops"][0]
        params = c["params"][0]
        param_bytes = nan
        if cap.modules and not math.isnan(params):
            # A root module's label is the last part of its path (below a region the path is
            # "ProfilerStep#3/ResNet"); the same root under several steps counts once.
            seen = {}
            for i, kind in enumerate(c["kind"]):
                p = tree.parent_index[i]
                if kind != "module" or (p >= 0 and c["kind"][p] == "module"):
                    continue
                label = c["path"][i].rsplit("/", 1)[-1]
                info = cap.modules.get(label)
                if info is not None:
                    seen[label] = info.param_bytes
            param_bytes = float(sum(seen.values())) if seen else nan
        out = {
            "name": c["name"][0],
            "wall_us": wall,
            "cpu_us": cpu,
            "cuda_us": c["cuda_us"][0],
            "forward_cpu_us": module_fwd,
            "backward_cpu_us": bwd,
            "other_cpu_us": cpu - module_fwd - bwd,
            "backward_cuda_us": c["bwd_cuda_us"][0],
            "params": params,
            "param_bytes": param_bytes,
            "macs": c["macs"][0],
            "flops": flops,
            "flops_per_s": flops / (wall / 1e6) if wall and not math.isnan(wall) and not math.isnan(flops) else nan,
            "peak_cpu_mem": tree.peak_cpu_mem,
            "peak_cuda_mem": tree.peak_cuda_mem,
            "steps": len(tree.steps),
            "events": tree.event_count,
            "nodes": len(tree),
        }
        if "interrupted" in cap.meta:
            out["interrupted"] = cap.meta["interrupted"]
        return out

    # -- terminal -------------------------------------------------------------------------------
    def table(
        self,
        min_pct: float = 1,
        sort_by: str | Sequence[str] | None = "cpu_us",
        show_ops: bool = False,
        filter: Iterable[str] | str | None = None,
        *,
        ascending: bool = False,
        max_depth: int | None = None,
        colour: bool = False,
    ) -> str:
        """The tree table as a string (see :meth:`display`)."""
        from ._table import render_table

        if filter is not None and not isinstance(filter, str) and len(list(filter)) == 0:
            # The 2020 torchprof's ``filter=[]`` meant "do not hide low-level events".
            filter, show_ops = None, True
        return render_table(self.tree, min_pct=min_pct, sort_by=sort_by, ascending=ascending, show_ops=show_ops,
                            filter=filter, max_depth=max_depth, colour=colour)  # fmt: skip

    def display(
        self,
        min_pct: float = 1,
        sort_by: str | Sequence[str] | None = "cpu_us",
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
            filter: name or path patterns (substring or glob); matches and their ancestors show.
        """
        from ._table import wants_colour

        options.setdefault("colour", wants_colour(sys.stdout))
        print(self.table(min_pct, sort_by, show_ops, filter, **options))

    def __str__(self) -> str:
        from ._table import wants_colour

        return self.table(colour=wants_colour(sys.stdout))

    def __repr__(self) -> str:
        if self._tree is None and getattr(self, "_ready", None) is None and type(self).__name__ == "Profiler":
            return object.__repr__(self)
        s = self.summary
        return f"<torchprof profile {s['name']!r}: {s['nodes']} nodes, CPU {s['cpu_us']:.0f} µs>"

    # -- notebook -------------------------------------------------------------------------------
    def widget(self, **state: Any):
        """The interactive widget; ``state`` sets ``min_pct``, ``sort_by``, ``show_ops``, ..."""
        from ._widget import ProfileWidget

        return ProfileWidget(self, **state)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        from ._widget import mimebundle

        return mimebundle(self)

    def to_html(self, path: str | None = None, **state: Any) -> str:
        """A self-contained interactive HTML report (no kernel, no network). Returns the HTML
        and writes it to ``path`` when given."""
        from ._html import report_html

        html = report_html(self, **state)
        if path is not None:
            with open(path, "w", encoding="utf-8") as f:
                f.write(html)
        return html

    # -- exports ----------------------------------------------------------------------------------
    def export_stacks(self, path: str, metric: str = "self_cpu_us") -> str:
        """Folded stacks (flamegraph.pl / speedscope) with module paths as frames."""
        from ._exports import write_stacks

        return write_stacks(self, path, metric)

    def export_chrome_trace(self, path: str) -> str:
        from ._exports import write_chrome_trace

        return write_chrome_trace(self, path)

    def save(self, path: str) -> str:
        """Save the profile (tree and summary) to reopen later with ``torchprof.load``."""
        from ._exports import save_profile

        return save_profile(self, path)
