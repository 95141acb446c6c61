"""The interactive view in real headless Chromium: the self-contained report (``prof.to_html``)
of a torchvision ResNet-18 training step, and the widget page rendered from the widget's own
synced bytes the way anywidget renders it. Every check compares the page with what Python's
``visible_rows`` computes for the page's state."""

from __future__ import annotations

import io
import math
import re
from pathlib import Path
from typing import Any

import pytest

from browser_util import ARTIFACTS, new_page, page_state, rendered_paths, serve, slider_position, wait_rendered, write_widget_page
from torchprof._views import format as fmt
from torchprof._views.rows import visible_rows

pytestmark = pytest.mark.browser

XSS_MODULE = "<img src=x onerror=window['__pwned']=1>"  # module names cannot contain "."
XSS_REGION = "<script>window.__pwned=2</script>"
ROW_COUNT = re.compile(r"^(\d+) of (\d+) rows$")


@pytest.fixture(scope="module")
def resnet(resnet18_step):
    """A ResNet-18 (weights=None) training step: forward, backward, optimizer step."""
    return resnet18_step[0]


def xss_profile():
    """A profile whose module name and region label are HTML/script injections."""
    import torch
    from torch import nn

    import torchprof

    class Evil(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = nn.ModuleDict({XSS_MODULE: nn.Linear(2, 2)})

        def forward(self, x):
            with torch.profiler.record_function(XSS_REGION):
                return self.layers[XSS_MODULE](x)

    model = Evil()
    with torchprof.Profiler() as prof:
        model(torch.randn(1, 2))
    return prof


@pytest.fixture(scope="module")
def report(resnet, tmp_path_factory) -> Path:
    """The report as ``prof.to_html(path)`` writes it (default view: min_pct=1)."""
    path = tmp_path_factory.mktemp("report") / "resnet18.html"
    resnet.to_html(str(path))
    return path


@pytest.fixture(scope="module")
def report_all(resnet, tmp_path_factory) -> Path:
    """The report opened with min_pct=0 and the structural expansion (not the hot path, which
    follows the timings), so which layers show does not depend on timing noise."""
    from torchprof._views.state import default_expanded

    path = tmp_path_factory.mktemp("report") / "resnet18-all.html"
    resnet.to_html(str(path), min_pct=0, expanded=default_expanded(resnet.tree))
    return path


def open_report(browser, path: Path, **options: Any):
    page = new_page(browser, viewport={"width": 1400, "height": 900}, **options)
    page.goto(path.as_uri())
    page.wait_for_selector('[role="row"][data-path]')
    return page


def python_paths(prof, state: dict[str, Any]) -> list[str]:
    rows = visible_rows(prof.tree, min_pct=state["min_pct"], sort_by=state["sort_by"], ascending=state["ascending"],
                        show_ops=state["show_ops"], search=state["search"], expanded=set(state["expanded"]))  # fmt: skip
    return [prof.tree.columns["path"][i] for i in rows]


def shown_count(page) -> tuple[int, int]:
    m = ROW_COUNT.match(page.locator('[data-testid="row-count"]').inner_text().strip())
    assert m, page.locator('[data-testid="row-count"]').inner_text()
    return int(m.group(1)), int(m.group(2))


def assert_page_is_python_view(page, prof, handle: str = "torchprofReport") -> list[str]:
    """The rows in the DOM are a contiguous run of Python's rows for the page's state, the
    status counts all of Python's rows; returns Python's rows."""
    expected = python_paths(prof, page_state(page, handle))
    rendered = rendered_paths(page)
    assert rendered, "no rows rendered"
    start = expected.index(rendered[0])
    assert rendered == expected[start : start + len(rendered)]
    assert shown_count(page) == (len(expected), len(prof.tree))
    return expected


def _text(v: Any) -> str | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)


def row(page, path: str):
    return page.locator(f'[role="row"][data-path="{path}"]')


# -- the report ---------------------------------------------------------------------------------
def test_report_opens_offline_with_the_default_view_and_summary(browser, resnet, report):
    page = open_report(browser, report)
    expected = assert_page_is_python_view(page, resnet)
    assert rendered_paths(page) == expected, "a short view is rendered whole"
    summary = page.locator('[data-testid="summary"]').inner_text()
    s = resnet.summary
    assert f"wall {fmt.time_us(s['wall_us'])}" in summary.replace("\n", " ")
    assert f"params {fmt.count(s['params'])}" in summary.replace("\n", " ")
    assert f"FLOPs {fmt.count(s['flops'])}" in summary.replace("\n", " ")
    # Rows down to depth 2 show, and the hot path down to the bottleneck: depth-1 layers and the
    # rows above the hot path's end are open, the others closed. (Which layers pass 1% depends
    # on timing, so only rows Python shows are checked.)
    df = resnet.df
    hot = resnet.summary["hot_path"]
    assert row(page, "ResNet").get_attribute("aria-expanded") == "true"
    assert row(page, hot[-1]).is_visible()  # the bottleneck, with no click
    assert max((df.loc[p, "depth"] for p in expected if p not in hot and df.loc[p, "parent"] not in hot), default=0) <= 2
    for p in expected:
        if df.loc[p, "depth"] == 2 and p not in hot[:-1] and row(page, p).locator('[data-testid="caret"]').count():
            assert row(page, p).get_attribute("aria-expanded") == "false", p
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "report.png"))
    assert page.requests == [report.as_uri()], "the report must make no request besides itself"
    assert page.blocked == [] and page.errors == []


def test_expand_and_collapse(browser, resnet, report_all):
    page = open_report(browser, report_all)
    layer1 = row(page, "ResNet.layer1")
    layer1.locator('[data-testid="caret"]').click()
    assert layer1.get_attribute("aria-expanded") == "true"
    assert row(page, "ResNet.layer1.0").is_visible()
    assert "ResNet.layer1" in page_state(page, "torchprofReport")["expanded"]
    assert_page_is_python_view(page, resnet)
    # A leaf layer has no caret while ops are hidden.
    assert row(page, "ResNet.conv1").locator('[data-testid="caret"]').count() == 0
    layer1.locator('[data-testid="caret"]').click()
    assert layer1.get_attribute("aria-expanded") == "false" and row(page, "ResNet.layer1.0").count() == 0

    page.click('[data-testid="collapse-all"]')
    assert page_state(page, "torchprofReport")["expanded"] == []
    expected = assert_page_is_python_view(page, resnet)
    assert all(resnet.df.loc[p, "depth"] <= 1 for p in expected)
    page.click('[data-testid="expand-all"]')
    expected = assert_page_is_python_view(page, resnet)
    layers = [p for p in resnet.df.index if resnet.df.loc[p, "kind"] == "module"]
    assert set(layers) <= set(expected), "expand all with min_pct=0 shows every layer"
    assert page.errors == []


def test_slider_hides_rows_below_the_percent_and_keeps_ancestors(browser, resnet, report_all):
    page = open_report(browser, report_all)
    page.click('[data-testid="expand-all"]')
    before = shown_count(page)[0]
    page.locator('input[type="range"][data-testid="min-pct"]').fill(slider_position(5))
    assert page_state(page, "torchprofReport")["min_pct"] == 5
    expected = assert_page_is_python_view(page, resnet)
    assert len(expected) < before
    df = resnet.df
    root = df.iloc[0]["cpu_us"]
    for p in expected[1:]:
        if 100 * df.loc[p, "cpu_us"] / root < 5:  # only as the ancestor of a shown row
            assert any(q.startswith((p + ".", p + "/")) for q in expected if 100 * df.loc[q, "cpu_us"] / root >= 5)
    assert page.errors == []


def test_clicking_a_header_sorts_siblings_both_ways(browser, resnet, report_all):
    page = open_report(browser, report_all)
    header = page.locator('.tp-head [data-col="flops"]')
    header.click()
    assert header.get_attribute("aria-sort") == "descending"
    assert page.locator('.tp-head [data-col="cpu_us"]').get_attribute("aria-sort") is None
    expected = assert_page_is_python_view(page, resnet)
    df = resnet.df
    kids = [p for p in expected if df.loc[p, "parent"] == "ResNet"]
    assert [df.loc[p, "flops"] for p in kids] == sorted((df.loc[p, "flops"] for p in kids), reverse=True)
    header.click()
    assert header.get_attribute("aria-sort") == "ascending"
    assert page_state(page, "torchprofReport")["ascending"] is True
    assert_page_is_python_view(page, resnet)
    page.locator('.tp-head [data-col="name"]').click()
    assert page_state(page, "torchprofReport")["sort_by"] == "name"
    assert_page_is_python_view(page, resnet)


def test_ops_toggle_shows_ops_and_switches_self_time(browser, resnet, report_all):
    page = open_report(browser, report_all)
    df = resnet.df
    conv1 = row(page, "ResNet.conv1")
    assert conv1.locator('[data-col="self_cpu_us"] .tp-v').inner_text() == fmt.time_us(df.loc["ResNet.conv1", "layer_self_cpu_us"])
    page.locator('input[type="checkbox"][data-testid="show-ops"]').check()
    # The visible leaf layers open so their ops show; Self now excludes the ops.
    assert conv1.get_attribute("aria-expanded") == "true"
    assert conv1.locator('[data-col="self_cpu_us"] .tp-v').inner_text() == fmt.time_us(df.loc["ResNet.conv1", "self_cpu_us"])
    ops = page.locator('[role="row"][data-path^="ResNet.conv1/"]')
    assert ops.count() >= 1
    assert any(t.strip().startswith("aten::") for t in ops.locator('[data-col="name"]').all_inner_texts())
    assert_page_is_python_view(page, resnet)
    page.locator('input[type="checkbox"][data-testid="show-ops"]').uncheck()
    assert page.locator('[role="row"][data-path*="aten::"]').count() == 0
    assert_page_is_python_view(page, resnet)


def test_search_keeps_matches_and_their_ancestors_and_opens_them(browser, resnet, report_all):
    page = open_report(browser, report_all)
    page.locator('input[type="search"][data-testid="search"]').fill("conv2")
    expected = assert_page_is_python_view(page, resnet)
    assert rendered_paths(page) == expected
    # Every conv2 layer shows (the search opened their collapsed ancestors), and besides them
    # only their ancestors.
    matches = [p for p in expected if "conv2" in p.lower()]
    assert sorted(matches) == sorted(p for p in resnet.df.index if p.endswith(".conv2"))
    assert len(matches) == 8  # layer1..4 x 2 blocks
    for p in expected:
        assert "conv2" in p.lower() or any(m.startswith(p + ".") for m in matches) or p == "profile"
    page.locator('input[type="search"][data-testid="search"]').fill("layer4.*.conv?")
    expected = assert_page_is_python_view(page, resnet)
    assert [p for p in expected if p.startswith("ResNet.layer4.") and p.count(".") == 3] == [
        p for p in expected if re.fullmatch(r"ResNet\.layer4\.\d\.conv\d", p)
    ]


def test_export_csv_downloads_every_row_named_after_the_profile(browser, resnet, report_all):
    import numpy as np
    import pandas as pd

    page = open_report(browser, report_all)
    # Filters, collapsed rows and the sort change what the table shows, not what the CSV holds.
    page.locator('input[type="checkbox"][data-testid="show-ops"]').check()
    page.locator('input[type="search"][data-testid="search"]').fill("layer4")
    page.locator('.tp-head [data-col="bwd_cpu_us"]').click()
    assert_page_is_python_view(page, resnet)
    with page.expect_download() as info:
        page.click('[data-testid="export-csv"]')
    download = info.value
    assert download.suggested_filename == "profile-ResNet.csv", "the profile's label and its model, not always cell.csv"
    text = Path(download.path()).read_text(encoding="utf-8")
    got = pd.read_csv(io.StringIO(text), keep_default_na=False, na_values=[""])
    want = resnet.df
    assert list(got.columns) == list(want.columns)
    assert list(got["path"]) == list(want.index), "every row, in the DataFrame's order"
    for col in want.columns:
        if want[col].dtype.kind in "fi":
            assert np.allclose(got[col].to_numpy(float), want[col].to_numpy(float), equal_nan=True, rtol=0, atol=0), col
        elif col == "is_backward":
            assert list(got[col]) == list(want[col]), col
        else:
            assert [_text(v) for v in got[col]] == [_text(v) for v in want[col]], col
    assert page.blocked == []


def test_profile_text_is_never_markup_in_the_report_or_the_widget(browser, tmp_path):
    prof = xss_profile()
    module_row = next(p for p in prof.df.index if p.endswith(XSS_MODULE))
    report = tmp_path / "xss.html"
    html = Path(prof.to_html(str(report), min_pct=0)).read_text(encoding="utf-8")
    # The same page without its Content-Security-Policy: the escaping alone must hold.
    bare = tmp_path / "xss-no-csp.html"
    bare.write_text(re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", html), encoding="utf-8")
    assert "Content-Security-Policy" not in bare.read_text(encoding="utf-8")
    pages = [open_report(browser, report), open_report(browser, bare)]
    widget_dir = tmp_path / "widget"
    write_widget_page(prof.widget(min_pct=0, expanded=list(prof.df.index)), widget_dir)
    with serve(widget_dir) as url:
        page = new_page(browser, viewport={"width": 1400, "height": 900})
        page.goto(url + "index.html")
        page.wait_for_selector("body[data-ready='1']")
        pages.append(page)
        for page in pages:
            page.click('[data-testid="expand-all"]')
            wait_rendered(page)
            # No element the profile's text could have made exists, so no handler of one can run later.
            assert page.locator("img").count() == 0 and page.locator("body script").count() <= 2
            assert page.evaluate("() => window.__pwned") is None
            # The name cell shows the module path as text, markup characters and all.
            assert row(page, module_row).locator(".tp-label").text_content() == prof.df.loc[module_row, "name"]
            assert prof.df.loc[module_row, "name"].endswith(XSS_MODULE)
            assert page.get_by_text(XSS_REGION, exact=True).is_visible()
            assert page.get_by_text(prof.df.loc[module_row, "name"], exact=True).is_visible()
            assert page.errors == [] and page.blocked == []


# -- the widget page (anywidget's path: binary payload, render(), save_changes) -----------------------
def test_widget_page_clicks_update_the_state_python_reads(browser, resnet, tmp_path):
    # min_pct=0 and the structural expansion: which layers pass 1% and where the hot path goes
    # depend on timing, and ResNet.layer2 must show, closed, to be clicked open.
    from torchprof._views.state import default_expanded

    w = resnet.widget(min_pct=0, expanded=default_expanded(resnet.tree))
    write_widget_page(w, tmp_path)
    with serve(tmp_path) as url:
        page = new_page(browser, viewport={"width": 1400, "height": 900})
        page.goto(url + "index.html")
        page.wait_for_selector("body[data-ready='1']")
        assert_page_is_python_view(page, resnet, "torchprofPage")
        row(page, "ResNet.layer2").locator('[data-testid="caret"]').click()
        page.locator('.tp-head [data-col="self_cpu_us"]').click()
        page.locator('input[type="checkbox"][data-testid="show-ops"]').check()
        page.locator('input[type="range"][data-testid="min-pct"]').fill(slider_position(0.5))
        # What the kernel would receive: apply the page's state to the Python widget.
        state = page_state(page, "torchprofPage")
        for k, v in state.items():
            setattr(w, k, v)
        assert (w.sort_by, w.ascending, w.show_ops, w.min_pct) == ("self_cpu_us", False, True, 0.5)
        assert "ResNet.layer2" in w.expanded
        rendered = rendered_paths(page)
        expected = list(w.view_df.index)
        assert rendered == expected[: len(rendered)]
        assert shown_count(page)[0] == len(expected)
        assert page.evaluate("() => window.torchprofPage.saves.length") >= 4, "every click must save_changes"
        # Python -> page: the model changes, the page follows.
        page.evaluate("() => { const m = window.torchprofPage.model; m.set('min_pct', 20); m.set('show_ops', false); }")
        page.wait_for_function(f"() => document.querySelector('[data-testid=\"min-pct\"]').value === '{slider_position(20)}'")
        assert not page.locator('input[data-testid="show-ops"]').is_checked()
        w.min_pct, w.show_ops = 20, False
        assert shown_count(page)[0] == len(w.view_df)
        assert page.errors == [] and page.blocked == []


def test_scrolling_a_long_view_keeps_the_dom_small_and_reaches_the_last_row(browser, tmp_path):
    from bench.bench_widget import big_profile

    prof = big_profile(6_000)
    w = prof.widget(min_pct=0, show_ops=True)
    write_widget_page(w, tmp_path)
    with serve(tmp_path) as url:
        page = new_page(browser, viewport={"width": 1200, "height": 800})
        page.goto(url + "index.html")
        page.wait_for_selector("body[data-ready='1']")
        page.click('[data-testid="expand-all"]')
        w.expanded = page_state(page, "torchprofPage")["expanded"]
        expected = list(w.view_df.index)
        assert shown_count(page) == (len(expected), len(prof.tree)) and len(expected) == len(prof.tree)
        counts = page.evaluate("""async () => {
            const s = document.querySelector('[data-testid="scroller"]');
            const counts = [];
            for (let k = 0; k <= 40; k++) {
                s.scrollTop = (s.scrollHeight - s.clientHeight) * k / 40;
                await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
                counts.push(s.querySelectorAll('[role="row"]').length);
            }
            return counts;
        }""")
        assert max(counts) <= 200, counts
        rendered = rendered_paths(page)
        assert rendered == expected[-len(rendered) :], "at the bottom the last rows are Python's last rows"
        page.evaluate("() => { document.querySelector('[data-testid=\"scroller\"]').scrollTop = 0; }")
        page.wait_for_function("() => document.querySelector('[role=\"row\"][data-path]').getAttribute('data-path') === 'profile'")
        assert rendered_paths(page) == expected[: len(rendered_paths(page))]
        assert page.errors == []
