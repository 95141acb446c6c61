"""``TorchprofProfiler`` in a real Lightning ``Trainer``: a small LightningModule trains 6 optimizer
steps of 2 accumulated batches each on the CPU, and steps 3-4 are recorded. One trained run is
shared by the tests (lightning costs seconds to import)."""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

import pytest

pytest.importorskip("lightning", reason="the [lightning] extra (lightning) is not installed")

from torch.nn.modules import module as nn_module

sys.path.insert(0, str(Path(__file__).parent / "jobs"))
import trainers

from torchprof.integrations.lightning import TorchprofProfiler

STEPS, MICRO, BATCH = [3, 4], 2, 4


def per_step(df, step: int, module: str, column: str) -> float:
    """A layer's figure in one step: the sum of its rows there (Lightning calls it from two
    places: the first micro-batch's training_step, and the optimizer's closure)."""
    rows = df[(df["module"] == module) & df.index.str.startswith(f"ProfilerStep#{step}/")]
    return float(rows[column].sum())


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """``(profiler, hooks installed at each step's first batch, printed, dirpath)`` of the run,
    and a one-step run recording every op's shapes (the FLOPs' reference)."""
    import lightning.pytorch as pl

    class HookProbe(pl.Callback):
        def __init__(self):
            self.hooks: dict[int, int] = {}

        def on_train_batch_start(self, trainer, module, batch, batch_idx):
            self.hooks.setdefault(trainer.global_step + 1, len(nn_module._global_forward_pre_hooks))

    out = tmp_path_factory.mktemp("lightning")
    profiler, probe = TorchprofProfiler(steps=STEPS, dirpath=out, filename="prof"), HookProbe()
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        trainers.lightning_train(profiler, accumulate=MICRO, callbacks=[probe])
    reference = TorchprofProfiler(steps=[1], shapes=True, display=False)
    with contextlib.redirect_stdout(io.StringIO()):
        trainers.lightning_train(reference, max_steps=1, accumulate=MICRO)
    return profiler, probe.hooks, printed.getvalue(), out, reference.result


def test_exactly_the_chosen_optimizer_steps_are_recorded_with_every_batch(run):
    profiler, hooks, *_ = run
    prof = profiler.result
    assert prof.steps["step"].tolist() == STEPS
    assert sorted(p for p in prof.df.index if "/" not in p and p.startswith("ProfilerStep#")) == ["ProfilerStep#3", "ProfilerStep#4"]
    for step in STEPS:
        assert per_step(prof.df, step, "Regressor.net", "calls") == MICRO
    assert hooks == {1: 0, 2: 1, 3: 1, 4: 1, 5: 0, 6: 0}
    assert prof.step_times["step"].tolist() == [1, 2, 3, 4, 5, 6]
    assert prof.step_times["recorded"].tolist() == [False, False, True, True, False, False]


def test_lightning_actions_are_regions_beside_the_layers(run):
    df = run[0].result.df
    for step in STEPS:
        children = df[df["parent"] == f"ProfilerStep#{step}"].set_index("name")
        loading = children.loc["[_TrainingEpochLoop].train_dataloader_next"]
        assert loading["kind"] == "region" and loading["calls"] == MICRO and loading["cpu_us"] > 0
        assert children.loc["run_training_batch", "kind"] == "region"
        optimizer = df[df.index.str.startswith(f"ProfilerStep#{step}/") & df["name"].str.startswith("Optimizer.step#")]
        assert len(optimizer) == 1 and optimizer["kind"].iloc[0] == "region"
        parent = df.loc[optimizer["parent"].iloc[0]]
        assert parent["name"] == "[LightningModule]Regressor.optimizer_step" and parent["kind"] == "region"
    assert "run_training_epoch" not in set(df["name"])  # it spans every step: never a region


def test_the_layers_have_forward_and_backward_time_and_exact_flops(run):
    prof, reference = run[0].result, run[4]
    for layer in ("Regressor.net.0", "Regressor.net.2"):
        assert per_step(prof.df, 4, layer, "fwd_cpu_us") > 0 and per_step(prof.df, 4, layer, "bwd_cpu_us") > 0
    # by hand, per micro-batch: net.2 = Linear(32, 1): forward, the input's gradient, the weight's
    # gradient; net.0 = Linear(8, 32) on the data: forward and the weight's gradient only
    assert per_step(prof.df, 3, "Regressor.net.2", "macs") == MICRO * 3 * BATCH * 32 * 1
    assert per_step(prof.df, 3, "Regressor.net.0", "macs") == MICRO * 2 * BATCH * 8 * 32
    for module in ("Regressor.net", "Regressor.net.0", "Regressor.net.1", "Regressor.net.2"):
        for column in ("flops", "macs"):
            assert per_step(prof.df, 3, module, column) == per_step(reference.df, 1, module, column), (module, column)


def test_summary_returns_the_table_and_the_report_files_are_written(run):
    profiler, _, printed, out, _ = run
    table = profiler.summary()
    assert "ProfilerStep#3" in table and "run_training_batch" in table
    assert "torchprof: Regressor under the Lightning Trainer, steps 3-4 recorded (of 1-6)" in printed
    assert (out / "fit-prof.html").stat().st_size > 10_000
    assert "ProfilerStep#3" in (out / "fit-prof.txt").read_text()  # Lightning's describe(): the summary
    import torchprof

    assert torchprof.load_trace(str(out / "fit-prof.json.gz")).steps["step"].tolist() == STEPS
    assert (out / "fit-prof.md").exists() == hasattr(profiler.result, "to_markdown")


def test_a_run_stopped_inside_the_chosen_steps_leaves_nothing_running():
    import torchprof

    class Boom(RuntimeError):
        pass

    import lightning.pytorch as pl

    class RaiseAtStep(pl.Callback):
        def on_train_batch_start(self, trainer, module, batch, batch_idx):
            if trainer.global_step + 1 == 3:
                raise Boom("stop")

    profiler = TorchprofProfiler(steps=[2, 3], flops=False, display=False)
    with pytest.raises(Boom), contextlib.redirect_stdout(io.StringIO()):
        trainers.lightning_train(profiler, max_steps=4, accumulate=1, callbacks=[RaiseAtStep()])
    # Lightning does not tear its profiler down after an exception; the profiler's own
    # teardown (at the next fit, or when it is deleted) ends the capture
    with pytest.warns(torchprof.ProfilerWarning, match="cut short"):
        profiler.teardown(stage="fit")
    assert not nn_module._global_forward_pre_hooks
    assert profiler._window.result.steps["step"].tolist() == [2, 3]
