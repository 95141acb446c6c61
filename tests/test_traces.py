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
        (gzip.compress(b'{"traceEvents": [')[:-8], "truncated"),
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
    pd.testing.assert_frame_equal(df, again.df, check_exact=False, rtol=1e-9)
