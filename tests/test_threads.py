"""Module work on other threads, and torch.profiler sessions started inside the profiled block.

torch's profile_all_threads mode records every thread; backward is owned per (forward thread,
sequence number), since every thread numbers its autograd nodes from 0. What cannot be recorded
(threads under memory=True) or was lost (a profile emptied by another session) is said.
"""

from __future__ import annotations

import threading
import warnings
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

import torchprof
from torchprof._capture import session

X = torch.randn(2, 8)
BACKWARD_MM = "autograd::engine::evaluate_function: AddmmBackward0/AddmmBackward0/aten::mm"


def on_thread(fn, name: str = "worker"):
    """Run ``fn`` on a new thread and return its result."""
    out = {}
    thread = threading.Thread(target=lambda: out.setdefault("value", fn()), name=name)
    thread.start()
    thread.join()
    return out["value"]


def own_warnings(summary) -> list[str]:
    """The profile's warnings, less the one a test before this one in the process causes by
    compiling something (calls outside modules are then not noted, whatever the threads did)."""
    return [w for w in summary.get("warnings", []) if "torch.compile has compiled code in this process" not in w]


def profiler_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, torchprof.ProfilerWarning)]


# -- threads ------------------------------------------------------------------------------------------------
def test_forward_on_another_thread_is_recorded_and_its_backward_reaches_the_layers(mlp):
    with torchprof.Profiler() as prof:
        y = on_thread(lambda: mlp(X))
        y.sum().backward()  # on the main thread
    df = prof.df
    assert list(df.loc[["Sequential", "Sequential.0", "Sequential.1", "Sequential.2"], "calls"]) == [1, 1, 1, 1]
    for layer in ("Sequential.0", "Sequential.1", "Sequential.2"):
        assert df.loc[layer, "bwd_cpu_us"] > 0, layer
    assert df.loc[f"Sequential.0/{BACKWARD_MM}", "calls"] == 1
    assert own_warnings(prof.summary) == []


def test_forward_on_a_thread_pool_started_before_the_profiler_is_recorded(mlp):
    with ThreadPoolExecutor(max_workers=2) as pool:
        pool.submit(lambda: None).result()  # the pool's thread exists before the profile starts
        with torchprof.Profiler() as prof:
            ys = list(pool.map(mlp, [X, X + 1]))
            sum(y.sum() for y in ys).backward()
    df = prof.df
    assert list(df.loc[["Sequential", "Sequential.0", "Sequential.2"], "calls"]) == [2, 2, 2]
    assert df.loc[f"Sequential.0/{BACKWARD_MM}", "calls"] == 2  # both threads' backward, on their layer
    assert "(backward, no module)" not in df.index or "AddmmBackward0" not in " ".join(
        i for i in df.index if i.startswith("(backward, no module)"))  # fmt: skip


def test_two_threads_with_colliding_sequence_numbers_each_get_their_own_backward():
    # Each new thread numbers its autograd nodes from 0, so the two forward passes produce the same
    # sequence numbers; backward runs on the main thread. Widths 16 and 64 tell the layers apart.
    torch.manual_seed(0)
    a = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    b = torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    with torchprof.Profiler(labels={a: "a", b: "b"}, shapes=True) as prof:
        ya = on_thread(lambda: a(X), "worker-a")
        yb = on_thread(lambda: b(X), "worker-b")
        (ya.sum() + yb.sum()).backward()
    df = prof.df
    assert df.loc[f"a.0/{BACKWARD_MM}", "input_shapes"] == "[[16, 2], [2, 8]]"  # weight grad of a.0
    assert df.loc[f"b.0/{BACKWARD_MM}", "input_shapes"] == "[[64, 2], [2, 8]]"
    assert df.loc[f"a.2/{BACKWARD_MM}", "input_shapes"] == "[[2, 4], [4, 16]]"  # input grad of a.2
    assert df.loc[f"b.2/{BACKWARD_MM}", "input_shapes"] == "[[2, 4], [4, 64]]"
    for layer in ("a.0", "a.2", "b.0", "b.2"):
        assert df.loc[f"{layer}/autograd::engine::evaluate_function: AddmmBackward0", "calls"] == 1, layer
    assert df.loc["a.0", "input_shapes"] == "[[2, 8]]"  # module input shapes, recorded on any thread


def test_a_layer_called_directly_on_a_worker_thread_is_named_under_its_known_root(mlp):
    with torchprof.Profiler(model=mlp) as prof:
        h = mlp[0](X)  # main thread: a known root's layer, called without its parent
        on_thread(lambda: mlp[2](mlp[1](h)))
        on_thread(lambda: mlp(X))
    df = prof.df
    modules = df[df.kind == "module"]
    # A layer called outside its parent is a row of its own, under the root ("Sequential.0 #2").
    calls = modules.calls.groupby(modules.index.str.replace(r" #\d+$", "", regex=True)).sum().to_dict()
    assert calls == {"Sequential": 1, "Sequential.0": 2, "Sequential.1": 2, "Sequential.2": 2}


def test_module_calls_on_a_thread_torch_cannot_record_are_named_in_a_warning(mlp):
    # With memory=True torch records only the starting thread (its every-thread mode drops memory).
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torchprof.Profiler(memory=True) as prof:
            mlp(X)
            on_thread(lambda: mlp(X), "loader-7")
        df = prof.df
    assert df.loc["Sequential", "calls"] == 1 and df.loc["Sequential", "cpu_mem"] > 0
    said = profiler_warnings(caught)
    assert len(said) == 1
    assert "module calls not recorded: 4 on thread 'loader-7'" in said[0] and "memory=True" in said[0]
    assert prof.summary["warnings"] == [said[0].removeprefix("torchprof: ")]
    assert "· note module calls not recorded: 4 on thread 'loader-7'" in prof.summary_line()


def test_every_thread_mode_costs_the_main_thread_no_memory_when_memory_is_asked(mlp):
    with torchprof.Profiler(memory=True) as prof:
        mlp(X).sum().backward()
    assert prof.df.loc["Sequential.0", "cpu_mem"] > 0


# -- foreign sessions ---------------------------------------------------------------------------------------
def test_a_torch_profiler_session_inside_the_block_is_reported_and_leaves_nothing_behind(mlp):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torchprof.Profiler() as prof:
            mlp(X)
            with torch.profiler.profile():  # as a library might
                mlp(X)
            mlp(X)
        said = profiler_warnings(caught)
        assert len(prof.df) == 1  # torch dropped everything torchprof had recorded
    assert len(said) == 1 and "a torch.profiler session was started (and stopped) inside the block" in said[0]
    assert prof.summary["warnings"] == [said[0].removeprefix("torchprof: ")]
    assert not torch.autograd.profiler._is_profiler_enabled and session._active is None
    with torchprof.Profiler() as again:
        mlp(X)
    assert again.df.loc["Sequential", "calls"] == 1 and own_warnings(again.summary) == []


def test_a_torch_profiler_session_still_running_at_the_end_is_reported_by_the_missing_calls(mlp):
    inner = torch.profiler.profile()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torchprof.Profiler() as prof:
            mlp(X)
            inner.start()
            mlp(X)
        assert prof.df.loc["Sequential", "calls"] == 1  # only what ran after it took over
        said = profiler_warnings(caught)
    inner.stop()
    assert said == ["torchprof: torchprof's hooks saw 8 module calls but the profile has only 4: torch's profiler did "
                    "not record the rest. A torch.profiler session started inside the profiled block replaces "
                    "torchprof's (torch runs one session at a time): turn the library's profiler off while torchprof "
                    "runs."]  # fmt: skip
    assert not torch.autograd.profiler._is_profiler_enabled and session._active is None


def test_a_complete_profile_carries_no_warning_and_the_warnings_survive_save_and_load(mlp, tmp_path):
    with torchprof.Profiler() as clean:
        mlp(X)
    assert own_warnings(clean.summary) == [] and own_warnings(clean.meta) == []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torchprof.Profiler() as emptied:
            with torch.profiler.profile():
                mlp(X)
        path = emptied.save(str(tmp_path / "p.json"))
    assert torchprof.load(path).summary["warnings"] == emptied.summary["warnings"]


# -- FSDP2 ------------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_fsdp2_backward_reaches_the_layers(tmp_path):
    """FSDP2 (fully_shard) records its ``evaluate_function`` ranges with sequence number -1; the
    op inside carries the number. One process, world size 1, gloo on CPU."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent(
        f"""
        import torch, torch.distributed as dist, torchprof
        from torch.distributed.fsdp import fully_shard
        dist.init_process_group("gloo", rank=0, world_size=1, init_method="file://{tmp_path}/rdzv")
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
        for layer in (model[0], model[2]):
            fully_shard(layer)
        fully_shard(model)
        x = torch.randn(2, 8)
        model(x).sum().backward()
        with torchprof.Profiler() as prof:
            model(x).sum().backward()
        df = prof.df
        print("bwd", df.loc["FSDPSequential.0", "bwd_cpu_us"] > 0, df.loc["FSDPSequential.2", "bwd_cpu_us"] > 0)
        print("addmm", any("AddmmBackward0" in i for i in df.index if i.startswith("(backward, no module)")))
        dist.destroy_process_group()
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "bwd True True" in done.stdout and "addmm False" in done.stdout, done.stdout


def test_the_starting_thread_is_not_reported_missing_when_its_first_call_falls_in_a_schedule_wait(mlp):
    schedule = torch.profiler.schedule(wait=1, warmup=1, active=1, repeat=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torchprof.Profiler(memory=True, schedule=schedule) as prof:
            for _ in range(3):
                mlp(X)
                prof.step()
        assert prof.df.loc["ProfilerStep#2/Sequential", "calls"] == 1
    assert profiler_warnings(caught) == [] and own_warnings(prof.summary) == []


# -- start on one thread, stop on another ---------------------------------------------------------------------
def test_stop_on_another_thread_stops_the_profile_and_keeps_it(mlp):
    """torch records every thread by default (profile_all_threads), so its profiler is stopped and
    read from any thread. Before, the stop raised "prior should not be empty when exiting
    ConfigPatch" (torch's config patch is context-local) where Inductor was loaded."""
    import torch._inductor.config

    prof = torchprof.Profiler()
    prof.start()
    mlp(X).sum().backward()
    on_thread(prof.stop)
    assert session._active is None and not torch.autograd.profiler._is_profiler_enabled
    assert not torch._C._autograd._profiler_enabled()
    assert list(prof.df.loc[["Sequential", "Sequential.0", "Sequential.2"], "calls"]) == [1, 1, 1]
    with torchprof.Profiler() as again:
        mlp(X)
    assert again.df.loc["Sequential.0", "calls"] == 1


def test_stop_on_another_thread_with_memory_is_a_clear_error_that_changes_nothing(mlp):
    """With memory=True torch's profiler lives in the starting thread: another thread can neither
    stop nor read it (before, it left it running there and the profile empty)."""
    prof = torchprof.Profiler(memory=True)
    prof.start()
    mlp(X).sum().backward()
    error = on_thread(lambda: _raises(prof.stop))
    assert isinstance(error, torchprof.ProfilerError)
    assert "stop() must run on the thread that started the Profiler ('MainThread')" in str(error)
    assert session._active is not None  # still running, as it was
    prof.stop()  # on the right thread: everything recorded is there
    assert prof.df.loc["Sequential.0", "calls"] == 1 and prof.df.loc["Sequential.0", "act_cpu_mem"] > 0
    with torchprof.Profiler() as again:
        mlp(X)
    assert again.df.loc["Sequential.0", "calls"] == 1


def _raises(fn):
    """Run ``fn``; return the exception it raised (for on_thread, which returns values)."""
    try:
        fn()
    except BaseException as exc:
        return exc
    return None


def test_the_users_own_inductor_config_changes_in_the_block_survive_its_end(mlp):
    """The keys torchprof patches for compiled graphs (under capture_compiled(); a Profiler alone
    patches none: graphs compile in its block as without it) are put back only where they still
    hold its values: a change the user made in the block stays (before, every key was reverted)."""
    import torch._inductor.config as config

    before = config.trace.provenance_tracking_level
    user_pass = config.post_grad_custom_post_pass
    try:
        with torchprof.Profiler():
            assert config.trace.provenance_tracking_level == before
            assert config.post_grad_custom_post_pass is user_pass
            with torchprof.capture_compiled():
                assert config.trace.provenance_tracking_level == 1  # torchprof's, while it captures
                assert config.post_grad_custom_post_pass is not user_pass
                config.trace.provenance_tracking_level = 2  # the user's own, set in the block
                mlp(X)
            assert config.trace.provenance_tracking_level == 2
            assert config.post_grad_custom_post_pass is user_pass  # torchprof's own change is undone
    finally:
        config.trace.provenance_tracking_level = before


def test_a_profile_leaves_no_context_variable_behind(mlp):
    """torch's config.patch() makes a context variable per use, left in the context for good:
    three per profile (the run's Inductor patch, the replay's Inductor and Dynamo patches)."""
    import contextvars

    import torch._dynamo
    import torch._inductor.config  # noqa: F401

    def profile_and_read() -> None:
        with torchprof.Profiler() as prof:
            mlp(X).sum().backward()
        assert prof.df.loc["Sequential.0", "flops"] > 0  # the replay ran

    profile_and_read()
    before = len(contextvars.copy_context())
    for _ in range(3):
        profile_and_read()
    assert len(contextvars.copy_context()) == before
