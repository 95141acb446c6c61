"""The widget's layout, Flame and Top views, controls, steps and keyboard in real headless Chromium,
on a torchvision ResNet-18 training step (the report page, which runs the widget's own module)
and on the widget page anywidget would render. Each check compares the page with what Python
computes; measurements (truncated cells per width, the Flame's draw time at 50k nodes) and
screenshots are written to tests/artifacts/."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from browser_util import ARTIFACTS, new_page, page_state, serve, wait_painted, wait_rendered, write_widget_page
from torchprof._tree.aggregate import across_steps
from torchprof._views import format as fmt
from torchprof._views.rows import select_rows, visible_rows
from torchprof._vocab import BACKWARD_PREFIX, COLUMN

pytestmark = pytest.mark.browser

WIDTHS = (700, 970, 1400)
#: Text that does not fit the box it is drawn in (measured with ranges, to the fraction of a pixel:
#: scrollWidth rounds): each number, percentage and header word against its cell's visible box.
TRUNCATED_JS = """() => {
  const inside = (el) => {
    const r = el.getBoundingClientRect();
    const cs = getComputedStyle(el);
    return [r.left + parseFloat(cs.borderLeftWidth), r.right - parseFloat(cs.borderRightWidth)];
  };
  const fits = (text, cell) => {
    if (!text.textContent || text.getClientRects().length === 0) return true;
    const range = document.createRange();
    range.selectNodeContents(text);
    const [left, right] = inside(cell);
    return [...range.getClientRects()].every((r) => r.left >= left - 0.5 && r.right <= right + 0.5);
  };
  const checks = [];
  for (const th of document.querySelectorAll('.tp-head .tp-th')) checks.push([th.firstElementChild, th, 'header ' + th.dataset.col]);
  for (const cell of document.querySelectorAll('[role="row"][data-path] .tp-num')) {
    const where = cell.closest('[role="row"]').dataset.path + ' ' + cell.dataset.col;
    for (const text of cell.querySelectorAll('.tp-v, .tp-pct')) checks.push([text, cell, where]);
  }
  const cut = checks.filter(([text, cell]) => !fits(text, cell)).map(([text, , where]) => where + ': ' + text.textContent);
  return {checked: checks.length, cut};
}"""
#: Rows whose name is cut while their type tag still shows: the tag must give way first.
NAME_ORDER_JS = """() => [...document.querySelectorAll('[role="row"][data-path] .tp-name')].filter((c) => {
  const head = c.querySelector('.tp-label');
  const tag = c.querySelector('.tp-tag');
  const range = document.createRange();
  range.selectNodeContents(head);
  const cut = range.getBoundingClientRect().width > head.getBoundingClientRect().width + 0.5;
  return cut && tag.textContent && tag.getBoundingClientRect().width > 1;
}).map((c) => c.closest('[role="row"]').dataset.path)"""


@pytest.fixture(scope="module")
def resnet(resnet18_step):
    return resnet18_step[0]


@pytest.fixture(scope="module")
def report(resnet, tmp_path_factory) -> Path:
    """Every layer open, every row above 0%: the widest tree a user gets by clicking."""
    path = tmp_path_factory.mktemp("widget") / "resnet18.html"
    layers = [p for p, k in zip(resnet.df.index, resnet.df["kind"]) if k in ("module", "region")]
    resnet.to_html(str(path), min_pct=0, expanded=layers)
    return path


@pytest.fixture(scope="module")
def report_top(resnet, tmp_path_factory) -> Path:
    """Every row above 0%, opened the default way (rows down to depth 2): all in view."""
    path = tmp_path_factory.mktemp("widget") / "resnet18-top.html"
    resnet.to_html(str(path), min_pct=0)
    return path


@pytest.fixture(scope="module")
def stepped(tmp_path_factory):
    """Three steps (torch.profiler schedule) of a Sequential whose children are named 0..11."""
    import torch

    import torchprof

    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(16, 16) if k % 2 == 0 else torch.nn.ReLU() for k in range(12)])
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(8, 16)
    with torchprof.Profiler(schedule=torch.profiler.schedule(wait=0, warmup=1, active=3)) as prof:
        for _ in range(4):
            model(x).sum().backward()
            opt.step()
            opt.zero_grad()
            prof.step()
    path = tmp_path_factory.mktemp("steps") / "steps.html"
    prof.to_html(str(path), min_pct=0)
    return prof, path


def open_page(browser, path: Path, width: int = 1400, scheme: str = "light"):
    page = new_page(browser, viewport={"width": width, "height": 900}, color_scheme=scheme)
    page.goto(path.as_uri())
    page.wait_for_selector('[role="row"][data-path]')
    return page


def model_set(page, **values: Any) -> None:
    page.evaluate("(values) => { const m = window.torchprofReport.model; for (const [k, v] of Object.entries(values)) m.set(k, v); }", values)
    wait_rendered(page)


def row(page, path: str):
    return page.locator(f'[data-testid="scroller"] [role="row"][data-path="{path}"]')


def record(name: str, values: Any) -> None:
    """Measurements for the report, one JSON file per measurement."""
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / f"{name}.json").write_text(json.dumps(values, indent=1) + "\n", encoding="utf-8")


# -- layout -----------------------------------------------------------------------------------------
def test_no_number_or_header_is_cut_at_700_970_and_1400_px_in_light_and_dark(browser, resnet, report):
    counts: dict[str, Any] = {}
    for scheme in ("light", "dark"):
        for width in WIDTHS:
            page = open_page(browser, report, width, scheme)
            cut: list[str] = []
            checked = 0
            # Every row: the top of the table, then the bottom (the rows are virtualised).
            for position in ("0", "s.scrollHeight"):
                page.evaluate(f"() => {{ const s = document.querySelector('[data-testid=scroller]'); s.scrollTop = {position}; }}")
                wait_painted(page)
                result = page.evaluate(TRUNCATED_JS)
                cut += result["cut"]
                checked += result["checked"]
                # The type tag gives way before the name does.
                assert page.evaluate(NAME_ORDER_JS) == [], f"{width}px: a name is cut while its type tag has room"
                if width >= 970:  # names and type tags whole ("dow…mple", "Con…" were cut)
                    names_cut = page.evaluate(NAMES_CUT_JS)
                    assert names_cut == [], f"{width}px {scheme}: names cut: {names_cut[:5]}"
            counts[f"{width}px {scheme}"] = {"truncated": len(cut), "texts checked": checked}
            assert checked > 500
            assert cut == [], f"{width}px {scheme}: {cut[:5]}"
            page.evaluate("() => { document.querySelector('[data-testid=scroller]').scrollTop = 0; }")
            wait_painted(page)
            # Every number reads as Python formats it (nothing elided).
            assert row(page, "ResNet").locator('[data-col="cpu_us"] .tp-v').inner_text() == fmt.time_us(resnet.df.loc["ResNet", "cpu_us"])
            table = page.locator(".tp-panel-table")
            has_pct = "tp-nopct" not in (table.get_attribute("class") or "")
            counts[f"{width}px {scheme}"]["percentages"] = has_pct
            if width == 700:
                assert not has_pct, "at 700 px the percentages go so the numbers fit"
            if width == 1400:
                assert has_pct, "at 1400 px there is room for the percentages"
                pcts = page.locator('[role="row"][data-path] .tp-pct').all_text_contents()
                assert any(pcts) and not [p for p in pcts if re.fullmatch(r"-?0(\.0)?%", p)], "no cell says 0.0%"
            if width == 970:
                ARTIFACTS.mkdir(exist_ok=True)
                page.locator('[data-testid="torchprof"]').screenshot(path=str(ARTIFACTS / f"widget-970-{scheme}.png"))
            assert page.errors == []
            page.context.close()
    record("truncation", counts)


NAMES_CUT_JS = """() => [...document.querySelectorAll('[role="row"][data-path] .tp-name')].flatMap((c) =>
  [c.querySelector('.tp-label'), c.querySelector('.tp-tag')].filter((e) => e && e.textContent && e.scrollWidth > e.clientWidth + 0.5)
    .map((e) => c.closest('[role="row"]').dataset.path + ': ' + e.textContent))"""


def test_names_are_one_text_node_shown_whole_and_the_whole_path_on_hover(browser, resnet, report_top, tmp_path):
    import torch

    import torchprof

    # Four regions whose long names differ only at the end.
    names = [f"transformer_encoder_block_attention_layer_{k}" for k in (8, 9, 10, 11)]
    with torchprof.Profiler() as prof:
        for name in names:
            with torch.profiler.record_function(name):
                torch.randn(64, 64) @ torch.randn(64, 64)
    path = tmp_path / "long.html"
    prof.to_html(str(path), min_pct=0)
    for width in (420, 970):
        page = open_page(browser, path, width)
        for name in names:
            cell = row(page, name).locator(".tp-name")
            assert cell.get_attribute("title").split("\n")[0] == name, "the whole path on hover"
            label = cell.locator(".tp-label")
            # One text node: copying the row gives the name intact (not "transformer_enc" + newline + ...).
            assert label.evaluate("(e) => e.childNodes.length === 1 && e.firstChild.nodeType === 3")
            copied = label.evaluate("(e) => { const r = document.createRange(); r.selectNodeContents(e); "
                                    "const s = getSelection(); s.removeAllRanges(); s.addRange(r); return s.toString(); }")
            assert copied == name
            # The Node column claims the room its names need: whole at 970 px (the table scrolls sideways at 420).
            assert label.evaluate("(e) => e.scrollWidth <= e.clientWidth"), f"{name} cut at {width} px"
    # An unlabelled root module is not named twice ("ResNet ResNet"): its tag is its class only when that differs.
    page = open_page(browser, report_top, 700)
    assert row(page, "ResNet").locator(".tp-tag").inner_text() == ""
    assert row(page, "ResNet.layer1").locator(".tp-tag").inner_text() == "Sequential"


def test_the_node_column_stays_pinned_for_header_and_rows_when_scrolling_sideways(browser, report):
    page = open_page(browser, report, 700)
    scroller = page.locator('[data-testid="scroller"]')
    room = scroller.evaluate("(s) => s.scrollWidth - s.clientWidth")
    assert room > 50, "at 700 px the table scrolls sideways"
    scroller.evaluate("(s) => { s.scrollLeft = s.scrollWidth; }")
    wait_painted(page)
    lefts = page.evaluate("""() => {
      const s = document.querySelector('[data-testid="scroller"]').getBoundingClientRect().left;
      const cells = [...document.querySelectorAll('.tp-head .tp-th.tp-name, [role="row"][data-path] .tp-name')];
      return cells.filter((c) => c.getBoundingClientRect().height > 0).map((c) => Math.round(c.getBoundingClientRect().left - s));
    }""")
    assert len(lefts) > 10 and set(lefts) == {0}, lefts[:10]
    # The last column is in view: the numbers beside the pinned names are the far right ones.
    calls = page.locator('.tp-head [data-col="calls"]').bounding_box()
    box = scroller.bounding_box()
    assert calls["x"] + calls["width"] <= box["x"] + box["width"] + 1


# -- controls -------------------------------------------------------------------------------------
def test_the_threshold_is_log_scaled_on_cpu_total_and_says_what_it_hides(browser, resnet, tmp_path):
    path = tmp_path / "default.html"
    resnet.to_html(str(path))  # min_pct=1
    page = open_page(browser, path, 1400)
    note = page.locator('[data-testid="hidden-note"]')
    tree = resnet.tree
    shown = select_rows(tree, min_pct=1)
    below = sum(1 for i in range(1, len(tree)) if not shown[i] and tree.columns["kind"][i] in ("module", "region"))
    assert below > 0
    assert note.inner_text() == f"{below} rows hidden ({below} below 1% of CPU total)"
    assert "of CPU total" in page.locator(".tp-controls").inner_text()
    # Sorting by backward time hides nothing more (the optimizer, with no backward time, stays):
    # the threshold stays on CPU total.
    rendered = '[data-testid="scroller"] [role="row"][data-path]'
    by_cpu = set(page.locator(rendered).evaluate_all("rs => rs.map(r => r.dataset.path)"))
    page.locator('.tp-head [data-col="bwd_cpu_us"]').click()
    assert set(page.locator(rendered).evaluate_all("rs => rs.map(r => r.dataset.path)")) == by_cpu
    assert ("Optimizer.step#SGD.step" in by_cpu) == (resnet.df.loc["Optimizer.step#SGD.step", "cpu_us"] >= resnet.df.iloc[0]["cpu_us"] / 100)
    # One click shows them.
    page.click('[data-testid="show-hidden"]')
    assert page_state(page, "torchprofReport")["min_pct"] == 0
    assert page.locator(".tp-note").is_hidden()
    # The slider is logarithmic: a quarter of the track is a decade.
    slider = page.locator('input[type="range"][data-testid="min-pct"]')
    slider.fill("250")
    assert page_state(page, "torchprofReport")["min_pct"] == 0.1
    assert page.locator('[data-testid="min-pct-value"]').inner_text() == "0.1%"
    slider.fill(str(round(27 / 144 * 1000)))  # the 27 px drag that once jumped to 16%
    assert page_state(page, "torchprofReport")["min_pct"] < 0.1
    # A search adds its own count, and the note names it.
    model_set(page, min_pct=1.0)
    page.locator('[data-testid="search"]').fill("conv")
    assert re.fullmatch(r"\d+ rows hidden \(\d+ below 1% of CPU total, \d+ not matching “conv”\)", note.inner_text()), note.inner_text()
    assert page.errors == []


def test_search_highlights_what_matched(browser, report):
    page = open_page(browser, report, 1400)
    page.locator('[data-testid="search"]').fill("conv")
    marks = page.locator('[data-testid="scroller"] .tp-label mark').all_inner_texts()
    assert marks and set(marks) == {"conv"}
    page.locator('[data-testid="search"]').fill("path:layer4.*.conv?")
    rows = page.locator('[data-testid="scroller"] [role="row"][data-path]').evaluate_all("rs => rs.map(r => r.dataset.path)")
    assert [p for p in rows if re.fullmatch(r"ResNet\.layer4\.\d\.conv\d", p)] == [p for p in rows if p.count(".") == 3], rows
    assert len([p for p in rows if p.count(".") == 3]) == 4


def test_ticking_aten_ops_never_changes_a_number_silently(browser, resnet, report_top):
    df = resnet.df
    ops = df[df["kind"] == "op"]
    # A threshold just above the biggest op: ticking "aten ops" shows no op row.
    threshold = 100 * ops["cpu_us"].max() / df.iloc[0]["cpu_us"] + 0.5
    page = open_page(browser, report_top, 1400)
    model_set(page, min_pct=threshold)

    def self_column() -> dict[str, str]:
        cells = page.locator('[data-testid="scroller"] [role="row"][data-path]')
        return dict(zip(cells.evaluate_all("rs => rs.map(r => r.dataset.path)"),
                        cells.locator('[data-col="self_cpu_us"] .tp-v').all_inner_texts()))  # fmt: skip

    def self_names() -> tuple[str, str]:  # the header and the sort picker's name of the column
        header = page.locator('[data-testid="scroller"] [role="columnheader"][data-col="self_cpu_us"]').inner_text()
        return header.strip(), page.locator('[data-testid="sort"] option[value="self_cpu_us"]').inner_text().strip()

    before = self_column()
    assert self_names() == ("Own CPU", "Own CPU")  # ops hidden: the layers' own time, prof.df's layer_self_cpu_us
    page.locator('[data-testid="show-ops"]').check()
    assert self_names() == ("Self CPU", "Self CPU")
    after = self_column()
    assert list(after) == list(before), "no op row passes the threshold"
    assert after == before, "and so no Self changed"
    modules = [p for p in before if df.loc[p, "kind"] == "module"]
    assert modules and all(before[p] == fmt.time_us(df.loc[p, "layer_self_cpu_us"]) or df.loc[p, "layer_self_cpu_us"] == 0 for p in modules)
    # At 0% the ops show, and the layer's Self is its own time beside them.
    model_set(page, min_pct=0)
    assert row(page, "ResNet.conv1").locator('[data-col="self_cpu_us"] .tp-v').inner_text() == fmt.time_us(df.loc["ResNet.conv1", "self_cpu_us"])


def test_every_backward_row_says_so_and_forward_backward_other_share_the_registry_labels(browser, resnet, report):
    page = open_page(browser, report, 1400)
    page.locator('[data-testid="show-ops"]').check()
    page.click('[data-testid="expand-all"]')
    model_set(page, search="path:ResNet.layer1.0.conv1")
    rows = page.locator('[data-testid="scroller"] [role="row"][data-path]')
    paths = rows.evaluate_all("rs => rs.map(r => r.dataset.path)")
    badges = rows.locator(".tp-badge").all_inner_texts()
    backward = [bool(resnet.df.loc[p, "is_backward"]) for p in paths]
    assert sum(backward) >= 3, "the conv's backward node, its op and the ops inside"
    assert badges == ["bwd" if b else "" for b in backward]
    headers = dict(zip(page.locator(".tp-head .tp-th").evaluate_all("hs => hs.map(h => h.dataset.col)"),
                       page.locator(".tp-head .tp-th").all_inner_texts()))  # fmt: skip
    table = resnet.table(min_pct=0, width=None)
    for col in ("fwd_cpu_us", "bwd_cpu_us", "other_cpu_us"):
        label = COLUMN[col].label
        assert headers[col].replace("\n", " ") == label
        assert label in table.splitlines()[1], f"the terminal table calls it {label} too"


# -- Flame ----------------------------------------------------------------------------------------
def flame_rects(page) -> list[dict[str, Any]]:
    """The Flame's rectangles as widget.js lays them out for the page's canvas, from the module itself."""
    return page.evaluate("""async () => {
      const m = await import('./widget.js');
      const model = window.torchprofPage.model;
      const data = await m.loadPayload(model.get('data'));
      const canvas = document.querySelector('[data-testid="flame-canvas"]');
      const viewed = m.viewedTable(data, model.get('step'));
      const zoom = m.rowOfPath(viewed.table, model.get('zoom'));
      const metric = m.flameMetric(viewed.table, model.get('metric'));
      const layout = m.flameLayout(viewed.table, {root: zoom > 0 ? zoom : viewed.root, width: canvas.clientWidth, widthColumn: metric.width, showOps: model.get('show_ops')});
      return Array.from({length: layout.count}, (_, r) => ({path: viewed.table.path[layout.node[r]], x: layout.x[r], w: layout.w[r], level: layout.level[r]}));
    }""")


@contextlib.contextmanager
def widget_page(browser, widget, directory: Path, width: int = 1200, scheme: str = "light") -> Iterator[Any]:
    """The page anywidget would render for ``widget`` (its synced bytes and state), served locally."""
    write_widget_page(widget, directory)
    with serve(directory) as url:
        page = new_page(browser, viewport={"width": width, "height": 900}, color_scheme=scheme)
        page.goto(url + "index.html")
        page.wait_for_selector("body[data-ready='1']")
        yield page
        page.context.close()


def test_flame_view_sizes_bars_by_the_metric_zooms_and_follows_the_table(browser, resnet, tmp_path):
    with widget_page(browser, resnet.widget(min_pct=0), tmp_path) as page:
        page.click('[data-testid="view-flame"]')
        panel = page.locator('.tp-panel-flame')
        page.wait_for_function("() => Number(document.querySelector('.tp-panel-flame').dataset.rects) > 10")
        assert page_state(page)["view"] == "flame"
        # Only the controls that act on the Flame show: the threshold and the sort are the table's.
        assert page.locator('[data-testid="min-pct"]').is_hidden() and page.locator('[data-testid="sort"]').is_hidden()
        assert page.locator('[data-testid="show-ops"]').is_visible() and page.locator('[data-testid="search"]').is_visible()
        rects = flame_rects(page)
        by_path = {r["path"]: r for r in rects}
        df = resnet.df
        root_w = by_path["profile"]["w"]
        layer1 = by_path["ResNet.layer1"]
        assert layer1["w"] / root_w == pytest.approx(df.loc["ResNet.layer1", "cpu_us"] / df.iloc[0]["cpu_us"], rel=1e-9)
        # Execution order left to right: conv1 ran before layer1, layer1 before layer2.
        assert by_path["ResNet.conv1"]["x"] < layer1["x"] < by_path["ResNet.layer2"]["x"]
        canvas = page.locator('[data-testid="flame-canvas"]')
        box = canvas.bounding_box()
        point = {"x": layer1["x"] + layer1["w"] / 2, "y": layer1["level"] * 18 + 9}
        # Hover gives the numbers.
        page.mouse.move(box["x"] + point["x"], box["y"] + point["y"])
        tip = page.locator('[data-testid="flame-tip"]')
        assert tip.is_visible()
        text = tip.inner_text()
        assert text.startswith("ResNet.layer1\nmodule · Sequential")
        assert f"CPU total: {fmt.time_us(df.loc['ResNet.layer1', 'cpu_us'])}" in text
        assert f"CPU bwd: {fmt.time_us(df.loc['ResNet.layer1', 'bwd_cpu_us'])}" in text
        ARTIFACTS.mkdir(exist_ok=True)
        page.locator('[data-testid="torchprof"]').screenshot(path=str(ARTIFACTS / "flame.png"))
        # Click zooms into the subtree and selects it; the breadcrumb leads back.
        page.mouse.click(box["x"] + point["x"], box["y"] + point["y"])
        state = page_state(page)
        assert (state["zoom"], state["selected"]) == ("ResNet.layer1", "ResNet.layer1")
        crumbs = page.locator('[data-testid="flame-crumbs"] .tp-crumb').all_inner_texts()
        assert crumbs == ["profile", "ResNet", "layer1"]
        zoomed = flame_rects(page)
        assert zoomed[0]["path"] == "ResNet.layer1" and zoomed[0]["w"] == pytest.approx(box["width"], abs=1)
        assert all(r["path"].startswith("ResNet.layer1") for r in zoomed)
        # Clicking the top bar zooms out one level; the breadcrumb's root all the way.
        page.mouse.click(box["x"] + 5, box["y"] + 9)
        assert page_state(page)["zoom"] == "ResNet"
        page.locator('[data-testid="flame-crumbs"] .tp-crumb').first.click()
        assert page_state(page)["zoom"] == ""
        # The table's selection shows here (outlined), and so does its search (others dimmed).
        page.click('[data-testid="view-table"]')
        row(page, "ResNet.layer2").locator(".tp-label").click()
        assert page_state(page)["selected"] == "ResNet.layer2"
        page.click('[data-testid="view-flame"]')
        assert panel.get_attribute("data-selected") == "ResNet.layer2"
        page.locator('[data-testid="search"]').fill("conv1")
        matches = int(panel.get_attribute("data-matches"))
        assert matches == sum(1 for r in flame_rects(page) if r["path"].split(".")[-1] == "conv1")
        assert int(panel.get_attribute("data-dimmed")) == int(panel.get_attribute("data-rects")) - 1 - matches
        # Another metric, another colouring.
        page.locator('[data-testid="flame-metric"]').select_option("bwd_cpu_us")
        page.locator('[data-testid="flame-colour"]').select_option("type")
        state = page_state(page)
        assert (state["metric"], state["flame_colour"]) == ("bwd_cpu_us", "type")
        rects = flame_rects(page)
        # The widest bar below the root (which bars are wide enough to draw depends on timing).
        widest = max((r for r in rects if r["level"] == 1), key=lambda r: r["w"])
        assert widest["w"] / rects[0]["w"] == pytest.approx(df.loc[widest["path"], "bwd_cpu_us"] / df.iloc[0]["bwd_cpu_us"], rel=1e-9)
        assert "one colour per module type" in page.locator('[data-testid="flame-legend"]').inner_text()
        assert page.errors == []


def test_flame_draws_a_50k_node_tree_in_under_200_ms(browser, tmp_path):
    from bench.bench_widget import big_profile

    prof = big_profile(50_000)
    w = prof.widget(min_pct=0, show_ops=True, view="flame")
    with widget_page(browser, w, tmp_path, width=1400) as page:
        page.wait_for_function("() => Number(document.querySelector('.tp-panel-flame')?.dataset.rects) > 0")
        times = page.evaluate("""async () => {
          const model = window.torchprofPage.model;
          const panel = document.querySelector('.tp-panel-flame');
          const out = [Number(panel.dataset.drawMs)];
          for (const colour of ['type', 'phase', 'type', 'phase', 'type']) {
            model.set('flame_colour', colour);
            await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
            out.push(Number(panel.dataset.drawMs));
          }
          return {times: out, rects: Number(panel.dataset.rects)};
        }""")
        best = min(times["times"])
        # Zoomed into one stage, far more bars are wide enough to draw.
        stage = prof.df[prof.df["depth"] == 2].index[0]
        zoomed = page.evaluate("""async (stage) => {
          const model = window.torchprofPage.model;
          const panel = document.querySelector('.tp-panel-flame');
          const out = [];
          for (const colour of ['phase', 'type', 'phase']) {
            model.set('zoom', stage);
            model.set('flame_colour', colour);
            await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
            out.push(Number(panel.dataset.drawMs));
          }
          return {times: out, rects: Number(panel.dataset.rects)};
        }""", stage)
        # The layout alone with nothing culled: every one of the 50k nodes placed.
        everything = page.evaluate("""async () => {
          const m = await import('./widget.js');
          const data = await m.loadPayload(window.torchprofPage.model.get('data'));
          m.flameLayout(data, {width: 1400, widthColumn: 'cpu_us', showOps: true, minPx: 0});
          const t0 = performance.now();
          const layout = m.flameLayout(data, {width: 1400, widthColumn: 'cpu_us', showOps: true, minPx: 0});
          return {ms: performance.now() - t0, rects: layout.count};
        }""")
        record("flame-draw-50k", {
            "nodes": len(prof.tree), "whole tree": {"rects drawn": times["rects"], "draw ms (layout + paint)": times["times"], "best ms": best},
            "zoomed into a stage": {"rects drawn": zoomed["rects"], "draw ms": zoomed["times"], "best ms": min(zoomed["times"])},
            "layout of every node, none culled": everything,
        })  # fmt: skip
        assert len(prof.tree) >= 50_000 and everything["rects"] == len(prof.tree)
        assert zoomed["rects"] > times["rects"]
        assert best < 200 and min(zoomed["times"]) < 200, (times, zoomed)
        assert page.errors == []


# -- Top ------------------------------------------------------------------------------------------
def test_top_view_ranks_layers_and_module_types_by_self_time_with_their_ops(browser, resnet, report):
    page = open_page(browser, report, 1400)
    page.click('[data-testid="view-top"]')
    assert page.locator('[data-testid="show-ops"]').is_hidden(), "Top always folds the ops in"
    assert page.locator('[data-testid="search"]').is_visible()
    df = resnet.df
    layers = df[df["kind"].isin(["module", "region"]) & (df.index != "profile")]
    want = list(layers.sort_values("layer_self_cpu_us", ascending=False, kind="stable").index[:10])
    got = page.locator('[data-testid="top-layers"] .tp-top-row').evaluate_all("rs => rs.map(r => r.dataset.path)")
    assert got[:10] == want
    # Named by the figure it ranks by: the layers' own time (layer_self_cpu_us), as the table names it.
    assert page.locator(".tp-top-title").first.inner_text().startswith("Layers by Own CPU (their ops folded in)")
    first = page.locator('[data-testid="top-layers"] .tp-top-row').first
    assert first.locator(".tp-v").inner_text() == fmt.time_us(df.loc[want[0], "layer_self_cpu_us"])
    ops = df[(df["parent"] == want[0]) & (df["kind"] == "op")].sort_values("cpu_us", ascending=False)
    if len(ops):
        name = df.loc[ops.index[0], "name"]
        short = f"{name[len(BACKWARD_PREFIX):]} (bwd)" if name.startswith(BACKWARD_PREFIX) else name
        assert first.locator(".tp-top-note").inner_text().startswith("ops: " + short)
    by_type = resnet.by_type().sort_values("layer_self_cpu_us", ascending=False, kind="stable")
    types = page.locator('[data-testid="top-types"] .tp-top-name .tp-label').all_text_contents()
    assert types == [t for t in by_type.index if by_type.loc[t, "layer_self_cpu_us"] > 0]
    # Double-click shows the layer in the table, selected.
    page.locator('[data-testid="top-layers"] .tp-top-row').nth(1).dblclick()
    state = page_state(page, "torchprofReport")
    assert state["view"] == "table" and state["selected"] == want[1]
    assert "tp-selected" in row(page, want[1]).get_attribute("class")
    assert page.errors == []


# -- steps ----------------------------------------------------------------------------------------
def test_steps_read_in_order_one_at_a_time_or_folded_into_one_tree(browser, stepped):
    prof, path = stepped
    page = open_page(browser, path, 1400)
    steps = list(prof.steps["step"])
    assert len(steps) == 3
    options = page.locator('[data-testid="step"] option').all_inner_texts()
    assert options == ["whole run", "all 3 steps (mean)", *[f"step #{s}" for s in steps]]
    rows = page.locator('[data-testid="scroller"] [role="row"][data-path]').evaluate_all("rs => rs.map(r => r.dataset.path)")
    assert [p for p in rows if p.startswith("ProfilerStep#") and "/" not in p] == [f"ProfilerStep#{s}" for s in steps]
    # One step: its row is the root, its CPU total is 100%.
    page.locator('[data-testid="step"]').select_option(str(steps[1]))
    first = page.locator('[data-testid="scroller"] [role="row"][data-path]').first
    assert first.get_attribute("data-path") == f"ProfilerStep#{steps[1]}"
    assert first.locator('[data-col="cpu_us"] .tp-pct').inner_text() == "100%"
    module = f"ProfilerStep#{steps[1]}/Sequential"
    assert row(page, module).count() == 1, "the step opens two levels deep"
    # Natural name sort: 0, 1, 2, ..., 10, 11 under the model.
    model_set(page, sort_by="name", ascending=True, expanded=[module])
    kids = [p.rsplit(".", 1)[-1] for p in page.locator('[data-testid="scroller"] [role="row"][data-path]').evaluate_all("rs => rs.map(r => r.dataset.path)") if p.startswith(module + ".")]
    assert kids == [str(k) for k in range(12)]
    # Every step folded: the means, with the least and the most of any step beside them.
    page.locator('[data-testid="step"]').select_option("all")
    folded = across_steps(prof.tree)
    t = folded.tree
    i = t.columns["path"].index("Sequential")
    assert page.locator('[data-testid="scroller"] [role="row"][data-path]').first.get_attribute("data-path") == "all steps"
    cells = row(page, "Sequential")
    assert cells.locator('[data-col="cpu_us"] .tp-v').nth(0).inner_text() == fmt.time_us(t.columns["cpu_us"][i])
    heads = page.locator(".tp-head .tp-th").all_inner_texts()
    assert "CPU total\nmin" in heads or "CPU total min" in [h.replace("\n", " ") for h in heads]
    values = cells.locator('[data-col="cpu_us"] .tp-v').all_inner_texts()
    assert values == [fmt.time_us(t.columns["cpu_us"][i]), fmt.time_us(folded.low["cpu_us"][i]), fmt.time_us(folded.high["cpu_us"][i])]
    assert "ran in 3 of 3 steps" in cells.locator(".tp-name").get_attribute("title")
    assert page.errors == []


# -- keyboard ----------------------------------------------------------------------------------------
def test_arrow_keys_move_open_and_close_rows_and_keys_stay_in_the_widget(browser, resnet, tmp_path):
    with widget_page(browser, resnet.widget(min_pct=0), tmp_path) as page:
        page.evaluate("""() => { window.leaked = []; document.addEventListener('keydown', (e) => window.leaked.push(e.key)); }""")
        state = page_state(page)
        expected = visible_rows(resnet.tree, min_pct=0, expanded=set(state["expanded"]))
        paths = [resnet.tree.columns["path"][i] for i in expected]
        row(page, paths[1]).locator(".tp-label").click()
        assert page_state(page)["selected"] == paths[1]
        page.keyboard.press("ArrowDown")
        page.keyboard.press("ArrowDown")
        assert page_state(page)["selected"] == paths[3]
        page.keyboard.press("ArrowUp")
        assert page_state(page)["selected"] == paths[2]
        target = next(p for p in paths if row(page, p).get_attribute("aria-expanded") == "false")
        row(page, target).locator(".tp-label").click()
        page.keyboard.press("ArrowRight")
        assert target in page_state(page)["expanded"]
        assert row(page, target).get_attribute("aria-expanded") == "true"
        page.keyboard.press("ArrowRight")
        assert page_state(page)["selected"].startswith(target + ".")
        page.keyboard.press("ArrowLeft")
        assert page_state(page)["selected"] == target
        page.keyboard.press("ArrowLeft")
        assert target not in page_state(page)["expanded"]
        assert page.locator('[data-testid="scroller"]').get_attribute("aria-activedescendant") == row(page, target).get_attribute("id")
        # Enter on a focused header sorts by it.
        page.locator('.tp-head [data-col="flops"]').focus()
        page.keyboard.press("Enter")
        assert page_state(page)["sort_by"] == "flops"
        # Notebook shortcuts (a, b, d d) pressed anywhere in the widget never reach the document.
        page.locator('[data-testid="caret"]').first.focus()
        for key in ("a", "b", "d", "d"):
            page.keyboard.press(key)
        row(page, paths[1]).locator(".tp-label").click()
        for key in ("a", "b", "d", "d", "ArrowDown"):
            page.keyboard.press(key)
        assert page.evaluate("() => window.leaked") == []
        assert page.locator('[data-testid="torchprof"]').get_attribute("data-lm-suppress-shortcuts") == "true"
        assert page.errors == []


def test_a_real_ddp_trace_lists_its_steps_in_order_and_sizes_the_flame_by_device_time(browser, tmp_path):
    import torchprof
    from conftest import shared_trace

    prof = torchprof.load_trace(str(shared_trace("a100-ddp-training.json.gz")))
    w = prof.widget()
    with widget_page(browser, w, tmp_path, width=1400) as page:
        steps = [f"step #{n}" for n in range(1009, 1015)]
        assert page.locator('[data-testid="step"] option').all_inner_texts() == ["whole run", "all 6 steps (mean)", *steps]
        rows = page.locator('[data-testid="scroller"] [role="row"][data-path]').evaluate_all("rs => rs.map(r => r.dataset.path)")
        assert [p for p in rows if p.startswith("ProfilerStep#") and "/" not in p] == [f"ProfilerStep#{n}" for n in range(1009, 1015)]
        # Every step folded, in the Flame, sized by device time.
        page.locator('[data-testid="step"]').select_option("all")
        page.click('[data-testid="view-flame"]')
        page.locator('[data-testid="flame-metric"]').select_option("cuda_us")
        labels = page.locator('[data-testid="flame-metric"] option').all_inner_texts()
        assert {"CPU total", "Own CPU", "CPU bwd", "CUDA total", "Own CUDA"} <= set(labels)
        folded = across_steps(prof.tree)
        t = folded.tree
        rects = {r["path"]: r for r in flame_rects(page)}
        assert "all steps" in rects and len(rects) > 20
        root_w = rects["all steps"]["w"]
        for p, r in list(rects.items())[1:6]:
            i = t.columns["path"].index(p)
            assert r["w"] / root_w == pytest.approx(t.columns["cuda_us"][i] / t.columns["cuda_us"][0], rel=1e-9), p
        assert page.errors == []
