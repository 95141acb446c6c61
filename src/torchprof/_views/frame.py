"""pandas views of a tree: ``prof.df``, ``prof.by_type()``, ``prof.steps``, ``prof.step_times``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._files import write_text
from .._tree.aggregate import by_type as aggregate_by_type
from .._tree.steps import step_splits
from .._tree.tree import Tree
from .._vocab import COLUMNS, CSV_FORMULA_START, STEP_EXTRA, STEP_PARTS, STEP_TIME_COLUMNS

if TYPE_CHECKING:
    import pandas as pd

_DTYPES = {"int": "int64", "bool": bool}
STEP_COLUMNS = ["step", "wall_us", "cpu_us", "cuda_us", "bwd_cpu_us"]
#: What ``prof.steps`` adds to each step: its CPU time split (:mod:`~torchprof._tree.steps`), the
#: device's idle time in it and whether it was slow.
STEP_SPLIT_COLUMNS = [*STEP_PARTS, *STEP_EXTRA]


def to_dataframe(tree: Tree, rows: Sequence[int] | None = None) -> pd.DataFrame:
    """One row per node in pre-order, indexed by ``path``, with the registry's columns and dtypes.
    ``rows`` picks and orders a subset."""
    import pandas as pd

    cols = tree.columns
    names = [c.name for c in COLUMNS]
    if rows is not None:
        data = {c: [cols[c][i] for i in rows] for c in names}
    else:
        data = {c: cols[c] for c in names}
    df = pd.DataFrame(data, columns=names)
    for c in COLUMNS:
        if c.dtype in _DTYPES:
            df[c.name] = df[c.name].astype(_DTYPES[c.dtype])
    df.index = pd.Index(list(data["path"]))
    return df


def csv_text(value: object) -> object:
    """A text cell as a spreadsheet cannot run it: behind a ``'`` when it starts like a formula
    (:data:`~torchprof._vocab.CSV_FORMULA_START`); anything else unchanged."""
    if isinstance(value, str) and value[:1] and value[0] in CSV_FORMULA_START:
        return "'" + value
    return value


def csv_safe(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``df`` fit to write as CSV: :func:`csv_text` on every text column and the index
    (a module or region name from an untrusted trace could read ``=HYPERLINK(...)``). Numeric
    and boolean columns stay as they are: ``-1.5`` is a number, not a formula."""
    import pandas as pd

    out = df.copy()
    for name in out.columns:
        column = out[name]
        if not (pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column)):
            out[name] = column.map(csv_text)
    if not pd.api.types.is_numeric_dtype(out.index):
        out.index = out.index.map(csv_text)
    return out


def write_csv(df: pd.DataFrame, path: str) -> str:
    """``df`` as CSV, guarded by :func:`csv_safe` (every CSV torchprof writes goes through here),
    written atomically."""
    return write_text(path, csv_safe(df).to_csv())


def by_type(tree: Tree, depth: int | None = None) -> pd.DataFrame:
    """:func:`torchprof._tree.aggregate.by_type` as a DataFrame indexed by module class."""
    import pandas as pd

    rows, summed = aggregate_by_type(tree, depth)
    df = pd.DataFrame(rows, columns=["type", "modules", *summed])
    df["calls"] = df["calls"].astype("int64")
    return df.set_index("type")


def steps(tree: Tree) -> pd.DataFrame:
    """Per-iteration figures (``ProfilerStep#N`` ranges): wall, CPU and device time, then the CPU
    time split into data loading, forward, backward, optimizer, communication and the rest
    (they add up to ``cpu_us``), the device's idle time and ``slow`` (over 1.25x the median step)."""
    import pandas as pd

    df = pd.DataFrame(tree.steps, columns=STEP_COLUMNS)
    splits: dict[str, Mapping[str, object]] = {str(s["step"]): s for s in step_splits(tree)}
    none: Mapping[str, object] = {}
    for column in STEP_SPLIT_COLUMNS:
        values = [splits.get(str(step), none).get(column, float("nan") if column != "slow" else False) for step in df["step"]]
        df[column] = pd.Series(values, index=df.index, dtype=bool if column == "slow" else float)
    return df



def step_times(columns: dict[str, list[Any]]) -> pd.DataFrame:
    """The wall time of every step a run marked (``Recording.step_times``), one row per step
    (per rank and step in a merged job)."""
    import pandas as pd

    names = [c for c in STEP_TIME_COLUMNS if c in columns or c != "rank"]
    frame = pd.DataFrame({c: columns.get(c, []) for c in names}, columns=names)
    return frame.astype({"step": "int64", "wall_us": "float64", "recorded": bool})
