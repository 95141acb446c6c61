"""load_trace on real A100 traces nobody here wrote, on our own exports, and on broken files."""

from __future__ import annotations

import gzip
import json
import math

import pandas as pd
import pytest
import torch

import torchprof
from conftest import shared_trace
from synthetic import ev
from torchprof._tree.builder import TreeBuilder
from torchprof._views.format import summary_line


def raw_events(path):
    with gzip.open(path) as f:
        return json.load(f)["traceEvents"]


def test_gpu_kernels_are_attributed_to_the_ops_that_launched_them():
    path = shared_trace("a100-alexnet-forward.json.gz")
    prof = torchprof.load_trace(path)
    df = prof.df
    device_time = sum(e["dur"] for e in raw_events(path) if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
    assert df.iloc[0]["cuda_us"] == pytest.approx(device_time)
    kernels = df[df.kind == "kernel"]
    assert len(kernels) > 0
    parents = df.loc[kernels.parent]
    # Nearly all GPU time sits under an aten op (a few memcpys are issued outside ops).
    under_ops = kernels[(parents.kind == "op").values & parents.name.str.startswith("aten::").values]
    assert under_ops.cuda_us.sum() / device_time > 0.9
    assert any("addmm" in p or "conv" in p for p in under_ops.parent)


def test_backward_ops_link_to_their_forward_region_by_sequence_number():
    prof = torchprof.load_trace(shared_trace("a100-ddp-training.json.gz"))
    df = prof.df
    over_arch = df[df.name == "## forward:over_arch ##"]
    assert len(over_arch) == 6  # one per profiler step
    assert (over_arch.bwd_cpu_us > 0).all() and (over_arch.bwd_cuda_us > 0).all()
    bwd_ops = df[df.parent.isin(over_arch.index) & df.name.str.startswith("autograd::engine::evaluate_function")]
    assert len(bwd_ops) > 0
    assert df.iloc[0]["bwd_cuda_us"] > 0.3 * df.iloc[0]["cuda_us"]
    assert len(prof.steps) == 6 and (prof.steps.wall_us > 0).all()


def test_every_shared_trace_loads_and_keeps_the_invariants():
    for name in ("a100-alexnet-forward.json.gz", "a100-ddp-training.json.gz", "a100-triton-kernel.json.gz", "cpu-gloo-rank34.json.gz"):
        df = torchprof.load_trace(shared_trace(name)).df
        kids = df.groupby("parent")
        for total, own in (("cpu_us", "self_cpu_us"), ("cuda_us", "self_cuda_us"), ("bwd_cpu_us", "bwd_self_cpu_us")):
            if df[total].isna().all():
                continue
            expected = df[own] + kids[total].sum().reindex(df.index).fillna(0.0)
            assert ((expected - df[total]).abs() <= 1e-6 * df[total].abs().max()).all(), (name, total)
        assert df.index.is_unique


def test_triton_kernel_is_found_through_its_driver_launch():
    df = torchprof.load_trace(shared_trace("a100-triton-kernel.json.gz")).df
    kernel = df[df.kind == "kernel"].iloc[0]
    assert kernel["name"] == "triton_poi_fused_add_cos_sin_0"
    assert df.loc[kernel.parent, "name"] == "triton_poi_fused_add_cos_sin_0"  # the cpu_op that launched it


def test_cpu_only_trace_has_no_cuda_columns():
    df = torchprof.load_trace(shared_trace("cpu-gloo-rank34.json.gz")).df
    assert df["cuda_us"].isna().all()
    assert df.loc["gloo:all_reduce", "calls"] == 10


def test_exported_trace_reads_back_as_the_same_dataframe(mlp, tmp_path):
    with torchprof.Profiler(memory=True, shapes=True, name="run") as prof:
        with torch.profiler.record_function("step"):
            mlp(torch.randn(4, 8)).sum().backward()
    path = prof.export_chrome_trace(str(tmp_path / "trace.json.gz"))
    again = torchprof.load_trace(path)
    pd.testing.assert_frame_equal(prof.df, again.df, check_exact=False, rtol=1e-9)
    # and the module ranges are named spans in the file (Perfetto shows them)
    names = {e.get("name") for e in raw_events(path)}
    assert "nn.Module: Sequential.0 [Linear]" in names


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such trace file"):
        torchprof.load_trace(tmp_path / "nope.json")


@pytest.mark.parametrize(
    "content, message",
    [
        (b"{not json", "not valid JSON"),
        (gzip.compress(b'{"traceEvents": [', mtime=0)[:-8], "truncated"),  # mtime=0: one test id on every worker
        (b'{"hello": 1}', "no 'traceEvents'"),
        (b'{"traceEvents": [{"ph": "M", "name": "process_name"}]}', "no profiler events"),
    ],
)
def test_broken_trace_files_get_a_clear_error(tmp_path, content, message):
    path = tmp_path / "broken.json.gz"
    path.write_bytes(content)
    with pytest.raises(torchprof.TraceError, match=message):
        torchprof.load_trace(path)


def test_saved_profile_reopens_without_rerunning(mlp, tmp_path):
    with torchprof.Profiler() as prof:
        mlp(torch.randn(3, 8)).sum().backward()
    path = prof.save(str(tmp_path / "p.torchprof.json"))
    again = torchprof.load(path)
    pd.testing.assert_frame_equal(prof.df, again.df)
    assert again.summary["cpu_us"] == pytest.approx(prof.summary["cpu_us"])
    with pytest.raises(torchprof.TraceError, match="load_trace"):
        torchprof.load(prof.export_chrome_trace(str(tmp_path / "t.json")))


def test_torch_nn_module_events_give_module_nodes(tmp_path):
    # torch's python tracer (with_stack=True) names module calls "nn.Module: Linear_0"
    events = [
        {"ph": "X", "cat": "python_function", "name": "nn.Module: Sequential_0", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
        {"ph": "X", "cat": "python_function", "name": "nn.Module: Linear_0", "pid": 1, "tid": 1, "ts": 10, "dur": 50},
        {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 12, "dur": 40, "args": {}},
        {"ph": "X", "cat": "python_function", "name": "torch/nn/functional.py(12): linear", "pid": 1, "tid": 1, "ts": 11, "dur": 45},
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    df = torchprof.load_trace(path).df
    assert df.loc["Sequential_0.Linear_0", "type"] == "Linear"
    assert df.loc["Sequential_0.Linear_0/aten::linear", "cpu_us"] == 40
    assert not math.isnan(df.loc["Sequential_0", "cpu_us"])


def test_torch_module_events_on_threads_named_by_numbers_and_strings_nest_per_thread(tmp_path):
    events = [
        {"ph": "X", "cat": "python_function", "name": "nn.Module: Net_0", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
        {"ph": "X", "cat": "python_function", "name": "nn.Module: Linear_0", "pid": 1, "tid": 1, "ts": 10, "dur": 50},
        {"ph": "X", "cat": "python_function", "name": "nn.Module: Linear_1", "pid": 1, "tid": "worker", "ts": 20, "dur": 30},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": "worker", "ts": 25, "dur": 5},
    ]
    df = torchprof.load_trace(write_trace(tmp_path / "t.json", events)).df
    assert df.loc["Net_0.Linear_0", "cpu_us"] == 50
    assert df.loc["Linear_1/aten::mm", "cpu_us"] == 5  # its own thread: not inside Net_0


def test_stack_option_names_the_user_source_line_and_survives_export(mlp, tmp_path):
    def train_step(x):
        return mlp(x).sum()

    with torchprof.Profiler(stack=True) as prof:
        train_step(torch.randn(2, 8)).backward()
    df = prof.df
    layer = df.loc["Sequential.0"]
    assert layer.source.startswith("test_traces.py(") and layer.source.endswith("): train_step")
    assert df.loc["Sequential.0/aten::linear", "source"] == layer.source
    again = torchprof.load_trace(prof.export_chrome_trace(str(tmp_path / "t.json")))
    assert_same_but_flops(df, again.df)


def assert_same_but_flops(live, loaded) -> None:
    """A trace keeps FLOPs as op shapes, which the default capture does not record (it replays the
    layers instead): the replay's counts go with the trace, so opened, each row has the FLOPs the
    live profile has; everything else is the same."""
    assert live["flops"].notna().all()
    assert loaded["flops"].tolist() == live["flops"].tolist() and loaded["macs"].tolist() == live["macs"].tolist()
    pd.testing.assert_frame_equal(live.drop(columns=["flops", "macs"]), loaded.drop(columns=["flops", "macs"]),
                                  check_exact=False, rtol=1e-9)  # fmt: skip


# -- exact times ------------------------------------------------------------------------------------
def write_trace(path, events, **top):
    path.write_text(json.dumps({"traceEvents": events, **top}))
    return path


def op(name, ts, dur, *, cat="cpu_op", tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}


def test_events_that_touch_end_to_start_at_epoch_times_are_siblings(tmp_path):
    # Epoch µs (~1.66e15) times 1000.0 is a double spaced 256 ns apart: rounding it nested some of
    # these touching ops into each other, and every ancestor then counted the child twice.
    t = 1661203462598738
    events, durations = [], [19, 7, 33, 1, 12, 5, 41, 3, 17, 9, 2, 29, 11, 6, 23, 13, 4, 37, 8, 15]
    for k, d in enumerate(durations):
        events.append(op(f"op{k}", t, d))
        t += d
    df = torchprof.load_trace(write_trace(tmp_path / "t.json", events)).df
    assert list(df.parent[1:]) == [df.index[0]] * len(durations)  # all children of the root
    assert [df.loc[f"op{k}", "cpu_us"] for k in range(len(durations))] == durations
    assert df.iloc[0]["cpu_us"] == sum(durations)


def _shifted_copy(path, dest, shift_us: int, fraction: str = ""):
    """The trace with every ``ts`` moved by ``shift_us`` µs and written with the decimal
    ``fraction`` appended to its literal (exact digits, no double in between)."""
    with gzip.open(path) as f:
        data = json.load(f)
    events = data.pop("traceEvents")
    parts = []
    for e in events:
        if "ts" not in e:
            parts.append(json.dumps(e))
            continue
        ts = e.pop("ts") + shift_us
        body = json.dumps(e)
        parts.append(body[:-1] + f', "ts": {ts}{fraction}}}')
    dest.write_text('{"traceEvents": [' + ",\n".join(parts) + "], " + json.dumps(data)[1:])
    return dest


@pytest.mark.slow
def test_the_tree_does_not_depend_on_the_epoch_of_the_timestamps(tmp_path):
    path = shared_trace("a100-ddp-training.json.gz")
    original = torchprof.load_trace(path, name="ddp")
    first = min(e["ts"] for e in raw_events(path) if "ts" in e)
    variants = {
        "integers, 1e15 µs later": _shifted_copy(path, tmp_path / "int.json", 10**15),
        "decimals, 1e15 µs later (beyond a double's ns)": _shifted_copy(path, tmp_path / "dec.json", 10**15, ".250"),
        "decimals from zero (as kineto writes since 2024)": _shifted_copy(path, tmp_path / "rel.json", -first, ".125"),
    }
    for what, copy in variants.items():
        again = torchprof.load_trace(copy, name="ddp")
        pd.testing.assert_frame_equal(original.df, again.df, check_exact=True, obj=what)
        assert again.summary["gpu_busy_us"] == original.summary["gpu_busy_us"], what


def test_a_loaded_trace_with_epoch_decimals_exports_and_reloads_with_every_digit(tmp_path):
    text = ('{"traceEvents": ['
            '{"ph": "X", "cat": "cpu_op", "name": "outer", "pid": 1, "tid": 1, "ts": 1711234567890123.456, "dur": 10.5},'
            '{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1711234567890124.001, "dur": 0.999},'
            '{"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 1711234567890125.000, "dur": 0.001}]}')  # fmt: skip
    path = tmp_path / "t.json"
    path.write_text(text)
    prof = torchprof.load_trace(path, name="t")
    df = prof.df
    assert df.loc["outer/a", "cpu_us"] == 0.999 and df.loc["outer/b", "cpu_us"] == 0.001
    assert df.loc["outer", "self_cpu_us"] == pytest.approx(10.5 - 1.0, abs=1e-9)
    exported = prof.export_chrome_trace(str(tmp_path / "again.json"))
    assert "1711234567890123.456" in open(exported).read()
    pd.testing.assert_frame_equal(df, torchprof.load_trace(exported).df, check_exact=True)
    # exported twice: one torchprof block, not two
    twice = torchprof.load_trace(exported).export_chrome_trace(str(tmp_path / "twice.json"))
    assert open(twice).read().count('"torchprof":') == 1


# -- device time from every accelerator ---------------------------------------------------------------
#: Every category name kineto writes (libkineto/include/ActivityType.h, 2026) and those of
#: kineto before 2022 (libkineto/src/output_json.cpp then).
KINETO_CATEGORIES = (
    "cpu_op", "user_annotation", "gpu_user_annotation", "gpu_memcpy", "gpu_memset", "kernel",
    "external_correlation", "cuda_runtime", "cuda_driver", "cpu_instant_event", "python_function",
    "overhead", "mtia_runtime", "mtia_ccp_events", "mtia_insight", "cuda_sync", "cuda_event",
    "mtia_counters", "glow_runtime", "cuda_profiler_range", "hpu_op", "xpu_runtime", "xpu_driver",
    "collective_comm", "privateuse1_runtime", "privateuse1_driver", "xpu_scope_profiler", "xpu_sync",
    "hardware_counters",
    "Operator", "Runtime", "Kernel", "Memcpy", "Memset", "User",
)  # fmt: skip


def test_every_category_kineto_writes_has_a_decided_kind():
    from torchprof._vocab import CATEGORY_KIND, PYTHON_CATEGORY

    assert [c for c in KINETO_CATEGORIES if c not in CATEGORY_KIND and c != PYTHON_CATEGORY] == []


@pytest.mark.parametrize(
    "runtime, device",
    [
        ("cuda_runtime", "kernel"),
        ("cuda_runtime", "gpu_memcpy"),
        ("cuda_driver", "gpu_memset"),
        ("mtia_runtime", "mtia_ccp_events"),
        ("xpu_runtime", "kernel"),
        ("xpu_driver", "gpu_memcpy"),
        ("privateuse1_runtime", "kernel"),
        ("privateuse1_driver", "gpu_memset"),
        ("hpu_op", "kernel"),
        ("Runtime", "Kernel"),
        ("Runtime", "Memcpy"),
        ("Runtime", "Memset"),
    ],
)
def test_device_time_is_read_from_every_accelerator_category(tmp_path, runtime, device):
    old = runtime == "Runtime"  # kineto before 2022: "Operator" ops, lowercase "external id"
    ext = "external id" if old else "External id"
    events = [
        op("aten::mm", 0, 100, cat="Operator" if old else "cpu_op", **{"External id": 7}),
        op("launch", 10, 5, cat=runtime, correlation=100, **{ext: 7}),
        {"ph": "X", "cat": device, "name": "work", "pid": 0, "tid": "stream 7", "ts": 50, "dur": 30,
         "args": {"correlation": 100, ext: 7}},
        # a second one found through the launching op's id alone (no runtime call recorded)
        {"ph": "X", "cat": device, "name": "more", "pid": 0, "tid": "stream 7", "ts": 90, "dur": 4, "args": {ext: 7}},
    ]  # fmt: skip
    df = torchprof.load_trace(write_trace(tmp_path / "t.json", events)).df
    assert df.loc["aten::mm/work", "kind"] == "kernel"
    assert df.loc["aten::mm/work", "cuda_us"] == 30
    assert df.loc["aten::mm/more", "cuda_us"] == 4
    assert df.iloc[0]["cuda_us"] == 34


# -- GPU busy and idle ------------------------------------------------------------------------------
def test_gpu_busy_is_the_union_over_streams_and_devices_and_idle_the_gaps_of_the_window(tmp_path):
    def kernel(name, ts, dur, pid, stream):
        return {"ph": "X", "cat": "kernel", "name": name, "pid": pid, "tid": stream, "ts": ts, "dur": dur, "args": {"External id": 1}}

    events = [
        op("aten::mm", 0, 200, **{"External id": 1}),
        kernel("a", 10, 10, 0, 7), kernel("b", 30, 10, 0, 7),   # stream 7: [10,20] [30,40]
        kernel("c", 15, 10, 0, 8), kernel("d", 50, 10, 0, 8),   # stream 8: [15,25] [50,60]
        kernel("e", 55, 15, 1, 7),                              # device 1: [55,70]
    ]  # fmt: skip
    s = torchprof.load_trace(write_trace(tmp_path / "t.json", events)).summary
    assert s["cuda_us"] == 55  # the sum over streams
    assert s["gpu_busy_us"] == 15 + 10 + 20  # [10,25] [30,40] [50,70]
    assert s["gpu_window_us"] == 60  # 10 -> 70
    assert s["gpu_idle_us"] == 15
    # clipped to the profiled span (kineto's "Trace" event) where the trace has one
    span = {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "x", "ts": 0, "dur": 60}
    s = torchprof.load_trace(write_trace(tmp_path / "span.json", [*events, span])).summary
    assert (s["gpu_busy_us"], s["gpu_window_us"], s["gpu_idle_us"]) == (15 + 10 + 10, 50, 15)


def test_gpu_idle_leaves_out_the_time_between_the_cycles_of_a_schedule():
    from synthetic import build

    cycle = [ev("op", "aten::mm", 0, 100, ext=1), ev("kernel", "k", 10, 30, tid="s", link=1)]
    later = [dict(e, start=e["start"] + 10**9, end=e["end"] + 10**9) for e in cycle]
    builder = TreeBuilder(cuda=True)
    from synthetic import columns as cols_of

    builder.add(cols_of(cycle))
    builder.add(cols_of(later))
    tree = builder.finish()
    assert (tree.gpu_busy_us, tree.gpu_window_us) == (40.0, 40.0)
    assert math.isnan(build([ev("op", "aten::mm", 0, 100)]).gpu_busy_us)


def test_gpu_busy_and_idle_match_holistic_trace_analysis_on_the_ddp_trace():
    path = shared_trace("a100-ddp-training.json.gz")
    device = sorted((e["ts"], e["ts"] + e["dur"]) for e in raw_events(path) if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
    busy, (cur_s, cur_e) = 0, device[0]
    for s, e in device:
        if s > cur_e:
            busy, cur_s, cur_e = busy + cur_e - cur_s, s, e
        cur_e = max(cur_e, e)
    busy += cur_e - cur_s
    window = max(e for _, e in device) - device[0][0]
    total = sum(e - s for s, e in device)
    # recomputed here from the raw JSON, and as a colleague computed them with HTA 0.5.0
    assert (len(device), busy, window, total) == (9450, 388_587, 464_594, 501_567)
    s = torchprof.load_trace(path).summary
    assert (s["gpu_busy_us"], s["gpu_window_us"], s["cuda_us"]) == (busy, window, total)
    assert s["gpu_idle_us"] == window - busy
    assert s["cuda_us"] > s["gpu_busy_us"]  # streams overlap: the kernel sum is not busy time


# -- device work no op of the window launched ----------------------------------------------------------
def test_device_work_launched_before_profiling_and_without_a_launching_op_get_labelled_rows(tmp_path):
    def kernel(name, ts, dur, **args):
        return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur, "args": args}

    events = [
        op("aten::mm", 1000, 100, **{"External id": 1}),
        op("cudaLaunchKernel", 1010, 5, cat="cuda_runtime", correlation=10, **{"External id": 1}),
        op("cudaMemcpyAsync", 1200, 5, cat="cuda_runtime", correlation=11),  # outside every op
        kernel("gemm", 1050, 20, correlation=10, **{"External id": 1}),
        kernel("queued_before", 500, 100, correlation=5),  # ran before the first host event
        kernel("older_launch", 1300, 40, correlation=3),  # its correlation id predates every launch
        kernel("Memcpy HtoD", 1210, 8, correlation=11),
        kernel("lost_launch", 1400, 2, correlation=50),  # a launch id newer than the window's, not recorded
        op("cudaLaunchKernel", 1500, 5, cat="cuda_runtime", correlation=12),  # outside every op, but...
        kernel("relu", 1510, 6, correlation=12, **{"External id": 1}),  # ...kineto names the op
    ]
    df = torchprof.load_trace(write_trace(tmp_path / "t.json", events), name="profile").df
    before, no_op = "(launched before profiling)", "(device, no launching op)"
    assert df.loc["aten::mm/gemm", "cuda_us"] == 20
    assert (df.loc[before, "kind"], df.loc[before, "parent"], df.loc[before, "cuda_us"]) == ("region", "profile", 140)
    assert sorted(df[df.parent == before].name) == ["older_launch", "queued_before"]
    assert (df.loc[no_op, "kind"], df.loc[no_op, "cuda_us"]) == ("region", 10)
    assert sorted(df[df.parent == no_op].name) == ["Memcpy HtoD", "lost_launch"]
    assert df[(df.parent == "profile") & (df.kind == "kernel")].empty
    assert df.loc["aten::mm/relu", "cuda_us"] == 6
    assert df.iloc[0]["cuda_us"] == 176


def test_on_the_real_traces_no_device_work_sits_loose_under_the_root():
    for name in ("a100-alexnet-forward.json.gz", "a100-ddp-training.json.gz", "a100-triton-kernel.json.gz"):
        df = torchprof.load_trace(shared_trace(name)).df
        assert df[(df.parent == df.index[0]) & (df.kind == "kernel")].empty, name
        assert "(launched before profiling)" not in df.index, name  # none in these three


# -- names ---------------------------------------------------------------------------------------
def test_export_then_load_keeps_unicode_quotes_newlines_and_backslashes_in_names(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential()
    model.add_module("données", torch.nn.Linear(4, 4))
    model.add_module('q"uote', torch.nn.ReLU())
    model.add_module("new\nline", torch.nn.Linear(4, 4))
    model.add_module("back\\slash", torch.nn.ReLU())
    model.add_module("tab\there", torch.nn.ReLU())
    model.add_module("日本", torch.nn.Identity())
    model.add_module("a [b]", torch.nn.Identity())  # the range format's own brackets in a path

    def étape(x):
        return model(x)

    with torchprof.Profiler(stack=True, name="run") as prof:
        with torch.profiler.record_function('région "q"\nsuite'):
            étape(torch.randn(2, 4))
    df = prof.df
    assert 'région "q"\nsuite/Sequential.new\nline' in df.index and "région \"q\"\nsuite/Sequential.日本" in df.index
    again = torchprof.load_trace(prof.export_chrome_trace(str(tmp_path / "t.json.gz")))
    assert list(again.df.index) == list(df.index)
    assert_same_but_flops(df, again.df)
    assert df.loc['région "q"\nsuite/Sequential.données', "source"].endswith("): étape")


def test_a_region_named_like_a_module_range_stays_a_region_in_a_trace(tmp_path):
    events = [
        op("nn.Module: Net [Net]", 0, 100),
        op("nn.Module: Net.fc [Linear]", 5, 30),
        op("aten::linear", 6, 20),
        op("nn.Module: x [Linear]", 50, 40, cat="user_annotation"),
        op("aten::relu", 55, 10),
    ]
    df = torchprof.load_trace(write_trace(tmp_path / "t.json", events)).df
    assert df.loc["Net.fc", "kind"] == "module"
    forged = df[df.name == "nn.Module: x [Linear]"]
    assert list(forged.kind) == ["region"] and list(forged.index) == ["Net/nn.Module: x [Linear]"]
    # and alone in a trace with no module ranges of ours
    df = torchprof.load_trace(write_trace(tmp_path / "alone.json", events[3:])).df
    assert list(df.kind[1:]) == ["region", "op"]


def test_a_region_named_like_a_module_range_stays_a_region_live_and_after_export(mlp, tmp_path):
    with torchprof.Profiler() as prof:
        with torch.profiler.record_function("nn.Module: fake [Linear]"):
            mlp(torch.randn(2, 8))
    df = prof.df
    assert df.loc["nn.Module: fake [Linear]", "kind"] == "region"
    assert df.loc["nn.Module: fake [Linear]/Sequential.0", "kind"] == "module"
    again = torchprof.load_trace(prof.export_chrome_trace(str(tmp_path / "t.json"))).df
    assert again.loc["nn.Module: fake [Linear]", "kind"] == "region"
    assert list(again.index) == list(df.index)


def test_loading_memory_grows_linearly_with_the_file_size(tmp_path):
    import tracemalloc

    def trace(steps):
        events = []
        for k in range(steps):
            t = k * 100
            events += [op(f"step{k % 7}", t, 90, **{"External id": 3 * k + 1}),
                       op("aten::mm", t + 1, 50, **{"External id": 3 * k + 2, "Sequence number": k, "Input Dims": [[4, 4], [4, 4]]}),
                       op("cudaLaunchKernel", t + 2, 5, cat="cuda_runtime", correlation=k + 1, **{"External id": 3 * k + 2}),
                       {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": t + 10, "dur": 20,
                        "args": {"correlation": k + 1, "External id": 3 * k + 2}}]  # fmt: skip
        path = write_trace(tmp_path / f"t{steps}.json", events)
        return path, path.stat().st_size

    peaks = []
    for steps in (1000, 4000):
        path, size = trace(steps)
        tracemalloc.start()
        torchprof.load_trace(path).df
        peaks.append((tracemalloc.get_traced_memory()[1], size))
        tracemalloc.stop()
    (small, small_size), (big, big_size) = peaks
    # bytes per file byte never grow (a trace streams through in chunks: a small file pays the
    # chunk in flight, so its bytes per file byte are the higher)
    assert (big / big_size) / (small / small_size) < 1.3, peaks


def test_the_trace_kept_before_the_tree_is_built_has_the_real_names_too():
    model = torch.nn.Sequential()
    model.add_module("données", torch.nn.Linear(2, 2))
    with torchprof.Profiler() as prof:
        model(torch.randn(1, 2))
    kept = prof.result._trace_files()[0]  # asked before the tree is built: the names come from torch's events
    with open(kept, encoding="utf-8") as f:
        names = {e.get("name") for e in json.load(f)["traceEvents"]}
    assert "nn.Module: Sequential.données [Linear]" in names and "unknown" not in names
    assert prof.result.df.loc["Sequential.données", "kind"] == "module"


# -- ranges that outlive their parent ----------------------------------------------------------------
def test_a_range_that_outlives_its_parent_counts_up_to_the_parents_end_and_its_overrun_apart(tmp_path):
    # As on HTA's MTIA trace: an async collective opened inside c10d::alltoall_base_ runs on long
    # after it; the model's forward, which starts after the op ended, is not inside it.
    events = [
        op("ProfilerStep#1", 0, 100, cat="user_annotation"),
        op("c10d::alltoall_base_", 10, 10),
        op("hccl:all_to_all", 15, 45, cat="user_annotation"),  # ends at 60, 40 µs after its parent
        op("aten::empty", 16, 2),
        op("## forward ##", 30, 20, cat="user_annotation"),
        op("aten::mm", 31, 10),
    ]
    prof = torchprof.load_trace(write_trace(tmp_path / "t.json", events), name="job")
    df = prof.df
    assert list(df.index) == ["job", "ProfilerStep#1", "ProfilerStep#1/## forward ##", "ProfilerStep#1/## forward ##/aten::mm",
                              "ProfilerStep#1/c10d::alltoall_base_", "ProfilerStep#1/c10d::alltoall_base_/hccl:all_to_all",
                              "ProfilerStep#1/c10d::alltoall_base_/hccl:all_to_all/aten::empty"]  # fmt: skip
    assert df.loc["ProfilerStep#1", "cpu_us"] == 100  # no total exceeds the time its thread covered
    assert df.loc["ProfilerStep#1/c10d::alltoall_base_", "cpu_us"] == 10
    collective = df.loc["ProfilerStep#1/c10d::alltoall_base_/hccl:all_to_all"]
    assert (collective.cpu_us, collective.self_cpu_us) == (5, 3)
    s = prof.summary
    assert s["overrun_us"] == 40 and s["overrun_top"] == {"name": "hccl:all_to_all", "ranges": 1, "rows": 1}
    assert "outlived parent 40.0µs (hccl:all_to_all)" in summary_line(s)
    assert prof.steps.loc[0, "cpu_us"] == 100
    # kept when saved
    reopened = torchprof.load(prof.save(str(tmp_path / "p.json")))
    assert reopened.summary["overrun_us"] == 40 and reopened.tree.overruns == prof.tree.overruns


def test_a_source_that_nests_events_itself_is_clipped_by_the_same_rule():
    from synthetic import columns

    events = [ev("region", "step", 0, 100), ev("op", "c10d::allreduce_", 10, 20), ev("region", "nccl:all_reduce", 15, 70),
              ev("op", "aten::add", 80, 90)]  # fmt: skip
    cols = columns(events)
    cols.parent = [-1, 0, 1, 0]  # as the live profiler's tree gives it
    builder = TreeBuilder()
    builder.add(cols)
    tree = builder.finish()
    total = dict(zip(tree.columns["path"], tree.columns["cpu_us"]))
    assert total["step"] == 100 and total["step/c10d::allreduce_"] == 10
    assert total["step/c10d::allreduce_/nccl:all_reduce"] == 5
    assert tree.overruns == [[tree.columns["path"].index("step/c10d::allreduce_/nccl:all_reduce"), 1, 50.0]]


def test_on_every_shared_trace_no_range_counts_more_than_its_thread_covered():
    # Per thread, the ranges of a row (its calls) are nested in their parent's: time a thread
    # spent in a row never exceeds what the thread spent in its parent row.
    for name in ("a100-alexnet-forward.json.gz", "a100-ddp-training.json.gz", "cpu-gloo-rank34.json.gz"):
        df = torchprof.load_trace(shared_trace(name)).df
        ops = df[(df.kind != "kernel") & ~df.is_backward & (df.index != df.index[0])]
        parents = df.loc[ops.parent]
        same = (parents.kind != "kernel").values & ~parents.is_backward.values & (ops.parent != df.index[0]).values
        assert (ops.cpu_us.values[same] <= parents.cpu_us.values[same] * (1 + 1e-9)).all(), name


# -- the profiled window -------------------------------------------------------------------------------
def span(name, ts, dur):
    return {"ph": "X", "cat": "Trace", "name": name, "pid": "Spans", "tid": name.split(" (")[0], "ts": ts, "dur": dur}


def kernel(name, ts, dur, **args):
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur, "args": args}


def test_the_window_is_the_profilers_own_span_not_the_last_backends(tmp_path):
    # kineto writes its own span first and each backend's after it (CUPTI's starts when the
    # first kernel does): the window, the wall time and so FLOP/s are the profiler's.
    events = [span("PyTorch Profiler (0)", 0, 1000), op("aten::mm", 100, 50), span("__cupti_profiler__ (-1)", 300, 690)]
    assert torchprof.load_trace(write_trace(tmp_path / "t.json", events)).summary["wall_us"] == 1000
    alone = [op("aten::mm", 100, 50), span("__cupti_profiler__ (-1)", 300, 690)]  # no profiler span: the one there is
    assert torchprof.load_trace(write_trace(tmp_path / "u.json", alone)).summary["wall_us"] == 690


def test_device_work_outside_the_window_is_left_out_of_every_device_figure_alike(tmp_path):
    events = [
        span("PyTorch Profiler (0)", 1000, 1000),
        op("aten::mm", 1000, 100, **{"External id": 1}),
        op("cudaLaunchKernel", 1010, 5, cat="cuda_runtime", correlation=10, **{"External id": 1}),
        kernel("gemm", 1050, 20, correlation=10, **{"External id": 1}),
        kernel("queued_before", 500, 100, correlation=5),  # wholly before the window
        kernel("running_at_start", 950, 60, correlation=6),  # 10 µs of it inside
        kernel("after_stop", 2100, 10, correlation=11),  # wholly after
    ]
    prof = torchprof.load_trace(write_trace(tmp_path / "t.json", events), name="run")
    df, s = prof.df, prof.summary
    kernels = df[df.kind == "kernel"]
    assert dict(zip(kernels.name, kernels.cuda_us)) == {"gemm": 20, "running_at_start": 10}
    # the per-kernel sums, the root's device time, busy, compute and the window agree
    assert s["cuda_us"] == kernels.cuda_us.sum() == s["gpu_busy_us"] == s["gpu_compute_us"] == 30
    assert (s["gpu_window_us"], s["gpu_idle_us"]) == (70, 40)  # 1000 -> 1070
    assert df.loc["(launched before profiling)", "compute_cuda_us"] == 10
    assert s["warnings"] == ["2 device activities and part of 1 more (0.160 ms) ran outside the profiled window (kineto's "
                             "span): every device figure counts only the window"]  # fmt: skip


def test_a_host_range_recorded_past_the_window_counts_only_its_part_inside(tmp_path):
    # A step range kineto wrote with an end long after the profile stopped (seen in a real A100
    # trace: 13.3 s of a 355 ms window): every CPU figure counts the window only, as device ones do.
    events = [
        span("PyTorch Profiler (0)", 1000, 1000),
        op("ProfilerStep#1", 1500, 13_000_000, cat="user_annotation"),
        op("aten::mm", 1600, 100),
        op("aten::add", 1900, 300),  # its last 200 µs after the window
        op("aten::relu", 2500, 10),  # wholly after: no time
    ]
    prof = torchprof.load_trace(write_trace(tmp_path / "t.json", events), name="run")
    df, s = prof.df, prof.summary
    assert s["wall_us"] == 1000 and s["cpu_us"] == 500 <= s["wall_us"]
    assert df.loc["ProfilerStep#1", "cpu_us"] == 500
    assert df.loc["ProfilerStep#1/aten::add", "cpu_us"] == 100 and df.loc["ProfilerStep#1/aten::mm", "cpu_us"] == 100
    assert "relu" not in " ".join(df.index)
    assert "1 host range and part of 2 more (12999.710 ms) ran outside the profiled window (kineto's span): every CPU figure counts only the window" in s["warnings"]


def test_cupti_range_profiler_ranges_are_listed_as_ranges_not_counted_as_kernels(tmp_path):
    def measured(name, ts):
        return {"ph": "X", "cat": "cuda_profiler_range", "name": name, "pid": 0, "tid": 0, "ts": ts, "dur": 121431,
                "args": {"smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 4096}}

    events = [span("PyTorch Profiler (0)", 0, 400_000), op("aten::mm", 10, 50, **{"External id": 1}),
              op("cudaLaunchKernel", 20, 5, cat="cuda_runtime", correlation=3, **{"External id": 1}),
              measured("gemm", 100), measured("gemm", 121_600), measured("relu", 243_100)]  # fmt: skip
    prof = torchprof.load_trace(write_trace(tmp_path / "t.json", events), name="run")
    df, s = prof.df, prof.summary
    assert df[df.kind == "kernel"].empty
    assert math.isnan(s["gpu_busy_us"]) and math.isnan(s["cuda_us"])  # the kernels' own runs were not recorded
    assert s["cpu_us"] == 50
    ranges = df[df.parent == "(CUPTI range profiler)"]
    assert dict(zip(ranges.name, ranges.calls)) == {"gemm": 2, "relu": 1} and (ranges.kind == "region").all()
    assert (ranges.cpu_us == 0).all() and df.loc["(CUPTI range profiler)", "calls"] == 3
    assert "3 CUPTI range-profiler ranges" in s["warnings"][0]


# -- other tools' traces ----------------------------------------------------------------------------------
def test_a_lightning_profiler_trace_opens_with_the_models_layers(tmp_path):
    # Recorded by Lightning's own PyTorchProfiler (with_stack too: its names win over torch's
    # "nn.Module: Linear_0" events, which mark the same calls again).
    import logging
    import warnings

    pl = pytest.importorskip("lightning.pytorch")
    from lightning.pytorch.profilers import PyTorchProfiler

    class Net(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.encoder = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU())
            self.head = torch.nn.Linear(8, 1)

        def forward(self, x):
            return self.head(self.encoder(x))

        def training_step(self, batch, i):
            x, y = batch
            return torch.nn.functional.mse_loss(self(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(8, 4), torch.randn(8, 1))
    profiler = PyTorchProfiler(dirpath=str(tmp_path), filename="pl", with_stack=True,
                               schedule=torch.profiler.schedule(wait=0, warmup=0, active=3, repeat=1))  # fmt: skip
    logging.getLogger("lightning").setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = pl.Trainer(max_steps=4, profiler=profiler, accelerator="cpu", logger=False, enable_checkpointing=False,
                             enable_progress_bar=False, enable_model_summary=False)  # fmt: skip
        trainer.fit(Net(), torch.utils.data.DataLoader(data, batch_size=4))
    trace = next(tmp_path.glob("*.pt.trace.json"))
    assert "[pl][module]torch.nn.modules.linear.Linear: encoder.0" in trace.read_text()
    df = torchprof.load_trace(trace).df
    layers = df[df.kind == "module"]
    assert set(zip(layers.module, layers.type)) == {("encoder", "Sequential"), ("encoder.0", "Linear"),
                                                     ("encoder.1", "ReLU"), ("head", "Linear")}  # fmt: skip
    first = layers[layers.module == "encoder.0"].iloc[0]
    assert first["name"] == "0" and df.loc[first.parent, "module"] == "encoder"
    assert (layers.fwd_cpu_us > 0).all() and layers.bwd_cpu_us.sum() > 0  # backward ops link to the layers' forward ops
    assert not df.name.str.startswith("[pl][module]").any()


def test_a_torchscript_model_profiled_with_modules_opens_with_its_layers(tmp_path):
    import warnings

    torch.manual_seed(0)
    model = torch.jit.script(torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Sequential(torch.nn.Linear(8, 2))))
    x = torch.randn(3, 4)
    model(x), model(x)  # the profiling executor's first runs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # with_modules is deprecated for eager models, not for TorchScript
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], with_modules=True) as p:
            model(x)
    p.export_chrome_trace(str(tmp_path / "t.json"))
    df = torchprof.load_trace(tmp_path / "t.json").df
    layers = df[df.kind == "module"]
    assert set(zip(layers.module, layers.type)) == {("Sequential", "Sequential"), ("Sequential.0", "Linear"), ("Sequential.1", "ReLU"),
                                                     ("Sequential.2", "Sequential"), ("Sequential.2.0", "Linear")}  # fmt: skip
    linear = layers[layers.module == "Sequential.0"].index[0]
    assert df.loc[f"{linear}/aten::linear", "cpu_us"] == df.loc[linear, "cpu_us"]  # its op, inside it


def test_module_hierarchies_of_torchscript_ops_read_as_nested_calls():
    from torchprof._traces.reader import script_modules

    assert script_modules("TOP(Net)::forward.fc1(Linear)::forward.") == [("Net", "Net"), ("Net.fc1", "Linear")]
    assert script_modules("TOP()::<forward op>.2(Sequential)::forward.0(Linear)::forward.") == [
        ("ScriptModule", "ScriptModule"), ("ScriptModule.2", "Sequential"), ("ScriptModule.2.0", "Linear")]
    assert script_modules("TOP(Net)::forward.1(ReLU)::forward.::relu.") == [("Net", "Net"), ("Net.1", "ReLU")]


def test_the_ranks_of_a_job_are_read_in_parallel_processes_as_they_are_one_by_one(tmp_path, monkeypatch):
    import torchprof._load as load_module

    files = []
    for rank in range(3):
        events = [op("ProfilerStep#1", 0, 100, cat="user_annotation"), op("aten::mm", 10, 20 + rank), op("aten::add", 40, 5)]
        files.append(write_trace(tmp_path / f"rank{rank}.json", events, distributedInfo={"rank": rank}))
    serial = torchprof.load_trace([str(f) for f in files])
    monkeypatch.setattr(load_module, "PARALLEL_FROM_BYTES", 0)
    started = []
    real_popen = __import__("subprocess").Popen
    monkeypatch.setattr("subprocess.Popen", lambda *a, **k: started.append(a[0]) or real_popen(*a, **k))
    parallel = torchprof.load_trace([str(f) for f in files])
    assert len(started) == 3 and all(cmd[1:3] == ["-I", "-c"] for cmd in started)
    pd.testing.assert_frame_equal(parallel.df, serial.df)
    assert parallel.ranks == serial.ranks == [0, 1, 2]
    (tmp_path / "rank1.json").write_text("{not json")
    with pytest.raises(torchprof.TraceError, match=r"rank1\.json is not valid JSON"):
        torchprof.load_trace([str(f) for f in files])


# -- reading big files in chunks ---------------------------------------------------------------------------
def training_events(steps: int, per_step: int = 1) -> list[dict]:
    """``steps`` profiler steps of ``per_step`` iterations: an op launching a kernel, an op whose
    name holds ``}, {`` and quotes."""
    events = []
    for k in range(steps * per_step):
        t = k * 100
        if k % per_step == 0:
            events.append(op(f"ProfilerStep#{k // per_step}", t, per_step * 100 - 10, cat="user_annotation"))
        events += [op("aten::mm", t + 1, 50, **{"External id": 3 * k + 1, "Sequence number": k}),
                   op("cudaLaunchKernel", t + 2, 5, cat="cuda_runtime", correlation=k + 1, **{"External id": 3 * k + 1}),
                   op("a name with }, { and \"}\", inside", t + 60, 9),
                   {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": t + 10, "dur": 20,
                    "args": {"correlation": k + 1, "External id": 3 * k + 1}}]  # fmt: skip
    return events


def test_a_trace_read_in_chunks_is_the_trace_read_whole(tmp_path, monkeypatch):
    import torchprof._traces.reader as reader

    path = tmp_path / "t.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": training_events(300), "traceName": "x"}, indent=1))
    whole = reader._read_whole(str(path))
    monkeypatch.setattr(reader, "CHUNK_BYTES", 1000)  # dozens of chunks, cuts beside "}, {" in names
    calls = []
    monkeypatch.setattr(reader, "_read_whole", lambda where: calls.append(where))
    chunked = reader.read_trace(str(path))
    assert calls == []  # read in chunks, not whole
    for field in ("name", "kind", "tid", "start", "end", "seq", "ext_id", "link", "corr"):
        assert list(getattr(chunked.cycles[0], field)) == list(getattr(whole.cycles[0], field)), field
    assert chunked.meta == whole.meta and chunked.wall_us == whole.wall_us


def test_a_chunk_with_epoch_decimals_is_read_again_keeping_every_digit(tmp_path, monkeypatch):
    import torchprof._traces.reader as reader

    monkeypatch.setattr(reader, "CHUNK_BYTES", 200)
    t = 1661203462598738  # epoch µs: a double cannot pin "…738.125" to the nanosecond
    body = ",\n".join(f'{{"ph": "X", "cat": "cpu_op", "name": "op{k}", "pid": 1, "tid": 1, "ts": {t + 10 * k}.125, "dur": 5.25}}'
                      for k in range(40))  # fmt: skip
    (tmp_path / "t.json").write_text('{"traceEvents": [\n' + body + "\n]}")
    cols = reader.read_trace(str(tmp_path / "t.json")).cycles[0]
    assert list(cols.start) == [(t + 10 * k) * 1000 + 125 for k in range(40)]
    assert list(cols.end) == [(t + 10 * k) * 1000 + 125 + 5250 for k in range(40)]


def test_loading_a_trace_takes_at_most_three_times_its_size_in_memory(tmp_path):
    # (a 366 MB trace is measured by tests/bench/bench_load_trace.py; the figures are in the README)
    import tracemalloc

    path = write_trace(tmp_path / "t.json", training_events(10, 500))
    tracemalloc.start()
    try:
        torchprof.load_trace(path).df
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # the events as columns, the tree and the DataFrame, and the one chunk parsed at a time
    from torchprof._traces.reader import CHUNK_BYTES

    assert peak < 3 * path.stat().st_size + 20 * CHUNK_BYTES, (peak, path.stat().st_size)
