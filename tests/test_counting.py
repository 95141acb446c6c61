"""One count per thing: every module, parameter and microsecond is counted once, wherever it ran
(under a region inside a module, in DataParallel, recomputed by checkpointing), and forward,
backward and other add up to the total on every row and in every view."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import torchprof
from torchprof._views.format import summary_line, time_us
from torchprof._vocab import RECOMPUTE


def check_split(df) -> None:
    """forward + backward + other == total on every row, and no part is negative."""
    for device in ("cpu", "cuda"):
        if df[f"{device}_us"].isna().all():
            continue
        parts = df[f"fwd_{device}_us"] + df[f"bwd_{device}_us"] + df[f"other_{device}_us"]
        assert ((parts - df[f"{device}_us"]).abs() <= 1e-6 * df[f"{device}_us"].abs().max() + 1e-9).all()
        for part in ("fwd", "bwd", "other"):
            assert (df[f"{part}_{device}_us"] >= 0).all(), f"negative {part}_{device}_us"


def params_of(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def test_the_optimizer_and_a_loss_outside_modules_are_other_never_forward(mlp):
    opt = torch.optim.SGD(mlp.parameters(), lr=0.1)
    x = torch.randn(4, 8)
    with torchprof.Profiler() as prof:
        loss = mlp(x).pow(2).mean()  # the loss runs outside every module
        loss.backward()
        opt.step()
    df = prof.df
    check_split(df)
    step = df.loc["Optimizer.step#SGD.step"]
    assert step.fwd_cpu_us == 0 and step.other_cpu_us == pytest.approx(step.cpu_us)
    root = df.iloc[0]
    assert root.other_cpu_us >= step.cpu_us  # the optimizer, the loss and the root's own time
    assert root.fwd_cpu_us == pytest.approx(df.loc["Sequential", "fwd_cpu_us"])  # forward is the modules' forward
    s = prof.summary
    assert (s["forward_cpu_us"], s["backward_cpu_us"], s["other_cpu_us"]) == pytest.approx(
        (root.fwd_cpu_us, root.bwd_cpu_us, root.other_cpu_us))  # fmt: skip
    # The one-line summary every view shows states the same split.
    line = summary_line(s)
    assert f"forward {time_us(root.fwd_cpu_us)}" in line and f"other {time_us(root.other_cpu_us)}" in line


class Wrapper(nn.Module):
    """Calls its inner model inside a record_function region, as DistributedDataParallel does."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, x):
        with torch.profiler.record_function("Wrapper.forward"):
            return self.module(x)


def test_a_module_inside_a_region_inside_a_module_is_counted_once(mlp):
    model = Wrapper(mlp)
    x = torch.randn(4, 8)
    with torchprof.Profiler() as prof:
        model(x).sum().backward()
    df = prof.df
    true = params_of(model)
    assert prof.summary["params"] == true and df.iloc[0]["params"] == true
    assert prof.summary["param_bytes"] == true * 4
    # The inner module keeps its dotted path; the region stays in the tree as its parent.
    inner = df.loc["Wrapper.module"]
    assert inner.kind == "module" and inner["name"] == "module" and inner.parent == "Wrapper/Wrapper.forward"
    assert df.loc["Wrapper.module.0", "parent"] == "Wrapper.module"
    assert prof.summary["forward_cpu_us"] == pytest.approx(df.loc["Wrapper", "fwd_cpu_us"])
    assert prof.summary["forward_cpu_us"] <= prof.summary["wall_us"]
    check_split(df)


def test_data_parallel_on_the_cpu_counts_parameters_once(mlp):
    model = nn.DataParallel(mlp)  # no GPU: it calls the module itself, inside a region
    with torchprof.Profiler() as prof:
        model(torch.randn(4, 8)).sum().backward()
    assert prof.summary["params"] == params_of(mlp)
    assert prof.df.loc["DataParallel.module.0", "bwd_cpu_us"] > 0
    check_split(prof.df)


def test_a_data_parallel_replica_shows_as_a_replica_and_adds_no_parameters(mlp):
    # What nn.DataParallel does per GPU: a copy of the model (run on a worker thread there).
    replica = mlp._replicate_for_data_parallel()
    x = torch.randn(4, 8)
    with torchprof.Profiler() as prof:
        mlp(x)
        replica(x)
    df = prof.df
    modules = df[df.kind == "module"]
    assert "Sequential (replica)" in set(modules.module), sorted(set(modules.module))
    assert prof.summary["params"] == params_of(mlp)


class Checkpointed(nn.Module):
    def __init__(self, reentrant: bool) -> None:
        super().__init__()
        self.reentrant = reentrant
        self.block = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 16))
        self.head = nn.Linear(16, 2)

    def forward(self, x):
        from torch.utils.checkpoint import checkpoint

        return self.head(checkpoint(self.block, x, use_reentrant=self.reentrant))


@pytest.mark.parametrize("reentrant", [False, True], ids=["non-reentrant", "reentrant"])
def test_checkpointing_shows_recompute_under_the_module_counted_once_as_backward(reentrant):
    torch.manual_seed(0)
    model = Checkpointed(reentrant)
    x = torch.randn(4, 16, requires_grad=True)
    model(x).sum().backward()
    with torchprof.Profiler() as prof:
        model(x).sum().backward()
    df = prof.df
    check_split(df)
    for layer in ("Checkpointed.block", "Checkpointed.block.0", "Checkpointed.block.1", "Checkpointed.block.2"):
        recompute = df.loc[f"{layer}/{RECOMPUTE}"]
        assert recompute.kind == "region" and recompute.is_backward and recompute.calls == 1
        assert recompute.bwd_cpu_us == pytest.approx(recompute.cpu_us) and recompute.cpu_us > 0
        # The module ran forward once: its forward part is that run, not the recomputation.
        assert df.loc[layer, "calls"] == 1 and df.loc[layer, "fwd_cpu_us"] > 0
        assert df.loc[layer, "bwd_cpu_us"] >= recompute.cpu_us
    # The layers' own backward lands on them, with either kind of checkpointing.
    for layer in ("Checkpointed.block.0", "Checkpointed.block.2"):
        assert f"{layer}/autograd::engine::evaluate_function: AddmmBackward0" in df.index
    # Recomputed modules are not counted again anywhere.
    assert prof.summary["params"] == params_of(model)
    assert (df[df.kind == "module"].module.value_counts() == 1).all()
