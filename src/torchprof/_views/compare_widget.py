"""The notebook widget of a comparison (``display(cmp)``, ``cmp.widget()``): the profile's front end
(js/widget.js) with the comparison's payload, the same synced view state and controls."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import traitlets

from .._tree.diff import Diff
from .compare import check_compare_state, compare_frame, compare_payload, compare_rows, default_sort, resolve_sort, view_tree
from .payload import payload_bytes
from .widget import ViewStateWidget, show_with_fallback

if TYPE_CHECKING:
    import pandas as pd


class CompareWidget(ViewStateWidget):
    """The interactive diff tree of two runs: delta columns coloured (green faster, red slower),
    siblings sorted by the size of their change; state as a profile's widget (``min_pct``,
    ``sort_by``, ``ascending``, ``show_ops``, ``search``, ``expanded``). ``df`` is the whole
    comparison, ``view_df`` the rows currently shown, in view order."""

    def __init__(self, diff: Diff, items: list[tuple[str, str, str]], label: str, **state: Any) -> None:
        self._diff = diff
        self._items = items
        self._label = label
        self._tree = view_tree(diff)
        self._default_sort = default_sort(diff)
        packed = payload_bytes(compare_payload(diff, items, label))
        super().__init__(data=packed, **check_compare_state(self._tree, state, self._default_sort))

    def _ipython_display_(self) -> None:
        # The diff table too, so what cannot render the widget shows the comparison (see show()).
        from .compare import render_table

        text = render_table(self._diff, self._items, min_pct=self.min_pct, sort_by=self.sort_by, ascending=self.ascending)
        show(self._diff, self._items, self._label, text, self)

    @traitlets.validate("view", "metric", "flame_colour", "step")
    def _valid_choice(self, proposal: dict[str, Any]) -> str:
        name = proposal["trait"].name
        checked: Mapping[str, object] = check_compare_state(self._tree, {name: proposal["value"], "expanded": []}, self._default_sort)
        return str(checked[name])

    @traitlets.validate("sort_by")
    def _valid_sort(self, proposal: dict[str, Any]) -> str:
        return resolve_sort(proposal["value"], self._default_sort)

    @property
    def rows(self) -> list[int]:
        """Row indices shown, in view order (what the front end shows for this state)."""
        st = self.state
        return compare_rows(self._tree, sort_by=st["sort_by"], min_pct=st["min_pct"], ascending=st["ascending"],
                            show_ops=st["show_ops"], search=st["search"], expanded=set(st["expanded"]))  # fmt: skip

    @property
    def df(self) -> pd.DataFrame:
        return compare_frame(self._diff.tree)

    @property
    def view_df(self) -> pd.DataFrame:
        return compare_frame(self._diff.tree, self.rows)


def static_bundle(text: str) -> dict[str, str]:
    """The comparison where no widget runs: the diff table as text, and as preformatted HTML."""
    from .compare import static_html

    return {"text/plain": text, "text/html": static_html(text)}


def show(diff: Diff, items: list[tuple[str, str, str]], label: str, text: str, widget: CompareWidget | None = None) -> None:
    """``display(cmp)``: the diff table, then, in a kernel, the widget, as a profile shows
    (two outputs: the table is what a reopened notebook or nbconvert shows)."""
    show_with_fallback(static_bundle(text), lambda: widget or CompareWidget(diff, items, label))
