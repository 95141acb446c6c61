"""A profile in a notebook is never an error box: interactive where the front end can run the
widget, the static tree table everywhere else.

In a real JupyterLab: the notebook runs (widgets show, their static tables are hidden), is saved,
its kernel is shut down, and it is reopened: JupyterLab does not save widget state, so every
widget's model is gone, and each profile must then show its static table, a left-aligned tree,
and no "Error displaying widget". A notebook run elsewhere (nbclient: untrusted, never signed)
opens the same way. Offline nbconvert (with and without saved widget state), a GitHub-like page
(every style stripped) and the terminal IPython show the table too.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

pytest.register_assert_rewrite("jupyter_fixture")
from playwright.sync_api import Locator, Page, expect  # noqa: E402

from jupyter_fixture import (  # noqa: E402
    ARTIFACTS,
    JupyterServer,
    assert_no_stderr,
    cell,
    execute_command,
    open_notebook,
    run_all_cells,
    write_notebook,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]
pytest_plugins = ["jupyter_fixture"]

SETUP = (
    "import torch, torchprof\n"
    "torch.set_num_threads(1)\n"
    "torch.manual_seed(0)\n"
    "model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Linear(16, 4)))\n"
    "with torchprof.Profiler() as prof:\n"
    "    model(torch.randn(2, 8)).sum().backward()"
)
#: Each way a notebook shows a profile: the result, a widget of it, the cell magic; and a comparison.
CELLS = [SETUP, "prof", "prof.widget(min_pct=0)", "%load_ext torchprof", "%%torchprof\nmodel(torch.randn(2, 8)).sum().backward()",
         "torchprof.compare(prof, prof)"]  # fmt: skip
PROFILE_CELLS = (1, 2, 4)
COMPARE_CELL = 5  # its static view is the diff table as preformatted text
FALLBACK = ".torchprof-fallback"
ERROR = "Error displaying widget"


def _kernels(server: JupyterServer) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"{server.url}api/kernels", timeout=10) as resp:
        return json.loads(resp.read())


def _shut_down_kernels(page: Page, server: JupyterServer) -> None:
    """Shut every session and kernel down, as the Running panel does (the page carries the
    server's XSRF token), and wait until the server lists none."""
    page.evaluate("async () => { await window.jupyterapp.serviceManager.sessions.shutdownAll(); "
                  "await window.jupyterapp.serviceManager.kernels.shutdownAll(); }")
    deadline = time.monotonic() + 30
    while _kernels(server) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _kernels(server)


def _wait_saved(path: Path, outputs: int) -> dict[str, Any]:
    """The notebook as written to disk once it holds ``outputs`` display outputs."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        nb = json.loads(path.read_text(encoding="utf-8"))
        if sum(o["output_type"] == "display_data" for c in nb["cells"] for o in c.get("outputs", [])) >= outputs:
            return nb
        time.sleep(0.2)
    raise AssertionError(f"{path.name} was not saved with its outputs")


def _assert_left_aligned_tree(table: Locator) -> None:
    """Names start at the left of their cell, after guides that grow with the depth: the tree
    is visible (Jupyter's stylesheet right-aligns table cells, which hid it)."""
    rows = table.locator("tbody tr").evaluate_all(
        """rows => rows.map(r => {
            const td = r.querySelector('td');
            const guide = td.firstElementChild;
            const range = document.createRange();
            range.setStartAfter(guide);
            range.setEndAfter(td.lastChild);
            return {align: getComputedStyle(td).textAlign, cell: td.getBoundingClientRect().left,
                    name: range.getBoundingClientRect().left, guide: guide.textContent, text: td.textContent};
        })"""
    )
    # profile, Sequential and its two children at least (which open further follows the timings: the hot path)
    assert len(rows) >= 4, rows
    assert {r["align"] for r in rows} <= {"left", "start", "-webkit-left"}, rows  # the last: from align="left"
    root = rows[0]
    assert root["name"] - root["cell"] < 16, root  # the root's name at the cell's left edge
    depth = [len(r["guide"]) for r in rows]
    assert len(set(depth)) >= 3, rows
    by_depth = sorted(zip(depth, [r["name"] for r in rows]))
    for (d1, x1), (d2, x2) in itertools.pairwise(by_depth):
        if d2 > d1:
            assert x2 > x1 + 8, (rows, d1, d2)  # deeper rows start further right


def _profile_outputs(page: Page) -> list[Locator]:
    return [cell(page, i) for i in PROFILE_CELLS]


def test_reopened_without_a_kernel_every_profile_shows_its_table_and_no_error(
    jupyter_server: JupyterServer, lab_page: Page, browser: Any, page_errors: list[str]
) -> None:
    name = "reopen.ipynb"
    path = jupyter_server.root_dir / name
    write_notebook(path, CELLS)
    page = lab_page
    open_notebook(page, jupyter_server, name)
    run_all_cells(page)
    assert_no_stderr(page)
    for out in [*_profile_outputs(page), cell(page, COMPARE_CELL)]:  # live: the widget, its table hidden
        expect(out.locator('[data-testid="torchprof"]')).to_be_visible()
        expect(out.locator(FALLBACK)).to_be_hidden()
    execute_command(page, "docmanager:save")
    saved = _wait_saved(path, 2 * len(PROFILE_CELLS) + 2)
    assert "widgets" not in saved["metadata"]  # JupyterLab's default: no widget state saved
    _shut_down_kernels(page, jupyter_server)
    page.close()

    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        reopened = context.new_page()
        reopened.set_default_timeout(60_000)
        reopened.on("pageerror", lambda exc: page_errors.append(str(exc)))
        open_notebook(reopened, jupyter_server, name)  # a new kernel, which has none of the widgets
        for out in _profile_outputs(reopened):
            table = out.locator(f"{FALLBACK} table")
            expect(table).to_be_visible()
            _assert_left_aligned_tree(table)
            # JupyterLab's error, once its widget manager has given up on the model: hidden.
            error = out.locator(".jp-OutputArea-output.jupyter-widgets")
            expect(error).to_have_text(re.compile(ERROR))
            expect(error).to_be_hidden()
        diff = cell(reopened, COMPARE_CELL)
        expect(diff.locator(f"{FALLBACK} pre")).to_be_visible()
        expect(diff.locator(f"{FALLBACK} pre")).to_contain_text("Sequential")
        expect(diff.locator(".jp-OutputArea-output.jupyter-widgets")).to_be_hidden()
        assert not [t for t in reopened.get_by_text(re.compile(ERROR)).all() if t.is_visible()]
        assert not [t for t in reopened.get_by_text("Loading widget").all() if t.is_visible()]
        assert "├──" in _profile_outputs(reopened)[0].locator(f"{FALLBACK} table").inner_text()
        ARTIFACTS.mkdir(exist_ok=True)
        reopened.screenshot(path=str(ARTIFACTS / "reopened-notebook.png"), full_page=True)
    finally:
        context.close()
    assert not page_errors, page_errors


def test_a_notebook_run_elsewhere_opens_untrusted_with_every_table_and_no_error(
    jupyter_server: JupyterServer, lab_page: Page, tmp_path: Path
) -> None:
    # Run by nbclient (as CI and papermill do): never signed, so JupyterLab opens it untrusted,
    # sanitises the HTML (no <style>) and does not run widgets.
    import nbformat

    from test_notebooks import execute_cells

    executed = execute_cells(CELLS, tmp_path)
    nb = nbformat.v4.new_notebook(cells=executed)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    name = "untrusted.ipynb"
    nbformat.write(nb, str(jupyter_server.root_dir / name))
    open_notebook(lab_page, jupyter_server, name)
    for out in _profile_outputs(lab_page):
        table = out.locator(f"{FALLBACK} table")
        expect(table).to_be_visible()
        _assert_left_aligned_tree(table)
    assert not [t for t in lab_page.get_by_text(re.compile(ERROR)).all() if t.is_visible()]


# -- nbconvert, GitHub-like viewers, the terminal ---------------------------------------------------------
@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The notebook run by nbclient, which saves the widget state (as JupyterLab can be told to)."""
    import nbformat

    from test_notebooks import execute

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    execute(nb, tmp_path_factory.mktemp("executed"))
    assert "widgets" in nb.metadata
    return nb


@pytest.mark.parametrize("widget_state", [True, False], ids=["saved-widget-state", "no-widget-state"])
def test_nbconvert_offline_shows_every_profile_as_a_tree(browser, executed, widget_state, tmp_path):
    from nbconvert import HTMLExporter

    from browser_util import guard_network

    nb = copy.deepcopy(executed)
    if not widget_state:
        nb.metadata.pop("widgets")
    html, _ = HTMLExporter(template_name="lab").from_notebook_node(nb)
    assert "object at 0x" not in html and "&lt;torchprof widget" not in html  # no repr instead of the table
    page_file = tmp_path / "notebook.html"
    page_file.write_text(html, encoding="utf-8")
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    guard_network(context)  # offline: the widget manager nbconvert links from a CDN never loads
    page = context.new_page()
    page.goto(page_file.as_uri())
    tables = page.locator(f"{FALLBACK} table")
    expect(tables).to_have_count(len(PROFILE_CELLS))
    for i in range(len(PROFILE_CELLS)):
        expect(tables.nth(i)).to_be_visible()
        _assert_left_aligned_tree(tables.nth(i))
    expect(page.locator(f"{FALLBACK} pre")).to_have_count(1)  # the comparison's diff table
    expect(page.locator(f"{FALLBACK} pre")).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / f"nbconvert-{'state' if widget_state else 'no-state'}.png"), full_page=True)
    context.close()


def test_a_viewer_that_strips_every_style_still_shows_a_left_aligned_tree(browser, executed, tmp_path):
    # GitHub and nbviewer-like sanitizers drop <style>, style attributes and scripts; their own
    # stylesheets may right-align cells as Jupyter's does. align= and the text guides remain.
    from browser_util import guard_network

    output = next(o for o in executed.cells[1].outputs if "text/html" in o.get("data", {}))
    stripped = re.sub(r"<style>.*?</style>", "", output["data"]["text/html"], flags=re.S)
    stripped = re.sub(r' style="[^"]*"', "", stripped)
    assert "style" not in stripped and "<script" not in stripped
    page_file = tmp_path / "github.html"
    page_file.write_text(f"<!DOCTYPE html><meta charset='utf-8'><style>td,th{{padding:4px}} th{{text-align:center}}</style>{stripped}",
                         encoding="utf-8")  # fmt: skip
    context = browser.new_context()
    guard_network(context)
    page = context.new_page()
    page.goto(page_file.as_uri())
    _assert_left_aligned_tree(page.locator(f"{FALLBACK} table"))
    context.close()


def test_the_terminal_ipython_shows_a_widget_and_a_profile_as_the_table(mlp, capsys):
    import torch
    from IPython.testing.globalipapp import get_ipython

    import torchprof

    with torchprof.Profiler() as prof:
        mlp(torch.randn(2, 8)).sum().backward()
    ip = get_ipython()
    ip.user_ns["prof"] = prof
    for source in ("prof", "prof.widget()", "from IPython.display import display; display(prof.result)"):
        capsys.readouterr()
        ip.run_cell(source)
        out = capsys.readouterr().out
        assert prof.table() in out, source
        assert "object at 0x" not in out, source
