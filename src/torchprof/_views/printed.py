"""DataFrames that print as a person reads them: ``print(prof.by_type())`` is a table of the
figures that matter in units (not 35 raw columns cut by pandas), ``print(prof.insights())`` the
findings as sentences, or "no findings". They are DataFrames in every other way; what is derived
from one (``df.head()``, a column) is a plain DataFrame again.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from .._vocab import COLUMN
from .format import printable, value_text

if TYPE_CHECKING:
    import pandas as pd

#: The columns ``print(prof.by_type())`` shows (the frame keeps them all), where the run has them.
TYPE_COLUMNS = ("modules", "calls", "params", "flops", "cpu_us", "fwd_cpu_us", "bwd_cpu_us", "cuda_us", "fwd_cuda_us",
                "bwd_cuda_us", "act_cpu_mem", "act_cuda_mem")  # fmt: skip

_CLASSES: list[Any] = []


def readable(df: pd.DataFrame, render: Callable[[pd.DataFrame], str]) -> pd.DataFrame:
    """``df`` printing as ``render`` writes it."""
    if not _CLASSES:  # made once, with pandas imported only where a frame is made
        import pandas as pd

        class Printed(pd.DataFrame):
            _metadata: ClassVar[list[str]] = ["_render"]  # (pandas keeps it off the columns)

            @property
            def _constructor(self) -> Any:
                return pd.DataFrame  # what is derived from it prints as pandas prints it

            def __repr__(self) -> str:
                return object.__getattribute__(self, "_render")(pd.DataFrame(self))

            def __str__(self) -> str:
                return self.__repr__()

        _CLASSES.append(Printed)
    out = _CLASSES[0](df)
    out._render = render
    return out


def type_table(df: pd.DataFrame, width: int | None = None) -> str:
    """``by_type()``'s figures as a text table: a row per module class, the columns of
    :data:`TYPE_COLUMNS` the run has, in units; ``df.columns`` lists every column it holds."""
    if df.empty:
        return "no modules ran"
    columns = [c for c in TYPE_COLUMNS if c in df.columns and df[c].notna().any() and (df[c] != 0).any()]
    header = ["type", *(COLUMN[c].label if c in COLUMN else c.capitalize() for c in columns)]
    rows = [[printable(str(name)), *(_cell(c, value) for c, value in zip(columns, row))]
            for name, row in zip(df.index, df[columns].itertuples(index=False))]  # fmt: skip
    sizes = [max(len(header[k]), *(len(r[k]) for r in rows)) for k in range(len(header))]
    lines = ["  ".join(h.ljust(s) if k == 0 else h.rjust(s) for k, (h, s) in enumerate(zip(header, sizes)))]
    lines += ["  ".join(v.ljust(s) if k == 0 else v.rjust(s) for k, (v, s) in enumerate(zip(r, sizes))) for r in rows]
    lines.append(f"({len(df)} module classes; {len(df.columns)} columns in the DataFrame: by_type().columns)")
    return "\n".join(line[:width] if width else line for line in lines)


def _cell(column: str, value: Any) -> str:
    if column in ("modules", "calls"):
        return str(int(value))
    spec = COLUMN.get(column)
    return value_text(spec.unit, float(value)) if spec is not None else str(value)


def findings_text(df: pd.DataFrame, width: int | None = 100) -> str:
    """``insights()``'s findings as numbered sentences, what each found and what to try; "no
    findings" when no rule fired."""
    if df.empty:
        return "no findings: no rule fired (each rule and its threshold: docs/answers.md)"
    lines: list[str] = []
    for n, row in enumerate(df.itertuples(index=False), 1):
        text = printable(f"{n}. [{row.rule}] {row.message}. Try: {row.advice}.")
        lines += textwrap.wrap(text, width, subsequent_indent="   ", break_long_words=False) if width else [text]
    return "\n".join(lines)
