"""MFU against the device: the table of peaks, recognising the device live and from a trace, the
``peak_flops=`` override, and the ``mfu`` column and summary figures."""

from __future__ import annotations

import math

import pytest

from conftest import shared_trace


@pytest.mark.parametrize(("reported", "device", "bf16"), [
    ("NVIDIA A100-SXM4-80GB", "NVIDIA A100", 312e12),
    ("NVIDIA A100-PG509-200", "NVIDIA A100", 312e12),
    ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM", 989.5e12),
    ("NVIDIA H100 PCIe", "NVIDIA H100 PCIe", 756e12),
    ("NVIDIA H100 NVL", "NVIDIA H100 NVL", 835.5e12),
    ("NVIDIA H200", "NVIDIA H200 SXM", 989.5e12),
    ("NVIDIA B200", "NVIDIA B200", 2250e12),
    ("NVIDIA L4", "NVIDIA L4", 121e12),
    ("NVIDIA L40S", "NVIDIA L40S", 362.05e12),
    ("AMD Instinct MI300X", "AMD Instinct MI300X", 1307.4e12),
    ("AMD Instinct MI250X/MI250", "AMD Instinct MI250X", 383e12 / 2),  # one of the package's two GCDs
])  # fmt: skip
def test_each_device_of_the_table_is_recognised_with_its_peak(reported, device, bf16):
    from torchprof._tree.devices import choose_peak

    meta = {"deviceProperties": [{"id": 0, "name": reported}], "compute_dtype": "bf16"}
    peak = choose_peak(meta, None, True)
    assert (peak.device, peak.dtype, peak.source) == (device, "bf16", "table")
    assert peak.flops_per_s == pytest.approx(bf16)


def test_an_unknown_device_or_dtype_has_no_peak_and_says_why():
    from torchprof._tree.devices import choose_peak

    assert math.isnan(choose_peak({"deviceProperties": [{"name": "NVIDIA GeForce GTX 1080"}]}, None, True).flops_per_s)
    unknown = choose_peak({"deviceProperties": [{"name": "NVIDIA A100"}]}, None, True)
    assert math.isnan(unknown.flops_per_s) and "peak_flops='bf16'" in unknown.source
    assert choose_peak({"deviceProperties": [{"name": "NVIDIA A100"}]}, "float16", True).flops_per_s == 312e12
    assert "no accelerator" in choose_peak({}, None, False).source
    assert choose_peak({}, 2e12, False).flops_per_s == 2e12
    for bad in (0, -1.0, "int3", "fast"):
        with pytest.raises(ValueError, match="peak_flops"):
            choose_peak({}, bad, False)


def test_a_trace_names_its_device_and_a_dtype_gives_its_mfu():
    import torchprof
    from torchprof._tree.devices import choose_peak
    from torchprof._tree.mfu import set_mfu
    from torchprof._tree.summary import mfu_summary

    plain = torchprof.load_trace(shared_trace("a100-alexnet-forward.json.gz"))  # no dtype recorded: no peak
    s = plain.summary
    assert s["peak_flops"]["device"] == "NVIDIA A100" and math.isnan(s["mfu"]) and plain.df["mfu"].isna().all()
    assert "MFU" not in plain.headline
    tf32 = torchprof.load_trace(shared_trace("a100-ddp-training.json.gz"), peak_flops="tf32")
    s = tf32.summary
    df = tf32.df
    assert s["peak_flops"] == {"flops_per_s": 156e12, "device": "NVIDIA A100", "dtype": "tf32", "source": "table"}
    # Its embedding lookups (fbgemm's) have no formula: the run's FLOPs are unknown, so is its MFU,
    # and the headline claims none; a row whose FLOPs are known has its own: its FLOPs over its
    # kernels' time.
    assert tf32.unsupported_ops.get("fbgemm::split_embedding_codegen_lookup_rowwise_adagrad_function") == 12
    assert math.isnan(s["mfu"]) and math.isnan(s["mfu_wall"]) and "MFU" not in tf32.headline
    known = df[(df["flops"] > 0) & (df["cuda_us"] > 0)]
    assert len(known) > 10
    row = known.iloc[1]
    assert row["mfu"] == pytest.approx(row["flops"] / (row["cuda_us"] / 1e6) / 156e12)
    set_mfu(tf32.tree, choose_peak(tf32.meta, "fp32", True))
    assert "measure above 100%" in mfu_summary(tf32.tree, s["flops_per_s"])["mfu_note"]  # its matmuls beat fp32's peak: TF32


@pytest.fixture(scope="module")
def cpu_run():
    import torch

    import torchprof

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    x = torch.randn(32, 64)
    # No op with a cost outside the layers (a loss's sum would be unknown in a process where an
    # earlier test compiled a model: outside calls are not noted then), so the root is exact.
    out = model(x)
    out.backward(torch.ones_like(out))
    with torchprof.Profiler(peak_flops=1e11) as prof:
        out = model(x)
        out.backward(torch.ones_like(out))
    return prof


def test_a_given_peak_measures_cpu_time_without_a_device(cpu_run):
    from torchprof._views.format import fraction

    df, s = cpu_run.df, cpu_run.summary
    expected = df["flops"] / (df["cpu_us"] / 1e6) / 1e11
    layers = df.index[df["kind"] == "module"]
    assert df.loc[layers, "mfu"].tolist() == pytest.approx(expected[layers].tolist())
    assert s["mfu"] == df["mfu"].iloc[0] and s["peak_flops"]["source"] == "given"
    assert " MFU |" in cpu_run.table(width=None) and cpu_run.headline.endswith(f"MFU {fraction(s['mfu'])} of 100GFLOP/s")
    assert cpu_run.meta["compute_dtype"] == "fp32"


def test_without_a_peak_mfu_is_nan_and_not_shown(resnet18_step):
    prof, _ = resnet18_step
    assert prof.df["mfu"].isna().all() and math.isnan(prof.summary["mfu"])
    assert "MFU" not in prof.table() and "no accelerator" in prof.summary["peak_flops"]["source"]


def test_a_peak_travels_with_a_saved_profile_and_an_exported_trace(cpu_run, tmp_path):
    import torchprof

    again = torchprof.load(cpu_run.save(str(tmp_path / "p.json.gz")))
    assert again.df["mfu"].equals(cpu_run.df["mfu"]) and again.summary["peak_flops"] == cpu_run.summary["peak_flops"]
    trace = cpu_run.export_chrome_trace(str(tmp_path / "t.json.gz"))
    loaded = torchprof.load_trace(trace, peak_flops=1e11)
    layers = cpu_run.df.index[cpu_run.df["kind"] == "module"]
    # the replay's FLOPs go with the trace, so the MFU of each layer is back (times are the trace's own)
    assert loaded.df.loc[layers, "flops"].tolist() == cpu_run.df.loc[layers, "flops"].tolist()
    assert loaded.df.loc[layers, "mfu"].notna().all()
    assert torchprof.load(str(tmp_path / "p.json.gz"), peak_flops=2e11).df["mfu"].iloc[0] == pytest.approx(cpu_run.df["mfu"].iloc[0] / 2)


def test_a_bad_peak_is_refused_before_the_run():
    import torchprof

    with pytest.raises(ValueError, match="peak_flops"):
        torchprof.Profiler(peak_flops="int4")
    with pytest.raises(ValueError, match="peak_flops"):
        torchprof.load_trace("no-such-file.json", peak_flops=-1)


def test_the_dtype_the_model_computed_in_is_recorded():
    import torch

    from torchprof._capture.facts import compute_dtype

    model = torch.nn.Linear(4, 4)
    assert compute_dtype([(model, "m")], [], on_device=False) == "fp32"
    assert compute_dtype([(model.to(torch.bfloat16), "m")], [], on_device=False) == "bf16"
    assert compute_dtype([(model, "m")], [torch.float16], on_device=False) == "fp16"  # autocast's wins
    assert compute_dtype([], [], on_device=False) is None


def test_a_profile_records_the_dtype_holding_most_parameter_bytes_counted_once():
    # The stop counts the one root's parameters once, for its row and for the dtype alike.
    import torch

    import torchprof

    class Mixed(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = torch.nn.Linear(64, 64), torch.nn.Linear(64, 64).to(torch.bfloat16)
            self.again = self.a  # one layer under two names: its bytes count once

        def forward(self, x):
            return self.again(self.b(self.a(x).to(self.b.weight.dtype)).to(x.dtype))

    torch.manual_seed(0)
    model, x = Mixed(), torch.randn(2, 64)

    def run():
        with torchprof.Profiler(flops=False) as prof:
            model(x)
        return prof.meta["compute_dtype"], prof.df.loc["Mixed", "params"]

    assert run() == ("fp32", 8320)  # 4160 fp32 parameters (16,640 bytes) against 4160 bf16 ones (8,320)
    model.b.to(torch.float64)
    assert run() == ("fp64", 8320)  # now 33,280 bytes of fp64


@pytest.mark.skipif("not __import__('torch').cuda.is_available()", reason="needs a CUDA device")
def test_a_live_gpu_is_recognised_from_its_properties():
    import torch

    import torchprof

    model = torch.nn.Linear(256, 256).cuda()
    x = torch.randn(64, 256, device="cuda")
    with torchprof.Profiler() as prof:
        model(x).sum().backward()
    assert prof.meta["deviceProperties"][0]["name"] == torch.cuda.get_device_properties(0).name
    assert prof.summary["peak_flops"]["device"] is not None
