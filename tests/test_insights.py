"""The answers a profile gives first: the hot path and the headline, the steps' time split, and
``prof.insights()``, each rule on a workload that plants it and on one that must not fire it.

Rules that need a GPU are checked on the real traces in ../shared/traces and on hand-written
events; the rest on small live runs whose planted cost is many times the threshold."""

from __future__ import annotations

import itertools
import math

import pytest

from conftest import shared_trace
from synthetic import build, ev, training_step

# -- helpers -------------------------------------------------------------------------------------------


def result_of(events, *, wall_us=None, meta=None, modules=None, **options):
    from torchprof._records import Recording
    from torchprof._result import Result

    return Result(build(events, **options), Recording(modules=modules or {}, wall_us=wall_us, meta=dict(meta or {})))


def rules(prof, **kwargs) -> list[str]:
    return list(prof.insights(**kwargs)["rule"])


@pytest.fixture(scope="module")
def ddp():
    import torchprof

    return torchprof.load_trace(shared_trace("a100-ddp-training.json.gz"))


@pytest.fixture(scope="module")
def alexnet():
    import torchprof

    return torchprof.load_trace(shared_trace("a100-alexnet-forward.json.gz"))


# -- the hot path and the headline ----------------------------------------------------------------------
def test_the_hot_path_follows_the_child_holding_most_then_goes_to_the_costliest_layer():
    from torchprof._tree.hotpath import hot_path

    tree = build(training_step())
    prof = result_of(training_step())
    path = hot_path(tree)
    paths = tree.columns["path"]
    # Net holds 150 of 195 µs (most of the root): the chain goes on; fc2 (70) and fc1 (50) share
    # Net's 150, so cost branches at Net and the path goes to its costliest layer, fc2.
    assert [paths[r] for r in path.rows] == ["profile", "Net", "Net.fc2"]
    assert paths[path.branch] == "Net" and paths[path.layer] == "Net.fc2"
    s = prof.summary
    assert s["hot_path"] == ["profile", "Net", "Net.fc2"]
    assert s["bottleneck"]["path"] == "Net.fc2" and s["bottleneck"]["type"] == "Linear"
    assert s["bottleneck"]["share"] == pytest.approx(70 / 195)
    assert s["costliest_type"]["type"] == "Linear" and s["costliest_type"]["modules"] == 2
    assert s["costliest_type"]["share"] == pytest.approx((70 + 50) / 195)
    assert prof.headline == "Costliest layer: Net.fc2 (Linear) 36% of CPU time · costliest type: Linear 62% (2 modules)"


def test_a_layer_holding_most_of_its_own_time_ends_the_path():
    from torchprof._tree.hotpath import hot_path

    events = [
        ev("module", "Net", 0, 100, type_="Net"),
        ev("module", "Net.big", 0, 90, type_="Block"),
        ev("op", "aten::mm", 1, 80),  # Net.big's own work: 79 of its 90 µs
        ev("module", "Net.big.small", 80, 90, type_="Linear"),
    ]
    tree = build(events)
    assert [tree.columns["path"][r] for r in hot_path(tree).rows] == ["profile", "Net", "Net.big"]


def test_the_costliest_layer_adds_up_its_time_in_every_step(ddp):
    # Six ProfilerSteps each run "## forward:over_arch ##": the headline names it once, over all steps.
    s = ddp.summary
    assert s["hot_metric"] == "cuda_us" and s["bottleneck"]["layer"] == "## forward ##/## forward:over_arch ##"
    df = ddp.df
    rows = df[df.index.str.endswith("/## forward ##/## forward:over_arch ##")]
    assert len(rows) == 6
    assert s["bottleneck"]["share"] == pytest.approx(rows["layer_self_cuda_us"].sum() / df["cuda_us"].iloc[0])
    assert ddp.headline.startswith(f"Costliest layer: ## forward ##/## forward:over_arch ## {s['bottleneck']['share'] * 100:.0f}% "
                                   "of device time")  # fmt: skip


def test_the_terminal_table_marks_the_hot_path_and_says_the_headline(resnet18_step):
    prof, _ = resnet18_step
    text = prof.table()
    lines = text.splitlines()
    marked = [line.split("|")[1].strip() for line in lines if line.endswith("| ◀")]
    hot = prof.summary["hot_path"]
    assert [m.split("──")[1] for m in marked] == [prof.df.loc[p, "name"] for p in hot[1:]]
    assert max(len(line) for line in lines) <= 120
    # As the table writes it: on one line, or (a long layer name: which layer is costliest
    # follows the timings) broken between its " · " parts.
    from torchprof._views.table import wrap_parts

    assert "\n".join(wrap_parts(prof.headline + " · ◀ hot path", 120)) in text


def test_views_open_on_the_hot_path_and_the_payload_carries_it(resnet18_step):
    from torchprof._views.payload import payload
    from torchprof._views.state import check_state, default_expanded

    prof, _ = resnet18_step
    hot = prof.summary["hot_path"]
    # the profile, then down to the costliest layer through its ancestors (which layer follows the
    # timings: under load a BatchNorm can be it, right below the model, or a stall can make the
    # optimizer's step or the model's own time the costliest)
    assert len(hot) >= 2 and all(child.startswith(parent + ".") for parent, child in itertools.pairwise(hot[1:]))
    expanded = check_state(prof.tree, {})["expanded"]
    assert set(hot[1:-1]) <= set(expanded) and set(default_expanded(prof.tree)) <= set(expanded)
    data = payload(prof.tree, prof.summary)
    paths = prof.tree.columns["path"]
    assert [paths[r] for r in data["hot_path"]["rows"]] == hot and data["hot_path"]["open"] == hot[1:-1]
    assert data["summary"]["headline"] == prof.headline


# -- steps --------------------------------------------------------------------------------------------------
def stepped_events():
    """Three steps: data loading, a forward, backward and an optimizer step; the third is slow."""
    out = []
    for k, t0, extra in ((1, 0, 0), (2, 100, 0), (3, 200, 60)):
        out += [
            ev("region", f"ProfilerStep#{k}", t0, t0 + 90 + extra),
            ev("region", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t0 + 1, t0 + 11 + extra),
            ev("module", "Net", t0 + 20 + extra, t0 + 50 + extra, type_="Net"),
            ev("op", "aten::mm", t0 + 21 + extra, t0 + 49 + extra, seq=k),
            ev("op", "autograd::engine::evaluate_function: MmBackward0", t0 + 55 + extra, t0 + 75 + extra, seq=k, fwd=1),
            ev("region", "Optimizer.step#SGD.step", t0 + 80 + extra, t0 + 88 + extra),
        ]
    return out


def test_each_step_splits_into_data_forward_backward_optimizer_and_the_rest():
    prof = result_of(stepped_events())
    steps = prof.steps
    assert list(steps["step"]) == [1, 2, 3]
    first = steps.iloc[0]
    assert (first.data_us, first.forward_us, first.backward_us, first.optimizer_us, first.comm_us) == (10, 30, 20, 8, 0)
    assert first.other_us == pytest.approx(90 - 10 - 30 - 20 - 8)
    parts = ["data_us", "forward_us", "backward_us", "optimizer_us", "comm_us", "other_us"]
    assert (steps[parts].sum(axis=1) == steps["cpu_us"]).all()
    assert list(steps["slow"]) == [False, False, True]  # 150 µs against a median of 90
    assert steps["idle_us"].isna().all()  # no device
    spread = prof.summary["step_spread"]
    assert (spread["median_us"], spread["min_us"], spread["max_us"], spread["slow"]) == (90, 90, 150, [3])
    assert prof.summary["time_split"]["data_us"] == 10 + 10 + 70


def test_the_payload_steps_carry_their_split(ddp):
    from torchprof._views.payload import payload

    steps = payload(ddp.tree, ddp.summary)["steps"]
    assert len(steps) == 6 and all(set(s) >= {"data_us", "forward_us", "backward_us", "optimizer_us", "idle_us", "slow"} for s in steps)
    for s, row in zip(steps, ddp.steps.itertuples()):
        assert s["idle_us"] == pytest.approx(row.wall_us - s["gpu_busy_us"])  # the device's idle time in the step


# -- insights: the frame --------------------------------------------------------------------------------------
#: Rules that read how long parts of a run took against each other: on a shared machine one
#: stalled layer or optimizer step of a real run can meet them (CI once saw SGD's step at 21% of
#: a ResNet-18 step); their firing is tested on synthetic timings below.
TIMING_RULES = {"low_mfu", "optimizer_step"}


def test_a_clean_training_step_has_no_findings(resnet18_step):
    prof, _ = resnet18_step
    found = prof.insights()
    assert list(found.columns) == ["rule", "at_stake_us", "share", "paths", "message", "advice"]
    found = found[~found["rule"].isin(TIMING_RULES)]
    assert found.empty, found.to_dict("records")


def test_findings_are_ranked_by_time_at_stake_and_point_at_rows(ddp):
    found = ddp.insights()
    assert list(found["rule"]) == ["exposed_communication", "host_sync"]  # 87.9 ms, then 76.2 ms
    assert found["at_stake_us"].is_monotonic_decreasing
    for paths in found["paths"]:
        assert paths and set(paths) <= set(ddp.df.index)


# -- insights: each rule planted, and a workload that must not fire it ----------------------------------------
def test_data_loading_that_dominates_the_step_is_named():
    import time

    import torch

    import torchprof

    class Slow(torch.utils.data.Dataset):
        def __len__(self):
            return 8

        def __getitem__(self, i):
            time.sleep(0.02)  # a file read or a decode: at least 20 ms per item, 160 ms per batch
            return torch.ones(4), i % 2

    model = torch.nn.Linear(4, 2)
    torch.nn.functional.cross_entropy(model(torch.ones(8, 4)), torch.zeros(8, dtype=torch.long)).backward()  # first calls
    with torchprof.Profiler() as prof:
        for x, y in torch.utils.data.DataLoader(Slow(), batch_size=8):
            torch.nn.functional.cross_entropy(model(x), y).backward()
    found = prof.insights()
    row = found[found.rule == "data_loading"].iloc[0]
    assert row.share > 0.2 and row.at_stake_us >= 160_000
    assert row.paths == ["enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"]
    assert "num_workers" in row.advice and "2 calls of enumerate(DataLoader)" in row.message


def test_data_loading_that_is_cheap_is_not_named(resnet18_step):
    prof, _ = resnet18_step
    assert "data_loading" not in rules(prof)
    assert "data_loading" not in rules(result_of(training_step()))


def test_host_device_syncs_inside_layers_are_named_per_layer_with_counts(ddp, alexnet):
    row = ddp.insights().set_index("rule").loc["host_sync"]
    assert row.share > 0.1 and "aten::item x6" in row.message and "6 layers" in row.message
    assert "host_sync" not in rules(alexnet)  # 21 syncs, 1.5 ms of a 43 s trace


def test_a_sync_in_a_layer_of_hand_written_events_is_counted_and_not_without_a_device():
    events = [
        ev("module", "Net", 0, 100, type_="Net"),
        ev("module", "Net.head", 10, 90, type_="Head"),
        ev("op", "aten::item", 20, 60),
        ev("op", "aten::_local_scalar_dense", 21, 59),
        ev("runtime", "cudaStreamSynchronize", 22, 58),
        ev("runtime", "cudaStreamSynchronize", 70, 80),
    ]
    row = result_of(events, cuda=True, wall_us=100.0).insights().set_index("rule").loc["host_sync"]
    assert row.at_stake_us == 40 + 10 and row.paths == ["Net.head"]
    assert "aten::item x1, cudaStreamSynchronize x1" in row.message
    assert "host_sync" not in rules(result_of(events, wall_us=100.0))  # on the CPU .item() waits for nothing


def test_gpu_idle_is_split_into_host_bound_and_waiting(alexnet, ddp):
    row = alexnet.insights().set_index("rule").loc["gpu_idle"]
    s = alexnet.summary
    assert row.at_stake_us == s["gpu_idle_us"] and s["gpu_idle_us"] / s["gpu_window_us"] > 0.9
    assert "host-bound" in row.message and "waiting for input" in row.message
    assert "gpu_idle" not in rules(ddp)  # idle 16% of its window: under the 25% threshold


def test_exposed_communication_is_named_on_the_device_and_on_a_host_backend(ddp, alexnet):
    import torchprof

    row = ddp.insights().set_index("rule").loc["exposed_communication"]
    assert row.at_stake_us == pytest.approx(87_921, abs=1) and row.share == pytest.approx(87_921 / 464_594, rel=1e-3)
    gloo = torchprof.load_trace(shared_trace("cpu-gloo-rank34.json.gz"))
    assert "exposed_communication" in rules(gloo)
    assert "exposed_communication" not in rules(alexnet)


def test_a_profile_of_nothing_has_no_findings():
    # Every share of it is 0/0 (NaN), and NaN compared below no threshold: a script's --help
    # under `python -m torchprof` was told it "waits in collectives ... for 0.00µs (0%)".
    nothing = [ev("region", "gloo:all_reduce", 0, 0), ev("region", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 0, 0)]
    assert rules(result_of(nothing, wall_us=0.0)) == []
    assert rules(result_of([], wall_us=0.0)) == []


def _optimizer_run(foreach: bool):
    import torch

    import torchprof

    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(2, 2) for _ in range(100)])  # 200 parameter tensors, tiny math
    opt = torch.optim.Adam(model.parameters(), foreach=foreach)
    x = torch.randn(2, 2)
    model(x).sum().backward()
    opt.step()
    with torchprof.Profiler() as prof:
        model(x).sum().backward()
        opt.step()
    return prof


def test_an_optimizer_running_one_op_per_parameter_is_named():
    row = _optimizer_run(foreach=False).insights().set_index("rule").loc["optimizer_not_foreach"]
    assert row.paths == ["Optimizer.step#Adam.step"] and "fused=True" in row.advice and row.share >= 0.05
    assert row.at_stake_us >= 200 * 10  # at least one op per parameter tensor, 10 µs each


def test_a_foreach_optimizer_is_not_named():
    assert "optimizer_not_foreach" not in rules(_optimizer_run(foreach=True))


def _compiled_run(graph_break: bool):
    import torch

    import torchprof

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)

        def forward(self, x):
            x = self.a(x)
            if graph_break:
                torch._dynamo.graph_break()
            return self.b(x)

    torch._dynamo.reset()
    model = torch.compile(Net(), backend="eager")  # Dynamo alone: no lowering, fast
    model(torch.randn(2, 8))  # compiled and warm before the block
    with torchprof.Profiler() as prof:
        model(torch.randn(2, 8))
        if graph_break:
            model(torch.randn(3, 8))  # a new size: Dynamo compiles again inside the block
    torch._dynamo.reset()
    return prof


def test_graph_breaks_and_recompilations_name_the_layer():
    prof = _compiled_run(graph_break=True)
    row = prof.insights().set_index("rule").loc["torch_compile"]
    assert "Net (Net) into 2 graphs" in row.message and "compiled inside the profiled block" in row.message
    assert "graph_break()" in row.message  # the reason Dynamo counted
    assert "Net" in row.paths and prof.meta["dynamo"]["frames"] >= 1


def test_a_warm_compiled_model_without_breaks_is_not_named():
    assert "torch_compile" not in rules(_compiled_run(graph_break=False))


@pytest.fixture(scope="module")
def activation_heavy():
    """A stack of layers whose activations are most of its memory peak (a large batch, small weights)."""
    import torch

    import torchprof

    torch.manual_seed(0)
    model = torch.nn.Sequential(*[m for _ in range(8) for m in (torch.nn.Linear(256, 256), torch.nn.ReLU())])
    x = torch.randn(1024, 256)
    model(x).sum().backward()
    model.zero_grad(set_to_none=True)
    with torchprof.Profiler(memory=True) as prof:
        model(x).sum().backward()
    return prof


def test_activations_filling_the_memory_name_the_blocks_to_checkpoint(activation_heavy):
    prof = activation_heavy
    peak = prof.summary["peak_cpu_mem"]
    assert prof.memory_breakdown().loc["activation", "share"] > 0.5
    row = prof.insights(memory_limit=peak / 0.6).set_index("rule").loc["activations"]
    assert math.isnan(row.at_stake_us) and row.share > 0.5
    assert row.paths[0].startswith("Sequential.") and "checkpoint" in row.advice
    assert "memory_limit" not in rules(prof, memory_limit=peak / 0.6)  # 60% of the device: not near its limit


def test_activations_far_from_the_memory_limit_are_not_named(activation_heavy, resnet18_step):
    assert "activations" not in rules(activation_heavy)  # the machine's memory: far from it
    prof, _ = resnet18_step
    assert "activations" not in rules(prof, memory_limit=prof.summary["peak_cpu_mem"] * 1.2)  # mostly weights and gradients


def test_memory_near_the_device_limit_is_named(activation_heavy):
    peak = activation_heavy.summary["peak_cpu_mem"]
    row = activation_heavy.insights(memory_limit=peak / 0.9).set_index("rule").loc["memory_limit"]
    assert row.share == pytest.approx(0.9) and row.paths == [activation_heavy.summary["peak_at"]["cpu"]["layer"]]


def test_memory_limit_of_a_trace_is_its_devices():
    from torchprof._views.insights import find

    tree = build([ev("module", "Net", 0, 10, type_="Net"), ev("memory", "[memory]", 1, 1, nbytes=900, cuda=True, addr=8, total=900)],
                 memory=True, cuda=True)  # fmt: skip
    summary = {"wall_us": 10.0}
    big = {"deviceProperties": [{"name": "NVIDIA A100", "totalGlobalMem": 1000}]}
    assert [f.rule for f in find(tree, summary, big)] == ["activations", "memory_limit"]  # 90% of it, all activations
    assert find(tree, summary, {"deviceProperties": [{"name": "NVIDIA A100", "totalGlobalMem": 10_000}]}) == []


def low_mfu_events(slow_us: float):
    """Net.big does 2 GFLOPs in 1000 µs; Net.odd 0.2 GFLOPs in ``slow_us``; 200 µs besides."""
    return [
        ev("module", "Net", 0, 1200 + slow_us, type_="Net"),
        ev("module", "Net.big", 10, 1010, type_="Linear"),
        ev("op", "aten::mm", 11, 1009, shapes=[[1000, 1000], [1000, 1000]]),
        ev("module", "Net.odd", 1100, 1100 + slow_us, type_="Linear"),
        ev("op", "aten::mm", 1101, 1099 + slow_us, shapes=[[100, 1000], [1000, 1000]]),
    ]


def test_layers_far_below_the_models_flop_rate_are_named():
    row = result_of(low_mfu_events(8000.0)).insights().set_index("rule").loc["low_mfu"]
    # the model: 2.2 GFLOPs in 9200 µs (239 GFLOP/s); Net.odd at 25 GFLOP/s, under 15% of that
    assert row.paths == ["Net.odd"] and "Net.odd (Linear) at 25.0GFLOP/s" in row.message
    assert row.at_stake_us == pytest.approx(8000 - 0.2e9 / (2.2e9 / 9200))


def test_layers_near_the_models_flop_rate_are_not_named():
    assert "low_mfu" not in rules(result_of(low_mfu_events(400.0)))


def test_time_outside_every_layer_is_named_and_not_in_a_tight_step(resnet18_step):
    import torch

    import torchprof

    model = torch.nn.Linear(8, 8)
    x = torch.randn(2, 8)
    with torchprof.Profiler() as prof:
        for _ in range(3):
            model(x)
            sum(i * i for i in range(200_000))  # the loop's own Python: no op, no layer
    row = prof.insights().set_index("rule").loc["python_overhead"]
    assert row.share > 0.5 and row.paths == [prof.df.index[0]]
    assert "python_overhead" not in rules(resnet18_step[0])


def test_the_cli_prints_the_top_findings(capsys):
    from torchprof._cli import main

    assert main([str(shared_trace("a100-alexnet-forward.json.gz"))]) == 0
    out = capsys.readouterr().out
    assert "\nInsights:\n1. [gpu_idle] The GPU is idle 99% of its window" in out
    assert main(["--width", "0", str(shared_trace("cpu-gloo-rank34.json.gz"))]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1].startswith("1. [exposed_communication] The host waits in collectives") and lines[-2] == "Insights:"


def _slow_optimizer_step():
    """training_step() with its optimizer step at 100 µs: the costliest thing in the run."""
    events = training_step()[:-2]  # (without its SGD step and the step's op)
    return [*events, ev("region", "Optimizer.step#AdamW.step", 200, 300),
            ev("op", "aten::_foreach_lerp_", 205, 295, shapes=[[[16, 8]], [[16, 8]], []])]  # fmt: skip


def test_an_optimizer_step_taking_much_of_the_run_is_an_insight_and_the_headline_names_a_layer():
    # An AdamW step of 21% read "Costliest layer: Optimizer.step#AdamW.step" while the hot path
    # ended at a convolution, and no rule fired.
    prof = result_of(_slow_optimizer_step())
    row = prof.insights().set_index("rule").loc["optimizer_step"]
    assert row.paths == ["Optimizer.step#AdamW.step"] and row.share == pytest.approx(100 / prof.df.iloc[0]["cpu_us"])
    assert "AdamW" in row.message and f"{100 * row.share:.0f}%" in row.message and "fused=True" in row.advice
    s = prof.summary
    assert s["bottleneck"]["path"] == s["hot_path"][-1] == "Net.fc2"  # the headline and ◀ agree: a layer
    assert "optimizer_step" not in rules(result_of(training_step()))  # 20 of 195 µs: under the threshold
    # A step run inside another's (a wrapper's closure, as Lightning's) counts once, at the outermost.
    events = training_step()[:-2]
    nested = result_of([*events, ev("region", "Optimizer.step#Wrapper.step", 200, 300), ev("region", "Optimizer.step#AdamW.step", 202, 298),
                        ev("op", "aten::_foreach_lerp_", 205, 295, shapes=[[[16, 8]], [[16, 8]], []])])  # fmt: skip
    row = nested.insights().set_index("rule").loc["optimizer_step"]
    assert row.paths == ["Optimizer.step#Wrapper.step"] and row.at_stake_us == 100 and "in 1 call" in row.message


def test_time_in_no_range_is_never_more_than_the_block_lasted():
    """Two threads' ranges (or ranges of a torch.profiler session of the script's own) can add up
    to more CPU time than the block's wall: the host time in no op is at most the wall, and its
    share at most 100%. It once read "100% of the run (13.7ms)" against a wall of 9.34 ms."""
    events = [ev("region", "ProfilerStep#1", 0, 9_000), ev("op", "aten::add", 100, 200),
              ev("region", "ProfilerStep#1", 0, 9_000, tid=2), ev("op", "aten::mul", 100, 200, tid=2)]  # fmt: skip
    prof = result_of(events, wall_us=5_000.0)
    row = prof.insights().set_index("rule").loc["python_overhead"]
    assert row.at_stake_us <= 5_000.0 and row.share <= 1.0


def test_a_block_whose_recording_torch_dropped_has_no_overhead_finding():
    """A torch.profiler session started inside the block drops torchprof's recording (torch runs
    one at a time, and a warning says so): nothing was recorded, which is not "100% of the run
    in no op and no layer"."""
    import warnings

    import torch

    import torchprof

    model = torch.nn.Linear(8, 8)
    x = torch.randn(4, 8)
    with warnings.catch_warnings(record=True) as caught, torchprof.Profiler() as prof:
        warnings.simplefilter("always")
        model(x).sum().backward()
        with torch.profiler.profile():
            model(x)
    assert any("dropped torchprof's" in str(w.message) for w in caught)
    assert prof.summary["wall_us"] > 0 and prof.summary["cpu_us"] == 0
    assert "python_overhead" not in rules(prof)
    assert str(prof.insights()).startswith("no findings")
