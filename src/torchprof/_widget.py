"""The notebook widget (``display(prof)``, ``prof.widget()``) and the profile's rich display.

Python only packs the data and keeps the view state; all table logic runs in ``js/widget.js``.
The view state is six synced traits, so a click in the page is visible from Python and a trait
set from Python redraws the page; ``view_df`` applies the same rules (``_view.visible_rows``) to
that state, so it always holds the rows the user sees.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import anywidget
import traitlets

from ._html import STATE_KEYS, payload, payload_bytes, static_file, static_table, view_state
from ._view import resolve_sort, visible_rows

if TYPE_CHECKING:
    import pandas as pd

    from ._profile import Profile

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


class ProfileWidget(anywidget.AnyWidget):
    """The interactive layer tree of one profile.

    Synced state (settable from Python, updated by clicks): ``min_pct``, ``sort_by``,
    ``ascending``, ``show_ops``, ``search``, ``expanded`` (paths of open rows). ``df`` is the
    whole profile, ``view_df`` the rows currently shown, in view order.
    """

    _esm = static_file("widget.js")
    _css = static_file("widget.css")

    data = traitlets.Bytes(b"", help="the profile, packed column-wise (see _html.payload_bytes)").tag(sync=True)
    min_pct = traitlets.Float(1.0, help="hide rows below this percent of the root's value").tag(sync=True)
    sort_by = traitlets.Unicode("cpu_us", help="the df column that orders siblings").tag(sync=True)
    ascending = traitlets.Bool(False).tag(sync=True)
    show_ops = traitlets.Bool(False, help="show aten ops and kernels under their layers").tag(sync=True)
    search = traitlets.Unicode("", help="substring or glob of name or path; matches and ancestors show").tag(sync=True)
    expanded = traitlets.List(traitlets.Unicode(), help="paths of expanded rows").tag(sync=True)

    def __init__(self, profile: Profile, **state: Any) -> None:
        self._profile = profile
        super().__init__(data=payload_bytes(payload(profile)), **view_state(profile.tree, state))

    @traitlets.validate("sort_by")
    def _valid_sort(self, proposal: dict[str, Any]) -> str:
        return resolve_sort(proposal["value"])

    @traitlets.validate("min_pct")
    def _valid_min_pct(self, proposal: dict[str, Any]) -> float:
        value = proposal["value"]
        if not 0 <= value <= 100:
            raise traitlets.TraitError(f"min_pct must be between 0 and 100, got {value!r}")
        return value

    @property
    def profile(self) -> Profile:
        return self._profile

    @property
    def state(self) -> dict[str, Any]:
        """The view state as keywords for ``prof.widget(**state)`` or ``prof.to_html(**state)``."""
        return {k: getattr(self, k) for k in STATE_KEYS}

    @property
    def rows(self) -> list[int]:
        """Tree row indices shown, in view order."""
        return visible_rows(self._profile.tree, min_pct=self.min_pct, sort_by=self.sort_by, ascending=self.ascending,
                            show_ops=self.show_ops, search=self.search, expanded=set(self.expanded))  # fmt: skip

    @property
    def df(self) -> pd.DataFrame:
        """The whole profile (``prof.df``)."""
        return self._profile.df

    @property
    def view_df(self) -> pd.DataFrame:
        """The rows the user currently sees, in view order (all of them, not only those scrolled
        into view)."""
        from ._frame import to_dataframe

        return to_dataframe(self._profile.tree, self.rows)


def _in_kernel() -> bool:
    """True inside an IPython kernel, the only place a widget manager can render a widget."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    shell = ipython.get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def mimebundle(prof: Profile) -> dict[str, Any]:
    """The profile's rich display: the terminal table as text/plain and a static HTML table of
    the top rows, always, so nbconvert, GitHub and consoles show something useful; plus the
    widget when a kernel (and so a widget manager) can render it."""
    bundle: dict[str, Any] = {"text/plain": prof.table(), "text/html": static_table(prof)}
    if _in_kernel():
        data, _ = ProfileWidget(prof)._repr_mimebundle_()
        bundle[WIDGET_VIEW] = data[WIDGET_VIEW]
    return bundle
