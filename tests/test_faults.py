"""Faults and hostile input: an interrupt in any write, a module planted beside the traces, step
names and strings that must round-trip, trees deep enough to be quadratic, reading that must not
run or write anything of the user's."""

from __future__ import annotations

import gc
import json
import os
import re
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


def _content(raw: bytes) -> bytes:
    """A file's content: a gzipped file's once decompressed (its header holds the second it was
    written, which differs between two writes)."""
    import gzip

    return gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw


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
        new = _content(Path(path).read_bytes())
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
            now = _content(Path(path).read_bytes())
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

    # "after": rank 1 waits for rank 0's report, however long rank 0 takes to stop on a loaded
    # machine (5 s by default); the other modes keep the default, which bounds the job's end.
    # "mid-step": rank 0 is stuck in the all-reduce, so rank 1's wait only delays the end.
    wait = {"TORCHPROF_FAILED_RANK_WAIT_S": "120" if mode == "after" else "1"}
    # Before, every mode but "after" hung until gloo's 30-minute timeout (rank 1 in torchprof's
    # gather, rank 0 in the script's all-reduce): the limit here is far below that.
    with pytest.MonkeyPatch.context() as env:
        for key, value in wait.items():
            env.setenv(key, value)
        code, log = torchrun("-m", "torchprof", "--out", str(tmp_path / "traces"), str(JOBS / "failing_rank.py"), mode,
                             cwd=tmp_path, timeout=240)  # fmt: skip
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


# -- saved profiles and traces validated whole: a fuzz of every field ----------------------------------------
class _Deleted:
    def __repr__(self) -> str:
        return "<deleted>"


DELETED = _Deleted()
#: What a field is set to (or deleted): wrong types, missing keys, NaN, huge numbers, nesting,
#: text no writer takes (a lone surrogate, a NUL, a bidi control).
MUTATIONS: list[Any] = [DELETED, None, "x", -1, 1.5, True, [], {}, float("nan"), 1e308, 2**70, [[[[1]]]], {"a": {"b": 1}},
                        "\ud800", "a\x00b", "\u202eevil"]  # fmt: skip


def _field_paths(value: Any, at: tuple = ()) -> list[tuple]:
    """Every field of a JSON value (of a list: its first and last element), outermost first."""
    out = []
    stack = [(value, at)]
    while stack:
        v, here = stack.pop()
        if here:
            out.append(here)
        if isinstance(v, dict):
            stack.extend((x, (*here, k)) for k, x in v.items())
        elif isinstance(v, list) and v:
            stack.extend((v[i], (*here, i)) for i in sorted({0, len(v) - 1}))
    return out


def _mutated(data: Any, path: tuple, value: Any) -> Any:
    out = json.loads(json.dumps(data))
    target = out
    for key in path[:-1]:
        target = target[key]
    if value is DELETED:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return out


def _every_view(prof: Any, tmp: Path) -> None:
    from torchprof._views.payload import payload

    str(prof)
    prof.table(min_pct=0)
    prof.df
    payload(prof.tree, prof.summary)
    prof.to_html()
    prof.to_markdown()
    prof.insights()
    prof.steps
    prof.by_type()
    prof._repr_mimebundle_()
    torchprof.compare(prof, prof).df
    again = torchprof.load(prof.save(str(tmp / "again.json")))
    assert str(again) == str(prof)


def _fuzz(cases: list[tuple[tuple, Any]], base: Any, read: Callable[[str], Any], tmp: Path) -> dict[str, int]:
    outcomes = {"cases": 0, "clear errors": 0, "works": 0}
    other = []
    for path, value in cases:
        case = tmp / "case.json"
        case.write_text(json.dumps(_mutated(base, path, value)))
        outcomes["cases"] += 1
        try:
            prof = read(str(case))
            _every_view(prof, tmp)
        except torchprof.TraceError:
            outcomes["clear errors"] += 1
            continue
        except Exception as exc:
            other.append(f"{path} = {value!r}: {type(exc).__name__}: {exc}"[:300])
            continue
        outcomes["works"] += 1
    assert not other, "\n".join(other[:20])
    return outcomes


def _cases(base: Any, seed: int) -> list[tuple[tuple, Any]]:
    """Every field deleted, and set to one of the other mutations (drawn with a fixed seed)."""
    import random

    rng = random.Random(seed)
    return [(path, value) for path in _field_paths(base) for value in (DELETED, rng.choice(MUTATIONS[1:]))]


@pytest.fixture(scope="module")
def stepped(tmp_path_factory) -> tuple[Any, Path]:
    """A small training profiled with memory over two steps: every field a saved profile has."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with torchprof.Profiler(memory=True, steps=[2, 3]) as prof:
        for _ in range(5):
            model(torch.randn(4, 8)).sum().backward()
            opt.step()
            opt.zero_grad()
            prof.step()
    return prof.result, tmp_path_factory.mktemp("fuzz")


@pytest.mark.slow
def test_every_field_of_a_saved_profile_mutated_loads_and_shows_in_every_view_or_is_a_clear_error(stepped, tmp_path):
    prof, _ = stepped
    base = json.loads(Path(prof.save(str(tmp_path / "base.json"))).read_text())
    base["capture"]["meta"]["warnings"] = ["a warning"]  # the facts a view reads, present to be mutated
    base["capture"]["meta"]["interrupted"] = "KeyboardInterrupt"
    cases = _cases(base, seed=31)
    outcomes = _fuzz(cases, base, torchprof.load, tmp_path)
    print("saved profiles:", outcomes)
    assert outcomes["works"] > 0 and outcomes["clear errors"] > 0


@pytest.mark.slow
def test_every_field_of_a_trace_mutated_loads_and_shows_in_every_view_or_is_a_clear_error(stepped, tmp_path):
    prof, _ = stepped
    base = json.loads(Path(prof.export_chrome_trace(str(tmp_path / "base.json"))).read_text())
    # One event of each kind (phase, category; each region's name) stands for all of its kind.
    kept: dict[Any, int] = {}
    for i, e in enumerate(base["traceEvents"]):
        kept.setdefault((e.get("ph"), e.get("cat"), e.get("name", "")[:12] if e.get("cat") == "user_annotation" else ""), i)
    fields = _field_paths({k: v for k, v in base.items() if k != "traceEvents"})
    for i in kept.values():
        fields += [("traceEvents", i, *p) for p in _field_paths(base["traceEvents"][i])]
    import random

    rng = random.Random(37)
    cases = [(path, value) for path in fields for value in (DELETED, rng.choice(MUTATIONS[1:]))]
    outcomes = _fuzz(cases, base, torchprof.load_trace, tmp_path)
    print("traces:", outcomes)
    assert outcomes["works"] > 0 and outcomes["clear errors"] > 0


def test_the_crafted_profiles_that_loaded_and_then_crashed_a_view_are_clear_errors(stepped, tmp_path):
    prof, _ = stepped
    base = json.loads(Path(prof.save(str(tmp_path / "base.json"))).read_text())
    crafted = {
        "threads[0].cpu_us": _mutated(base, ("threads", 0, "cpu_us"), "12"),
        "steps[0] has no 'step'": _mutated(base, ("steps", 0, "step"), DELETED),
        "capture.meta.warnings": _mutated(base, ("capture", "meta", "warnings"), 3),
        "columns has no 'kind'": _mutated(base, ("columns", "kind"), None),
    }
    for field, data in crafted.items():
        path = tmp_path / "crafted.json"
        path.write_text(json.dumps(data))
        with pytest.raises(torchprof.TraceError, match=re.escape(field.split(" has ")[0])):
            torchprof.load(str(path))


def test_any_name_a_trace_holds_round_trips_through_save_and_every_view(tmp_path):
    names = {
        "lone surrogate": b"aten::\\ud800x",
        "low surrogate first": b"aten::\\udc00\\ud800",
        "not UTF-8": b"aten::\xff\xfe",
        "NUL": b"aten::a\\u0000b",
        "bidi": "aten::\u202eevil\u202c".encode(),
        "emoji pair": b"aten::\\ud83d\\ude00",
        "1 MB": b"aten::" + b"n" * (1 << 20),
    }
    events = b",".join(b'{"ph": "X", "cat": "cpu_op", "name": "' + name + b'", "pid": 1, "tid": 1, "ts": %d, "dur": 5, "args": {}}' % (10 * k)
                       for k, name in enumerate(names.values()))  # fmt: skip
    trace = tmp_path / "names.json"
    trace.write_bytes(b'{"traceEvents": [' + events + b"]}")
    prof = torchprof.load_trace(str(trace))
    shown = sorted(prof.df["name"][1:])
    assert "aten::\\ud800x" in shown and "aten::\\xff\\xfe" in shown and "aten::😀" in shown  # escaped, visibly
    assert "aten::a\x00b" in shown and "aten::\u202eevil\u202c" in shown
    first = Path(prof.save(str(tmp_path / "a.json"))).read_bytes()
    again = torchprof.load(str(tmp_path / "a.json"))
    assert sorted(again.df["name"][1:]) == shown
    second = Path(again.save(str(tmp_path / "b.json"))).read_bytes()

    def without_meta(raw: bytes) -> Any:  # (the meta says where each file came from)
        data = json.loads(raw)
        data["capture"].pop("meta")
        return data

    assert without_meta(second) == without_meta(first)  # escaped the same way each time
    _every_view(again, tmp_path)
    html = again.to_html()
    assert "\u202e" not in html.split("<script", 1)[0]  # a bidi control never reorders the page's text outside the data


# -- reading never runs or writes anything of the user's -----------------------------------------------------
def test_reading_a_profile_in_every_way_never_runs_the_users_code(tmp_path):
    import torch

    calls = [0]
    side = tmp_path / "side-effect.txt"

    class Noisy(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            calls[0] += 1
            with open(side, "a") as f:
                f.write("forward ran\n")
            return self.fc(x).relu()

    model = Noisy()
    with torchprof.Profiler() as prof:
        model(torch.randn(2, 4)).sum().backward()
    assert calls == [1]
    side.unlink()
    from torchprof._views.payload import payload

    result = prof.result
    result.df
    str(result)
    payload(result.tree, result.summary)
    result.widget()
    result._repr_mimebundle_()
    result.to_html(str(tmp_path / "r.html"))
    result.to_markdown()
    result.insights()
    torchprof.load(result.save(str(tmp_path / "p.json"))).df
    torchprof.compare(result, result).df
    result.export_chrome_trace(str(tmp_path / "t.json"))
    torchprof.load_trace(str(tmp_path / "t.json")).df
    assert calls == [1] and not side.exists()


# -- linear at any depth -------------------------------------------------------------------------------------
def _deep_trace(path: Path, shape: str, depth: int) -> Path:
    """A chain ``depth`` deep: ops inside ops, or calls of one module path inside each other."""
    name = "aten::op" if shape == "ops" else "nn.Module: m [M]"
    events = [{"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": k, "dur": 2 * depth - 2 * k, "args": {}}
              for k in range(depth)]  # fmt: skip
    events.append({"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": depth, "dur": 0.5, "args": {}})
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def _peaks(trace: Path, tmp: Path) -> dict[str, float]:
    """For each way to read a deep profile (load the trace, show it: table, widget payload, HTML,
    Markdown; save it, load the saved file, compare it with itself), the most memory Python held
    for it beyond what it held before, over the size of the file it reads (``tracemalloc``:
    counted, not timed)."""
    import tracemalloc

    from torchprof._views.payload import payload

    out: dict[str, float] = {}
    saved = tmp / "deep.json"

    def stage(name: str, size: int, read: Callable[[], Any]) -> Any:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        value = read()
        out[name] = (tracemalloc.get_traced_memory()[1] - before) / size
        return value

    size = trace.stat().st_size
    tracemalloc.start()
    try:
        def read_trace() -> Any:
            loaded = torchprof.load_trace(str(trace))
            loaded.summary
            return loaded

        prof = stage("load_trace", size, read_trace)
        stage("table", size, lambda: str(prof))
        stage("payload", size, lambda: payload(prof.tree, prof.summary))
        stage("to_html", size, prof.to_html)
        stage("to_markdown", size, prof.to_markdown)
        stage("save", size, lambda: prof.save(str(saved)))
        stage("load", saved.stat().st_size, lambda: str(torchprof.load(str(saved))))
        stage("compare", size, lambda: (str(torchprof.compare(prof, prof)), torchprof.compare(prof, prof).to_html()))
    finally:
        tracemalloc.stop()
    return out


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["ops", "one module path"])
def test_a_deep_trace_loads_shows_saves_and_compares_in_memory_linear_in_its_size(shape, tmp_path):
    ratios = {depth: _peaks(_deep_trace(tmp_path / f"deep{depth}.json", shape, depth), tmp_path) for depth in (1_500, 6_000)}
    print(shape, {d: {k: round(v, 1) for k, v in r.items()} for d, r in ratios.items()})
    for way, ratio in ratios[6_000].items():
        # Memory over the file's size stays flat as the chain gets 4 times deeper (paths were
        # built whole for every row, and compared whole: 4 times deeper was 16 times the
        # memory), and at most 20 times the file.
        assert ratio < 1.5 * ratios[1_500][way] + 1, (way, ratios)
        assert ratio < 20, (way, ratios)
