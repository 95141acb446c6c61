"""``TorchprofCallback`` in a real Hugging Face ``Trainer``: a tiny GPT-2 built from a config trains 6
optimizer steps of 2 gradient-accumulation micro-batches each on the CPU, and steps 3-4 are
recorded. One trained run is shared by the tests (transformers costs seconds to import)."""

from __future__ import annotations

import contextlib
import io
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("transformers", reason="the [hf] extra (transformers) is not installed")

from torch.nn.modules import module as nn_module

sys.path.insert(0, str(Path(__file__).parent / "jobs"))
import trainers

import torchprof
from torchprof.integrations.hf import TorchprofCallback

# The trained run is shared by the module's tests, whichever xdist worker runs them.
pytestmark = pytest.mark.slow
STEPS, MICRO = [3, 4], 2


@dataclass
class Run:
    result: torchprof.Result
    """The profile of the run with the default options (no shapes)."""
    hooks: dict[int, int]
    """torchprof's hooks in torch's tables at each step's begin."""
    printed: str
    out: Path
    """The callback's output_dir."""
    reference: torchprof.Result
    """One step of the same run recording every op's shapes (the FLOPs' reference)."""


def train(folder: Path) -> None:
    from transformers import TrainerCallback

    class HookProbe(TrainerCallback):
        def __init__(self):
            self.hooks: dict[int, int] = {}

        def on_step_begin(self, args, state, control, **kwargs):
            self.hooks[state.global_step + 1] = len(nn_module._global_forward_pre_hooks)

    callback, probe = TorchprofCallback(steps=STEPS, output_dir=folder / "report"), HookProbe()
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        trainers.hf_train([probe, callback], accumulate=MICRO, output_dir=str(folder / "trainer"))
    # every step has the same shapes: one step recording every op's shapes is the reference
    reference = TorchprofCallback(steps=[1], shapes=True, display=False)
    with contextlib.redirect_stdout(io.StringIO()):
        trainers.hf_train([reference], max_steps=1, accumulate=MICRO, output_dir=str(folder / "trainer"))
    callback.result.save(str(folder / "result.json"))
    reference.result.save(str(folder / "reference.json"))
    (folder / "hooks.json").write_text(json.dumps(probe.hooks))
    (folder / "printed.txt").write_text(printed.getvalue())


@pytest.fixture(scope="session")
def hf_run(tmp_path_factory) -> Run:
    folder = trainers.once_per_session(tmp_path_factory, "integrations-hf", train)
    return Run(torchprof.load(folder / "result.json"), {int(k): v for k, v in json.loads((folder / "hooks.json").read_text()).items()},
               (folder / "printed.txt").read_text(), folder / "report", torchprof.load(folder / "reference.json"))  # fmt: skip


def test_exactly_the_chosen_optimizer_steps_are_recorded(hf_run):
    prof, hooks = hf_run.result, hf_run.hooks
    assert prof.steps["step"].tolist() == STEPS
    assert sorted(p for p in prof.df.index if "/" not in p and p.startswith("ProfilerStep#")) == ["ProfilerStep#3", "ProfilerStep#4"]
    # every micro-batch of a recorded step is in it: the model ran twice per step
    assert prof.df.loc["ProfilerStep#3/GPT2LMHeadModel", "calls"] == MICRO
    # torchprof's hooks were in torch's tables only on the warm-up step (2) and the recorded ones
    assert hooks == {1: 0, 2: 1, 3: 1, 4: 1, 5: 0, 6: 0}
    assert not nn_module._global_forward_pre_hooks


def test_every_step_of_the_run_has_its_wall_time(hf_run):
    times = hf_run.result.step_times
    assert times["step"].tolist() == [1, 2, 3, 4, 5, 6]
    assert times["recorded"].tolist() == [False, False, True, True, False, False]
    assert (times["wall_us"] > 0).all()


def test_the_layers_have_forward_and_backward_time(hf_run):
    df = hf_run.result.df
    for block in ("GPT2LMHeadModel.transformer.h.0", "GPT2LMHeadModel.transformer.h.1", "GPT2LMHeadModel.lm_head"):
        row = df.loc[f"ProfilerStep#4/{block}"] if f"ProfilerStep#4/{block}" in df.index else df[df["module"] == block].iloc[0]
        assert row["fwd_cpu_us"] > 0 and row["bwd_cpu_us"] > 0, block


def test_flops_are_exact(hf_run):
    prof, reference = hf_run.result, hf_run.reference
    # by hand: lm_head is Linear(EMBD, VOCAB) on BATCH * SEQ tokens per micro-batch; forward, the
    # input's gradient and the weight's gradient are one matmul each
    lm_head = prof.df.loc["ProfilerStep#3/GPT2LMHeadModel.lm_head"]
    assert lm_head["macs"] == MICRO * 3 * trainers.BATCH * trainers.SEQ * trainers.EMBD * trainers.VOCAB
    assert lm_head["flops"] == 2 * lm_head["macs"]
    # every layer's FLOPs are those the run recording every op's shapes counted: the embeddings,
    # each block and everything in it, the head (GPT2Model's own mask checks, which branch on
    # data a replay does not have, are listed as unknown instead: see prof.unsupported_ops)
    df, ref = prof.df, reference.df
    layers = df[(df["kind"] == "module") & (df["module"].str.count(r"\.") >= 2) | (df["name"] == "lm_head")]
    assert len(layers) > 20 and (layers["flops"] > 0).any()
    for path, row in layers.iterrows():
        same = path.replace("ProfilerStep#3/", "ProfilerStep#1/").replace("ProfilerStep#4/", "ProfilerStep#1/")
        assert row["flops"] == ref.loc[same, "flops"] and row["macs"] == ref.loc[same, "macs"], path
    assert not math.isnan(prof.summary["flops"]) and prof.summary["flops"] > 0


def test_data_loading_and_the_optimizer_have_their_own_rows(hf_run):
    df = hf_run.result.df
    for step in STEPS:
        children = df[df["parent"] == f"ProfilerStep#{step}"]
        loading = children[children["name"].str.contains("DataLoader")]
        assert len(loading) == 1 and loading["kind"].iloc[0] == "region" and loading["calls"].iloc[0] == MICRO
        optimizer = children[children["name"].str.startswith("Optimizer.step#")]
        assert len(optimizer) == 1 and optimizer["cpu_us"].iloc[0] > 0


def test_outside_a_notebook_a_summary_is_printed_and_the_report_written(hf_run):
    printed, out = hf_run.printed, hf_run.out
    assert "torchprof: GPT2LMHeadModel under the Trainer, steps 3-4 recorded (of 1-6)" in printed
    assert "step time over 6 steps" in printed
    assert (out / "torchprof.html").stat().st_size > 10_000
    trace = out / "torchprof-trace.json.gz"
    assert torchprof.load_trace(str(trace)).steps["step"].tolist() == STEPS
    markdown = out / "torchprof.md"
    assert markdown.exists() == hasattr(hf_run.result, "to_markdown")


def test_in_a_notebook_the_widget_shows_at_the_end_of_train_and_unreached_steps_are_named(monkeypatch, tmp_path):
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda obj, **kw: shown.append(obj))
    callback = TorchprofCallback(steps=[2, 50], display=True, flops=False)
    with pytest.warns(torchprof.ProfilerWarning, match="step 50 was not recorded: it ended at step 3"):
        with contextlib.redirect_stdout(io.StringIO()):
            trainers.hf_train([callback], max_steps=3, accumulate=1, output_dir=str(tmp_path))
    assert shown == [callback.result]
    assert callback.result.steps["step"].tolist() == [2]
    assert not nn_module._global_forward_pre_hooks


def test_a_profiler_already_running_is_a_warning_not_a_failed_training(tmp_path):
    callback = TorchprofCallback(steps=[1], display=False)
    with torchprof.Profiler(steps=[10**6]):  # running, idle: it records nothing while the training runs
        with pytest.warns(torchprof.ProfilerWarning, match="already running"):
            trainers.hf_train([callback], max_steps=1, accumulate=1, output_dir=str(tmp_path))
    assert callback.result is None


@pytest.mark.slow
def test_a_compiled_model_under_the_trainer_has_the_whole_steps_flops_and_compiles_nothing_again(tmp_path, monkeypatch):
    # TrainingArguments(torch_compile=True) with gradient clipping: the clipping's norms and
    # scaling run outside every module, once unknown in a process holding compiled code (the
    # root was NaN, 14 ops listed). Now every op is counted from what ran, as eager's are.
    import torch._dynamo
    from torch._dynamo.utils import counters
    from transformers import Trainer, TrainerCallback, TrainingArguments

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    trainers.quiet_frameworks()

    class Graphs(TrainerCallback):
        def __init__(self) -> None:
            self.seen: list[dict[str, int]] = []

        def on_step_end(self, args, state, control, **kwargs):
            self.seen.append(dict(counters["stats"]))

    torch._dynamo.reset()
    counters.clear()
    callback, graphs = TorchprofCallback(steps=[3, 4], display=False), Graphs()
    args = TrainingArguments(output_dir=str(tmp_path / "trainer"), use_cpu=True, report_to=[], save_strategy="no",
                             logging_strategy="no", disable_tqdm=True, max_steps=5, per_device_train_batch_size=trainers.BATCH,
                             dataloader_num_workers=0, seed=0, torch_compile=True, max_grad_norm=1.0)  # fmt: skip
    Trainer(model=trainers.gpt2(), args=args, train_dataset=trainers.token_dataset(64), callbacks=[graphs, callback]).train()
    assert all(seen == graphs.seen[0] for seen in graphs.seen), graphs.seen  # the recorded steps compiled nothing
    df = callback.result.df
    assert not callback.result.unsupported_ops
    root = df.loc[df.index[0], "flops"]
    assert not math.isnan(root) and root > 0
    # (each recorded step: the whole step's FLOPs over its rows, clipping outside every module included)
    steps = df[(df.kind == "region") & df.name.str.startswith("ProfilerStep#")]
    assert len(steps) == 2 and steps.flops.sum() == pytest.approx(root, rel=1e-9)
    assert steps.flops.iloc[0] == steps.flops.iloc[1]
    torch._dynamo.reset()
