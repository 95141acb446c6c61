"""Live CUDA: kernels per layer, a warm compiled model's Triton kernels, the memory peak and MFU,
each checked against an independent measure of the same run. They skip without a CUDA device
(figures at scale: ``tests/bench/bench_cuda.py``)."""

from __future__ import annotations

import json
import math

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

import torchprof  # noqa: E402

DEVICE_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}


def device_us_of_trace(prof: torchprof.Result, tmp_path) -> float:
    """Every kernel, memcpy and memset duration of the run, read from the exported JSON directly;
    where kineto wrote them without times (torch 2.11 on an H200 did), the sum of the profile's
    kernel rows, and reopening the file must say its device time is unknown."""
    path = prof.export_chrome_trace(str(tmp_path / "trace.json"))
    events = json.loads(open(path).read())["traceEvents"]
    device = [e for e in events if e.get("ph") == "X" and e.get("cat") in DEVICE_CATEGORIES]
    if device and all(e.get("dur", 0) == 0 for e in device):
        reopened = torchprof.load_trace(path)
        assert math.isnan(reopened.df.iloc[0]["cuda_us"]) and "carry no times" in reopened.summary["warnings"][-1]
        return float(prof.df[prof.df["kind"] == "kernel"]["self_cuda_us"].sum())
    return float(sum(e.get("dur", 0) for e in device))


def cnn() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(), torch.nn.Linear(32, 10),
    ).cuda()  # fmt: skip


def test_every_kernel_of_a_training_step_is_counted_once_and_lands_on_its_layer(tmp_path):
    model = cnn()
    opt = torch.optim.AdamW(model.parameters())
    x = torch.randn(8, 3, 32, 32, device="cuda")

    def step() -> None:
        model(x).sum().backward()
        opt.step()
        opt.zero_grad()

    step()
    torch.cuda.synchronize()
    with torchprof.Profiler() as prof:
        step()
        torch.cuda.synchronize()
    df = prof.df
    assert math.isclose(df.iloc[0]["cuda_us"], device_us_of_trace(prof, tmp_path), rel_tol=1e-6, abs_tol=1.0)
    for path in ["Sequential.0", "Sequential.3", "Sequential.7"]:  # the convolutions and the Linear
        assert df.loc[path, "fwd_cuda_us"] > 0 and df.loc[path, "bwd_cuda_us"] > 0, path
    model_row = df.loc["Sequential"]
    assert model_row["fwd_cuda_us"] + model_row["bwd_cuda_us"] <= model_row["cuda_us"] + 1e-6
    on_cpu = cnn().cpu()
    with torchprof.Profiler(cuda=False) as reference:
        on_cpu(x.cpu()).sum().backward()
    layers = df["kind"] == "module"
    on_device = df[layers]["flops"].sort_index()  # rows follow the timings: compare by layer
    assert on_device.equals(reference.df[reference.df["kind"] == "module"]["flops"].sort_index())


def test_a_compiled_models_triton_kernels_land_on_its_layers_without_compiling_again(tmp_path):
    from torch._dynamo.utils import counters

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True)
    eager = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).cuda()
    x = torch.randn(4, 32, 64, device="cuda")
    with torchprof.Profiler() as reference:
        eager(x).sum().backward()
    compiled = torch.compile(eager)
    for _ in range(2):
        compiled(x).sum().backward()
    torch.cuda.synchronize()
    before = {k: dict(v) for k, v in counters.items()}
    with torchprof.Profiler() as prof:
        compiled(x).sum().backward()
        torch.cuda.synchronize()
    df = prof.df
    assert {k: dict(v) for k, v in counters.items()} == before
    assert df.loc["TransformerEncoder", "flops"] == reference.df.loc["TransformerEncoder", "flops"]
    triton = df[(df["kind"] == "kernel") & df["name"].str.startswith("triton")]
    assert len(triton) > 0
    assert triton["path"].str.contains("TransformerEncoder.layers.", regex=False).any()
    assert (df.loc[["TransformerEncoder.layers.0", "TransformerEncoder.layers.1"], "cuda_us"] > 0).all()
    assert math.isclose(df.iloc[0]["cuda_us"], device_us_of_trace(prof, tmp_path), rel_tol=1e-6, abs_tol=1.0)


def test_mfu_is_the_flops_over_device_time_and_the_devices_own_peak():
    torch.manual_seed(0)
    model = torch.nn.Linear(2048, 2048, bias=False).cuda().to(torch.bfloat16)
    x = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    model(x).sum().backward()
    with torchprof.Profiler() as prof:
        model(x).sum().backward()
        torch.cuda.synchronize()
    peak = prof.summary["peak_flops"]
    assert peak["device"] is not None and peak["dtype"] == "bf16" and peak["flops_per_s"] > 1e13
    row = prof.df.loc["Linear"]
    assert row["flops"] == 3 * 2 * 2048**3
    assert math.isclose(row["mfu"], row["flops"] / (row["cuda_us"] * 1e-6) / peak["flops_per_s"], rel_tol=1e-9)
    assert 0 < row["mfu"] <= 1
