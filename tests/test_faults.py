"""Faults and hostile input: an interrupt in any write, a module planted beside the traces, step
names and strings that must round-trip, trees deep enough to be quadratic, reading that must not
run or write anything of the user's."""

from __future__ import annotations

import gc
import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import torchprof
from synthetic import ev, training_step

FILES = os.path.join(os.path.dirname(torchprof.__file__), "_files.py")


def result_of(events: list[dict], **meta: Any) -> Any:
    from synthetic import build
    from torchprof._records import Recording
    from torchprof._result import Result

    return Result(build(events), Recording(modules={}, wall_us=None, meta=dict(meta)))


# -- every write is atomic ---------------------------------------------------------------------------------
class WriteInterrupt:
    """A ``sys.setprofile`` hook that interrupts torchprof's file writing (``_files.py``, where every
    write goes) at its ``at``-th event there: entering or leaving one of its functions, or just
    before or after a call it makes into C (``os.open``, ``write``, ``os.replace``): the points where
    Python handles a real Ctrl-C. By raising KeyboardInterrupt (``code``), or by a real SIGINT
    handled there (``signal``). (Not ``sys.settrace``'s lines: on CPython 3.11 an exception raised
    at a ``try:`` line escapes the handlers around it, which no real Ctrl-C can do.)"""

    def __init__(self, at: int, kind: str) -> None:
        self.at, self.kind, self.seen, self.fired = at, kind, 0, False

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if self.fired or frame.f_code.co_filename != FILES:
            return
        self.seen += 1
        if self.seen == self.at:
            self.fired = True
            sys.setprofile(None)
            if self.kind == "code":
                raise KeyboardInterrupt(f"injected at {event} of _files.py:{frame.f_lineno}")
            signal.raise_signal(signal.SIGINT)


def _writers(tmp: Path) -> dict[str, Callable[[str], Any]]:
    import torch

    from torchprof._views.frame import write_csv

    prof = result_of(training_step())
    model = torch.nn.Linear(4, 2)
    with torchprof.Profiler(flops=False) as live:
        model(torch.randn(2, 4))
    live.tree
    cmp = torchprof.compare(prof, prof)
    return {
        "save": prof.save,
        "save .gz": lambda p: prof.save(p + ".gz"),
        "to_html": prof.to_html,
        "to_markdown": prof.to_markdown,
        "export_stacks": prof.export_stacks,
        "export_chrome_trace": live.export_chrome_trace,
        "csv": lambda p: write_csv(prof.df, p),
        "compare.to_html": cmp.to_html,
    }


@pytest.mark.parametrize("kind", ["code", "signal"])
def test_an_interrupt_at_any_line_of_any_write_leaves_the_old_file_or_the_new_one_and_no_temporary(kind, tmp_path):
    outcomes: dict[str, dict[str, int]] = {}
    for name, write in _writers(tmp_path).items():
        folder = tmp_path / name.replace(" ", "_").replace(".", "_")
        folder.mkdir()
        target = folder / "out"
        path = str(target) + (".gz" if name.endswith(".gz") else "")
        write(str(target))
        new = Path(path).read_bytes()
        old = b"an older, complete file\n"
        counts = {"old": 0, "new": 0}
        at = 1
        while True:
            Path(path).write_bytes(old)
            tracer = WriteInterrupt(at, kind)
            collecting = gc.isenabled()
            gc.disable()  # (a finalizer run at that point would swallow the interrupt)
            sys.setprofile(tracer)
            try:
                write(str(target))
            except KeyboardInterrupt:
                pass
            finally:
                sys.setprofile(None)
                if collecting:
                    gc.enable()
            if not tracer.fired:
                break
            now = Path(path).read_bytes()
            assert now in (old, new), f"{name}: an interrupt at line {at} of its write left {len(now)} other bytes"
            counts["old" if now == old else "new"] += 1
            assert sorted(p.name for p in folder.iterdir()) == [Path(path).name], f"{name}: interrupted at line {at}"
            at += 1
        assert counts["old"] > 0, name  # the interrupts did land inside the write
        outcomes[name] = counts
    print(kind, outcomes)


def test_a_write_into_a_missing_folder_says_so_and_a_failed_write_keeps_the_old_file(tmp_path, monkeypatch):
    prof = result_of(training_step())
    with pytest.raises(FileNotFoundError, match="does not exist"):
        prof.to_html(str(tmp_path / "no" / "r.html"))
    target = tmp_path / "r.html"
    target.write_text("old")

    def full(*args: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(OSError, match="No space left"):
        prof.to_html(str(target))
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["r.html"]


# -- no code from the data's folder ------------------------------------------------------------------------
def test_the_reader_processes_import_nothing_from_the_traces_folder_or_the_working_folder(tmp_path, monkeypatch):
    import torchprof._load as load_module

    traces, work = tmp_path / "traces", tmp_path / "work"
    traces.mkdir()
    work.mkdir()
    marker = tmp_path / "ran"
    planted = f"open({str(marker)!r}, 'a').write(__file__ + '\\n')\nraise ImportError('planted')\n"
    for folder in (traces, work):
        for module in ("orjson", "gzip", "pickle", "torchprof"):
            (folder / f"{module}.py").write_text(planted)
    files = []
    for rank in range(2):
        events = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 5 + rank, "args": {}}]
        path = traces / f"rank{rank}.json"
        path.write_text(json.dumps({"traceEvents": events, "distributedInfo": {"rank": rank}}))
        files.append(str(path))
    monkeypatch.chdir(work)
    monkeypatch.setenv("PYTHONPATH", str(traces))
    monkeypatch.setattr(load_module, "PARALLEL_FROM_BYTES", 0)
    started = []
    real_popen = __import__("subprocess").Popen
    monkeypatch.setattr("subprocess.Popen", lambda *a, **k: started.append(a[0]) or real_popen(*a, **k))
    prof = torchprof.load_trace(files)
    assert len(started) == 2  # read in reader processes
    assert prof.ranks == [0, 1] and not marker.exists(), marker.read_text() if marker.exists() else ""


# -- step names and strings round-trip -----------------------------------------------------------------------
STEP_NAMES = ["x", "-1", "1.5", "²", "007", "99999999999999999999999", "", "1 ", "#2"]


@pytest.mark.parametrize("number", STEP_NAMES)
def test_every_step_name_a_trace_may_hold_saves_and_loads_back(number, tmp_path):
    events = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{number}", "pid": 1, "tid": 1, "ts": 0, "dur": 100,
               "args": {}},
              {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 50, "args": {}}]  # fmt: skip
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    prof = torchprof.load_trace(str(trace))
    again = torchprof.load(prof.save(str(tmp_path / "p.json")))
    assert str(again) == str(prof)
    assert list(again.steps["step"]) == list(prof.steps["step"])
    assert again.to_markdown() == prof.to_markdown()


def test_step_numbers_that_are_whole_numbers_sort_as_numbers():
    from torchprof._tree.builder import _step_number

    assert [_step_number(t) for t in ("12", "007", "x", "²", "1" * 19)] == [12, 7, "x", "²", "1" * 19]


# -- the ` #n` of a path met again is given in linear time ----------------------------------------------------
PACKAGE = os.path.dirname(torchprof.__file__) + os.sep


def calls_made(fn: Callable[[], Any]) -> int:
    """How many Python functions of torchprof's ``fn`` calls: work counted, not timed."""
    count = [0]

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename.startswith(PACKAGE):
            count[0] += 1

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return count[0]


def test_nested_calls_of_one_module_path_are_placed_and_numbered_in_linear_time():
    from synthetic import build

    def events(depth: int) -> list[dict]:
        return [ev("module", "m", k, 2 * depth - k, type_="M") for k in range(depth)] + [ev("op", "aten::add", depth, depth + 0.5)]

    assert list(build(events(3)).paths) == ["profile", "m", "m #2", "m #3", "m #3/aten::add"]
    # Each module's owner was looked for up every module above it, and each ` #n` tried from 2:
    # both grew with the depth's square.
    small, large = calls_made(lambda: build(events(500))), calls_made(lambda: build(events(2000)))
    assert large < 6 * small, (small, large)


# -- a failing rank never hangs the job ---------------------------------------------------------------------
JOBS = Path(__file__).resolve().parent / "jobs"


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["mid-step", "after", "kill-mid", "kill-after"])
def test_a_rank_that_fails_or_dies_ends_the_job_with_its_traceback_and_rank_0_says_what_it_got(mode, tmp_path):
    from test_distributed import torchrun

    # Before, every mode but "after" hung until gloo's 30-minute timeout (rank 1 in torchprof's
    # gather, rank 0 in the script's all-reduce): the limit here is far below that.
    code, log = torchrun("-m", "torchprof", "--out", str(tmp_path / "traces"), str(JOBS / "failing_rank.py"), mode,
                         cwd=tmp_path, timeout=150)  # fmt: skip
    assert code != 0, log[-3000:]
    assert "within 600s" not in log and "cannot send the trees" not in log, log[-3000:]
    if mode in ("mid-step", "after"):
        assert f"PlantedFailure: rank 1 failed {'in step 1' if mode == 'mid-step' else 'after its steps'}" in log, log[-3000:]
    if mode == "after":  # rank 0 finished its steps: it reports the job, naming the rank that failed
        assert "rank 1's script failed (PlantedFailure: rank 1 failed after its steps)" in log, log[-3000:]
        assert "(rank 1 failed) · 2 ranks" in log and "merged 2 ranks' trees" in log, log[-3000:]
    for line in log.splitlines():
        if "sent no tree" in line:  # with the time rank 0 truly waited
            assert "(rank 0 waited " in line, line
