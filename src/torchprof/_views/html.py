"""HTML views: the self-contained interactive report page and the static table shown where no
widget can run (nbconvert, GitHub, a notebook reopened without its kernel)."""

from __future__ import annotations

import base64
import hashlib
import html
import json
from pathlib import Path
from typing import Any

from .._tree.aggregate import across_steps
from .._tree.hotpath import hot_path
from .._tree.summary import Summary
from .._tree.tree import Tree
from .._vocab import COLUMN, DEFAULT_MIN_PCT, DEFAULT_SORT, NodeKind
from .cells import cell_text, view_columns
from .format import summary_line
from .insights import Finding
from .payload import payload, payload_json
from .rows import threshold_column, visible_rows
from .state import check_state
from .table import HOT_MARK, tree_guides


# -- HTML ----------------------------------------------------------------------------------------
def script_json(obj: Any) -> str:
    """JSON that is safe inside a ``<script>`` element: ``<``, ``>``, ``&``, U+2028 and U+2029
    are written as ``\\uXXXX`` escapes (still the same JSON), so no ``</script>`` or ``<!--`` in a
    module name can end or change the element."""
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(ch, esc)
    return text


def static_file(name: str) -> Path:
    """``widget.js`` / ``widget.css``: packaged under ``torchprof/static`` in the wheel, in the
    repository's ``js/`` for an editable install."""
    package = Path(__file__).resolve().parents[1]  # .../torchprof
    for candidate in (package / "static" / name, package.parents[1] / "js" / name):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"torchprof's front-end file {name} is missing (looked in {package / 'static'})")


def _inline_module_source() -> str:
    source = static_file("widget.js").read_text(encoding="utf-8")
    lowered = source.lower()
    # Inside <script> these sequences end the element or switch the parser's escaping mode.
    for bad in ("</script", "<!--", "<script"):
        if bad in lowered:
            raise RuntimeError(f"widget.js contains {bad!r} and cannot be inlined in a <script> element")
    return source


_BOOT = """
{
  const spec = JSON.parse(document.getElementById("torchprof-data").textContent);
  const model = createModel({ ...spec.state, data: spec.payload });
  globalThis.torchprofReport = { model };
  render({ model, el: document.getElementById("torchprof-report") });
}
"""

_PAGE_CSS = """
:root { color-scheme: light dark; }
html, body { margin: 0; }
body { padding: 12px; background: var(--jp-layout-color0, #ffffff); }
@media (prefers-color-scheme: dark) {
  :root {
    --jp-layout-color0: #111418; --jp-layout-color1: #161a1f; --jp-layout-color2: #22272e;
    --jp-ui-font-color1: #e6edf3; --jp-ui-font-color2: #a8b3bd; --jp-ui-font-color3: #7d8590;
    --jp-border-color2: #373e47; --jp-input-background: #0d1117; --jp-input-border-color: #444c56;
    --jp-brand-color1: #4493f8; --jp-brand-color2: #4493f8;
  }
}
#torchprof-report .tp-scroller { max-height: calc(100vh - 9rem); min-height: 12rem; resize: none; }
"""


def report_html(tree: Tree, summary: Summary, findings: list[Finding] | None = None, **state: Any) -> str:
    """One self-contained page with the widget's interactive view: the ES module and its CSS
    inlined, the data as escaped JSON, a Content-Security-Policy that allows only the page's own
    inline code, so it works with no kernel and no network."""
    folded = across_steps(tree)
    spec = {"state": check_state(tree, state, folded), "payload": payload_json(payload(tree, summary, folded, findings=findings))}
    return report_page(spec, str(tree.columns["name"][0]))


def report_page(spec: dict[str, Any], label: str) -> str:
    """The report page of a view: ``spec`` (``state`` and the JSON ``payload``) as escaped JSON,
    the ES module and its CSS inlined, a Content-Security-Policy allowing only the page's own
    inline code."""
    module = _inline_module_source() + _BOOT
    digest = base64.b64encode(hashlib.sha256(module.encode("utf-8")).digest()).decode("ascii")
    csp = f"default-src 'none'; script-src 'sha256-{digest}'; style-src 'unsafe-inline'; img-src data:"
    css = static_file("widget.css").read_text(encoding="utf-8")
    title = html.escape(f"torchprof · {label}")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{csp}\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<title>{title}</title>\n<style>{_PAGE_CSS}\n{css}</style>\n</head>\n<body>\n"
        "<div id=\"torchprof-report\"></div>\n"
        f"<script type=\"application/json\" id=\"torchprof-data\">{script_json(spec)}</script>\n"
        f"<script type=\"module\">{module}</script>\n</body>\n</html>\n"
    )


#: The mime type of a widget's output (ipywidgets' view of a model by id).
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
#: Marks the static table a notebook shows with the widget (see :data:`FALLBACK_CSS`).
FALLBACK_CLASS = "torchprof-fallback"
_NBSP = "\u00a0"

# In a notebook the profile is two outputs: this static table, then the widget. JupyterLab and
# Notebook 7 (and nbconvert's lab template) put every output in a .jp-OutputArea-child, so these
# rules show one of them: the widget once it renders (its root is .torchprof), else the table.
# The widget's output is hidden while it holds no element, only text: "Loading widget...", and
# "Error displaying widget: model not found" in a notebook reopened without its widget state.
# (:has() cannot hold :has(), so the second rule hides the output itself, not its wrapper.)
# Where <style> is dropped (an untrusted notebook, GitHub) no widget renders either: the table
# shows alone. The rules cost a :has() match per output, and only while this table is there.
FALLBACK_CSS = (
    f".jp-OutputArea-child:has(.{FALLBACK_CLASS}):has(+ .jp-OutputArea-child .torchprof){{display:none}}\n"
    f".jp-OutputArea-child:has(.{FALLBACK_CLASS}) + .jp-OutputArea-child > .jp-OutputArea-output:not(:has(*)){{display:none}}"
)


def static_table(tree: Tree, summary: Summary, min_pct: float = DEFAULT_MIN_PCT, max_rows: int = 200,
                 sort_by: str = DEFAULT_SORT) -> str:  # fmt: skip
    """A plain HTML table of the top rows, for front ends with no widget manager (nbconvert,
    GitHub, a notebook reopened without its widget state), with :data:`FALLBACK_CSS` so a
    notebook shows it only where the widget cannot render.

    It reads as a tree wherever it is shown: names are left-aligned by attribute and by style
    (Jupyter's stylesheet right-aligns table cells) and drawn behind the terminal's ``├──``
    guides as text in ``<samp>`` (monospace without a style, non-breaking spaces), so the
    hierarchy survives sanitizers that drop every style. Inline styles only; every profile string
    is escaped. It opens on the bottleneck as the widget does: the headline (the costliest layer
    and module type) above it, and the rows of the hot path marked as in the terminal table."""
    cols = tree.columns
    rows = visible_rows(tree, min_pct=min_pct, sort_by=sort_by)
    on_path = set(hot_path(tree).rows[1:]) if len(tree) else set()
    spec = view_columns(tree, show_ops=False)
    guides, names = tree_guides(tree, rows)
    has_types = any(isinstance(t, str) for t in cols["type"])
    cell = "padding:2px 8px;border-bottom:1px solid rgba(128,128,128,.25);white-space:nowrap"
    left = f'align="left" style="{cell};text-align:left"'
    right = f'align="right" style="{cell};text-align:right"'
    head = [f"<th {left}>{html.escape(COLUMN['name'].label)}</th>"]
    if has_types:
        head.append(f"<th {left}>{html.escape(COLUMN['type'].label)}</th>")
    head += [f"<th {right}>{html.escape(c.label)}</th>" for c in spec]
    out = [
        f'<style>{FALLBACK_CSS}</style>',
        f'<div class="{FALLBACK_CLASS}"><p style="margin:4px 0"><b>{html.escape(str(cols["name"][0]))}</b>'
        f" · {html.escape(summary_line(summary))}</p>",
        *([f'<p style="margin:4px 0"><b>{html.escape(str(summary["headline"]))}</b>'
           f'{f" · {html.escape(HOT_MARK.strip())} hot path" if on_path else ""}</p>'] if summary.get("headline") else []),
        '<table style="border-collapse:collapse;font-variant-numeric:tabular-nums;font-size:12px;margin:0">',
        "<thead><tr>" + "".join(head) + "</tr></thead><tbody>",
    ]
    paths = tree.paths
    for k, r in enumerate(rows[:max_rows]):
        guide = html.escape(guides[k].replace(" ", _NBSP))
        path = html.escape(str(paths[r]), quote=True)
        mark = f'<b title="on the hot path">{html.escape(HOT_MARK)}</b>' if r in on_path else ""
        tds = [f'<td {left} title="{path}"><samp style="opacity:.55">{guide}</samp>{html.escape(names[k])}{mark}</td>']
        if has_types:
            module_type = cols["type"][r] if cols["kind"][r] == NodeKind.MODULE.label and isinstance(cols["type"][r], str) else ""
            tds.append(f'<td align="left" style="{cell};text-align:left;opacity:.75">{html.escape(module_type)}</td>')
        tds += [f"<td {right}>{html.escape(cell_text(tree, c, r))}</td>" for c in spec]
        out.append("<tr>" + "".join(tds) + "</tr>")
    out.append("</tbody></table>")
    if len(rows) > max_rows:
        out.append(f'<p style="margin:4px 0">… {len(rows) - max_rows} more rows</p>')
    base = html.escape(COLUMN[threshold_column(sort_by)].label)
    out.append(
        f'<p style="margin:4px 0;opacity:.7">{len(rows)} of {len(tree)} rows (≥ {min_pct:g}% of {base}; (x%) = share of the '
        "root's total). The interactive view: run the cell in Jupyter, or open prof.to_html(path).</p></div>"
    )
    return "\n".join(out)
