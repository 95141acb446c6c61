"""The notebook widget (``display(prof)``, ``prof.widget()``) and the profile's rich display.

Python only packs the data and keeps the view state; all table logic runs in ``js/widget.js``.
The view state is one synced trait per key of :data:`torchprof._vocab.STATE`, so a click in the
page is visible from Python and a trait set from Python redraws the page; ``view_df`` applies the
same rules (:func:`~torchprof._views.rows.visible_rows`) to that state, so it always holds the
rows the user sees.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import anywidget
import traitlets

from .._tree.aggregate import across_steps
from .._tree.summary import Summary
from .._tree.tree import Tree
from .._vocab import ALL_STEPS, DEFAULT_MIN_PCT, DEFAULT_SORT, STATE, STATE_KEYS, StateKey
from .html import WIDGET_VIEW, static_file, static_table
from .insights import Finding
from .payload import payload, payload_bytes
from .rows import resolve_sort, visible_rows
from .state import check_state, step_root
from .table import render_table

if TYPE_CHECKING:
    import pandas as pd


def _trait(key: StateKey) -> traitlets.TraitType:
    if key.type == "float":
        trait: traitlets.TraitType = traitlets.Float(key.default, help=key.about)
    elif key.type == "text":
        trait = traitlets.Unicode(key.default, help=key.about)
    elif key.type == "bool":
        trait = traitlets.Bool(key.default, help=key.about)
    else:
        trait = traitlets.List(traitlets.Unicode(), help=key.about)
    return trait.tag(sync=True)


class ViewStateWidget(anywidget.AnyWidget):
    """js/widget.js with a payload (``data``) and the synced view state of :data:`~torchprof._vocab.STATE`:
    what a profile's widget and a comparison's share."""

    _esm = static_file("widget.js")
    _css = static_file("widget.css")

    data = traitlets.Bytes(b"", help="the table, packed column-wise (see _views.payload.payload_bytes)").tag(sync=True)
    locals().update({key.name: _trait(key) for key in STATE})

    @traitlets.validate("min_pct")
    def _valid_min_pct(self, proposal: dict[str, Any]) -> float:
        value = proposal["value"]
        if not 0 <= value <= 100:
            raise traitlets.TraitError(f"min_pct must be between 0 and 100, got {value!r}")
        return float(value)

    @property
    def state(self) -> dict[str, Any]:
        """The view state as keywords for ``widget(**state)`` or ``to_html(**state)``."""
        return {k: getattr(self, k) for k in STATE_KEYS}


class ProfileWidget(ViewStateWidget):
    """The interactive layer tree of one profile.

    Synced state (settable from Python, updated by clicks): ``min_pct``, ``sort_by``,
    ``ascending``, ``show_ops``, ``search``, ``expanded`` (paths of open rows), ``view`` (table,
    flame or top), ``step`` (the part of the run viewed), ``selected``, ``metric``,
    ``flame_colour`` and ``zoom``. ``df`` is the whole profile, ``view_df`` the rows of the table
    view, in view order (of the folded tree for ``step="all"``).
    """

    def __init__(self, tree: Tree, summary: Summary, findings: list[Finding] | None = None, **state: Any) -> None:
        self._tree = tree
        self._summary = summary
        self._findings = findings
        self._folded = across_steps(tree)
        super().__init__(data=payload_bytes(payload(tree, summary, self._folded, findings=findings)),
                         **check_state(tree, state, self._folded))  # fmt: skip

    @traitlets.validate("step")
    def _valid_step(self, proposal: dict[str, Any]) -> str:
        return check_state(self._tree, {"step": proposal["value"], "expanded": []}, self._folded)["step"]

    @traitlets.validate("view", "metric", "flame_colour")
    def _valid_choice(self, proposal: dict[str, Any]) -> str:
        name = proposal["trait"].name
        checked: Mapping[str, object] = check_state(self._tree, {name: proposal["value"], "expanded": []}, self._folded)
        return str(checked[name])

    def __repr__(self) -> str:
        return f"<torchprof widget {self._tree.columns['name'][0]!r}: {len(self._tree)} nodes>"

    def _ipython_display_(self) -> None:
        # The static table too, so what cannot render the widget shows the profile (see show()).
        show(self._tree, self._summary, self, self._findings)

    @traitlets.validate("sort_by")
    def _valid_sort(self, proposal: dict[str, Any]) -> str:
        return resolve_sort(proposal["value"])

    @property
    def _viewed(self) -> tuple[Tree, int]:
        """The tree the table shows and its root row: a step's row, or the folded steps."""
        if self.step == ALL_STEPS and self._folded is not None:
            return self._folded.tree, 0
        return self._tree, step_root(self._tree, self.step)

    @property
    def rows(self) -> list[int]:
        """Row indices of the table view, in view order (rows of the folded tree for ``step="all"``)."""
        st = self.state
        tree, root = self._viewed
        return visible_rows(tree, min_pct=st["min_pct"], sort_by=st["sort_by"], ascending=st["ascending"],
                            show_ops=st["show_ops"], search=st["search"], expanded=set(st["expanded"]), root=root)  # fmt: skip

    @property
    def df(self) -> pd.DataFrame:
        """The whole profile (``prof.df``)."""
        from .frame import to_dataframe

        return to_dataframe(self._tree)

    @property
    def view_df(self) -> pd.DataFrame:
        """The rows the user currently sees, in view order (all of them, not only those scrolled
        into view)."""
        from .frame import to_dataframe

        return to_dataframe(self._viewed[0], self.rows)


def _in_kernel() -> bool:
    """True inside an IPython kernel, the only place a widget manager can render a widget."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    shell = ipython.get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def static_bundle(tree: Tree, summary: Summary, *, min_pct: float = DEFAULT_MIN_PCT, sort_by: str = DEFAULT_SORT) -> dict[str, str]:
    """The profile as a front end without widgets shows it: the terminal table as text/plain and
    the static HTML table (nbconvert, GitHub, consoles, a notebook reopened without its widgets)."""
    return {"text/plain": render_table(tree, min_pct=min_pct, sort_by=sort_by, hot=True, headline=summary.get("headline"),
                                       warnings=summary.get("warnings") or ()),
            "text/html": static_table(tree, summary, min_pct=min_pct, sort_by=sort_by)}  # fmt: skip


def show(tree: Tree, summary: Summary, widget: ProfileWidget | None = None,
         findings: list[Finding] | None = None) -> None:  # fmt: skip
    """Display the profile in IPython: the static table, then, in a kernel, the widget (see
    :func:`show_with_fallback`)."""
    # A widget's own threshold and sort, so its table shows what it opened with.
    view_of = {"min_pct": widget.min_pct, "sort_by": widget.sort_by} if widget is not None else {}
    show_with_fallback(static_bundle(tree, summary, **view_of), lambda: widget or ProfileWidget(tree, summary, findings))


def show_with_fallback(static: dict[str, str], make_widget: Callable[[], Any]) -> None:
    """Display ``static`` (text/plain and a text/html wrapped as :data:`~.html.FALLBACK_CLASS`),
    then, in a kernel, the widget ``make_widget`` returns.

    Two outputs rather than one bundle: a notebook front end renders only the richest type of
    each output, so the widget's output, reopened without the widget's state, would show JupyterLab's
    "model not found" error and never its HTML. The table comes first and its CSS shows exactly
    one of the two where the front end can run the widget. The widget's output carries an empty
    text/plain, so what cannot render it (nbconvert without widget state, an untrusted notebook)
    shows nothing more than the table. A terminal IPython gets the table as text."""
    from IPython.display import display

    display(static, raw=True)
    if not _in_kernel():
        return
    view: Any = make_widget()._repr_mimebundle_()
    data = view[0] if isinstance(view, tuple) else view  # anywidget returns (data, metadata)
    display({WIDGET_VIEW: data[WIDGET_VIEW], "text/plain": ""}, raw=True)
