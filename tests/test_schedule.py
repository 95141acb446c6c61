"""Long-running jobs: ``schedule=`` / ``on_trace_ready=`` with ``prof.step()``, as in torch.profiler."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import torch

import torchprof


@pytest.fixture
def train_step(mlp):
    opt = torch.optim.SGD(mlp.parameters(), lr=0.1)
    x = torch.randn(4, 8)

    def step():
        mlp(x).sum().backward()
        opt.step()
        opt.zero_grad()

    return step


def steps_of(prof) -> list[int]:
    steps = list(prof.steps["step"])
    assert all(isinstance(s, int) for s in steps), "step numbers must sort as numbers"
    return steps


def test_each_recorded_step_is_a_profiler_step_region_with_its_own_figures(train_step):
    schedule = torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=2)
    with torchprof.Profiler(schedule=schedule) as prof:
        for _ in range(10):
            train_step()
            prof.step()
    assert steps_of(prof) == [2, 3, 6, 7]  # cycle = wait 0, warm 1, record 2-3; wait 4, warm 5, record 6-7
    df = prof.df
    for n in (2, 3, 6, 7):
        region = f"ProfilerStep#{n}"
        assert df.loc[region, "kind"] == "region" and df.loc[region, "parent"] == "profile"
        assert df.loc[f"{region}/Sequential.0", "calls"] == 1  # one step = one forward of the model
        assert df.loc[f"{region}/Sequential.0", "calls_per_step"] == 1
        assert df.loc[f"{region}/Sequential.0", "bwd_cpu_us"] > 0
        assert f"{region}/Optimizer.step#SGD.step" in df.index
    assert "ProfilerStep#0" not in df.index and "ProfilerStep#5" not in df.index  # wait and warm-up: not kept
    assert df.loc["ProfilerStep#2", "calls_per_step"] == pytest.approx(1 / 4)  # one of the four recorded steps
    steps = prof.steps
    assert list(steps.columns) == ["step", "wall_us", "cpu_us", "cuda_us", "bwd_cpu_us", "data_us", "forward_us", "backward_us",
                                   "optimizer_us", "comm_us", "other_us", "idle_us", "slow"]  # fmt: skip
    assert (steps.wall_us > 0).all() and (steps.cpu_us > 0).all() and (steps.bwd_cpu_us > 0).all()
    assert steps.cuda_us.isna().all()  # no GPU recorded
    for row in steps.itertuples():
        assert row.cpu_us == pytest.approx(df.loc[f"ProfilerStep#{row.step}", "cpu_us"])


def test_summary_refers_to_the_recorded_steps(train_step):
    with torchprof.Profiler(schedule=torch.profiler.schedule(wait=2, warmup=1, active=1, repeat=3)) as prof:
        for _ in range(15):
            train_step()
            prof.step()
    s = prof.summary
    assert s["steps"] == 3
    assert s["wall_us"] == pytest.approx(prof.steps.wall_us.sum())  # FLOP/s over the time the FLOPs took
    assert s["cpu_us"] == pytest.approx(prof.steps.cpu_us.sum())
    # (unknown when the step's FLOPs are: calls outside modules are not noted in a process
    # holding torch.compile'd code, as earlier tests may leave)
    assert s["flops_per_s"] == pytest.approx(s["flops"] / (s["wall_us"] / 1e6), nan_ok=True)
    assert prof.meta["block_wall_us"] > s["wall_us"]  # the whole loop, waits included


def test_on_trace_ready_gets_torch_profile_of_each_cycle(train_step, tmp_path):
    seen = []

    def handler(p):
        path = tmp_path / f"trace_{p.step_num}.json"
        p.export_chrome_trace(str(path))
        table = p.key_averages().table(sort_by="self_cpu_time_total", row_limit=5)
        steps = sorted({e["name"] for e in json.loads(path.read_text())["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")})
        seen.append((p.step_num, steps, "aten::addmm" in p.key_averages().table(row_limit=-1), bool(table)))

    with torchprof.Profiler(schedule=torch.profiler.schedule(wait=1, warmup=1, active=2), on_trace_ready=handler) as prof:
        for _ in range(8):
            train_step()
            prof.step()
    assert seen == [(4, ["ProfilerStep#2", "ProfilerStep#3"], True, True), (8, ["ProfilerStep#6", "ProfilerStep#7"], True, True)]
    # torch's per-cycle trace shows our module ranges as named spans too
    events = json.loads((tmp_path / "trace_4.json").read_text())["traceEvents"]
    assert any(e.get("name") == "nn.Module: Sequential.0 [Linear]" for e in events)
    assert steps_of(prof) == [2, 3, 6, 7]


def test_a_cycle_cut_short_by_the_end_of_the_block_is_kept(train_step):
    calls = []
    with torchprof.Profiler(schedule=torch.profiler.schedule(wait=0, warmup=1, active=3), on_trace_ready=calls.append) as prof:
        for _ in range(3):  # warm 0, record 1, 2 and the block ends inside the cycle
            train_step()
            prof.step()
    assert len(calls) == 1  # torch delivers the cut cycle at exit, as without torchprof
    assert steps_of(prof) == [1, 2, 3]  # step 3 is the (empty) step opened by the last step() call
    assert prof.df.loc["ProfilerStep#1/Sequential", "calls"] == 1


def test_on_trace_ready_without_a_schedule_is_called_once_at_the_end(mlp):
    calls = []
    with torchprof.Profiler(on_trace_ready=lambda p: calls.append(len(p.key_averages()))) as prof:
        mlp(torch.randn(2, 8))
    assert len(calls) == 1 and calls[0] > 0
    assert prof.df.loc["Sequential", "calls"] == 1
    assert prof.steps.empty  # torch marks steps only with a schedule


def test_step_outside_a_running_profiler_is_a_clear_error(mlp):
    prof = torchprof.Profiler(schedule=torch.profiler.schedule(wait=0, warmup=1, active=1))
    with pytest.raises(torchprof.ProfilerError, match="step\\(\\) needs a running Profiler"):
        prof.step()
    with prof:
        mlp(torch.randn(2, 8))
        prof.step()
    with pytest.raises(torchprof.ProfilerError, match="inside the with block"):
        prof.step()


def test_an_exception_in_the_handler_stops_cleanly(train_step):
    def handler(p):
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        with torchprof.Profiler(schedule=torch.profiler.schedule(wait=0, warmup=1, active=1), on_trace_ready=handler) as prof:
            for _ in range(4):
                train_step()
                prof.step()
    assert steps_of(prof) == [1]  # the cycle folded before the handler ran is kept
    # (the autouse fixture checks that no hook or profiler was left behind)


@pytest.mark.slow
def test_steps_print_no_profiler_noise_or_cycle_warning():
    code = textwrap.dedent(
        """
        import torch, torchprof
        m = torch.nn.Linear(4, 4)
        with torchprof.Profiler(schedule=torch.profiler.schedule(wait=1, warmup=1, active=1)) as prof:
            for _ in range(9):
                m(torch.randn(2, 4))
                prof.step()
        print(len(prof.steps))
        """
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "3\n"
    assert run.stderr == ""  # no USDT lines, no "Profiler clears events at the end of each cycle"


# -- memory over a long run ----------------------------------------------------------------------------------------
# The same 200-step training loop runs several times, each reporting how much memory grew from
# step 50 to step 200 and how many tree nodes were added in that window. Clean runs go first in a
# fresh process (so they cannot reuse memory a leaky run freed). Two runs leak on purpose through
# the user's on_trace_ready handler: one keeps each cycle's events as Python records (seen by
# tracemalloc), one, in a process of its own, keeps each cycle's kineto result (native memory,
# seen by RSS). The clean runs must stay within a per-node budget; the leaky runs prove that the
# same measurement fails when a cycle's raw events are kept.
MEMORY_PROBE = textwrap.dedent(
    """
    import gc, json, os, sys, tracemalloc
    import torch, torchprof
    from torchprof._capture.kineto import result_columns

    torch.set_num_threads(1)

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def run(leak, measure):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x = torch.randn(16, 32)
        kept = []

        def handler(p):
            if leak == "native":
                kept.append(p.profiler.kineto_results)
            elif leak == "python":
                kept.append(result_columns(p.profiler.kineto_results))

        if measure == "python":
            tracemalloc.start()
        marks = {}
        schedule = torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=0)
        with torchprof.Profiler(schedule=schedule, on_trace_ready=handler) as prof:
            for i in range(200):
                model(x).sum().backward()
                opt.step()
                opt.zero_grad()
                prof.step()
                if i in (50, 199):
                    gc.collect()
                    heap = tracemalloc.get_traced_memory()[0] if measure == "python" else rss()
                    marks[i] = (heap, len(prof._builder.nodes.parent), len(prof._builder.steps))
        tracemalloc.stop()
        df = prof.df
        tops = [p for p in df.index if p.startswith("ProfilerStep#") and "/" not in p]
        sizes = {p: int((df.index.str.startswith(p + "/")).sum()) + 1 for p in tops}
        kept.clear()
        return {"grew": marks[199][0] - marks[50][0], "nodes": marks[199][1] - marks[50][1],
                "steps": marks[199][2] - marks[50][2], "step_sizes": sorted(set(sizes.values())),
                "recorded": len(prof.steps)}

    out = {}
    runs = {"clean_rss": (None, "rss"), "clean_python": (None, "python"), "leak_python": ("python", "python"),
            "leak_native": ("native", "rss")}
    for name in sys.argv[1:]:
        out[name] = run(*runs[name])
        gc.collect()
    print(json.dumps(out))
    """
)
BYTES_PER_NODE = 600  # measured: ~415 B of Python heap and ~435 B of RSS per tree node
SLACK = {"python": 256 * 1024, "rss": 2 * 1024 * 1024}  # allocator and interpreter noise


def probe(*runs: str) -> dict:
    done = subprocess.run([sys.executable, "-c", MEMORY_PROBE, *runs], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def within_budget(run: dict, measure: str) -> bool:
    return run["grew"] <= run["nodes"] * BYTES_PER_NODE + SLACK[measure]


@pytest.mark.slow
def test_memory_grows_only_by_the_tree_nodes_of_recorded_steps_over_200_steps():
    runs = {**probe("clean_rss", "clean_python", "leak_python"), **probe("leak_native")}
    for name in ("clean_rss", "clean_python"):
        run = runs[name]
        assert run["recorded"] == 100  # wait 1, warm 1, record 2: half of 200 steps
        # Every recorded step adds one ProfilerStep#N subtree of the same size and nothing else.
        assert len(run["step_sizes"]) == 1
        assert run["steps"] >= 70 and run["nodes"] == run["steps"] * run["step_sizes"][0]
    assert within_budget(runs["clean_rss"], "rss"), runs
    assert within_budget(runs["clean_python"], "python"), runs
    # The same measurement catches a leak of either kind.
    assert not within_budget(runs["leak_native"], "rss"), runs
    assert not within_budget(runs["leak_python"], "python"), runs


def test_summary_counts_parameter_bytes_of_a_model_seen_in_several_steps(train_step, mlp):
    with torchprof.Profiler(schedule=torch.profiler.schedule(wait=0, warmup=1, active=3)) as prof:
        for _ in range(4):
            train_step()
            prof.step()
    summary = prof.summary
    assert summary["params"] == sum(p.numel() for p in mlp.parameters())
    assert summary["param_bytes"] == 4 * summary["params"]


# -- a torch.profiler session inside the block ----------------------------------------------------------------------
@pytest.mark.slow
def test_a_cycle_another_profiler_emptied_is_left_out_not_saved(tmp_path):
    """A library that opens its own torch.profiler session in one step empties that step's cycle
    (torch runs one session at a time). Saving an empty cycle's trace crashes kineto (SIGSEGV: a
    notebook's kernel dies), so the run goes in a process of its own: the cycle is left out, the
    user's on_trace_ready (which exports it, as tensorboard_trace_handler does) is not called for
    it, a warning says why, and the other cycles are kept and exported."""
    code = textwrap.dedent(
        """
        import json, os, sys, warnings
        import torch, torchprof
        out = sys.argv[1]
        net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
        x = torch.randn(4, 8)
        handled = []

        def handler(p):
            handled.append(p.step_num)
            p.export_chrome_trace(os.path.join(out, f"{p.step_num}.json"))

        schedule = torch.profiler.schedule(wait=0, warmup=0, active=1, repeat=3)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with torchprof.Profiler(schedule=schedule, on_trace_ready=handler) as prof:
                for step in range(3):
                    if step == 1:
                        with torch.profiler.profile():  # as some libraries do
                            net(x)
                    else:
                        net(x)
                    prof.step()
        with open(prof.export_chrome_trace(os.path.join(out, "all.json"))) as f:
            exported = torchprof.load_trace(f.name).df
        print(json.dumps({
            "steps": [int(s) for s in prof.steps["step"]],
            "handled": handled,
            "warned": [str(w.message) for w in caught if issubclass(w.category, torchprof.ProfilerWarning)],
            "exported": sorted(p for p in exported.index if p.endswith("/Sequential")),
        }))
        """
    )
    run = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, f"exit {run.returncode}: {run.stderr[-2000:]}"  # -11 was kineto's SIGSEGV
    result = json.loads(run.stdout)
    assert result["steps"] == [0, 2]
    assert result["handled"] == [1, 3]  # the empty cycle's handler call was skipped
    assert len(result["warned"]) == 1 and "a profiling cycle recorded nothing" in result["warned"][0]
    assert result["exported"] == ["ProfilerStep#0/Sequential", "ProfilerStep#2/Sequential"]  # both kept cycles, in one trace
