"""The columns a table shows and the text of each cell, shared by the terminal table and the static
HTML table (the widget gets the same column specs through its payload)."""

from __future__ import annotations

from dataclasses import dataclass

from .._tree.tree import Tree
from .._vocab import COLUMN, UNKNOWN_MARK, VIEW_COLUMNS, Column, is_missing
from . import format as fmt
from .rows import value_column


@dataclass(frozen=True)
class ViewColumn:
    """A registry column as one table shows it."""

    spec: Column
    values: str
    """The tree column read: ``spec.name``, or its layer alternative with ops hidden."""

    @property
    def label(self) -> str:
        """The header: the label of the column read ("Own CPU" with ops hidden, as
        ``prof.df`` names those values; "Self CPU" only for ``self_cpu_us``'s own)."""
        return COLUMN[self.values].label


def has_data(tree: Tree, name: str) -> bool:
    """The column holds something to show: not all missing, not all zero (the root aside for calls)."""
    values = tree.columns[name]
    if name == "calls" and len(values) > 0:
        return True
    if len(values) > _ARRAY_FROM and not any(isinstance(v, bool) for v in values[1:2]):
        # A column of a big tree at C speed: a table asks every column, and most are empty.
        import numpy as np

        try:
            numbers = np.array(values[1:], dtype=float)  # None reads NaN
        except (TypeError, ValueError):
            pass  # text (a rank named by a string): read one by one below
        else:
            return bool(np.any((numbers != 0) & ~np.isnan(numbers)))
    return any(not is_missing(v) and v != 0 for v in values[1:] if not isinstance(v, bool))


#: Rows from which :func:`has_data` reads a column as an array.
_ARRAY_FROM = 2_000


def view_columns(tree: Tree, show_ops: bool) -> list[ViewColumn]:
    """The registry's view columns this profile has data for, in order (a column that ``needs``
    another is shown only with it)."""
    shown = {name for name in VIEW_COLUMNS if has_data(tree, name)}
    out = []
    for name in VIEW_COLUMNS:
        spec = COLUMN[name]
        if name in shown and (spec.needs is None or spec.needs in shown):
            out.append(ViewColumn(spec, value_column(name, show_ops)))
    return out


def cell_text(tree: Tree, column: ViewColumn, row: int, *, percent: bool = True) -> str:
    """``812µs (45%)``: the value and, for a column with a percent base (unless ``percent`` is
    False), its share of the root's. Empty for a missing value and for zero (an empty cell reads
    faster than ``0.00µs (0%)``), except for whole numbers (a call count, a rank), as the front
    end writes them; :data:`~torchprof._vocab.UNKNOWN_MARK` where a missing value is unknown
    (:attr:`~torchprof._vocab.Column.unknown`: FLOPs of a row that holds an op of unknown cost)."""
    spec = column.spec
    v = tree.columns[column.values][row]
    if is_missing(v):
        return UNKNOWN_MARK if spec.unknown else ""
    if v == 0 and spec.unit != "int":
        return ""
    text = fmt.value_text(spec.unit, v)
    if percent and spec.percent_of is not None:
        base = tree.columns[spec.percent_of][0]
        if base:
            text += f" ({fmt.percent(v, base)})"
    return text
