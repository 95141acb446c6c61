"""A real JupyterLab server and headless Chromium for end-to-end notebook tests.

The server runs from this interpreter (so the kernel sees the same torch, anywidget and the
editable torchprof), isolated from the user's Jupyter set-up by temporary config/data/runtime
directories, on 127.0.0.1 with no token. The page talks only to that server: every other
request is aborted (``browser_util.guard_network``), so nothing waits on the absent internet.

A test module gets the fixtures (``jupyter_server``, ``lab_page``, ``page_errors``) with
``pytest_plugins = ["jupyter_fixture"]``; the browser is the session's (``browser`` in conftest.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from browser_util import ARTIFACTS, guard_network

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Locator, Page

SERVER_START_TIMEOUT_S = 60.0
KERNEL_NAME = "python3"


@dataclass(frozen=True)
class JupyterServer:
    url: str
    """Base URL, e.g. ``http://127.0.0.1:40123/``."""
    root_dir: Path
    """Where notebooks opened by the tests live (the server's ``root_dir``)."""
    log_path: Path
    """The server's stdout+stderr, quoted when something goes wrong."""

    def lab_url(self, notebook: str) -> str:
        # A workspace of its own: JupyterLab reopens the tabs of the workspace it is given, so in
        # the shared one a notebook an earlier test left open would come back in front.
        return f"{self.url}lab/workspaces/tp-{uuid.uuid4().hex[:12]}/tree/{notebook}"

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write_isolated_jupyter_dirs(base: Path) -> dict[str, str]:
    """Temporary Jupyter dirs: a kernelspec bound to this interpreter and no news/update toast."""
    dirs = {name: base / name for name in ("path", "config", "data", "runtime")}
    for d in dirs.values():
        d.mkdir(parents=True)
    # A kernelspec named in the notebook metadata, or a "Select Kernel" dialog blocks the page.
    spec_dir = dirs["path"] / "kernels" / KERNEL_NAME
    spec_dir.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (torchprof tests)",
        "language": "python",
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    # The "get notified about news?" toast is a front-end setting, not a server flag.
    settings = dirs["config"] / "lab" / "user-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    return {
        "JUPYTER_PATH": str(dirs["path"]),
        "JUPYTER_CONFIG_DIR": str(dirs["config"]),
        "JUPYTER_DATA_DIR": str(dirs["data"]),
        "JUPYTER_RUNTIME_DIR": str(dirs["runtime"]),
    }


def _wait_until_up(proc: subprocess.Popen[bytes], url: str, log_path: Path) -> None:
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"JupyterLab exited with code {proc.returncode} before serving:\n"
                + log_path.read_text(errors="replace")[-4000:]
            )
        try:
            with urllib.request.urlopen(f"{url}api/status", timeout=2) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.2)
    raise RuntimeError(
        f"JupyterLab did not answer {url}api/status within {SERVER_START_TIMEOUT_S:.0f} s:\n"
        + log_path.read_text(errors="replace")[-4000:]
    )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM first (the server shuts its kernels down), then SIGKILL its process group if it
    hangs. Kernels run in sessions of their own; they exit when their parent server is gone
    (ipykernel watches ``JPY_PARENT_PID``)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=15)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def _server_command(port: int, root_dir: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--allow-root",  # CI runs as root; without it the server exits 1
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",  # otherwise it silently moves to another port
        "--IdentityProvider.token=",
        f"--ServerApp.root_dir={root_dir}",
        "--LabApp.expose_app_in_browser=True",  # window.jupyterapp: run cells by command
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.extension_manager=readonly",
        "--KernelManager.shutdown_wait_time=1",  # teardown: do not wait 5 s for a kernel to exit
    ]


def _start_server(root_dir: Path, env: dict[str, str], log_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    """The running server and its base URL. The port is free when probed, but another process
    (tests run in parallel on our machines) may take it before the server binds: then the
    server exits saying so, and a new port is tried."""
    attempts = 3
    for attempt in range(1, attempts + 1):
        port = _free_port()
        url = f"http://127.0.0.1:{port}/"
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                _server_command(port, root_dir),
                cwd=root_dir,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            _wait_until_up(proc, url, log_path)
            return proc, url
        except RuntimeError:
            _stop(proc)
            port_taken = f"port {port} is not available" in log_path.read_text(errors="replace")
            if not port_taken or attempt == attempts:
                raise
    raise AssertionError("unreachable")


@pytest.fixture(scope="session")
def jupyter_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    base = tmp_path_factory.mktemp("jupyter")
    root_dir = base / "root"
    root_dir.mkdir()
    env = {**os.environ, **_write_isolated_jupyter_dirs(base)}
    env.pop("JUPYTER_TOKEN", None)
    log_path = base / "server.log"
    proc, url = _start_server(root_dir, env, log_path)
    try:
        yield JupyterServer(url=url, root_dir=root_dir, log_path=log_path)
    finally:
        _stop(proc)


def write_notebook(path: Path, cells: list[str]) -> None:
    """A notebook of code cells bound to the test kernelspec (no kernel-picker dialog)."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": KERNEL_NAME, "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    nb.cells = [nbformat.v4.new_code_cell(src) for src in cells]
    nbformat.write(nb, str(path))


# -- browser --------------------------------------------------------------------------------------
@pytest.fixture
def page_errors() -> list[str]:
    """Uncaught exceptions thrown in the page (filled by ``lab_page``); a test asserts it empty."""
    return []


@pytest.fixture
def lab_page(
    request: pytest.FixtureRequest,
    browser: Browser,
    jupyter_server: JupyterServer,
    page_errors: list[str],
) -> Iterator[Page]:
    """A fresh browser context on the server, downloads allowed, page errors collected. When
    the test fails, the page as it was is saved to ``tests/artifacts/<test>-failure.png``."""
    from playwright.sync_api import expect

    # A cold kernel importing torch takes longer than expect()'s default 5 s.
    expect.set_options(timeout=60_000)
    context = browser.new_context(
        accept_downloads=True, viewport={"width": 1400, "height": 1000}, color_scheme="light"
    )
    guard_network(context)  # nothing may wait on the absent internet
    page = context.new_page()
    page.set_default_timeout(60_000)
    page.on("pageerror", lambda exc: page_errors.append(str(exc)))
    failed_before = request.session.testsfailed
    try:
        yield page
    finally:
        # The call's report is logged before teardown, so a failure has been counted by now.
        if request.session.testsfailed > failed_before:
            ARTIFACTS.mkdir(exist_ok=True)
            shot = ARTIFACTS / f"{request.node.name}-failure.png"
            try:
                page.screenshot(path=str(shot))
                print(f"\nfailure screenshot: {shot}")
            except Exception as exc:
                print(f"\nno failure screenshot ({exc})")
            print(f"JupyterLab server log (tail):\n{jupyter_server.log_tail()}")
        context.close()


# -- driving JupyterLab -----------------------------------------------------------------------
def open_notebook(page: Page, server: JupyterServer, name: str) -> None:
    """Open ``name`` and wait until its kernel is connected, so cells can run."""
    page.goto(server.lab_url(name))
    page.wait_for_function(
        """() => {
            const app = window.jupyterapp;
            const panel = app && app.shell.currentWidget;
            return !!(panel && panel.sessionContext && panel.sessionContext.session
                      && panel.sessionContext.session.kernel
                      && panel.sessionContext.session.kernel.connectionStatus === 'connected'
                      && panel.content && panel.content.widgets.length > 0);
        }"""
    )


def execute_command(page: Page, command: str, args: dict[str, Any] | None = None) -> Any:
    return page.evaluate("([cmd, args]) => window.jupyterapp.commands.execute(cmd, args)", [command, args or {}])


def run_all_cells(page: Page) -> None:
    """Run every cell; returns when they have all run (JupyterLab's command awaits them)."""
    execute_command(page, "notebook:run-all-cells")


def append_and_run_cell(page: Page, code: str) -> int:
    """Add a code cell at the end of the open notebook, run it and return its index (once it
    has run: the command awaits the execution, so its output is there or arriving)."""
    return page.evaluate(
        """async (code) => {
            const app = window.jupyterapp;
            const nb = app.shell.currentWidget.content;
            nb.activeCellIndex = nb.widgets.length - 1;
            await app.commands.execute('notebook:insert-cell-below');
            nb.activeCell.model.sharedModel.setSource(code);
            const index = nb.activeCellIndex;
            await app.commands.execute('notebook:run-cell');
            return index;
        }""",
        code,
    )


def cell(page: Page, index: int) -> Locator:
    """Cell ``index`` of the notebook in front. JupyterLab restores the tabs a test before left
    open (hidden behind this one), so cells are counted in the current panel only."""
    panel = page.evaluate("() => window.jupyterapp && window.jupyterapp.shell.currentWidget && window.jupyterapp.shell.currentWidget.id")
    scope = f'[id="{panel}"] ' if panel else ""
    return page.locator(f"{scope}.jp-Notebook .jp-Cell").nth(index)


STDOUT = '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stdout"]'
#: JupyterLab renders tracebacks with the stderr renderer too.
STDERR = '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'


def run_cell_after_widget_changes(page: Page, code: str) -> int:
    """:func:`append_and_run_cell` once the widget's last changes are in the kernel. ipywidgets
    keeps one change in flight and holds later ones until the kernel has answered it, so a cell
    run right after a click can run before the click's change arrives: a first, empty cell
    runs while the held change is sent behind it, and the cell that reads the state runs after."""
    append_and_run_cell(page, "pass")
    return append_and_run_cell(page, code)


def cell_stdout(page: Page, index: int) -> str:
    """What cell ``index`` printed; a failure quoting its whole output when it printed nothing
    (a traceback, most likely)."""
    from playwright.sync_api import expect

    area = cell(page, index).locator(".jp-OutputArea")
    stdout = area.locator(STDOUT)
    try:
        expect(stdout).to_have_count(1, timeout=10_000)
    except AssertionError:
        raise AssertionError(f"cell {index} printed nothing; its output:\n{area.inner_text()}") from None
    return stdout.inner_text()


def assert_no_stderr(page: Page) -> None:
    """No cell of the open notebook wrote to stderr or raised."""
    outputs = page.locator(f".jp-Notebook .jp-Cell {STDERR}").all_inner_texts()
    assert not outputs, "\n---\n".join(outputs)


__all__ = [
    "ARTIFACTS",
    "JupyterServer",
    "append_and_run_cell",
    "assert_no_stderr",
    "cell",
    "cell_stdout",
    "execute_command",
    "jupyter_server",
    "lab_page",
    "open_notebook",
    "page_errors",
    "run_all_cells",
    "write_notebook",
]
