"""pandas views of a tree: ``prof.df``, ``prof.by_type()``, ``prof.steps``."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Sequence

from ._tree import COLUMNS, Tree

if TYPE_CHECKING:
    import pandas as pd

_SUMMED = (
    "calls", "self_cpu_us", "cpu_us", "self_cuda_us", "cuda_us", "bwd_self_cpu_us", "bwd_cpu_us",
    "bwd_self_cuda_us", "bwd_cuda_us", "self_cpu_mem", "cpu_mem", "self_cuda_mem", "cuda_mem",
    "params", "macs", "flops",
)  # fmt: skip


def to_dataframe(tree: Tree, rows: Sequence[int] | None = None) -> pd.DataFrame:
    """One row per node in pre-order, indexed by ``path``. ``rows`` picks and orders a subset."""
    import pandas as pd

    cols = tree.columns
    if rows is not None:
        data = {c: [cols[c][i] for i in rows] for c in COLUMNS}
    else:
        data = {c: cols[c] for c in COLUMNS}
    df = pd.DataFrame(data, columns=list(COLUMNS))
    for c in ("calls", "depth"):
        df[c] = df[c].astype("int64")
    df["is_backward"] = df["is_backward"].astype(bool)
    df.index = pd.Index(list(data["path"]))
    return df


def by_type(tree: Tree, depth: int | None = None) -> pd.DataFrame:
    """Module metrics aggregated by class (DeepSpeed's "top modules at depth N").

    ``depth`` counts module nesting (a root module is 0, its children 1, ...); None takes every
    module. Totals come from the outermost module of each class only, so a ``Sequential`` inside
    a ``Sequential`` is not counted twice; ``modules`` is how many tree nodes were aggregated.
    """
    import pandas as pd

    cols = tree.columns
    parent = tree.parent_index
    kinds = cols["kind"]
    module_depth = [-1] * len(tree)
    for i in range(len(tree)):
        if kinds[i] == "module":
            p = parent[i]
            module_depth[i] = module_depth[p] + 1 if p >= 0 and kinds[p] == "module" else 0
    groups: dict[str, dict[str, Any]] = {}
    for i in range(len(tree)):
        if kinds[i] != "module" or (depth is not None and module_depth[i] != depth):
            continue
        t = cols["type"][i]
        g = groups.setdefault(t, {"type": t, "modules": 0, **{c: 0.0 for c in _SUMMED}})
        g["modules"] += 1
        nested = False
        if depth is None:
            p = parent[i]
            while p >= 0 and kinds[p] == "module":
                if cols["type"][p] == t:
                    nested = True
                    break
                p = parent[p]
        for c in _SUMMED:
            if nested and not c.startswith(("self_", "bwd_self_")) and c != "calls":
                continue
            v = cols[c][i]
            g[c] = g[c] + (0.0 if v is None or (isinstance(v, float) and math.isnan(v)) else v)
    df = pd.DataFrame(list(groups.values()), columns=["type", "modules", *_SUMMED])
    for c in _SUMMED:
        if all(_missing(v) for v in cols[c][1:]):
            df[c] = float("nan")
    df["calls"] = df["calls"].astype("int64")
    return df.sort_values("cpu_us", ascending=False, kind="stable").set_index("type")


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))
