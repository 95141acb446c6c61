"""Memory that answers "why did I run out?": what each layer keeps for backward, the highest total
while each node ran, where the run peaked and what the peak was made of, and the timeline.

Hand-written event streams give exact answers; hand-made models with known sizes check the live
capture; a real A100 trace with device memory events added checks the device path."""

from __future__ import annotations

import gzip
import json
import math

import pytest

from conftest import shared_trace
from synthetic import build, ev
from torchprof._tree.memory import minmax_thin

MB = 1 << 20


def training_step_with_memory() -> list[dict]:
    """Net.a and Net.b forward on thread 1, then Net.a's backward on thread 2 (the allocator's
    total after each event in ``total``):

    - Net.a keeps 1000 B (block 1, freed in backward) and frees a 500 B temporary (block 2);
    - Net.b keeps 2000 B (block 3, freed at 95 inside Net, after Net.b ended) and 100 B (block 4,
      its output, never freed);
    - Net.a's backward makes and frees a 4000 B temporary (block 5): the peak, 5100 B.
    """
    return [
        ev("module", "Net", 0, 100, type_="Net"),
        ev("module", "Net.a", 10, 40, type_="A"),
        ev("op", "aten::empty", 11, 12),
        ev("memory", "[memory]", 11.5, 11.5, nbytes=1000, addr=1, total=1000),
        ev("op", "aten::empty", 13, 14),
        ev("memory", "[memory]", 13.5, 13.5, nbytes=500, addr=2, total=1500),
        ev("op", "aten::mul", 15, 16, seq=5),
        ev("memory", "[memory]", 30, 30, nbytes=-500, addr=2, total=1000),
        ev("module", "Net.b", 50, 90, type_="B"),
        ev("memory", "[memory]", 55, 55, nbytes=2000, addr=3, total=3000),
        ev("memory", "[memory]", 60, 60, nbytes=100, addr=4, total=3100),
        ev("memory", "[memory]", 95, 95, nbytes=-2000, addr=3, total=1100),
        ev("op", "autograd::engine::evaluate_function: MulBackward0", 120, 160, tid=2, seq=5, fwd=1),
        ev("memory", "[memory]", 130, 130, nbytes=4000, addr=5, total=5100, tid=2),
        ev("memory", "[memory]", 140, 140, nbytes=-4000, addr=5, total=1100, tid=2),
        ev("memory", "[memory]", 150, 150, nbytes=-1000, addr=1, total=100, tid=2),
    ]


def column(tree, name: str) -> dict[str, float]:
    return dict(zip(tree.columns["path"], tree.columns[name]))


# -- kept bytes (act_*_mem) ---------------------------------------------------------------------------
def test_a_layer_keeps_what_its_forward_allocated_and_did_not_free_before_it_ended():
    tree = build(training_step_with_memory(), memory=True)
    act = column(tree, "act_cpu_mem")
    assert act["Net.a"] == 1000  # block 2 was a temporary
    assert act["Net.b"] == 2100
    # Net counts its children's allocations once, if still alive at its own end: block 3 is not.
    assert act["Net"] == 1100
    assert act["profile"] == 1100  # above layers: the sum of the layers below
    assert math.isnan(act["Net.a/aten::empty"])  # ops have no forward of their own
    assert math.isnan(column(tree, "act_cuda_mem")["Net"])  # no device memory recorded


def test_the_net_columns_still_say_allocated_minus_freed():
    tree = build(training_step_with_memory(), memory=True)
    net = column(tree, "cpu_mem")
    assert net["Net.a"] == 0  # what Net.a kept was freed by its own backward: nets to nothing
    assert net["Net.b"] == 2100 and net["Net"] == 100 and net["profile"] == 100


def test_kept_bytes_of_repeated_calls_add_up():
    once = training_step_with_memory()[:12]
    shifted = [dict(e, start=e["start"] + 200_000, end=e["end"] + 200_000, addr=e["addr"] + 100 if e["addr"] else 0,
                    total=e["total"] + 1100 if e["total"] else 0) for e in once]  # fmt: skip
    tree = build(once + shifted, memory=True)
    act = column(tree, "act_cpu_mem")
    calls = column(tree, "calls")
    assert calls["Net.a"] == 2 and act["Net.a"] == 2000 and act["Net.b"] == 4200 and act["Net"] == 2200


def test_without_addresses_kept_bytes_are_unknown_but_peaks_are_not():
    events = [dict(e, addr=0) for e in training_step_with_memory()]
    tree = build(events, memory=True)
    assert all(math.isnan(v) for v in tree.columns["act_cpu_mem"])
    assert column(tree, "peak_cpu_mem")["Net.b"] == 3100
    assert tree.memory["devices"]["cpu"]["breakdown"] is None


# -- peaks ------------------------------------------------------------------------------------------
def test_a_nodes_peak_is_the_highest_total_while_it_ran_forward_or_backward():
    tree = build(training_step_with_memory(), memory=True)
    peak = column(tree, "peak_cpu_mem")
    assert peak["Net.b"] == 3100  # its own range: 1000 when it opened, 3100 at most
    assert peak["Net.a/autograd::engine::evaluate_function: MulBackward0"] == 5100
    assert peak["Net.a"] == 5100  # its backward work counts
    assert peak["Net"] == 5100 and peak["profile"] == 5100
    assert peak["Net.a/aten::mul"] == 1500  # the total when it opened
    assert tree.peak_cpu_mem == 5100


def test_without_allocator_totals_the_peak_is_the_running_sum_of_what_was_seen():
    """Traces whose memory events carry no ``Total Allocated`` (older torch): the peak is the
    running sum, not 0."""
    events = [dict(e, total=0) for e in training_step_with_memory()]
    tree = build(events, memory=True)
    assert tree.peak_cpu_mem == 5100
    assert column(tree, "peak_cpu_mem")["Net.b"] == 3100


def test_a_total_from_before_a_range_counts_in_its_peak():
    """A range that opens while bytes are allocated has at least that total, even if nothing
    is allocated inside it."""
    events = [
        ev("memory", "[memory]", 1, 1, nbytes=700, addr=9, total=700),
        ev("module", "Idle", 10, 20, type_="Idle"),
        ev("memory", "[memory]", 30, 30, nbytes=-700, addr=9, total=0),
    ]
    assert column(build(events, memory=True), "peak_cpu_mem")["Idle"] == 700


def test_peak_at_names_the_deepest_node_its_layer_and_the_phase():
    from torchprof._records import Recording
    from torchprof._tree.summary import summarize

    tree = build(training_step_with_memory(), memory=True)
    at = summarize(tree, Recording())["peak_at"]
    assert at == {"cpu": {"path": "Net.a/autograd::engine::evaluate_function: MulBackward0", "layer": "Net.a",
                          "phase": "backward", "bytes": 5100.0, "time_us": 130.0}}  # fmt: skip


def test_the_summary_line_says_where_memory_peaked():
    from torchprof._records import Recording
    from torchprof._tree.summary import summarize
    from torchprof._views.format import summary_line

    line = summary_line(summarize(build(training_step_with_memory(), memory=True), Recording()))
    assert "peak CPU mem 4.98 KB · cpu peak in Net.a (backward)" in line


def test_the_breakdown_at_the_peak_adds_up_to_it():
    tree = build(training_step_with_memory(), memory=True)
    parts = tree.memory["devices"]["cpu"]["breakdown"]
    assert sorted(map(tuple, parts)) == sorted([
        ("activation", "Net.a", 1000, True),  # block 1: made in Net.a's forward, alive after it
        ("activation", "Net.b", 100, True),  # block 4
        ("temporary", "Net.a", 4000, True),  # block 5: freed before its backward node ended
    ])  # fmt: skip


def test_device_memory_peaks_per_device():
    events = [
        ev("module", "Net", 0, 100, type_="Net"),
        ev("memory", "[memory]", 10, 10, nbytes=300, cuda=True, device=0, addr=1, total=300),
        ev("memory", "[memory]", 20, 20, nbytes=900, cuda=True, device=1, addr=1, total=900),
        ev("memory", "[memory]", 30, 30, nbytes=400, cuda=True, device=0, addr=2, total=700),
        ev("memory", "[memory]", 40, 40, nbytes=-900, cuda=True, device=1, addr=1, total=0),
    ]
    tree = build(events, memory=True)
    assert {d: p["peak"] for d, p in tree.memory["devices"].items()} == {"cuda:0": 700.0, "cuda:1": 900.0}
    assert column(tree, "peak_cuda_mem")["Net"] == 900  # the highest of any one device
    assert column(tree, "act_cuda_mem")["Net"] == 700
    assert math.isnan(column(tree, "peak_cpu_mem")["Net"])
    assert tree.peak_cuda_mem == 900


# -- timeline ---------------------------------------------------------------------------------------
def test_the_timeline_has_every_event_with_the_node_running_and_the_phase():
    from torchprof._views.memory import timeline_frame

    df = timeline_frame(build(training_step_with_memory(), memory=True))
    assert df["allocated"].tolist() == [1000, 1500, 1000, 3000, 3100, 1100, 5100, 1100, 100]
    assert df["time_us"].tolist() == [11.5, 13.5, 30, 55, 60, 95, 130, 140, 150]
    assert df["layer"].tolist() == ["Net.a"] * 3 + ["Net.b"] * 2 + ["Net"] + ["Net.a"] * 3
    assert df["phase"].tolist() == ["forward"] * 6 + ["backward"] * 3
    assert df["path"][0] == "Net.a/aten::empty"


def test_thinning_keeps_the_peak_the_ends_and_two_points_per_bucket():
    times = list(range(10_000))
    values = [(i * 7919) % 1000 for i in times]
    values[6543] = 5000
    keep = minmax_thin(times, values, 100)
    assert keep == sorted(set(keep)) and len(keep) <= 202
    assert 6543 in keep and keep[0] == 0 and keep[-1] == 9999
    # each bucket keeps its lowest and highest point
    assert min(values[k] for k in keep) == min(values) and max(values[k] for k in keep) == 5000


def test_the_widget_thins_a_line_exactly_as_python_does():
    import subprocess

    from conftest import REPO
    from test_widget import node_binary

    times = [i * 1.5 + (i % 3) for i in range(5000)]
    values = [(i * 7919) % 997 + (3000 if i == 4321 else 0) for i in range(5000)]
    script = ("import {downsampleMinMax} from './js/widget.js';"
              f"console.log(JSON.stringify(downsampleMinMax({json.dumps(times)}, {json.dumps(values)}, 100)));")  # fmt: skip
    out = subprocess.run([node_binary(), "--input-type=module", "-e", script], cwd=REPO, capture_output=True, text=True,
                         timeout=60, check=True)  # fmt: skip
    assert json.loads(out.stdout) == minmax_thin(times, values, 100)


def test_the_widget_gets_a_few_thousand_points_with_the_peak_and_the_phase_bands():
    from torchprof._views.memory import PAYLOAD_POINTS, memory_payload

    events = [ev("module", "Net", 0, 50_000, type_="Net")]
    total = 0
    for i in range(20_000):  # 10k allocations and their frees, one slow ramp
        b = 10 + (i % 7) if i % 2 == 0 else -(10 + ((i - 1) % 7))
        total += b
        events.append(ev("memory", "[memory]", 1 + i * 2, 1 + i * 2, nbytes=b, addr=1 + i // 2, total=total + i))
    events.append(ev("op", "autograd::engine::evaluate_function: X", 60_000, 60_010, tid=2))
    events.append(ev("memory", "[memory]", 60_005, 60_005, nbytes=8, addr=99_999, total=1, tid=2))
    tree = build(events, memory=True)
    data = memory_payload(tree)
    (cpu,) = data["devices"]
    assert len(cpu["t"]) <= PAYLOAD_POINTS and len(cpu["t"]) == len(cpu["v"]) == len(cpu["row"])
    assert max(cpu["v"]) == tree.memory["devices"]["cpu"]["peak"] == cpu["peak"]["v"]
    assert [b[2] for b in data["bands"]] == [0, 1] and data["phases"][:2] == ["forward", "backward"]


# -- device memory on a real A100 trace -------------------------------------------------------------
def alexnet_with_device_memory(tmp_path):
    """The A100 AlexNet trace with device allocations added inside its real ops: each
    ``aten::empty`` or ``aten::empty_strided`` in a forward region allocates ``(k + 1)`` MiB on
    device 0 at its start, freed at the end of that region. Returns the path, the events added and
    ``(time, bytes, address, op)`` of each allocation."""
    data = json.loads(gzip.open(shared_trace("a100-alexnet-forward.json.gz")).read())
    events = data["traceEvents"]
    regions = sorted((e for e in events if e.get("cat") == "user_annotation" and e["name"].endswith("|forward]")),
                     key=lambda e: e["ts"])  # fmt: skip
    empties = sorted((e for e in events if e.get("name") in ("aten::empty", "aten::empty_strided")), key=lambda e: e["ts"])
    changes = []  # (time, bytes, address, op)
    for k, op in enumerate(empties):
        region = next((r for r in regions if r["ts"] <= op["ts"] <= r["ts"] + r["dur"]), None)
        if region is not None:
            changes.append((op["ts"] + min(op["dur"], 1) / 2, (k + 1) * MB, 1 << 20 | k, op))
            changes.append((region["ts"] + region["dur"] - 0.5, -(k + 1) * MB, 1 << 20 | k, op))
    total = 0
    added = []
    for ts, size, addr, op in sorted(changes, key=lambda c: c[0]):
        total += size
        added.append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": op["pid"], "tid": op["tid"],
                      "ts": ts, "args": {"Total Reserved": 0, "Total Allocated": total, "Bytes": size, "Device Id": 0,
                                         "Device Type": 1, "Addr": addr}})  # fmt: skip
    data["traceEvents"] = events + added
    path = tmp_path / "alexnet-memory.json"
    path.write_text(json.dumps(data))
    return path, added, [c for c in changes if c[1] > 0]


def test_device_memory_of_a_real_a100_trace_peaks_in_the_op_that_allocated_last(tmp_path):
    import torchprof

    path, added, frees = alexnet_with_device_memory(tmp_path)
    assert len(added) > 10
    prof = torchprof.load_trace(path)
    timeline = prof.memory_timeline()
    ordered = sorted(added, key=lambda e: e["ts"])
    assert timeline["allocated"].tolist() == [e["args"]["Total Allocated"] for e in ordered]
    assert set(timeline["device"]) == {"cuda:0"}
    top = max(ordered, key=lambda e: e["args"]["Total Allocated"])
    top_op = next(op for _, _, addr, op in frees if addr == top["args"]["Addr"])  # the op it was added to
    at = prof.summary["peak_at"]["cuda:0"]
    assert at["bytes"] == top["args"]["Total Allocated"] == prof.summary["peak_cuda_mem"]
    assert at["path"].endswith("/" + top_op["name"]) and at["phase"] == "other"  # user regions, no modules
    df = prof.df
    assert df.loc[at["path"], "peak_cuda_mem"] == at["bytes"]
    assert df["peak_cuda_mem"].iloc[0] == at["bytes"]
    # what is alive at the peak is the region's blocks, each freed before the outermost range
    # around it ends (outside every module): temporaries, which add up to the peak
    parts = prof.memory_breakdown()
    assert parts.loc["temporary", "bytes"] == at["bytes"] == parts["bytes"].sum()


# -- live capture on hand-made models ------------------------------------------------------------------


def test_a_layer_that_saves_a_tensor_for_backward_keeps_its_bytes(keep_and_temp):
    act = keep_and_temp.df["act_cpu_mem"]
    output = 4 * 16 * 4
    assert act["Net.saver"] == 4 * MB + output  # the saved tensor and its output
    assert act["Net.temp"] == output  # its 8 MiB temporary is not kept
    assert keep_and_temp.df["cpu_mem"]["Net.saver"] < 4 * MB  # what the net column showed


def test_a_large_temporary_is_the_peak_of_its_layer_and_named_at_the_peak(keep_and_temp):
    df = keep_and_temp.df
    at = keep_and_temp.summary["peak_at"]["cpu"]
    assert at["layer"] == "Net.temp" and at["phase"] == "forward"
    assert df.loc["Net.temp", "peak_cpu_mem"] >= 12 * MB > df.loc["Net.saver", "peak_cpu_mem"]
    parts = keep_and_temp.memory_breakdown()
    assert parts.loc["temporary", "bytes"] >= 8 * MB and parts.loc["activation", "bytes"] >= 4 * MB
    by_layer = keep_and_temp.memory_breakdown(by="layer")
    assert by_layer.loc["Net.temp", "temporary"] >= 8 * MB and by_layer.loc["Net.saver", "activation"] == 4 * MB + 256
    assert parts["bytes"].sum() == at["bytes"] == by_layer["total"].sum()


def test_an_optimizers_state_and_the_gradients_are_named_at_an_optimizer_peak():
    import torch
    from torch import nn

    import torchprof

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 8))
    opt = torch.optim.Adam(net.parameters())
    x = torch.randn(4, 512)
    with torchprof.Profiler(memory=True) as prof:
        net(x).sum().backward()
        opt.step()
        opt.zero_grad()
    param_bytes = sum(p.numel() * 4 for p in net.parameters())
    state_bytes = sum(t.untyped_storage().nbytes() for s in opt.state.values() for t in s.values())
    assert state_bytes > 2 * param_bytes  # exp_avg, exp_avg_sq and a step per parameter
    at = prof.summary["peak_at"]["cpu"]
    assert at["phase"] == "optimizer" and at["layer"] == "Optimizer.step#Adam.step"
    parts = prof.memory_breakdown()
    assert parts.loc["optimizer_state", "bytes"] == state_bytes
    assert parts.loc["gradient", "bytes"] == param_bytes
    # the parameters were allocated before profiling: torch's host total leaves them out, the peak counts them
    assert parts.loc["parameter", "bytes"] == param_bytes and parts["not_in_peak"].sum() == 0
    assert parts["bytes"].sum() == at["bytes"] == prof.summary["peak_cpu_mem"] == prof.df["peak_cpu_mem"].iloc[0]
    by_layer = prof.memory_breakdown(by="layer")
    assert by_layer.loc["Sequential.0", "optimizer_state"] == sum(
        t.untyped_storage().nbytes() for p in net[0].parameters() for t in opt.state[p].values())


def test_a_peak_counts_parameters_gradients_and_optimizer_state_made_before_the_profiler_opened():
    """Issue 16: a model warmed up before the block (its parameters, gradients and Adam's state
    all exist) had parameter = 0 and gradient = 0 at the peak, and a peak without them."""
    import torch
    from torch import nn

    import torchprof

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256))
    opt = torch.optim.Adam(net.parameters())
    x = torch.randn(8, 256)

    def step():
        net(x).sum().backward()
        opt.step()

    step()  # parameters, gradients and optimizer state now exist; the gradients are kept (no zero_grad)
    with torchprof.Profiler(memory=True) as prof:
        step()
    param_bytes = sum(p.untyped_storage().nbytes() for p in net.parameters())
    grad_bytes = sum(p.grad.untyped_storage().nbytes() for p in net.parameters())
    state_bytes = sum(t.untyped_storage().nbytes() for s in opt.state.values() for t in s.values())
    parts = prof.memory_breakdown()
    assert parts.loc["parameter", "bytes"] == param_bytes
    assert parts.loc["gradient", "bytes"] == grad_bytes  # accumulated into in place: allocated before the block
    assert parts.loc["optimizer_state", "bytes"] == state_bytes
    assert parts["not_in_peak"].sum() == 0
    peak = prof.summary["peak_cpu_mem"]
    assert parts["bytes"].sum() == peak == prof.summary["peak_at"]["cpu"]["bytes"] == prof.df["peak_cpu_mem"].iloc[0]
    # torch's own figure (its host total counts only blocks allocated while it records) plus what it leaves out
    device = prof.tree.memory["devices"]["cpu"]
    assert device["allocator_peak"] == max(prof.memory_timeline()["allocated"]) - device["before_block"]
    assert device["before_block"] >= param_bytes + grad_bytes + state_bytes - device["allocator_peak"]
    assert peak >= param_bytes + grad_bytes + state_bytes


def test_activation_checkpointing_keeps_less():
    import torch
    from torch import nn
    from torch.utils.checkpoint import checkpoint

    import torchprof

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(256, 1024), nn.Linear(1024, 256)

        def forward(self, x):
            return self.b(torch.relu(self.a(x)))

    class Net(nn.Module):
        def __init__(self, ckpt: bool):
            super().__init__()
            self.block, self.ckpt = Block(), ckpt

        def forward(self, x):
            return checkpoint(self.block, x, use_reentrant=False) if self.ckpt else self.block(x)

    kept = {}
    for ckpt in (False, True):
        torch.manual_seed(0)
        net = Net(ckpt)
        x = torch.randn(64, 256, requires_grad=True)
        with torchprof.Profiler(memory=True) as prof:
            net(x).sum().backward()
        kept[ckpt] = prof.df.loc["Net.block", "act_cpu_mem"]
    output = 64 * 256 * 4
    assert kept[False] == 64 * 1024 * 4 + output  # the ReLU's output (b's saved input) and its own
    assert kept[True] == output  # only what it returns


def test_activations_at_the_peak_fall_when_a_resnet_checkpoints_its_stages():
    import torch
    import torchvision
    from torch.utils.checkpoint import checkpoint

    import torchprof

    activations, kept = {}, {}
    for ckpt in (False, True):
        torch.manual_seed(0)
        model = torchvision.models.resnet18(weights=None)
        if ckpt:
            for name in ("layer1", "layer2", "layer3", "layer4"):
                stage = getattr(model, name)
                stage.forward = lambda x, f=stage.forward: checkpoint(f, x, use_reentrant=False)
        x = torch.randn(2, 3, 64, 64)
        model(x).sum().backward()
        model.zero_grad()
        with torchprof.Profiler(memory=True) as prof:
            model(x).sum().backward()
        activations[ckpt] = prof.memory_breakdown().loc["activation", "bytes"]
        kept[ckpt] = prof.df.loc[[f"ResNet.layer{i}" for i in range(1, 5)], "act_cpu_mem"].sum()
    assert 0 < activations[True] < activations[False]
    assert kept[True] < kept[False] / 4  # a checkpointed stage keeps its output alone


def test_a_trace_exported_and_loaded_has_the_same_memory_figures(keep_and_temp, tmp_path):
    import torchprof

    path = keep_and_temp.export_chrome_trace(str(tmp_path / "run.json"))
    loaded = torchprof.load_trace(path)
    live, back = keep_and_temp.df, loaded.df
    modules = [p for p in live.index if live.loc[p, "kind"] == "module"]
    for name in ("act_cpu_mem", "peak_cpu_mem"):
        assert back.loc[modules, name].tolist() == live.loc[modules, name].tolist(), name
    assert loaded.memory_timeline()["allocated"].tolist() == keep_and_temp.memory_timeline()["allocated"].tolist()
    assert loaded.summary["peak_at"] == keep_and_temp.summary["peak_at"]


def test_a_saved_profile_reopens_with_its_memory(keep_and_temp, tmp_path):
    import torchprof

    path = keep_and_temp.save(str(tmp_path / "p.json"))
    again = torchprof.load(path)
    assert again.summary["peak_at"] == keep_and_temp.summary["peak_at"]
    assert again.memory_breakdown().equals(keep_and_temp.memory_breakdown())
    assert again.memory_timeline().equals(keep_and_temp.memory_timeline())


def test_without_memory_the_memory_tables_say_how_to_get_them(mlp):
    import torch

    import torchprof

    with torchprof.Profiler() as prof:
        mlp(torch.randn(2, 8))
    with pytest.raises(ValueError, match=r"memory=True"):
        prof.memory_timeline()
    with pytest.raises(ValueError, match=r"memory=True"):
        prof.memory_breakdown()
    with pytest.raises(ValueError, match=r"view='memory' needs a profile recorded with memory=True"):
        prof.widget(view="memory")
    assert "peak_at" not in prof.summary


def test_with_a_schedule_the_peak_is_the_highest_cycles_and_kept_bytes_add_up_over_cycles():
    import torch
    from torch import nn

    import torchprof

    class Spiky(nn.Module):
        def forward(self, x, spike: int):
            t = torch.ones(spike)  # a temporary whose size changes per step
            return x * x + t.sum()

    net = Spiky()
    x = torch.randn(8, 8, requires_grad=True)
    spikes = [16, MB, 16, 3 * MB, 16, 2 * MB]  # floats; the warm-up steps are not recorded
    schedule = torch.profiler.schedule(wait=0, warmup=1, active=1, repeat=3)
    with torchprof.Profiler(memory=True, schedule=schedule) as prof:
        for spike in spikes:
            net(x, spike).sum().backward()
            prof.step()
    at = prof.summary["peak_at"]["cpu"]
    assert at["layer"] == "ProfilerStep#3/Spiky" and at["phase"] == "forward"
    df = prof.df
    steps = sorted(p for p in df.index if df.loc[p, "kind"] == "module")
    assert steps == ["ProfilerStep#1/Spiky", "ProfilerStep#3/Spiky", "ProfilerStep#5/Spiky"]
    peaks = df.loc[steps, "peak_cpu_mem"].tolist()
    assert peaks[1] == max(peaks) == at["bytes"] and peaks[1] - peaks[0] >= 8 * MB
    assert df.loc[steps, "act_cpu_mem"].tolist() == [8 * 8 * 4] * 3  # its output alone, each step
    assert df.loc["profile", "act_cpu_mem"] == 3 * 8 * 8 * 4  # the steps add up
    timeline = prof.memory_timeline()
    assert timeline["time_us"].is_monotonic_increasing and timeline["allocated"].max() == at["bytes"]
    assert prof.memory_breakdown().loc["temporary", "bytes"] >= 3 * 4 * MB
    # Every step folded into one tree (step="all"): a peak is the highest of any step, not a mean.
    folded = prof.widget(step="all", min_pct=0).view_df
    assert folded.loc["Spiky", "peak_cpu_mem"] == max(peaks)


def test_with_a_schedule_optimizer_state_read_after_the_cycles_last_allocation_is_still_named():
    import torch

    import torchprof

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
    opt = torch.optim.Adam(model.parameters())
    x = torch.randn(64, 256)
    with pytest.warns(UserWarning, match="warmup"):  # every step recorded: torch says so
        schedule = torch.profiler.schedule(wait=0, warmup=0, active=1, repeat=3)
    with torchprof.Profiler(model, memory=True, schedule=schedule) as prof:
        for _ in range(3):
            model(x).sum().backward()
            opt.step()  # its state is read right after, with no allocation before the cycle ends
            opt.zero_grad(set_to_none=False)
            prof.step()
    by_layer = prof.memory_breakdown(by="layer")
    state = by_layer["optimizer_state"]
    first = next(p for p in by_layer.index if p.endswith("Sequential.0"))
    # Adam keeps two moments per parameter (and a scalar step): 2 x (256 x 512 + 512) float32
    # and a few bytes for the first layer, on the layer, not on the optimizer's row.
    moments = 2 * 4 * (256 * 512 + 512)
    assert moments <= state[first] <= moments + 64
    assert state.sum() == prof.memory_breakdown().loc["optimizer_state", "bytes"] > 0
    assert all(state[p] == 0 for p in by_layer.index if "Optimizer.step" in p)


def test_the_c10_unknown_size_warning_stays_off_the_terminal_and_the_users_output_does_not(tmp_path):
    """Issue 16: freeing a block allocated before the profiler started made c10 print "Memory block
    of unknown size was allocated before the profiling started" on fd 2 in the middle of the run."""
    import os
    import subprocess
    import sys
    import textwrap

    from conftest import REPO

    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent("""
        import os, sys, torch, torchprof
        before = [torch.randn(64, 64) for _ in range(3)]
        with torchprof.Profiler(memory=True) as prof:
            before.clear()  # three blocks from before the profiler, freed inside it
            kept = torch.ones(1000)
            print("user stdout", flush=True)
            sys.stderr.write("user stderr\\n"); sys.stderr.flush()
            os.write(2, b"native stderr\\n")
            os.write(2, b"partial ")
        os.write(2, b"line\\n")
        print(prof.summary["peak_cpu_mem"] > 0)
    """), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    assert "unknown size" not in done.stderr
    assert [line for line in done.stderr.splitlines() if not line.startswith(("USDT", "STAGE"))] == [
        "user stderr", "native stderr", "partial line"]
    assert done.stdout.splitlines() == ["user stdout", "True"]


@pytest.mark.skipif("not __import__('torch').cuda.is_available()", reason="needs a CUDA device")
def test_a_gpu_peak_is_the_allocators_own():
    import torch

    import torchprof

    model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024)).cuda()
    opt = torch.optim.Adam(model.parameters())
    x = torch.randn(256, 1024, device="cuda")
    model(x).sum().backward()
    opt.step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    with torchprof.Profiler(memory=True) as prof:
        model(x).sum().backward()
        opt.step()
        torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()
    assert prof.summary["peak_cuda_mem"] == peak
    parts = prof.memory_breakdown(device="cuda:0")
    assert parts["bytes"].sum() == peak and parts.loc["parameter", "bytes"] > 0 and parts.loc["optimizer_state", "bytes"] > 0


def test_a_device_peak_is_checked_against_the_allocators_high_water_mark():
    from torchprof._records import Recording
    from torchprof._result import Result

    events = [ev("module", "Net", 0, 10, type_="Net"), ev("memory", "[memory]", 1, 1, nbytes=900, cuda=True, addr=8, total=900)]
    tree = build(events, memory=True, cuda=True)

    def summary(max_start: int, max_end: int) -> dict:
        meta = {"cuda_allocator": {"cuda:0": {"allocated_start": 0, "max_start": max_start, "max_end": max_end}}}
        return Result(tree, Recording(wall_us=10.0, meta=meta)).summary

    agrees = summary(100, 900)
    assert agrees["allocator_peaks"] == {"cuda:0": 900.0} and agrees["peak_cuda_mem"] == 900 and "warnings" not in agrees
    differs = summary(100, 1200)  # the allocator went higher than any event the profile recorded
    assert "differs from the allocator's own (1200 bytes" in differs["warnings"][0]
    assert "allocator_peaks" not in summary(5000, 5000)  # an earlier high: the block's own is not known
