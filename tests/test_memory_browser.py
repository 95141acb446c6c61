"""The Memory view in real headless Chromium: the line of allocated bytes with its phase bands and
peak, the layer under the cursor, and a click that selects that layer in the table; in the
self-contained report and in the widget page rendered from the widget's synced bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

from browser_util import new_page, page_state, rendered_paths, serve, write_widget_page

pytestmark = pytest.mark.browser


def open_memory(browser, url: str, ready: str = '[role="row"][data-path]'):
    page = new_page(browser, viewport={"width": 1200, "height": 900})
    page.goto(url)
    page.wait_for_selector(ready)
    page.click('[data-testid="view-memory"]')
    page.wait_for_selector('[data-testid="memory-line"]')
    return page


def test_the_report_draws_the_line_the_phases_and_the_peak(browser, keep_and_temp, tmp_path):
    path = tmp_path / "report.html"
    keep_and_temp.to_html(str(path))
    page = open_memory(browser, path.as_uri())
    assert page.get_attribute('[data-testid="view-memory"]', "aria-pressed") == "true"
    assert page.locator('[data-testid="search"]').is_hidden()  # the search acts on the other views
    d = page.get_attribute('[data-testid="memory-line"]', "d")
    assert d.startswith("M") and d.count("V") >= 4
    assert page.locator(".tp-mem-band.tp-mem-forward").count() >= 1
    assert page.locator(".tp-mem-band.tp-mem-backward").count() >= 1
    assert page.locator('[data-testid="memory-peak-mark"]').count() == 1
    readout = page.text_content('[data-testid="memory-readout"]')
    assert "peak" in readout and "Net.temp" in readout and "(forward)" in readout
    page.click('[data-testid="view-table"]')
    assert page.locator('[data-testid="memory"]').is_hidden()
    assert page.errors == [] and page.blocked == []


def test_the_layer_under_the_cursor_is_named_and_a_click_selects_it_in_the_table(browser, keep_and_temp, tmp_path):
    path = tmp_path / "report.html"
    keep_and_temp.to_html(str(path), min_pct=0)
    page = open_memory(browser, path.as_uri())
    box = page.locator('[data-testid="memory-peak-mark"]').bounding_box()
    x, y = box["x"] + box["width"] / 2 + 1, box["y"] + box["height"] / 2
    page.mouse.move(x, y)
    assert "· Net.temp (forward)" in page.text_content('[data-testid="memory-readout"]')
    page.mouse.click(x, y)
    selected = page.locator('[role="row"][aria-selected="true"]')
    selected.wait_for()
    assert selected.get_attribute("data-path") == "Net.temp"
    assert "Net" in page_state(page, "torchprofReport")["expanded"]
    assert page.errors == []


def test_peak_layer_opens_and_shows_a_row_the_filters_hid(browser, resnet18_step, tmp_path):
    prof = resnet18_step[0]
    at = prof.summary["peak_at"]["cpu"]
    assert at["layer"].count(".") >= 2  # deep enough to be collapsed by default
    path = tmp_path / "resnet.html"
    prof.to_html(str(path), search="no such layer")
    page = open_memory(browser, path.as_uri(), ready='[data-testid="row-count"]')
    assert at["layer"] not in rendered_paths(page)
    page.click('[data-testid="memory-peak"]')
    selected = page.locator('[role="row"][aria-selected="true"]')
    selected.wait_for()
    assert selected.get_attribute("data-path") == at["layer"] and selected.is_visible()
    state = page_state(page, "torchprofReport")
    assert state["search"] == "" and state["min_pct"] == 0
    parents = at["layer"].split(".")
    assert {".".join(parents[:k]) for k in range(1, len(parents))} <= set(state["expanded"])
    assert page.errors == []


def test_the_widget_page_shows_the_memory_of_its_synced_bytes(browser, keep_and_temp, tmp_path):
    index = write_widget_page(keep_and_temp.widget(), Path(tmp_path) / "widget")
    with serve(index.parent) as base:
        page = open_memory(browser, base + "index.html")
        assert "Net.temp" in page.text_content('[data-testid="memory-readout"]')
        page.click('[data-testid="memory-peak"]')
        page.locator('[role="row"][aria-selected="true"][data-path="Net.temp"]').wait_for()
        assert page.errors == []
