"""Shared fixtures: tiny hand-written models for exact expectations, the shared GPU traces."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: The real GPU traces: ``../shared/traces`` beside the repository, or ``$TORCHPROF_SHARED/traces``
#: (pointing it at an empty folder shows what a fresh clone, with nothing beside it, does).
SHARED_TRACES = Path(os.environ.get("TORCHPROF_SHARED") or REPO.parent / "shared") / "traces"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
# Printed tables fit the terminal's width ($COLUMNS first): the tests, their subprocesses included,
# read them at the default width whatever terminal (or pytest, which sets 80) runs them.
os.environ["COLUMNS"] = "120"


def shared_trace(name: str) -> Path:
    """A real trace from the shared traces. A missing one fails in CI (which must run them) and
    is skipped, saying why, anywhere else: a fresh clone has no ``../shared``."""
    path = SHARED_TRACES / name
    if not path.exists():
        if IN_CI:
            pytest.fail(f"{path} is missing: CI must run with ../shared beside the repository")
        pytest.skip(f"real-trace test: {path} is not here (a clone has no ../shared; CI runs these tests)")
    return path


@pytest.hookimpl(tryfirst=True)  # before pytest's own -m selection, so the markers added here count there
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that drive a browser or run notebooks are slow: ``pytest -m "not slow"`` leaves them out
    while iterating (CI runs everything). A test that uses the ``browser`` fixture is a browser test."""
    for item in items:
        if "browser" in getattr(item, "fixturenames", ()) and not item.get_closest_marker("browser"):
            item.add_marker(pytest.mark.browser)
        if item.get_closest_marker("browser") or item.get_closest_marker("notebook"):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium for the whole session (Debian's, driven by Playwright; see
    tests/browser_util.py). Chromium missing is a failure, never a skip."""
    from browser_util import chromium

    with chromium() as b:
        yield b


@pytest.fixture(autouse=True)
def _browser_contexts_closed(request: pytest.FixtureRequest):
    """The pages a test opened are closed when it ends: the session's browser keeps nothing of it."""
    yield
    if "browser" in request.fixturenames:
        for context in list(request.getfixturevalue("browser").contexts):
            context.close()


@pytest.fixture
def mlp():
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


@pytest.fixture(scope="session")
def resnet18_step():
    """One ResNet-18 (weights=None) training step profiled with memory, shared by the tests that
    read a real CNN's profile: ``(prof, step)``; ``step()`` runs another identical step."""
    import torch
    import torchvision

    import torchprof

    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(2, 3, 64, 64)

    def step():
        model(x).sum().backward()
        opt.step()
        opt.zero_grad()

    step()  # warm-up: first-call costs stay out of the profile
    for _ in range(3):
        with torchprof.Profiler(memory=True) as prof:
            step()
        # The tests read a step whose model holds most of its time, as it does on a machine to
        # itself: a stall under load outside the model (in the optimizer's step) once made that
        # step the costliest part. Such a profile is taken again.
        df = prof.df
        model_us = df.loc["ResNet", "cpu_us"]
        if model_us >= 0.5 * df.iloc[0]["cpu_us"] and df.loc[df["kind"] == "op", "cpu_us"].max() < model_us:
            break
    return prof, step


@pytest.fixture(scope="session", autouse=True)
def _ctrl_c_raises_keyboard_interrupt():
    """Python's own SIGINT handler for the session, as an interactive run has it: a launcher that
    starts the tests in the background (``cmd &`` in a non-interactive shell) hands them SIGINT
    ignored, and the tests of Ctrl-C need it to raise KeyboardInterrupt. Put back after."""
    import signal

    before = signal.getsignal(signal.SIGINT)
    if before is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    if before is signal.SIG_IGN:
        signal.signal(signal.SIGINT, before)


@pytest.fixture(autouse=True)
def _no_hooks_left_behind():
    """Every test must leave no global module hooks and no running profiler behind."""
    yield
    import torch
    from torch.nn.modules import module as nn_module

    assert not nn_module._global_forward_pre_hooks, "a test left a global forward pre-hook installed"
    assert not nn_module._global_forward_hooks, "a test left a global forward hook installed"
    assert not torch.autograd.profiler._is_profiler_enabled, "a test left a profiler running"


# -- memory: a hand-made model whose layers keep and make known amounts --------------------------------
def keep_and_temp_net():
    import torch
    from torch import nn

    class Keep(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            big = torch.ones(1 << 20)  # 4 MiB saved for backward
            ctx.save_for_backward(big)
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            (_big,) = ctx.saved_tensors  # what forward kept, released after backward
            return grad * 2

    class Saver(nn.Module):
        def forward(self, x):
            return Keep.apply(x)

    class Temp(nn.Module):
        def forward(self, x):
            t = torch.ones(2 << 20)  # an 8 MiB temporary
            return x + t.sum()

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.saver, self.temp, self.fc = Saver(), Temp(), nn.Linear(16, 16)

        def forward(self, x):
            return self.fc(self.temp(self.saver(x)))

    return Net()


@pytest.fixture(scope="module")
def keep_and_temp():
    """Net.saver keeps 4 MiB for backward, Net.temp makes an 8 MiB temporary: the peak."""
    import torch

    import torchprof

    torch.manual_seed(0)
    net = keep_and_temp_net()
    x = torch.randn(4, 16, requires_grad=True)
    net(x).sum().backward()
    with torchprof.Profiler(memory=True) as prof:
        net(x).sum().backward()
    return prof
