"""A comparison in real headless Chromium: the report page (``cmp.to_html``) and the widget rendered
from its synced bytes show the diff tree with Python's rows, a faster time green and a slower one
red, and sort by a delta column when its header is clicked."""

from __future__ import annotations

import pytest

import torchprof
from browser_util import new_page, page_state, rendered_paths, serve, write_widget_page
from synthetic import build, ev
from torchprof._records import Recording
from torchprof._result import Result
from torchprof._views.compare import compare_rows, view_tree

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def cmp():
    base = build([ev("module", "Net", 0, 100, type_="Net"), ev("module", "Net.a", 10, 40, type_="Linear"),
                  ev("module", "Net.b", 50, 60, type_="Linear")], label="before")  # fmt: skip
    new = build([ev("module", "Net", 0, 100, type_="Net"), ev("module", "Net.a", 10, 30, type_="Linear"),
                 ev("module", "Net.b", 50, 65, type_="Linear"), ev("module", "Net.c", 70, 71, type_="ReLU")], label="after")  # fmt: skip
    return torchprof.compare(Result(base, Recording(wall_us=100.0)), Result(new, Recording(wall_us=100.0)))


def python_paths(cmp, state) -> list[str]:
    tree = view_tree(cmp._diff)
    rows = compare_rows(tree, sort_by=state["sort_by"], min_pct=state["min_pct"], ascending=state["ascending"],
                        show_ops=state["show_ops"], search=state["search"], expanded=set(state["expanded"]))  # fmt: skip
    return [tree.columns["path"][i] for i in rows]


def delta_cell(page, path: str, column: str = "cpu_us_delta"):
    return page.locator(f'[role="row"][data-path="{path}"] [data-col="{column}"]')


def check_colours_and_sorting(page, cmp, handle: str) -> None:
    assert rendered_paths(page) == python_paths(cmp, page_state(page, handle))
    assert rendered_paths(page)[:5] == ["before → after", "Net", "Net.a", "Net.b", "Net.c"]  # by the size of the change
    headers = page.locator(".tp-head .tp-th").all_inner_texts()
    assert headers == ["Node", "CPU total base", "CPU total new", "Δ CPU total", "Calls base", "Calls new"]
    faster, slower = delta_cell(page, "Net.a"), delta_cell(page, "Net.b")
    assert "tp-faster" in faster.get_attribute("class") and "tp-slower" in slower.get_attribute("class")
    assert faster.inner_text().replace("\n", " ").startswith("-10.0µs")
    green = faster.locator(".tp-v").evaluate("e => getComputedStyle(e).color")
    red = slower.locator(".tp-v").evaluate("e => getComputedStyle(e).color")
    assert green == "rgb(26, 127, 55)" and red == "rgb(207, 34, 46)"
    assert "tp-faster" not in (delta_cell(page, "Net", "cpu_us_base").get_attribute("class") or "")
    assert page.locator('[role="row"][data-path="Net.c"] .tp-label').text_content() == "c (added)"
    header = page.locator('.tp-head [data-col="cpu_us_delta"]')
    header.click()  # regressions first
    assert page_state(page, handle)["sort_by"] == "cpu_us_delta"
    assert rendered_paths(page) == python_paths(cmp, page_state(page, handle))
    assert rendered_paths(page)[2:5] == ["Net.b", "Net.c", "Net.a"]
    header.click()  # improvements first
    assert rendered_paths(page)[2:5] == ["Net.a", "Net.c", "Net.b"]
    assert page.errors == [] and page.blocked == []


def test_the_comparison_report_colours_deltas_and_sorts_by_them(browser, cmp, tmp_path):
    path = tmp_path / "diff.html"
    cmp.to_html(str(path), min_pct=0)
    page = new_page(browser, viewport={"width": 1400, "height": 900})
    page.goto(path.as_uri())
    page.wait_for_selector('[role="row"][data-path]')
    assert "before → after" in page.locator('[data-testid="summary"]').inner_text()
    check_colours_and_sorting(page, cmp, "torchprofReport")


def test_the_comparison_widget_renders_from_its_synced_bytes(browser, cmp, tmp_path):
    page_file = write_widget_page(cmp.widget(min_pct=0), tmp_path / "widget")
    with serve(page_file.parent) as base:
        page = new_page(browser, viewport={"width": 1400, "height": 900})
        page.goto(base + "index.html")
        page.wait_for_selector('body[data-ready="1"] [role="row"][data-path]')
        check_colours_and_sorting(page, cmp, "torchprofPage")


def test_each_view_the_comparison_offers_draws_without_errors(browser, cmp, tmp_path):
    path = tmp_path / "views.html"
    cmp.to_html(str(path), min_pct=0)
    page = new_page(browser, viewport={"width": 1200, "height": 800})
    page.goto(path.as_uri())
    page.wait_for_selector('[role="row"][data-path]')
    views = page.locator(".tp-switch-btn").evaluate_all("bs => bs.map(b => b.dataset.view)")
    assert views == ["table", "flame"]  # no self times to rank (Top), no timeline (Memory)
    for view in views[1:]:
        page.click(f'[data-testid="view-{view}"]')
        panel = page.locator(f'.tp-panel[data-view="{view}"]')
        panel.wait_for()
        assert panel.inner_text().strip(), view  # it drew something
    # The Flame colours each bar by its change: Net.a got faster, Net.b slower, Net.c is new.
    flame = page.locator('.tp-panel[data-view="flame"]')
    assert page.locator('[data-testid="flame-colour"] option').evaluate_all("os => os.map(o => o.value)") == ["delta", "type"]
    assert int(flame.get_attribute("data-faster")) >= 1 and int(flame.get_attribute("data-slower")) >= 2
    assert "faster" in flame.inner_text() and "slower" in flame.inner_text()  # the legend
    assert page.errors == [] and page.blocked == []
