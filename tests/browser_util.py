"""Headless Chromium for the front-end tests and the widget benchmark.

Debian's Chromium driven by Playwright (never a downloaded browser), with the flags that keep
it from stalling on a machine without internet, and every request that is not to our own
127.0.0.1 server or a local file aborted and recorded, so a test can assert that a page made
no network request.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage",
]  # fmt: skip
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
REPO = Path(__file__).resolve().parents[1]


#: Sync Playwright instances handed to launch() and still running. Sync Playwright allows one
#: instance per thread at a time (a second start() fails with "using Playwright Sync API inside
#: the asyncio loop"), so chromium() reuses a running one, e.g. the JupyterLab tests' session one.
_running: list[Any] = []


def launch(playwright: Any):
    """Debian's headless Chromium; a clear failure when it is not installed."""
    if not Path(CHROMIUM).exists():
        raise RuntimeError(
            f"{CHROMIUM} is missing: apt-get install -y --no-install-recommends chromium fonts-liberation "
            "(tests/run.sh does it)"
        )
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
    if playwright not in _running:
        _running.append(playwright)
    return browser


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium for the duration of the block, on the Playwright instance already
    running in this process if there is one, else on one of its own."""
    for playwright in reversed(_running):
        try:
            browser = launch(playwright)
        except Exception:
            _running.remove(playwright)
            continue
        try:
            yield browser
        finally:
            browser.close()
        return
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            yield browser
        finally:
            browser.close()
            _running.remove(playwright)


def is_local(url: str) -> bool:
    parsed = urlparse(url)
    if parsed.scheme in ("file", "data", "blob", "about"):
        return True
    return parsed.scheme in ("http", "https", "ws") and parsed.hostname == "127.0.0.1"


def guard_network(context: Any) -> list[str]:
    """Aborts every request that leaves the machine; returns the (live) list of their URLs."""
    blocked: list[str] = []

    def route(r: Any) -> None:
        if is_local(r.request.url):
            r.continue_()
        else:
            blocked.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    return blocked


def new_page(browser: Any, **options: Any):
    """A page in a fresh context with the network guard, console errors and page errors
    recorded on ``page.errors`` and every request URL on ``page.requests``."""
    context = browser.new_context(accept_downloads=True, **options)
    blocked = guard_network(context)
    page = context.new_page()
    page.blocked = blocked
    page.errors = []
    page.requests = []
    page.on("console", lambda msg: page.errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    page.on("request", lambda req: page.requests.append(req.url))
    return page


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-store")
        super().end_headers()


@contextlib.contextmanager
def serve(directory: Path) -> Iterator[str]:
    """A static file server on 127.0.0.1 (a free port) for ``directory``; yields its base URL.
    ES modules do not load from file:// URLs, so the widget page needs one."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


WIDGET_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>torchprof widget</title>
<link rel="stylesheet" href="widget.css">
<style>body { margin: 12px; font-size: 13px; }</style></head>
<body><div id="host"></div>
<script type="module">
import widget, { createModel } from "./widget.js";
const state = await (await fetch("state.json")).json();
const bytes = await (await fetch("data.bin")).arrayBuffer();
// What anywidget hands to render(): a model whose "data" is a DataView of the synced bytes.
const model = createModel({ ...state, data: new DataView(bytes) });
const saves = [];
model.on("save", () => saves.push(Date.now()));
window.torchprofPage = { model, saves, widget, createModel };
await widget.render({ model, el: document.getElementById("host") });
document.body.dataset.ready = "1";
</script></body></html>
"""


def write_widget_page(widget: Any, directory: Path) -> Path:
    """A page that renders ``widget`` the way anywidget does: the module's default export's
    ``render`` with a model holding the widget's synced traits (``data`` as a DataView)."""
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "js" / "widget.js", directory / "widget.js")
    shutil.copy(REPO / "js" / "widget.css", directory / "widget.css")
    (directory / "data.bin").write_bytes(widget.data)
    (directory / "state.json").write_text(json.dumps(widget.state), encoding="utf-8")
    (directory / "index.html").write_text(WIDGET_PAGE, encoding="utf-8")
    return directory / "index.html"


STATE_JS = """(model) => Object.fromEntries(
  ["min_pct", "sort_by", "ascending", "show_ops", "search", "expanded", "view", "step", "selected", "metric",
   "flame_colour", "zoom"].map((k) => [k, model.get(k)]))"""


def slider_position(pct: float) -> str:
    """The min-% slider's position for a percentage (its scale is logarithmic: 0, then 0.01% to
    100% over 1000 steps; ``pctToSlider`` in widget.js)."""
    import math

    return "0" if pct <= 0 else str(max(1, min(1000, round((math.log10(pct) + 2) / 4 * 1000))))


def page_state(page: Any, handle: str = "torchprofPage") -> dict[str, Any]:
    """The view state held by the page's model (``torchprofPage`` or ``torchprofReport``)."""
    return page.evaluate(f"() => ({STATE_JS})(window.{handle}.model)")


#: The widget once it has drawn the state its model holds: its root says ``aria-busy="false"`` from
#: the end of the redraw a model change causes (js/src/widget.js ``mount``).
RENDERED = '[data-testid="torchprof"][aria-busy="false"]'
#: The table's rows are drawn for the scroll position its scroller is at: the panel records the
#: position its last paint was for (js/src/views/table.js ``paint``).
PAINTED_JS = """() => [...document.querySelectorAll('[data-testid="scroller"]')].every((s) => {
  const panel = s.closest('.tp-panel');
  return panel.dataset.scrollTop === String(s.scrollTop) && panel.dataset.scrollLeft === String(s.scrollLeft);
})"""


def wait_rendered(page: Any) -> None:
    """Until the widget has redrawn for the last change of its model (at once when none is pending)."""
    page.wait_for_selector(RENDERED, state="attached")


def wait_painted(page: Any) -> None:
    """Until the table's rows are those of its scroller's position (after a scroll, the scroll
    event's paint has run)."""
    page.wait_for_function(PAINTED_JS)


def rendered_paths(page: Any) -> list[str]:
    """``data-path`` of the row elements in the DOM, in DOM (= display) order."""
    return page.locator('[data-testid="scroller"] [role="row"][data-path]').evaluate_all(
        "rows => rows.map(r => r.getAttribute('data-path'))"
    )
