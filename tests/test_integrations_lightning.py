"""``TorchprofProfiler`` in a real Lightning ``Trainer``: a small LightningModule trains 6 optimizer
steps of 2 accumulated batches each on the CPU, and steps 3-4 are recorded. One trained run is
shared by the tests (lightning costs seconds to import)."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("lightning", reason="the [lightning] extra (lightning) is not installed")

from torch.nn.modules import module as nn_module

sys.path.insert(0, str(Path(__file__).parent / "jobs"))
import trainers

import torchprof
from torchprof.integrations.lightning import TorchprofProfiler

# The trained run is shared by the module's tests, whichever xdist worker runs them.
pytestmark = pytest.mark.slow
STEPS, MICRO, BATCH = [3, 4], 2, 4


def per_step(df, step: int, module: str, column: str) -> float:
    """A layer's figure in one step: the sum of its rows there (Lightning calls it from two
    places: the first micro-batch's training_step, and the optimizer's closure)."""
    rows = df[(df["module"] == module) & df.index.str.startswith(f"ProfilerStep#{step}/")]
    return float(rows[column].sum())


@dataclass
class Run:
    result: torchprof.Result
    """The profile of the run with the default options (no shapes)."""
    summary: str
    """What the profiler's summary() returned."""
    hooks: dict[int, int]
    """torchprof's hooks in torch's tables at each step's first batch."""
    printed: str
    out: Path
    """The profiler's dirpath."""
    reference: torchprof.Result
    """One step of the same run recording every op's shapes (the FLOPs' reference)."""


def train(folder: Path) -> None:
    import lightning.pytorch as pl

    class HookProbe(pl.Callback):
        def __init__(self):
            self.hooks: dict[int, int] = {}

        def on_train_batch_start(self, trainer, module, batch, batch_idx):
            self.hooks.setdefault(trainer.global_step + 1, len(nn_module._global_forward_pre_hooks))

    profiler, probe = TorchprofProfiler(steps=STEPS, dirpath=folder / "report", filename="prof"), HookProbe()
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        trainers.lightning_train(profiler, accumulate=MICRO, callbacks=[probe])
    reference = TorchprofProfiler(steps=[1], shapes=True, display=False)
    with contextlib.redirect_stdout(io.StringIO()):
        trainers.lightning_train(reference, max_steps=1, accumulate=MICRO)
    profiler.result.save(str(folder / "result.json"))
    reference.result.save(str(folder / "reference.json"))
    (folder / "summary.txt").write_text(profiler.summary())
    (folder / "hooks.json").write_text(json.dumps(probe.hooks))
    (folder / "printed.txt").write_text(printed.getvalue())


@pytest.fixture(scope="session")
def lightning_run(tmp_path_factory) -> Run:
    folder = trainers.once_per_session(tmp_path_factory, "integrations-lightning", train)
    hooks = {int(k): v for k, v in json.loads((folder / "hooks.json").read_text()).items()}
    return Run(torchprof.load(folder / "result.json"), (folder / "summary.txt").read_text(), hooks,
               (folder / "printed.txt").read_text(), folder / "report", torchprof.load(folder / "reference.json"))  # fmt: skip


def test_exactly_the_chosen_optimizer_steps_are_recorded_with_every_batch(lightning_run):
    prof, hooks = lightning_run.result, lightning_run.hooks
    assert prof.steps["step"].tolist() == STEPS
    assert sorted(p for p in prof.df.index if "/" not in p and p.startswith("ProfilerStep#")) == ["ProfilerStep#3", "ProfilerStep#4"]
    for step in STEPS:
        assert per_step(prof.df, step, "Regressor.net", "calls") == MICRO
    assert hooks == {1: 0, 2: 1, 3: 1, 4: 1, 5: 0, 6: 0}
    assert prof.step_times["step"].tolist() == [1, 2, 3, 4, 5, 6]
    assert prof.step_times["recorded"].tolist() == [False, False, True, True, False, False]


def test_lightning_actions_are_regions_beside_the_layers(lightning_run):
    df = lightning_run.result.df
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


def test_the_layers_have_forward_and_backward_time_and_exact_flops(lightning_run):
    prof, reference = lightning_run.result, lightning_run.reference
    for layer in ("Regressor.net.0", "Regressor.net.2"):
        assert per_step(prof.df, 4, layer, "fwd_cpu_us") > 0 and per_step(prof.df, 4, layer, "bwd_cpu_us") > 0
    # by hand, per micro-batch: net.2 = Linear(32, 1): forward, the input's gradient, the weight's
    # gradient; net.0 = Linear(8, 32) on the data: forward and the weight's gradient only
    assert per_step(prof.df, 3, "Regressor.net.2", "macs") == MICRO * 3 * BATCH * 32 * 1
    assert per_step(prof.df, 3, "Regressor.net.0", "macs") == MICRO * 2 * BATCH * 8 * 32
    for module in ("Regressor.net", "Regressor.net.0", "Regressor.net.1", "Regressor.net.2"):
        for column in ("flops", "macs"):
            assert per_step(prof.df, 3, module, column) == per_step(reference.df, 1, module, column), (module, column)
    # The loss in training_step (in the first micro-batch's range and in the optimizer's closure),
    # the second micro-batch's adds into the gradients (its backward runs in the closure, the
    # first's before the step, and Lightning clears the gradients between the first's forward and
    # its backward) and the optimizer's update are counted: the whole step is exact.
    df, ref = prof.df, reference.df
    for op in ("aten::mse_loss", "aten::mse_loss_backward", "aten::add_"):
        mine = df[(df["name"] == op) & df.index.str.startswith("ProfilerStep#3/")]["flops"]
        theirs = ref[(ref["name"] == op) & ref.index.str.startswith("ProfilerStep#1/")]["flops"]
        assert mine.sum() == theirs.sum() > 0 and mine.notna().all(), op
    for step in STEPS:
        assert df.loc[f"ProfilerStep#{step}", "flops"] == ref.loc["ProfilerStep#1", "flops"] > 0
    assert not prof.unsupported_ops and "warnings" not in prof.summary


def test_summary_returns_the_table_and_the_report_files_are_written(lightning_run):
    table, printed, out = lightning_run.summary, lightning_run.printed, lightning_run.out
    assert "ProfilerStep#3" in table and "run_training_batch" in table
    assert "torchprof: Regressor under the Lightning Trainer, steps 3-4 recorded (of 1-6)" in printed
    assert (out / "fit-prof.html").stat().st_size > 10_000
    assert "ProfilerStep#3" in (out / "fit-prof.txt").read_text()  # Lightning's describe(): the summary
    assert torchprof.load_trace(str(out / "fit-prof.json.gz")).steps["step"].tolist() == STEPS
    assert (out / "fit-prof.md").exists() == hasattr(lightning_run.result, "to_markdown")


def test_a_run_stopped_inside_the_chosen_steps_leaves_nothing_running():
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
