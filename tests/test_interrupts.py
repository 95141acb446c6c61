"""Ctrl-C at any point of starting, stopping or reading a profile leaves the process able to profile.

Each internal step of the start and stop paths is made to raise KeyboardInterrupt in turn (before
or after it did its work); afterwards no hook is installed, torch's profiler is off (its Python
flag and its C++ state), fd 2 and the SIGINT handler are restored, a new Profiler gives a correct
tree, and the profile of a run that had finished is readable. Then real SIGINTs at random points,
and, through sys.settrace, an interrupt at every line of torchprof's code that an export, the first
read of a profile, a start and a stop run: a real SIGINT and a KeyboardInterrupt raised there, each in turn.
"""

from __future__ import annotations

import _thread
import contextlib
import functools
import gc
import json
import os
import random
import signal
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.autograd.profiler as autograd_profiler
import torch.profiler.profiler as torch_profiler
from torch.nn.modules import module as nn_module

import torchprof
from torchprof import _cli
from torchprof._capture import compiled, global_hooks, interrupts, kernels, module_names, quiet, session
from torchprof._tree.builder import TreeBuilder

X = torch.randn(2, 8)


class Inject:
    """Make ``owner.name`` raise KeyboardInterrupt on its ``on_call``-th call from now on: before
    doing anything, or ``after`` doing its work (as a Ctrl-C arriving just after it returns)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, *, after: bool = False, on_call: int = 1) -> None:
        real = getattr(owner, name)
        self.fired = False
        calls = [0]

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls[0] += 1
            if calls[0] != on_call:
                return real(*args, **kwargs)
            self.fired = True
            if after:
                real(*args, **kwargs)
            raise KeyboardInterrupt(f"injected {'after' if after else 'at'} {name}")

        monkeypatch.setattr(owner, name, wrapper)


class _QuietOs:
    """``quiet.py``'s view of ``os``, so its fd juggling can be interrupted without touching the
    ``os`` every other module (pytest's own capture included) uses."""

    def __init__(self) -> None:
        self.dup2 = os.dup2

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)


def torch_profiler_is_off() -> bool:
    """Ask torch's C++ side itself whether a profiling session is left: with profile_all_threads
    its state is global and no query shows it, but disabling when none runs only logs that none
    was found (and returns an empty result)."""
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            result = torch._C._autograd._disable_profiler()
        except RuntimeError:  # older torch: "Can't disable Kineto profiler when it's not running"
            return True
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        sink.seek(0)
        log = sink.read().decode(errors="replace")
    return "no active profiling session" in log and not result.experimental_event_tree()


def fd2() -> tuple[int, int]:
    st = os.fstat(2)
    return st.st_dev, st.st_ino


def assert_clean(stderr_before: tuple[int, int], capfd: pytest.CaptureFixture[str]) -> None:
    assert not nn_module._global_forward_pre_hooks and not nn_module._global_forward_hooks
    assert not nn_module._global_forward_hooks_always_called
    assert not autograd_profiler._is_profiler_enabled
    assert not torch._C._autograd._profiler_enabled()
    assert session._active is None
    assert torch_profiler_is_off()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert fd2() == stderr_before
    capfd.readouterr()
    os.write(2, b"stderr still works\n")
    assert capfd.readouterr().err == "stderr still works\n"


def assert_profiles_again(mlp: torch.nn.Module) -> None:
    with torchprof.Profiler() as again:
        mlp(X).sum().backward()
    df = again.df
    assert list(df.loc[["Sequential", "Sequential.0", "Sequential.1", "Sequential.2"], "calls"]) == [1, 1, 1, 1]
    assert df.loc["Sequential.0", "bwd_cpu_us"] > 0  # backward still reaches the layer
    assert "warnings" not in again.summary


# -- the start ----------------------------------------------------------------------------------------------
START_STEPS = [
    # torchprof registers its hook pair with torch once per process (the first time; the tests
    # below make it the first time) and puts the same pair back in torch's tables at each start.
    pytest.param(nn_module, "register_module_forward_pre_hook", False, 1, id="hook-install-pre-hook-at"),
    pytest.param(nn_module, "register_module_forward_pre_hook", True, 1, id="hook-install-pre-hook-after"),
    pytest.param(nn_module, "register_module_forward_hook", False, 1, id="hook-install-forward-hook-at"),
    pytest.param(nn_module, "register_module_forward_hook", True, 1, id="hook-install-forward-hook-after"),
    pytest.param(global_hooks.GlobalHooks, "show", False, 1, id="hook-reinstall-at"),
    pytest.param(global_hooks.GlobalHooks, "show", True, 1, id="hook-reinstall-after"),
    pytest.param(autograd_profiler, "_prepare_profiler", False, 1, id="torch-prepare-at"),
    pytest.param(autograd_profiler, "_prepare_profiler", True, 1, id="torch-prepare-after"),
    pytest.param(autograd_profiler, "_run_on_profiler_start", True, 1, id="torch-flag-up-after"),
    pytest.param(autograd_profiler, "_enable_profiler", False, 1, id="kineto-enable-at"),
    pytest.param(autograd_profiler, "_enable_profiler", True, 1, id="kineto-enable-after"),
    pytest.param(torch_profiler._KinetoProfile, "add_metadata_json", True, 1, id="torch-start-trace-metadata-after"),
    pytest.param(torch_profiler.profile, "start", True, 1, id="torch-start-after"),
    pytest.param(_QuietOs, "dup2", False, 1, id="quiet-redirect-at"),
    pytest.param(_QuietOs, "dup2", True, 1, id="quiet-redirect-after"),
    pytest.param(_QuietOs, "dup2", False, 2, id="quiet-restore-at"),
    pytest.param(_QuietOs, "dup2", True, 2, id="quiet-restore-after"),
]


@pytest.mark.parametrize(("owner", "name", "after", "on_call"), START_STEPS)
def test_ctrl_c_at_any_step_of_the_start_leaves_nothing_behind(owner, name, after, on_call, mlp, monkeypatch, capfd):
    before = fd2()
    if owner is global_hooks.GlobalHooks:  # a start that puts the registered pair back (the second)
        with torchprof.Profiler():
            mlp(X)
    else:  # the process's first start, which registers the pair with torch
        monkeypatch.setattr(global_hooks, "GLOBAL_HOOKS", global_hooks.GlobalHooks())
    quiet_os = _QuietOs()
    monkeypatch.setattr(quiet, "os", quiet_os)
    if owner is _QuietOs:  # fd 2 swapped around torch's start (kineto logs in this process)
        monkeypatch.setattr(quiet, "_kineto_silent", [False])
    injected = Inject(monkeypatch, quiet_os if owner is _QuietOs else owner, name, after=after, on_call=on_call)
    prof = torchprof.Profiler(shapes=name == "add_metadata_json")  # torch adds its metadata for recorded shapes
    with pytest.raises(KeyboardInterrupt, match="injected"):
        with prof:
            mlp(X)
    assert injected.fired
    monkeypatch.undo()
    assert_clean(before, capfd)
    with pytest.raises(torchprof.ProfilerError, match="nothing was profiled"):
        prof.df  # the start never completed: there is no profile, and it says so
    assert_profiles_again(mlp)


# -- the stop ------------------------------------------------------------------------------------------------
STOP_STEPS = [
    # (owner, name, after, on_call, whether what was recorded survives)
    pytest.param(global_hooks.GlobalHooks, "hide", False, 1, True, id="hook-removal-at"),
    pytest.param(global_hooks.GlobalHooks, "hide", True, 1, True, id="hook-removal-after"),
    pytest.param(autograd_profiler.profile, "__exit__", False, 1, True, id="torch-stop-trace-at"),
    pytest.param(autograd_profiler.profile, "__exit__", True, 1, True, id="torch-stop-trace-after"),
    pytest.param(torch_profiler.profile, "stop", False, 1, True, id="torch-stop-at"),
    pytest.param(torch_profiler.profile, "stop", True, 1, True, id="torch-stop-after"),
    pytest.param(autograd_profiler, "_disable_profiler", False, 1, True, id="kineto-disable-at"),
    # The Ctrl-C lands after torch's C++ stop returned and before its result was kept: lost.
    pytest.param(autograd_profiler, "_disable_profiler", True, 1, False, id="kineto-disable-after"),
    pytest.param(autograd_profiler, "_run_on_profiler_stop", False, 1, True, id="torch-flag-down-at"),
    pytest.param(_QuietOs, "dup2", False, 1, True, id="quiet-redirect-at"),
    pytest.param(_QuietOs, "dup2", True, 1, True, id="quiet-redirect-after"),
    pytest.param(_QuietOs, "dup2", False, 2, True, id="quiet-restore-at"),
    pytest.param(_QuietOs, "dup2", True, 2, True, id="quiet-restore-after"),
]


@pytest.mark.parametrize(("owner", "name", "after", "on_call", "kept"), STOP_STEPS)
def test_ctrl_c_at_any_step_of_the_stop_leaves_nothing_behind_and_keeps_the_profile(owner, name, after, on_call, kept, mlp,
                                                                                      monkeypatch, capfd):  # fmt: skip
    before = fd2()
    quiet_os = _QuietOs()
    monkeypatch.setattr(quiet, "os", quiet_os)
    if owner is _QuietOs:  # fd 2 swapped around torch's stop (kineto logs in this process)
        monkeypatch.setattr(quiet, "_kineto_silent", [False])
    injected = None
    with pytest.raises(KeyboardInterrupt, match="injected"):
        with torchprof.Profiler() as prof:
            mlp(X).sum().backward()
            # Armed inside the block, so it is the stop that is interrupted.
            injected = Inject(monkeypatch, quiet_os if owner is _QuietOs else owner, name, after=after, on_call=on_call)
    assert injected is not None and injected.fired
    monkeypatch.undo()
    assert_clean(before, capfd)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        df = prof.df
    if kept:
        assert list(df.loc[["Sequential.0", "Sequential.1", "Sequential.2"], "calls"]) == [1, 1, 1]
        assert df.loc["Sequential.0", "bwd_cpu_us"] > 0
        assert not [w for w in caught if issubclass(w.category, torchprof.ProfilerWarning)]
    else:  # readable, empty, and saying why
        assert len(df) == 1
        assert "4 module calls but the profile has none" in prof.summary["warnings"][0]
        assert [w for w in caught if issubclass(w.category, torchprof.ProfilerWarning)]
    assert prof.summary["wall_us"] > 0
    assert_profiles_again(mlp)


def test_ctrl_c_that_interrupts_the_body_and_then_the_stop_keeps_the_partial_profile(mlp, monkeypatch, capfd):
    class Stop(torch.nn.Module):
        def forward(self, x):
            Inject(monkeypatch, autograd_profiler, "_disable_profiler")  # the second Ctrl-C, in the stop
            raise KeyboardInterrupt("first")

    before = fd2()
    with pytest.raises(KeyboardInterrupt, match="injected"):
        with torchprof.Profiler() as prof:
            torch.nn.Sequential(mlp, Stop())(X)
    monkeypatch.undo()
    assert_clean(before, capfd)
    assert prof.df.loc["Sequential.0.0", "calls"] == 1
    assert prof.summary["interrupted"] == "KeyboardInterrupt: first"
    assert_profiles_again(mlp)


# -- reading the profile ---------------------------------------------------------------------------------------
READ_STEPS = [
    pytest.param(session, "result_columns", False, 1, id="result-reading-at"),
    pytest.param(session.CaptureSession, "cycle_columns", False, 1, id="cycle-at"),
    pytest.param(session.CaptureSession, "cycle_columns", True, 1, id="cycle-after"),
    pytest.param(TreeBuilder, "add", True, 1, id="tree-fold-after"),
    pytest.param(TreeBuilder, "finish", False, 1, id="tree-finish-at"),
    pytest.param(_QuietOs, "dup2", False, 1, id="trace-save-quiet-redirect-at"),
    pytest.param(_QuietOs, "dup2", True, 2, id="trace-save-quiet-restore-after"),
]


@pytest.mark.parametrize(("owner", "name", "after", "on_call"), READ_STEPS)
def test_ctrl_c_while_the_profile_is_read_can_be_retried_and_counts_nothing_twice(owner, name, after, on_call, mlp,
                                                                                   monkeypatch, capfd, tmp_path):  # fmt: skip
    before = fd2()
    with torchprof.Profiler() as prof:
        mlp(X).sum().backward()
    quiet_os = _QuietOs()
    monkeypatch.setattr(quiet, "os", quiet_os)
    injected = Inject(monkeypatch, quiet_os if owner is _QuietOs else owner, name, after=after, on_call=on_call)
    with pytest.raises(KeyboardInterrupt, match="injected"):
        prof.df  # the first read is interrupted
        # kineto's trace is written only when an export asks for it
        prof.export_chrome_trace(str(tmp_path / "interrupted.json"))
    assert injected.fired
    assert not (tmp_path / "interrupted.json").exists()
    monkeypatch.undo()
    df = prof.df
    assert list(df.loc[["Sequential", "Sequential.0", "Sequential.1", "Sequential.2"], "calls"]) == [1, 1, 1, 1]
    assert df.loc["Sequential.0", "bwd_cpu_us"] > 0
    trace = Path(prof.export_chrome_trace(str(tmp_path / "trace.json")))
    assert torchprof.load_trace(str(trace)).df.loc["Sequential.0", "calls"] == 1  # kineto's trace was kept
    assert_clean(before, capfd)


# -- real signals ------------------------------------------------------------------------------------------------
# A Ctrl-C that lands in a finalizer is reported by Python as ignored, as it would be for a user.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_random_sigints_never_leave_the_process_unable_to_profile(capfd):
    """A real SIGINT at a random point of a Profiler's start, run, stop or read, 60 times (fixed
    seed); after each, whether or not it interrupted anything, the process must be able to
    profile. Before the interrupt-safe lifecycle, about 1 run in 12 left torch's flag up."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[m for _ in range(10) for m in (torch.nn.Linear(16, 16), torch.nn.ReLU())])
    x = torch.randn(4, 16)

    def once() -> None:
        with torchprof.Profiler() as prof:
            model(x).sum().backward()
        assert prof.df.loc["Sequential.0", "calls"] == 1

    def settle() -> None:
        # A signal tripped just before the timer was disarmed is handled at the next check: here.
        for _ in range(3):
            with contextlib.suppress(KeyboardInterrupt):
                time.sleep(0.0005)

    before = fd2()
    once()
    t0 = time.perf_counter()
    once()
    span = time.perf_counter() - t0
    rng = random.Random(7)
    # The timer's handler delivers the SIGINT at the next point the interpreter checks for signals,
    # exactly as a Ctrl-C from the terminal.
    previous = signal.signal(signal.SIGALRM, lambda *_: _thread.interrupt_main())
    interrupted = 0
    try:
        for _ in range(60):
            try:
                signal.setitimer(signal.ITIMER_REAL, rng.uniform(1e-5, span))
                try:
                    once()
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
            except KeyboardInterrupt:
                interrupted += 1
            settle()
            assert not nn_module._global_forward_pre_hooks and not nn_module._global_forward_hooks
            assert not autograd_profiler._is_profiler_enabled and session._active is None
            assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
            assert fd2() == before
            once()  # profiles again, correctly
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    # The signals did land, mostly inside the runs (how many depends on the machine's load).
    assert interrupted > 10
    assert_clean(before, capfd)


def test_ctrl_c_inside_a_hook_is_not_blamed_on_another_profiler(mlp, monkeypatch):
    """A Ctrl-C that lands in torchprof's hook as a module call begins interrupts the forward; the
    profile used to warn that "a torch.profiler session started inside the block" dropped calls."""
    real, calls = module_names.ModuleNames.name, [0]

    def name(self, module, stack, args=()):
        calls[0] += 1
        if calls[0] == 3:  # the third module met: Sequential.1
            raise KeyboardInterrupt("in the hook")
        return real(self, module, stack, args)

    monkeypatch.setattr(module_names.ModuleNames, "name", name)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(KeyboardInterrupt, match="in the hook"):
            with torchprof.Profiler() as prof:
                mlp(X)
        df = prof.df
    assert list(df.loc[["Sequential", "Sequential.0"], "calls"]) == [1, 1]
    assert not any("torch.profiler session" in str(w.message) for w in caught)
    assert prof.summary["interrupted"] == "KeyboardInterrupt: in the hook"


# -- every line ----------------------------------------------------------------------------------------------------
PACKAGE = os.path.dirname(torchprof.__file__) + os.sep


class LineInterrupt:
    """A ``sys.settrace`` tracer that interrupts torchprof at the first run of the ``at``-th
    distinct line of its own code it meets: by raising KeyboardInterrupt there (``code``: as a
    callback, a handler of the user's, or a call on that line would), or by a real SIGINT
    (``signal``: handled by whatever SIGINT handler is installed, at that point of the stack, as a
    Ctrl-C from the terminal is). With ``at=None`` it only lists the lines, in the order met."""

    def __init__(self, at: int | None, kind: str) -> None:
        self.at, self.kind = at, kind
        self.lines: dict[tuple[str, int], int] = {}
        self.fired: tuple[str, int] | None = None

    def __call__(self, frame: Any, event: str, arg: Any) -> Any:
        if self.fired is not None or not frame.f_code.co_filename.startswith(PACKAGE):
            return None
        if event == "line":
            key = (frame.f_code.co_filename[len(PACKAGE):], frame.f_lineno)
            if key not in self.lines:
                self.lines[key] = len(self.lines)
                if self.lines[key] == self.at:
                    self.fired = key
                    sys.settrace(None)
                    if self.kind == "code":
                        raise KeyboardInterrupt(f"injected at {key[0]}:{key[1]}")
                    signal.raise_signal(signal.SIGINT)
        return self


class State:
    """What a step may change and must leave as it was."""

    def __init__(self) -> None:
        self.fd2 = fd2()
        self.streams = (sys.stdout, sys.stderr)
        self.filters = warnings.filters
        self.kineto_level = os.environ.get("KINETO_LOG_LEVEL")

    def problems(self) -> list[str]:
        found = []
        if nn_module._global_forward_pre_hooks or nn_module._global_forward_hooks or global_hooks.GLOBAL_HOOKS.owner is not None:
            found.append("module hooks left installed")
        if autograd_profiler._is_profiler_enabled or torch._C._autograd._profiler_enabled():
            found.append("torch's profiler left on")
        if session._active is not None:
            found.append("a session left running")
        if signal.getsignal(signal.SIGINT) is not signal.default_int_handler or interrupts._DEFERRAL.holders:
            found.append("SIGINT still held")
        if interrupts._DEFERRAL.pending:
            found.append("a Ctrl-C held and never raised")
        if fd2() != self.fd2:
            found.append("fd 2 not restored")
        if (sys.stdout, sys.stderr) != self.streams:
            found.append("sys.stdout/sys.stderr not restored")
        if warnings.filters is not self.filters:
            found.append("warnings filters not restored")
        if os.environ.get("KINETO_LOG_LEVEL") != self.kineto_level:
            found.append("KINETO_LOG_LEVEL left set")
        if not torch.is_grad_enabled() or torch._C._len_torch_dispatch_stack():
            found.append("grad mode or a dispatch mode left")
        if "torch._dynamo" in sys.modules and sys.modules["torch._dynamo"].config.disable:
            found.append("Dynamo left disabled")
        if compiled._depth or compiled._patch is not None:
            found.append("Inductor's config left patched")
        if compiled._hiders:
            found.append("a tracker left hiding hooks from compiles")
        if kernels._active:
            found.append("compiled kernels left rebound")
        return found


def _traced(tracer: LineInterrupt | None, fn: Any) -> bool:
    """Run ``fn`` under ``tracer``; whether it raised KeyboardInterrupt. The cyclic GC is paused
    meanwhile: it could run an earlier step's finalizers (a session's temporary trace removed) at
    a traced line, where the interrupt is unraisable, whenever the GC's thresholds happen to fall."""
    collecting = gc.isenabled()
    gc.disable()
    sys.settrace(tracer)
    try:
        fn()
    except KeyboardInterrupt:
        return True
    finally:
        sys.settrace(None)
        if collecting:
            gc.enable()
    return False


def _mlp(batch_norm: bool = False) -> torch.nn.Module:
    torch.manual_seed(0)
    norm = [torch.nn.BatchNorm1d(16)] if batch_norm else []
    return torch.nn.Sequential(torch.nn.Linear(8, 16), *norm, torch.nn.ReLU(), torch.nn.Linear(16, 4))


def _calls(tree: Any, path: str) -> int:
    cols = tree.columns
    return cols["calls"][cols["path"].index(path)] if path in cols["path"] else 0


def _export_step(tmp: Path) -> Any:
    model = _mlp()

    def step(tracer: LineInterrupt) -> tuple[bool, list[str]]:
        with torchprof.Profiler(flops=False) as prof:
            model(X).sum().backward()
        prof.tree  # what the export reads first
        path = tmp / "trace.json"
        path.unlink(missing_ok=True)
        raised = _traced(tracer, lambda: prof.export_chrome_trace(str(path)))
        problems = []
        if path.exists():
            json.loads(path.read_bytes())  # never half a file
        again = prof.export_chrome_trace(str(path))
        if _calls(torchprof.load_trace(again, flops=False).tree, "Sequential.0") != 1:
            problems.append("the export done again lost events")
        return raised, problems

    return step


def _read_step(tmp: Path) -> Any:
    """The first read of a profile (the tree built from torch's result, the FLOPs counted, with
    the int-list arguments of its convolution read from kineto's event list): a Ctrl-C while a
    big profile is read."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv1d(8, 16, 3), torch.nn.BatchNorm1d(16), torch.nn.ReLU())
    with torchprof.Profiler() as prof:
        model(X[:, :, None].expand(-1, -1, 5)).sum().backward()
    build = prof.result._build
    expected = build().columns

    def step(tracer: LineInterrupt) -> tuple[bool, list[str]]:
        raised = _traced(tracer, build)
        return raised, []

    def check() -> None:
        tree = build()  # read again after every interrupt: the same profile
        assert tree.columns["flops"] == expected["flops"] and tree.columns["path"] == expected["path"]

    step.check = check  # type: ignore[attr-defined]
    return step


def _with_kineto(state: str, run: Callable[[LineInterrupt], tuple[bool, list[str]]]) -> Any:
    """``run`` as a step, each time with what torchprof knows of kineto's logging set to ``state``:
    ``silent`` as the process has it (the default since torchprof's first start), ``logging`` (fd
    2 swapped around torch's start and stop), ``first`` (the start that decides, setting kineto's
    level for it); the process's own put back after."""

    def step(tracer: LineInterrupt) -> tuple[bool, list[str]]:
        kept = list(quiet._kineto_silent), list(quiet._clean_start)
        if state == "logging":
            quiet._kineto_silent[:] = [False]
        elif state == "first":
            quiet._kineto_silent.clear()
            quiet._clean_start.clear()
        try:
            return run(tracer)
        finally:
            quiet._kineto_silent[:], quiet._clean_start[:] = kept

    return step


def _start_step(tmp: Path, kineto: str = "silent") -> Any:
    model = _mlp()

    def run(tracer: LineInterrupt) -> tuple[bool, list[str]]:
        prof = torchprof.Profiler(flops=False)
        ran = []

        def block() -> None:
            with prof:  # a with statement: the Ctrl-C lands in its __enter__ (start)
                sys.settrace(None)
                model(X)
                ran.append(True)

        raised = _traced(tracer, block)
        problems = []
        if ran and tracer.fired is not None:
            problems.append("the Ctrl-C was held until the block ended")  # it lands as start() returns
        elif ran and _calls(prof.tree, "Sequential.0") != 1:
            problems.append("a start that completed recorded nothing")
        if not ran:
            with pytest.raises(torchprof.ProfilerError, match="nothing was profiled"):
                prof.df
        return raised, problems

    return _with_kineto(kineto, run)


def _stop_step(tmp: Path, kineto: str = "silent") -> Any:
    model = _mlp()

    def run(tracer: LineInterrupt) -> tuple[bool, list[str]]:
        prof = torchprof.Profiler(flops=False)

        def block() -> None:
            with prof:
                model(X).sum().backward()
                sys.settrace(tracer)  # from here: the with statement's exit, __exit__ (stop)

        raised = _traced(None, block)
        problems = []
        if session._active is not None:
            # Only for an interrupt before any line of __exit__ ran (its first line): the next
            # Profiler stops the one its with block left running, and says so.
            with pytest.warns(torchprof.ProfilerWarning, match="was still running after its with block had ended"):
                with torchprof.Profiler(flops=False):
                    pass
            problems.append("recovered")
        if _calls(prof.tree, "Sequential.0") != 1:
            problems.append("the profile was lost")
        return raised, problems

    return _with_kineto(kineto, run)


STEPS = {
    "export": _export_step,
    "read": _read_step,
    "start": _start_step,
    "stop": _stop_step,
    "start, fd 2 swapped": functools.partial(_start_step, kineto="logging"),
    "stop, fd 2 swapped": functools.partial(_stop_step, kineto="logging"),
    "start, kineto's first": functools.partial(_start_step, kineto="first"),
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["signal", "code"])
@pytest.mark.parametrize("name", list(STEPS))
def test_an_interrupt_at_any_line_of_a_step_leaves_the_process_as_it_was(name, kind, tmp_path, capfd):
    """Export, the first read, start and stop, each interrupted in turn at every line of torchprof's own
    code it runs (the first time each runs), by a real SIGINT and by a KeyboardInterrupt raised
    there: each time the interrupt reaches the caller, nothing the step changed is left changed
    (hooks, torch's profiler, SIGINT, fd 2, sys.stdout/sys.stderr, warnings, grad and dispatch
    modes, configs), the step can be done again, and a profile that was recorded is kept."""
    step = STEPS[name](tmp_path)
    step(LineInterrupt(None, kind))  # first runs import modules (lines run once per process)
    counting = LineInterrupt(None, kind)
    step(counting)
    state = State()
    assert not state.problems()
    lines = list(counting.lines)
    survived, recovered, failures = 0, 0, []
    for at in range(len(lines)):
        tracer = LineInterrupt(at, kind)
        raised, problems = step(tracer)
        if tracer.fired is None:
            continue  # this run took another path and met fewer lines
        left = state.problems()
        if "recovered" in problems:
            problems.remove("recovered")
            recovered += 1
        if not raised:
            problems.append("the interrupt was lost")
        if problems or left:
            failures.append(f"{tracer.fired[0]}:{tracer.fired[1]}: {', '.join(problems + left)}")
            _repair(state)
        else:
            survived += 1
    getattr(step, "check", lambda: None)()
    capfd.readouterr()
    with capfd.disabled():
        print(f"\n{name} ({kind}): {survived} of {len(lines)} interrupts survived"
              f"{f', {recovered} by the next Profiler' if recovered else ''}")
    assert not failures, "\n".join(failures)
    assert survived > 0.9 * len(lines)  # (the few others ran on a shorter path)


def _repair(state: State) -> None:
    """Put the process back after a failed case, so one failure does not cascade."""
    nn_module._global_forward_pre_hooks.clear()
    nn_module._global_forward_hooks.clear()
    global_hooks.GLOBAL_HOOKS.owner = None
    global_hooks.GLOBAL_HOOKS._in_tables = False
    with contextlib.suppress(RuntimeError):
        torch_profiler_is_off()
    autograd_profiler._is_profiler_enabled = False
    session._active = None
    interrupts._DEFERRAL.holders.clear()
    interrupts._DEFERRAL.pending = False
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.stdout, sys.stderr = state.streams
    warnings.filters = state.filters
    if state.kineto_level is None:
        os.environ.pop("KINETO_LOG_LEVEL", None)
    if compiled._patch is not None:
        compiled._patch.revert()
    compiled._depth, compiled._patch = 0, None
    compiled._hiders.clear()
    compiled._capturing.clear()
    torch.set_grad_enabled(True)
    while torch._C._len_torch_dispatch_stack():
        torch.utils._python_dispatch._pop_mode()


# -- the entry points ---------------------------------------------------------------------------------------------
def test_cli_prints_the_partial_profile_and_exits_130_when_ctrl_c_lands_in_the_stop(tmp_path, monkeypatch, capsys):
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\n"
        "import torch.autograd.profiler as ap\n"
        "real = ap._disable_profiler\n"
        "def interrupted():\n"
        "    real()\n"
        "    raise KeyboardInterrupt\n"
        "net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU())\n"
        "net(torch.randn(4, 8)).sum().backward()\n"
        "ap._disable_profiler = interrupted  # the stop that follows the script is interrupted\n"
    )
    real = autograd_profiler._disable_profiler
    try:
        code = _cli.main([str(script)])
    finally:
        autograd_profiler._disable_profiler = real
    out, err = capsys.readouterr()
    assert "3 module calls but the profile has none" in out  # torch's result was lost with the interrupt: said once
    assert code == 130
    assert "(incomplete: the script did not finish)" in out
    assert err.endswith("KeyboardInterrupt\n")
    assert not autograd_profiler._is_profiler_enabled and session._active is None
    assert torch_profiler_is_off()


def test_magic_shows_the_partial_profile_when_ctrl_c_lands_in_the_stop(monkeypatch, capsys):
    from IPython.testing.globalipapp import get_ipython

    ip = get_ipython()
    ip.run_line_magic("load_ext", "torchprof")
    try:
        ip.user_ns["model"] = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU())
        ip.user_ns["x"] = X
        ip.user_ns["arm"] = lambda: Inject(monkeypatch, autograd_profiler, "_run_on_profiler_stop")
        with pytest.raises(KeyboardInterrupt, match="injected"):
            ip.run_cell_magic("torchprof", "--text", "model(x).sum().backward()\narm()")
        monkeypatch.undo()
        out = capsys.readouterr().out
        prof = ip.user_ns["_torchprof"]
        assert prof.df.loc["model.0", "calls"] == 1 and "model" in out
        assert not autograd_profiler._is_profiler_enabled and session._active is None
        ip.run_cell_magic("torchprof", "--text", "model(x)")  # the next profile starts cleanly
        assert ip.user_ns["_torchprof"].df.loc["model.0", "calls"] == 1
    finally:
        for name in ("model", "x", "arm", "_torchprof"):
            ip.user_ns.pop(name, None)
        ip.run_line_magic("unload_ext", "torchprof")
        capsys.readouterr()
