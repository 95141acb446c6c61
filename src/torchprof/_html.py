"""What the browser gets: the column-wise payload the front end (``js/widget.js``) decodes, the
static HTML table shown where no widget can run, and the self-contained report page.

The payload is one JSON-able dict: a few per-node arrays (parent index, a flag byte, the path as
a tail of the parent's path) and one array per numeric column, never a list of per-row dicts.
The widget sends it packed in binary (float64 and int32 buffers behind a JSON header, zlib
compressed); the report embeds it as JSON.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import math
import struct
import sys
import zlib
from array import array
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import _format as fmt
from ._tree import COLUMNS, Tree
from ._view import LAYER_KINDS, resolve_sort, visible_rows

if TYPE_CHECKING:
    from ._profile import Profile

FORMAT = "torchprof-1"
MAGIC = b"TPF1"
KIND_CODES = {"module": 0, "region": 1, "op": 2, "kernel": 3}
FLAG_BACKWARD = 4
FLAG_ABSOLUTE_PATH = 8  # the path does not extend the parent's path: the tail is all of it
FLAG_NAME_IN_TAIL = 16  # name == tail without its separator ("/name" or ".name")
#: Numeric columns the payload carries; ``depth`` the front end derives from the parents.
NUMBER_COLUMNS = (
    "calls", "self_cpu_us", "cpu_us", "self_cuda_us", "cuda_us", "bwd_self_cpu_us", "bwd_cpu_us",
    "bwd_self_cuda_us", "bwd_cuda_us", "self_cpu_mem", "cpu_mem", "self_cuda_mem", "cuda_mem",
    "params", "macs", "flops", "layer_self_cpu_us", "layer_self_cuda_us", "layer_bwd_self_cpu_us",
    "layer_bwd_self_cuda_us",
)  # fmt: skip
#: The view state every view takes (widget traits, report, ``prof.widget(**state)``).
STATE_KEYS = ("min_pct", "sort_by", "ascending", "show_ops", "search", "expanded")


# -- state ---------------------------------------------------------------------------------------
def default_expanded(tree: Tree, show_ops: bool = False) -> list[str]:
    """Rows open by default: every depth-1 layer (module or region) with children, so rows down
    to depth 2 show; with ops shown also the depth-2 layers that hold only ops (so their ops are
    visible). The same rule as ``defaultExpanded`` in widget.js."""
    cols = tree.columns
    n = len(tree)
    kinds, depth, paths = cols["kind"], cols["depth"], cols["path"]
    has_child = [False] * n
    has_layer_child = [False] * n
    for i in range(1, n):
        p = tree.parent_index[i]
        has_child[p] = True
        if kinds[i] in LAYER_KINDS:
            has_layer_child[p] = True
    out = []
    for i in range(1, n):
        if depth[i] == 1 and kinds[i] in LAYER_KINDS and has_child[i]:
            out.append(paths[i])
        elif show_ops and depth[i] == 2 and kinds[i] in LAYER_KINDS and has_child[i] and not has_layer_child[i]:
            out.append(paths[i])
    return out


def view_state(tree: Tree, state: dict[str, Any]) -> dict[str, Any]:
    """Complete, checked view state from user keywords (unknown keys and bad values raise)."""
    unknown = set(state) - set(STATE_KEYS)
    if unknown:
        raise TypeError(f"unknown view option(s) {', '.join(sorted(unknown))}; choose from {', '.join(STATE_KEYS)}")
    min_pct = float(state.get("min_pct", 1.0))
    if math.isnan(min_pct) or not 0 <= min_pct <= 100:
        raise ValueError(f"min_pct must be between 0 and 100, got {state.get('min_pct')!r}")
    show_ops = bool(state.get("show_ops", False))
    search = state.get("search") or ""
    if not isinstance(search, str):
        raise TypeError(f"search must be a string (a substring or a glob such as 'layer1*'), got {search!r}")
    expanded = state.get("expanded")
    if expanded is None:
        expanded = default_expanded(tree, show_ops)
    elif isinstance(expanded, str):
        raise TypeError("expanded must be a list of paths, not a string")
    return {
        "min_pct": min_pct,
        "sort_by": resolve_sort(state.get("sort_by", "cpu_us")),
        "ascending": bool(state.get("ascending", False)),
        "show_ops": show_ops,
        "search": search,
        "expanded": [str(p) for p in expanded],
    }


# -- payload -------------------------------------------------------------------------------------
def _clean(value: Any) -> Any:
    """JSON-safe: NaN and infinities become null (JSON has neither)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def payload(prof: Profile) -> dict[str, Any]:
    """The profile column-wise, as ``decodePayload`` in widget.js reads it.

    Paths are sent as the part that extends the parent's path (``.conv1``, ``/aten::addmm``) and
    names, when they are that tail minus its separator, not at all: a path costs about as much as
    its name. A column whose values are all equal (all NaN without CUDA, all 0 without backward)
    is sent as one constant.
    """
    tree = prof.tree
    cols = tree.columns
    n = len(tree)
    parent = tree.parent_index
    paths, names, kinds, backward = cols["path"], cols["name"], cols["kind"], cols["is_backward"]
    flags = bytearray(n)
    tails: list[str] = []
    name_exceptions: list[list[Any]] = []
    for i in range(n):
        f = KIND_CODES[kinds[i]] | (FLAG_BACKWARD if backward[i] else 0)
        p = parent[i]
        path = paths[i]
        if p >= 0 and path.startswith(paths[p]):
            tail = path[len(paths[p]) :]
        else:
            tail = path
            f |= FLAG_ABSOLUTE_PATH
        if len(tail) > 1 and tail[0] in "./" and tail[1:] == names[i]:
            f |= FLAG_NAME_IN_TAIL
        else:
            name_exceptions.append([i, names[i]])
        flags[i] = f
        tails.append(tail)
    num: dict[str, Any] = {}
    for c in NUMBER_COLUMNS:
        values = [float(v) for v in cols[c]]
        first = values[0] if values else math.nan
        if all(v == first or (v != v and first != first) for v in values):
            num[c] = {"const": _clean(first)}
        else:
            num[c] = values
    return {
        "format": FORMAT,
        "n": n,
        "parent": list(parent),
        "flags": flags,
        "tail": tails,
        "names": name_exceptions,
        "type": list(cols["type"]),
        "shapes": list(cols["input_shapes"]),
        # Only with stack=True; otherwise all null, sent as an empty list.
        "source": list(cols["source"]) if any(cols["source"]) else [],
        "num": num,
        "columns": list(COLUMNS),
        "summary": _clean(prof.summary),
        "steps": _clean(tree.steps),
    }


def payload_json(data: dict[str, Any]) -> dict[str, Any]:
    """The payload with plain lists everywhere (NaN -> null), for JSON."""
    out = dict(data)
    out["flags"] = list(data["flags"])
    out["num"] = {c: v if isinstance(v, dict) else _clean(v) for c, v in data["num"].items()}
    return out


def payload_bytes(data: dict[str, Any], level: int = 6) -> bytes:
    """The payload packed for the widget: ``TPF1``, the JSON header's length (uint32 LE), the
    header, then 8-byte aligned little-endian buffers (int32 parents, flag bytes, float64
    columns) that the header points into; all zlib-compressed."""
    header = {k: v for k, v in data.items() if k not in ("parent", "flags", "num")}
    buffers: list[bytes] = []
    offset = 0

    def put(raw: bytes, length: int) -> dict[str, int]:
        nonlocal offset
        ref = {"offset": offset, "length": length}
        pad = -len(raw) % 8
        buffers.append(raw + b"\0" * pad)
        offset += len(raw) + pad
        return ref

    def typed(code: str, values: Any) -> bytes:
        arr = array(code, values)
        if sys.byteorder == "big":
            arr.byteswap()
        return arr.tobytes()

    header["parent"] = put(typed("i", data["parent"]), data["n"])
    header["flags"] = put(bytes(data["flags"]), data["n"])
    header["num"] = {
        c: v if isinstance(v, dict) else put(typed("d", v), data["n"]) for c, v in data["num"].items()
    }
    head = json.dumps(header, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")
    start = 8 + len(head)
    blob = b"".join([MAGIC, struct.pack("<I", len(head)), head, b"\0" * (-start % 8), *buffers])
    return zlib.compress(blob, level)


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
    here = Path(__file__).resolve().parent
    for candidate in (here / "static" / name, here.parents[1] / "js" / name):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"torchprof's front-end file {name} is missing (looked in {here / 'static'})")


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


def report_html(prof: Profile, **state: Any) -> str:
    """One self-contained page with the widget's interactive view: the ES module and its CSS
    inlined, the data as escaped JSON, a Content-Security-Policy that allows only the page's own
    inline code, so it works with no kernel and no network."""
    tree = prof.tree
    spec = {"state": view_state(tree, state), "payload": payload_json(payload(prof))}
    module = _inline_module_source() + _BOOT
    digest = base64.b64encode(hashlib.sha256(module.encode("utf-8")).digest()).decode("ascii")
    csp = f"default-src 'none'; script-src 'sha256-{digest}'; style-src 'unsafe-inline'; img-src data:"
    css = static_file("widget.css").read_text(encoding="utf-8")
    title = html.escape(f"torchprof · {tree.columns['name'][0]}")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{csp}\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<title>{title}</title>\n<style>{_PAGE_CSS}\n{css}</style>\n</head>\n<body>\n"
        "<div id=\"torchprof-report\"></div>\n"
        f"<script type=\"application/json\" id=\"torchprof-data\">{script_json(spec)}</script>\n"
        f"<script type=\"module\">{module}</script>\n</body>\n</html>\n"
    )


def static_table(prof: Profile, min_pct: float = 1.0, max_rows: int = 200) -> str:
    """A plain HTML table of the top rows, for front ends with no widget manager (nbconvert,
    GitHub, a saved notebook). Inline styles only; every profile string is escaped."""
    from ._table import _columns

    tree = prof.tree
    cols = tree.columns
    rows = visible_rows(tree, min_pct=min_pct)
    spec = _columns(tree, show_ops=False)
    derived = {"fwd_cpu_us": [c - b for c, b in zip(cols["cpu_us"], cols["bwd_cpu_us"])]}
    cell = "padding:2px 8px;border-bottom:1px solid rgba(128,128,128,.25);white-space:nowrap"
    out = [
        f"<div class=\"torchprof-static\"><p style=\"margin:4px 0\"><b>{html.escape(str(cols['name'][0]))}</b>"
        f" · {html.escape(_summary_line(prof))}</p>",
        "<table style=\"border-collapse:collapse;font-variant-numeric:tabular-nums;font-size:12px\">",
        "<thead><tr>" + f"<th style=\"{cell};text-align:left\">Node</th>"
        + "".join(f"<th style=\"{cell};text-align:right\">{html.escape(h)}</th>" for h, *_ in spec) + "</tr></thead><tbody>",
    ]
    for r in rows[:max_rows]:
        name = html.escape(str(cols["name"][r]))
        path = html.escape(str(cols["path"][r]), quote=True)
        tds = [f"<td style=\"{cell};padding-left:{8 + 14 * cols['depth'][r]}px\" title=\"{path}\">{name}</td>"]
        for _, col, f, pct_of in spec:
            v = derived[col][r] if col in derived else cols[col][r]
            text = ""
            if not fmt.is_missing(v) and (v != 0 or col == "calls"):
                text = f(v)
                if pct_of is not None and cols[pct_of][0]:
                    text += f" ({fmt.percent(v, cols[pct_of][0])})"
            tds.append(f"<td style=\"{cell};text-align:right\">{html.escape(text)}</td>")
        out.append("<tr>" + "".join(tds) + "</tr>")
    out.append("</tbody></table>")
    if len(rows) > max_rows:
        out.append(f"<p style=\"margin:4px 0\">… {len(rows) - max_rows} more rows</p>")
    out.append(
        f"<p style=\"margin:4px 0;opacity:.7\">{len(rows)} of {len(tree)} rows (≥ {min_pct:g}% of the total). "
        "Run in Jupyter for the interactive view, or save one with prof.to_html(path).</p></div>"
    )
    return "\n".join(out)


def _summary_line(prof: Profile) -> str:
    s = prof.summary
    parts = []

    def add(text: str, *values: Any) -> None:
        if not any(fmt.is_missing(v) for v in values):
            parts.append(text)

    add(f"wall {fmt.time_us(s['wall_us'])}", s["wall_us"])
    add(f"CPU {fmt.time_us(s['cpu_us'])}", s["cpu_us"])
    if s["forward_cpu_us"] > 0:
        add(f"forward {fmt.time_us(s['forward_cpu_us'])}", s["forward_cpu_us"])
    if s["backward_cpu_us"] > 0:
        add(f"backward {fmt.time_us(s['backward_cpu_us'])}", s["backward_cpu_us"])
    add(f"CUDA {fmt.time_us(s['cuda_us'])}", s["cuda_us"])
    add(f"{fmt.count(s['params'])} params", s["params"])
    add(f"{fmt.count(s['flops'])} FLOPs", s["flops"])
    add(fmt.rate(s["flops_per_s"]), s["flops_per_s"])
    add(f"peak CPU mem {fmt.nbytes(s['peak_cpu_mem'])}", s["peak_cpu_mem"])
    add(f"peak CUDA mem {fmt.nbytes(s['peak_cuda_mem'])}", s["peak_cuda_mem"])
    return " · ".join(parts)
