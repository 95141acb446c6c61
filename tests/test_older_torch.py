"""What differs on older torch releases (2.11 was met on a live GPU): kineto's events that do not
say their category (no ``_KinetoEvent.activity_type``), its activities inside the event tree, a
session left prepared, traces written without device times or with raw quotes."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

torch = pytest.importorskip("torch")

from torch._C._autograd import DeviceType  # noqa: E402

from torchprof._capture import kineto  # noqa: E402


@dataclass
class OldEvent:
    """What a _KinetoEvent of such a release answers (no activity_type)."""

    event_name: str
    device: DeviceType
    linked: int = 0
    annotation: bool = False

    def name(self) -> str:
        return self.event_name

    def device_type(self) -> DeviceType:
        return self.device

    def linked_correlation_id(self) -> int:
        return self.linked

    def is_user_annotation(self) -> bool:
        return self.annotation


class WithoutCategory:
    """A real event of this torch, with its activity_type hidden."""

    def __init__(self, ev) -> None:
        self.ev = ev

    def __getattr__(self, name):
        if name == "activity_type":
            raise AttributeError(name)
        return getattr(self.ev, name)


@pytest.mark.parametrize(
    ("event", "category"),
    [
        (OldEvent("void at::native::vectorized_elementwise_kernel<4>", DeviceType.CUDA, linked=12), "kernel"),
        (OldEvent("Memcpy HtoD (Pageable -> Device)", DeviceType.CUDA, linked=13), "kernel"),
        (OldEvent("triton_poi_fused_add_0", DeviceType.CUDA), "kernel"),  # launched outside any op: still device time
        (OldEvent("## Call CompiledFxGraph fabc ##", DeviceType.CUDA, annotation=True), "gpu_user_annotation"),
        (OldEvent("cudaLaunchKernel", DeviceType.CPU, linked=12), "cuda_runtime"),
        (OldEvent("cuLaunchKernel", DeviceType.CPU, linked=14), "cuda_runtime"),
        (OldEvent("cudaDeviceSynchronize", DeviceType.CPU), "cuda_runtime"),  # torch.cuda.synchronize(): no op around it
        (OldEvent("aten::addmm", DeviceType.CPU), "cpu_op"),
        (OldEvent("Optimizer.step#AdamW.step", DeviceType.CPU, annotation=True), "user_annotation"),
        (OldEvent("CUPTI Buffer Flush", DeviceType.CPU), "cpu_op"),  # an overhead record: not a runtime call
    ],
)
def test_an_event_without_a_category_is_read_as_torchs_own_parser_reads_it(event, category):
    assert kineto.event_category(event) == category
    kind = kineto.CATEGORY_KIND[category]
    assert (kind == kineto.DEVICE) == (category == "kernel") and (kind == kineto.RUNTIME) == (category == "cuda_runtime")


def test_a_cpu_run_reads_the_same_with_and_without_the_category():
    """On this torch (which has activity_type) the fallback gives every event of a real run the
    category torch gives it, wherever the category is one the fallback can tell."""
    with torch.profiler.profile() as prof:
        torch.nn.Linear(8, 8)(torch.randn(2, 8)).sum()
    events = list(prof.profiler.kineto_results.events())
    assert events
    if not hasattr(events[0], "activity_type"):
        pytest.skip("this torch's events have no activity_type")
    actual = [kineto.event_category(ev) for ev in events]
    derived = [kineto.event_category(WithoutCategory(ev)) for ev in events]
    told = [(a, d) for a, d in zip(actual, derived) if a in ("cpu_op", "user_annotation")]
    assert told and all(a == d for a, d in told)


def test_a_kineto_activity_inside_the_event_tree_is_not_taken_for_an_op():
    """torch 2.11 puts kernels and runtime calls of a CUDA run into the event tree, as events
    whose fields have no scope: never ops or regions (the tree is walked again without them)."""
    from types import SimpleNamespace

    from torch._C._profiler import RecordScope

    op = SimpleNamespace(extra_fields=SimpleNamespace(scope=RecordScope.FUNCTION))
    region = SimpleNamespace(extra_fields=SimpleNamespace(scope=RecordScope.USER_SCOPE))
    kernel = SimpleNamespace(extra_fields=SimpleNamespace())
    kinds, memory = kineto._kinds([op, region, kernel], ["aten::mm", "my region", "ampere_sgemm_128x64_nn"], False)
    assert kinds == [kineto.OP, kineto.REGION, kineto._FOREIGN] and memory == []


class TreeEvent:
    """An event of torch's event tree: its fields and its children."""

    def __init__(self, name: str, fields: object, children: list | None = None) -> None:
        self.name, self.extra_fields, self._children = name, fields, children or []

    @property
    def children(self) -> list:
        return self._children


def test_kinetos_own_activities_are_walked_around_keeping_the_ops_nesting():
    class Kernel:
        pass

    class Op:
        pass

    tree = [TreeEvent("aten::linear", Op(), [TreeEvent("cudaLaunchKernel", Kernel(), [TreeEvent("aten::mm", Op())]),
                                             TreeEvent("aten::add", Op())])]  # fmt: skip
    flat, parent = kineto._flatten(tree, None, drop=Kernel)
    assert [e.name for e in flat] == ["aten::linear", "aten::mm", "aten::add"] and parent == [-1, 0, 0]
    flat, parent = kineto._flatten(tree, None)
    assert [e.name for e in flat] == ["aten::linear", "cudaLaunchKernel", "aten::mm", "aten::add"] and parent == [-1, 0, 1, 0]


def untimed_trace(tmp_path, kernel_dur: float):
    """A CUDA trace as torch 2.11's kineto wrote it on an H200: the host ops timed, every kernel
    and runtime call at ts 0 with no duration (``kernel_dur`` > 0 gives the kernel its time)."""
    import json

    events = [
        {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": 1, "tid": 1, "ts": 1000.0, "dur": 100.0},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1010.0, "dur": 50.0,
         "args": {"External id": 5, "Sequence number": 1}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 0.0, "dur": 0.0,
         "args": {"correlation": 9, "External id": 5}},
        {"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm", "pid": 0, "tid": 7, "ts": 0.0 if not kernel_dur else 1030.0,
         "dur": kernel_dur, "args": {"correlation": 9, "External id": 5, "device": 0, "stream": 7}},
    ]  # fmt: skip
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_a_trace_whose_device_work_has_no_times_reads_device_time_as_unknown(tmp_path):
    import math

    import torchprof

    prof = torchprof.load_trace(untimed_trace(tmp_path, 0.0))
    assert math.isnan(prof.df.iloc[0]["cuda_us"]) and prof.df.loc["aten::mm", "cpu_us"] == 50.0
    assert "carry no times" in prof.summary["warnings"][0]
    timed = torchprof.load_trace(untimed_trace(tmp_path, 20.0))
    assert timed.df.iloc[0]["cuda_us"] == 20.0 and "warnings" not in timed.summary


class StaleStart:
    """torch.profiler.profile on torch 2.11 after a Ctrl-C between its prepare and its start: the
    next start fails once with kineto's error (the session is then cleared and started)."""

    def __init__(self, message: str) -> None:
        self.message, self.starts = message, 0

    def start(self) -> None:
        self.starts += 1
        if self.starts == 1:
            raise RuntimeError(self.message)


def test_a_start_after_a_session_left_prepared_clears_it_and_starts(monkeypatch):
    from torchprof._capture import session

    cleared = []
    monkeypatch.setattr(session, "_clear_prepared", lambda prof: cleared.append(prof) or True)
    stale = StaleStart("Can't disable Kineto profiler when it's not running")
    session._start_torch(stale)
    assert stale.starts == 2 and cleared == [stale]
    other = StaleStart("CUPTI_ERROR_NOT_INITIALIZED")  # any other failure is the user's to see
    with pytest.raises(RuntimeError, match="CUPTI"):
        session._start_torch(other)
    assert other.starts == 1



def test_a_trace_written_with_raw_quotes_in_names_is_made_valid_with_the_real_names(tmp_path):
    """kineto of torch 2.11 writes ``"name": "say "hi""`` (no JSON): the export escapes such names
    and puts the real ones back (backslash and all), so the file opens in Perfetto and torchprof."""
    import torchprof
    from torchprof._traces.rewrite import restore_names

    base = 1_790_000_000_000_000_000
    backslashed = "a\\b \"c\""  # kineto 2.11 writes it 'a/b "c"'
    written = [('say "hi"', 1000.0, 5.0), ('a/b "c"', 1010.0, 3.0), ("plain", 1020.0, 2.0)]
    lines = [f'{{"ph": "X", "cat": "user_annotation", "name": "{n}", "pid": 1, "tid": 1, "ts": {ts}, "dur": {d}}}'
             for n, ts, d in written]  # fmt: skip
    path = tmp_path / "t.json"
    events = ", ".join(lines)
    path.write_text(f'{{"schemaVersion": 1, "baseTimeNanoseconds": {base}, "traceEvents": [{events}]}}')
    with pytest.raises(ValueError):
        json.loads(path.read_text())
    restore_names(str(path), {(base + 1_000_000, base + 1_005_000): 'say "hi"', (base + 1_010_000, base + 1_013_000): backslashed})
    assert [e["name"] for e in json.loads(path.read_text())["traceEvents"]] == ['say "hi"', backslashed, "plain"]
    assert {'say "hi"', backslashed, "plain"} <= set(torchprof.load_trace(str(path)).df["name"])


def test_without_a_second_trace_writer_the_handlers_export_gets_a_copy_of_ours(monkeypatch, tmp_path):
    """kineto writes a cycle's trace once and torch 2.11 has no second writer: with a schedule,
    torchprof writes the cycle's trace first and the handler's own export_chrome_trace (as
    tensorboard_trace_handler calls it) gets a copy; both exports hold the cycle."""
    import gzip

    import torchprof
    from torchprof._capture import session

    monkeypatch.setattr(session, "_exports_twice", lambda: False)
    net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
    written = []

    def handler(prof):
        path = tmp_path / f"cycle{len(written)}.pt.trace.json.gz"
        prof.export_chrome_trace(str(path))
        written.append(path)

    with torchprof.Profiler(schedule=torch.profiler.schedule(wait=0, warmup=1, active=1, repeat=2), on_trace_ready=handler) as prof:
        for _ in range(4):
            net(torch.randn(2, 8))
            prof.step()
    assert len(written) == 2
    for path in written:
        events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
        assert any(e.get("name", "").startswith("ProfilerStep#") for e in events)
    ours = torchprof.load_trace(prof.export_chrome_trace(str(tmp_path / "all.json")))
    assert list(ours.steps["step"]) == list(prof.steps["step"]) == [1, 3]


def test_device_work_written_without_times_gets_the_times_the_capture_read(tmp_path):
    """The export of a live CUDA profile under torch 2.11: kineto wrote the kernel and its launch
    at ts 0 with no duration, while the capture read their times (by correlation id); the file
    gets them back, so Perfetto and load_trace show the device time."""
    import torchprof
    from torchprof._traces.rewrite import retime_device_work

    base = 1_790_857_026_000_000_000
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 4804330530301.895, "dur": 50.0,
         "args": {"External id": 5}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 0.0, "dur": 0.0,
         "args": {"correlation": 9, "External id": 5}},
        {"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm", "pid": 0, "tid": 7, "ts": 0.0, "dur": 0.0,
         "args": {"correlation": 9, "External id": 5, "device": 0, "stream": 7}},
    ]  # fmt: skip
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"baseTimeNanoseconds": base, "traceEvents": events}))
    launch = base + 4804330530310_000
    kernel = base + 4804330530320_000
    times = {(False, 9): (launch, launch + 4_000), (True, 9): (kernel, kernel + 20_500)}
    assert retime_device_work(str(path), times) == 2
    written = {e["cat"]: e for e in json.loads(path.read_text())["traceEvents"]}
    assert (written["kernel"]["ts"], written["kernel"]["dur"]) == (4804330530320.0, 20.5)
    prof = torchprof.load_trace(str(path))
    assert prof.df.iloc[0]["cuda_us"] == 20.5 and "warnings" not in prof.summary
    assert retime_device_work(str(path), times) == 0  # a file with times is left as it is
