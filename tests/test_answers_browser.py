"""The views that answer, in real headless Chromium at 970 px (a notebook's output width): every
view opens on the bottleneck with no click (a CNN, a small transformer, an LSTM), the headline
names it, the Insights view's rows open their rows in the table, the Steps view draws each step's
split, and the Memory view shows what its peak is made of. One shared browser; waits on the
widget's render markers, never on a delay."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from browser_util import ARTIFACTS, new_page, page_state, serve, wait_rendered, write_widget_page

pytestmark = pytest.mark.browser
WIDTH = 970


def open_report(browser, path: Path, height: int = 800):
    page = new_page(browser, viewport={"width": WIDTH, "height": height})
    page.goto(path.as_uri())
    wait_rendered(page)
    return page


def in_view(page, path: str) -> bool:
    """The row of ``path`` is drawn and lies inside the table's scroller and the page's viewport."""
    return page.evaluate("""(path) => {
      const row = [...document.querySelectorAll('[data-testid="scroller"] [role="row"][data-path]')].find((r) => r.dataset.path === path);
      if (!row) return false;
      const r = row.getBoundingClientRect();
      const s = document.querySelector('[data-testid="scroller"]').getBoundingClientRect();
      return r.top >= s.top && r.bottom <= s.bottom + 0.5 && r.bottom <= innerHeight && r.left < innerWidth;
    }""", path)


def transformer_step():
    import torch

    import torchprof

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, batch_first=True)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.TransformerEncoder(layer, num_layers=2), torch.nn.Linear(64, 8))
    x = torch.randn(4, 32, 16)
    model(x).sum().backward()
    with torchprof.Profiler() as prof:
        model(x).sum().backward()
    return prof


def lstm_step():
    import torch

    import torchprof

    class Tagger(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(100, 32)
            self.rnn = torch.nn.LSTM(32, 64, num_layers=2, batch_first=True)
            self.head = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))

        def forward(self, x):
            return self.head(self.rnn(self.embed(x))[0])

    torch.manual_seed(0)
    model = Tagger()
    x = torch.randint(0, 100, (8, 24))
    model(x).sum().backward()
    with torchprof.Profiler() as prof:
        model(x).sum().backward()
    return prof


@pytest.mark.parametrize("shape", ["cnn", "transformer", "lstm"])
def test_the_bottleneck_shows_with_no_click_and_the_headline_names_it(browser, resnet18_step, shape, tmp_path):
    prof = {"cnn": lambda: resnet18_step[0], "transformer": transformer_step, "lstm": lstm_step}[shape]()
    hot = prof.summary["hot_path"]
    assert len(hot) >= 3, hot  # the bottleneck is below the top level: the views must open to it
    if shape == "cnn":  # the widget as anywidget renders it
        directory = write_widget_page(prof.widget(), tmp_path / "page").parent
        with serve(directory) as url:
            page = new_page(browser, viewport={"width": WIDTH, "height": 800})
            page.goto(url + "index.html")
            page.wait_for_selector("body[data-ready='1']")
            wait_rendered(page)
            check_bottleneck(page, prof, hot, shape)
    else:  # the report
        path = tmp_path / f"{shape}.html"
        prof.to_html(str(path))
        check_bottleneck(open_report(browser, path), prof, hot, shape)


def check_bottleneck(page, prof, hot: list[str], shape: str) -> None:
    # The hot path's end (the layer the cost comes down to) is in view, and every row of the path is marked.
    assert in_view(page, hot[-1]), f"{shape}: {hot[-1]} not in view"
    marked = page.locator('[data-testid="scroller"] .tp-row.tp-hot').evaluate_all("rows => rows.map(r => r.dataset.path)")
    assert marked == hot[1:], (marked, hot)
    # The headline: the costliest layer (a link into the table) and module type with their shares.
    headline = page.text_content('[data-testid="headline"]')
    assert headline == prof.summary["headline"] and "%" in headline and prof.summary["costliest_type"]["type"] in headline
    link = page.locator('[data-testid="headline-layer"]')
    assert link.text_content() in headline
    link.click()
    wait_rendered(page)
    state = page_state(page, "torchprofReport" if page.evaluate("() => !!window.torchprofReport") else "torchprofPage")
    assert state["view"] == "table" and state["selected"] and in_view(page, state["selected"])
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator('[data-testid="torchprof"]').screenshot(path=str(ARTIFACTS / f"answers-{shape}-970.png"))
    assert page.errors == []


@pytest.fixture(scope="module")
def adam_steps(tmp_path_factory) -> tuple[Any, Path]:
    """Four steps of a 60-layer stack under a per-parameter Adam (a finding: optimizer_not_foreach),
    with memory: every view has something to show."""
    import torch

    import torchprof

    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(2, 2) for _ in range(60)])
    opt = torch.optim.Adam(model.parameters(), foreach=False)
    x = torch.randn(2, 2)
    model(x).sum().backward()
    opt.step()
    with torchprof.Profiler(memory=True, schedule=torch.profiler.schedule(wait=0, warmup=1, active=4)) as prof:
        for _ in range(5):
            model(x).sum().backward()
            opt.step()
            opt.zero_grad()
            prof.step()
    path = tmp_path_factory.mktemp("answers") / "adam.html"
    prof.to_html(str(path))
    return prof, path


def test_each_view_opens_and_insights_link_to_the_table(browser, adam_steps):
    from torchprof._vocab import VIEWS

    prof, path = adam_steps
    found = prof.insights()
    assert "optimizer_not_foreach" in set(found["rule"])
    page = open_report(browser, path)
    for view in VIEWS:
        page.click(f'[data-testid="view-{view}"]')
        wait_rendered(page)
        panel = page.locator(f'.tp-panel[data-view="{view}"]')
        assert panel.is_visible() and panel.inner_text().strip(), view
    # Insights: one row per finding, ranked; a click opens its row in the table, selected and in view.
    page.click('[data-testid="view-insights"]')
    wait_rendered(page)
    items = page.locator('[data-testid="insight"]')
    assert items.count() == len(found)
    assert items.evaluate_all("els => els.map(e => e.dataset.rule)") == list(found["rule"])
    first = items.nth(0)
    assert found.iloc[0]["message"] in first.inner_text()
    first.click()
    wait_rendered(page)
    state = page_state(page, "torchprofReport")
    assert state["view"] == "table" and state["selected"] == found.iloc[0]["paths"][0]
    assert in_view(page, state["selected"])
    assert page.locator('[data-testid="scroller"] .tp-row.tp-selected').get_attribute("data-path") == state["selected"]
    # Top: the optimizer's step of every ProfilerStep#N is one line, its times added up.
    page.click('[data-testid="view-top"]')
    wait_rendered(page)
    names = page.locator('[data-testid="top-layers"] .tp-top-name .tp-label').all_text_contents()
    assert names.count("Optimizer.step#Adam.step") == 1 and [n for n in names if n.startswith("ProfilerStep#")] == ["ProfilerStep#*"]
    assert "in 4 steps" in page.locator('[data-testid="top-layers"] .tp-top-row').nth(names.index("Optimizer.step#Adam.step")).inner_text()
    page.uncheck('[data-testid="top-fold-steps"]')
    names = page.locator('[data-testid="top-layers"] .tp-top-name .tp-label').all_text_contents()
    assert sum(n.endswith("/Optimizer.step#Adam.step") for n in names) == 4, "unfolded: one line per step"
    # Steps: a bar per step, its parts adding up to the step's split; a click shows that step.
    page.click('[data-testid="view-steps"]')
    wait_rendered(page)
    bars = page.locator('[data-testid="step-bar"]')
    steps = prof.tree.steps
    assert bars.count() == len(steps) == 4
    assert page.locator('[data-testid="steps-spread"]').inner_text().startswith("4 steps · wall median")
    assert bars.nth(0).locator(".tp-part").count() >= 3  # forward, backward, optimizer at least
    bars.nth(2).click()
    wait_rendered(page)
    state = page_state(page, "torchprofReport")
    assert state["view"] == "table" and state["step"] == str(steps[2]["step"])
    ARTIFACTS.mkdir(exist_ok=True)
    page.click('[data-testid="view-steps"]')
    wait_rendered(page)
    page.locator('[data-testid="torchprof"]').screenshot(path=str(ARTIFACTS / "answers-steps-970.png"))
    assert page.errors == []


def test_the_memory_view_shows_what_the_peak_is_made_of(browser, resnet18_step, tmp_path):
    prof = resnet18_step[0]
    path = tmp_path / "resnet.html"
    prof.to_html(str(path))
    page = open_report(browser, path, height=900)
    page.click('[data-testid="view-memory"]')
    wait_rendered(page)
    assert page.locator('[data-testid="memory-line"]').count() == 1  # today's line stays
    bar = page.locator('[data-testid="memory-makeup-bar"]')
    categories = bar.locator("[data-category]").evaluate_all("els => els.map(e => e.dataset.category)")
    # A training step's peak holds its parameters and their gradients (the SGD has no state).
    assert {"parameter", "gradient"} <= set(categories)
    widths = bar.locator("[data-category]").evaluate_all("els => els.map(e => parseFloat(e.style.width))")
    assert sum(widths) == pytest.approx(100, abs=0.01)
    layers = page.locator('[data-testid="memory-makeup-layers"] li')
    assert 1 <= layers.count() <= 10
    top = layers.nth(0).locator(".tp-link")
    name = top.text_content()
    assert name.startswith("ResNet.")
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator('[data-testid="torchprof"]').screenshot(path=str(ARTIFACTS / "answers-memory-970.png"))
    top.click()
    wait_rendered(page)
    state = page_state(page, "torchprofReport")
    assert state["view"] == "table" and state["selected"] == name and in_view(page, name)
    assert page.errors == []


def test_search_finds_module_types_and_marks_path_matches(browser, resnet18_step, tmp_path):
    prof = resnet18_step[0]
    path = tmp_path / "search.html"
    prof.to_html(str(path), min_pct=0)
    page = open_report(browser, path)
    page.fill('[data-testid="search"]', "BatchNorm2d")
    wait_rendered(page)
    rows = page.locator('[data-testid="scroller"] [role="row"][data-path]')
    tags = page.locator('[data-testid="scroller"] .tp-tag mark').all_text_contents()
    assert tags and set(tags) == {"BatchNorm2d"}, "the class is what matched, and it is marked"
    assert "ResNet.bn1" in rows.evaluate_all("rs => rs.map(r => r.dataset.path)")
    page.fill('[data-testid="search"]', "path:layer1.0.co")
    wait_rendered(page)
    marked = page.locator('[data-testid="scroller"] [role="row"][data-path] .tp-label').evaluate_all(
        "ls => ls.filter(l => l.querySelector('mark')).map(l => [l.closest('[role=row]').dataset.path, l.querySelector('mark').textContent])")
    assert ["ResNet.layer1.0.conv1", "co"] in marked and ["ResNet.layer1.0.conv2", "co"] in marked
    assert not [p for p, _ in marked if "layer1.0.co" not in p.lower()], "only the rows the path matched"
    assert page.errors == []
