"""torchprof.Profiler on real models: attribution, invariants, clean-up and errors."""

from __future__ import annotations

import ast
import contextlib
import math
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import torchprof
from torchprof._vocab import UNATTRIBUTED_BACKWARD


def check_invariants(df) -> None:
    kids = df.groupby("parent")
    for total, own in (("cpu_us", "self_cpu_us"), ("bwd_cpu_us", "bwd_self_cpu_us"), ("cuda_us", "self_cuda_us"),
                       ("bwd_cuda_us", "bwd_self_cuda_us"), ("cpu_mem", "self_cpu_mem"), ("cuda_mem", "self_cuda_mem")):
        if df[total].isna().all():
            continue
        expected = df[own] + kids[total].sum().reindex(df.index).fillna(0.0)
        err = (expected - df[total]).abs()
        assert (err <= 1e-6 * df[total].abs().max() + 1e-6).all(), f"{total} != {own} + children"


def test_every_call_of_a_small_model_is_attributed(mlp):
    x = torch.randn(4, 8)
    with torchprof.Profiler() as prof:
        mlp(x).sum().backward()
    df = prof.df
    modules = df[df.kind == "module"]
    assert set(modules.index) == {"Sequential", "Sequential.0", "Sequential.1", "Sequential.2"}
    assert modules.loc["Sequential.0", "type"] == "Linear"
    assert modules.loc["Sequential.0", "name"] == "0"
    assert (modules["calls"] == 1).all()
    for layer in ("Sequential.0", "Sequential.2"):
        assert modules.loc[layer, "cpu_us"] > modules.loc[layer, "bwd_cpu_us"] > 0
        assert f"{layer}/autograd::engine::evaluate_function: AddmmBackward0" in df.index
    assert modules.loc["Sequential.0", "params"] == 8 * 16 + 16
    assert modules.loc["Sequential", "params"] == 8 * 16 + 16 + 16 * 4 + 4
    # forward addmm, then only the weight gradient in backward (the input needs none)
    assert df.loc["Sequential.0", "macs"] == 2 * 4 * 8 * 16
    check_invariants(df)


def test_resnet18_training_step_has_forward_and_backward_time_on_every_conv_and_exact_macs(resnet18_step):
    from torch.utils.flop_counter import FlopCounterMode

    prof, step = resnet18_step
    with FlopCounterMode(display=False) as counter:
        step()
    df = prof.df
    convs = df[df.type == "Conv2d"]
    assert len(convs) == 20
    assert ((convs.cpu_us - convs.bwd_cpu_us) > 0).all(), "a Conv2d has no forward time"
    assert (convs.bwd_cpu_us > 0).all(), "a Conv2d has no backward time"
    check_invariants(df)
    assert df.loc["profile", "macs"] == pytest.approx(counter.get_total_flops() / 2, rel=0.01)
    assert "Optimizer.step#SGD.step" in df.index and df.loc["Optimizer.step#SGD.step", "kind"] == "region"
    summary = prof.summary
    assert summary["params"] == 11_689_512  # torchvision's resnet18: sum(p.numel() for p in model.parameters())
    assert summary["backward_cpu_us"] > 0 and summary["forward_cpu_us"] > 0
    assert summary["peak_cpu_mem"] > 0


def test_root_total_equals_torch_self_cpu_total(mlp):
    x = torch.randn(64, 8)
    with torchprof.Profiler() as prof:
        for _ in range(3):
            mlp(x).sum().backward()
    torch_total = prof.torch_profile.key_averages().self_cpu_time_total
    assert prof.df.loc["profile", "cpu_us"] == pytest.approx(torch_total, rel=1e-3)


def test_model_option_attributes_only_that_model_and_roots_paths_at_it(mlp):
    other = torch.nn.Linear(4, 4)
    with torchprof.Profiler(model=mlp) as prof:
        other(mlp(torch.randn(2, 8)))
    paths = set(prof.df[prof.df.kind == "module"].index)
    assert paths == {"Sequential", "Sequential.0", "Sequential.1", "Sequential.2"}


def test_module_called_directly_is_named_under_its_known_root(mlp):
    with torchprof.Profiler(model=mlp) as prof:
        mlp[0](torch.randn(2, 8))
    assert "Sequential.0" in prof.df.index


def test_a_root_is_read_below_when_first_needed_and_its_modules_keep_their_paths():
    # A root's call alone names it without walking the model (a compiled model's call is the only
    # module call its profile sees); the walk comes with the first call that needs it.
    class Functional(torch.nn.Module):  # runs its layer's weights without calling the layer
        def __init__(self):
            super().__init__()
            self.inner = torch.nn.Sequential(torch.nn.Linear(2, 2))

        def forward(self, x):
            return torch.nn.functional.linear(x, self.inner[0].weight, self.inner[0].bias)

    model = Functional()
    outer = torch.nn.Sequential(Functional())
    with torchprof.Profiler() as prof:
        model(torch.randn(1, 2))
        model.inner[0](torch.randn(1, 2))  # by itself, after the root's call
        outer[0](torch.randn(1, 2))  # a root inside a model not seen yet
        outer(torch.randn(1, 2))
    modules = prof.df[prof.df.kind == "module"]
    assert {"Functional", "Functional.inner.0", "Sequential", "Sequential.0"} <= set(modules.index)
    assert not any(path.startswith("Linear") for path in modules.index)  # the layer did not become a root


def test_modules_called_outside_any_root_become_roots_and_same_class_roots_stay_apart():
    a, b = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    with torchprof.Profiler() as prof:
        a(torch.randn(1, 2))
        b(torch.randn(1, 2))
        a(torch.randn(1, 2))
    df = prof.df
    assert df.loc["Linear", "calls"] == 2 and df.loc["Linear#2", "calls"] == 1


def test_a_layer_held_by_two_parents_keeps_its_named_modules_name_wherever_it_was_called():
    class Pair(torch.nn.Module):
        def __init__(self):
            super().__init__()
            shared = torch.nn.Linear(3, 3)
            self.left = torch.nn.Sequential(shared)
            self.right = torch.nn.Sequential(shared)

        def forward(self, x):
            return self.right(self.left(x))

    model = Pair()
    for _ in range(2):  # the same paths in every run, whichever call came first
        with torchprof.Profiler() as prof:
            model(torch.randn(1, 3))
        df = prof.df
        # named_modules() names it left.0: its row under left, and the call right made, which does
        # not hold it by that name, under the module both are in, named within it.
        assert df.loc["Pair.left.0", "parent"] == "Pair.left" and df.loc["Pair/Pair.left.0", "parent"] == "Pair"
        assert set(df.module[df.kind == "module"]) == {"Pair", "Pair.left", "Pair.right", "Pair.left.0"}


def test_shapes_of_a_module_called_with_an_object_record_no_torchscript_side_effects():
    # torchvision's detection models pass an ImageList. Recorded as a profiler input, it made
    # torch compile the class with TorchScript inside the profile, which ran a stray "defaults"
    # op (and where a class cannot compile, the argument was dropped, shifting the others' shapes).
    image_list = pytest.importorskip("torchvision.models.detection.image_list")

    class Head(torch.nn.Module):
        def forward(self, images, x, scale):
            return images.tensors * x * scale

    images = image_list.ImageList(torch.ones(2, 4), [(1, 2)])
    with torchprof.Profiler(shapes=True) as prof:
        Head()(images, torch.ones(2, 4), 2.0)
    df = prof.df
    assert "defaults" not in set(df.name)
    assert torch.jit._state._get_script_class(image_list.ImageList) is None  # the class was not compiled
    assert df.loc["Head", "input_shapes"] == "[[], [2, 4], []]"  # the object's place kept, without a shape
    assert set(df[df.kind == "op"].name) >= {"aten::mul"}


def test_labels_name_root_modules(mlp):
    with torchprof.Profiler(labels={mlp: "model"}, name="cell") as prof:
        mlp(torch.randn(1, 8))
    assert "model.0" in prof.df.index
    assert prof.df.index[0] == "cell"


def test_user_regions_are_region_nodes(mlp):
    with torchprof.Profiler() as prof:
        with torch.profiler.record_function("data"):
            x = torch.randn(2, 8)
        with torch.profiler.record_function("train"):
            mlp(x).sum().backward()
    df = prof.df
    assert df.loc["data", "kind"] == "region"
    assert df.loc["train/Sequential", "kind"] == "module"
    # The loss (outside modules) is in region "train", so its backward belongs to that region.
    assert df.loc["train", "bwd_cpu_us"] > 0


def test_accumulate_grad_goes_to_the_unattributed_backward_node(mlp):
    with torchprof.Profiler() as prof:
        mlp(torch.randn(2, 8)).sum().backward()
    df = prof.df
    node = df[df.name == UNATTRIBUTED_BACKWARD]
    assert len(node) == 1 and node.iloc[0].bwd_cpu_us > 0
    children = df[df.parent == node.index[0]].name
    assert any("AccumulateGrad" in n for n in children)


def test_hooks_are_removed_and_partial_profile_kept_when_the_body_raises(mlp):
    class Boom(torch.nn.Module):
        def forward(self, x):
            raise ValueError("bad input")

    model = torch.nn.Sequential(mlp, Boom())
    with pytest.raises(ValueError, match="bad input"):
        with torchprof.Profiler() as prof:
            model(torch.randn(2, 8))
    df = prof.df
    assert "Sequential.0.0" in df.index and df.loc["Sequential.1", "type"] == "Boom"
    assert "ValueError" in prof.summary["interrupted"]


def test_keyboard_interrupt_leaves_nothing_installed(mlp):
    class Stop(torch.nn.Module):
        def forward(self, x):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        with torchprof.Profiler() as prof:
            torch.nn.Sequential(mlp, Stop())(torch.randn(2, 8))
    assert prof.df.loc["Sequential.0", "calls"] == 1
    with torchprof.Profiler() as again:  # a new profile starts cleanly afterwards
        mlp(torch.randn(2, 8))
    assert "Sequential" in again.df.index


def test_exception_caught_inside_a_module_keeps_the_stack_consistent():
    class Flaky(torch.nn.Module):
        def forward(self, x):
            raise RuntimeError("flaky")

    class Outer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.flaky = Flaky()
            self.fc = torch.nn.Linear(2, 2)

        def forward(self, x):
            with contextlib.suppress(RuntimeError):
                self.flaky(x)
            return self.fc(x)

    with torchprof.Profiler() as prof:
        Outer()(torch.randn(1, 2))
    assert prof.df.loc["Outer.fc", "parent"] == "Outer"


def test_nested_profilers_are_a_clear_error(mlp):
    import traceback

    with torchprof.Profiler():
        with pytest.raises(torchprof.ProfilerError, match="already running") as raised:
            with torchprof.Profiler():
                pass
    # The user's own line is where the error is: one torchprof frame (the start), not its insides.
    package = os.path.dirname(os.path.abspath(torchprof.__file__)) + os.sep  # (not a folder named torchprof: a clone may be one)
    inside = [f for f in traceback.extract_tb(raised.value.__traceback__) if os.path.abspath(f.filename).startswith(package)]
    assert [f.name for f in inside] == ["start"], traceback.format_tb(raised.value.__traceback__)
    with torch.profiler.profile():
        with pytest.raises(torchprof.ProfilerError, match="already running"):
            with torchprof.Profiler():
                pass


def test_bad_options_are_rejected_before_anything_is_installed():
    with pytest.raises(TypeError, match=r"nn\.Module"):
        torchprof.Profiler(model="resnet")
    if not torch.cuda.is_available():
        with pytest.raises(torchprof.ProfilerError, match="CUDA"):
            torchprof.Profiler(cuda=True)


def test_results_need_a_finished_run():
    prof = torchprof.Profiler()
    with pytest.raises(torchprof.ProfilerError, match="nothing was profiled"):
        prof.df


def test_seed_api_profile_and_display(mlp, capsys):
    with torchprof.profile(mlp, use_cuda=False) as prof:
        mlp(torch.randn(2, 8))
    prof.display(min_pct=0, sort_by=["self_cpu_time"])
    out = capsys.readouterr().out
    assert "├──" in out or "└──" in out
    assert "Sequential" in out


def test_shapes_are_kept_per_node_when_asked(mlp):
    with torchprof.Profiler(shapes=True) as prof:
        mlp(torch.randn(5, 8))
    assert prof.df.loc["Sequential.0", "input_shapes"] == "[[5, 8]]"


@pytest.mark.slow
def test_no_kineto_lines_reach_stderr():
    code = textwrap.dedent(
        """
        import torch, torchprof
        m = torch.nn.Linear(4, 4)
        import os, sys
        fds = []
        for block in range(4):  # fd 2's swaps reuse one temporary file: no descriptor leaks per block
            with torchprof.Profiler() as prof:
                m(torch.randn(2, 4))
                os.write(2, f"user line {block}\\n".encode())
            fds.append(len(os.listdir("/proc/self/fd")))
            print(len(prof.df))
        print("user message", file=sys.stderr)
        print("fds", fds)
        """
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "USDT" not in run.stderr and "gpuGetDeviceCount" not in run.stderr, run.stderr
    assert "user message" in run.stderr
    assert [f"user line {b}" for b in range(4)] == [line for line in run.stderr.splitlines() if line.startswith("user line")]
    fds = ast.literal_eval(run.stdout.splitlines()[-1].removeprefix("fds "))
    assert len(set(fds[1:])) == 1, fds


@pytest.mark.slow
@pytest.mark.parametrize("before", ["nothing", "torch.profiler", "the user's kineto level"])
def test_kineto_is_silenced_at_its_first_start_or_its_lines_are_swapped_away(before):
    from torchprof._capture.quiet import is_noise

    # kineto reads its level once, at the process's first profiler start: torchprof's first start
    # sets it silent if it is that start and the user set none (no fd 2 swaps from then on);
    # otherwise every start and stop swaps fd 2 as before. Either way no kineto line shows.
    code = textwrap.dedent(
        f"""
        import os, sys, torch, torchprof
        from torchprof._capture import quiet
        m = torch.nn.Linear(4, 4)
        if {before!r} == "torch.profiler":
            with torch.profiler.profile():
                m(torch.randn(2, 4))
        print("-- torchprof", file=sys.stderr, flush=True)
        for block in range(3):
            with torchprof.Profiler() as prof:
                m(torch.randn(2, 4))
                os.write(2, f"user line {{block}}\\n".encode())
        print("-- the user's own session", file=sys.stderr, flush=True)
        with torch.profiler.profile():
            m(torch.randn(2, 4))
        print(quiet._kineto_silent, os.environ.get("KINETO_LOG_LEVEL"), len(prof.df))
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "KINETO_LOG_LEVEL"}
    if before == "the user's kineto level":
        env["KINETO_LOG_LEVEL"] = "2"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode == 0, run.stderr
    silent, level, rows = run.stdout.split()[-3:]
    before_ours, rest = run.stderr.split("-- torchprof\n", 1)
    ours, users = rest.split("-- the user's own session\n")
    assert ours == "".join(f"user line {b}\n" for b in range(3))  # the user's lines, nothing of kineto's
    assert int(rows) > 0
    if before == "nothing":
        assert (silent, level) == ("[True]", "None")  # silenced at its first start; the variable removed again
        assert users == ""  # the user's own sessions are quiet too
    elif before == "torch.profiler":  # kineto started before, at its own level
        # Judged by what torchprof's first start and stop caught: a kineto that writes lines at
        # every start or stop (this build's) keeps fd 2 swapped; one that wrote only at its first
        # session (torch 2.11's) writes nothing later, and needs no swap. Either way torchprof's
        # output above held none of them.
        wrote = sum(is_noise(line) for line in before_ours.splitlines())
        assert level == "None" and silent in ("[False]", "[True]") and wrote
    else:  # the user chose kineto's level: left as it was, and fd 2 stays swapped
        assert silent in ("[]", "[False]") and level == "2"


def test_native_output_around_torchs_start_and_stop_keeps_each_swaps_own_lines_only(monkeypatch, capsys, tmp_path):
    import os

    from torchprof._capture import quiet

    monkeypatch.setattr(quiet, "_SINK_LIMIT", 200)  # the kept file is emptied once it holds this much
    kineto = "USDT:2026-11-26 03:22:42 24401:24401 SyncActivityProfilerHandler.cpp:46] profiler_stop\n"
    for n in range(6):  # the later swaps write past the limit: the file is emptied between them
        with quiet.quiet_native_stderr():
            os.write(2, kineto.encode())
            os.write(2, f"native line {n}\n".encode())
        assert capsys.readouterr().err == f"native line {n}\n"  # its own line once, never an earlier swap's
    assert quiet._free_sink and os.fstat(quiet._free_sink[-1].fd).st_size < 200 + 2 * len(kineto)
    # The process closes the kept file's descriptor and the number names another file now (one of
    # the user's): that file is neither written to nor emptied, and the swap makes a sink of its own.
    kept = quiet._free_sink[-1].fd
    precious = tmp_path / "user.log"
    precious.write_bytes(b"x" * 300)  # past the limit: a sink this full would be emptied
    users = os.open(precious, os.O_RDWR | os.O_APPEND)
    os.dup2(users, kept)  # our number, given out again
    os.close(users)
    try:
        with quiet.quiet_native_stderr():
            os.write(2, b"native line again\n")
        assert capsys.readouterr().err == "native line again\n"
        assert precious.read_bytes() == b"x" * 300 and quiet._free_sink[-1].fd != kept
    finally:
        os.close(kept)


def test_functional_convolution_counts_its_real_stride():
    class Functional(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.randn(8, 3, 3, 3))

        def forward(self, x):
            return torch.nn.functional.conv2d(x, self.weight, stride=2, padding=1)

    with torchprof.Profiler() as prof:
        Functional()(torch.randn(1, 3, 16, 16))
    assert prof.df.loc["profile", "macs"] == 1 * 8 * 3 * 9 * 8 * 8




class Transforms(torch.nn.Module):
    def forward(self, x):
        return torch.fft.fft(x).abs().sum() + torch.linalg.inv(x).sum()


@pytest.mark.parametrize("shapes", [True, False])
def test_flops_read_nan_only_with_a_warning_naming_the_ops(shapes):
    # NaN came with no word wherever no cause was known (ops without a formula, calls left
    # unnoted): the rule is NaN with a note.
    with torchprof.Profiler(shapes=shapes) as prof:
        Transforms()(torch.randn(8, 8))
    assert math.isnan(prof.df.loc["Transforms", "flops"]) and "aten::_fft_r2c" in prof.unsupported_ops
    (note,) = [w for w in prof.summary["warnings"] if "FLOPs" in w]
    assert "unknown" in note and "aten::_fft_r2c" in note


def test_a_profile_leaves_the_warnings_filters_as_it_found_them(mlp):
    # torchprof's own filter (torch's compile-hook and cycle warnings) is in place during the
    # block only: a later change once took it out by the wrong name, and each Profiler left one
    # behind, hiding those warnings from the user for good.
    import warnings

    with torchprof.Profiler():  # (what torch imports at its first profile adds filters of its own)
        mlp(torch.randn(4, 8)).sum().backward()
    before = list(warnings.filters)
    for _ in range(2):
        with torchprof.Profiler():
            mlp(torch.randn(4, 8)).sum().backward()
    assert warnings.filters == before
