"""What the trainer integrations stand on, without any trainer: ``Profiler(steps=..., first_step=...)``
records exactly the chosen iterations and installs nothing on the others, ``prof.region()``,
every step's wall time in ``prof.step_times`` (kept by save, export and a merged job), and the
default choice of steps."""

from __future__ import annotations

import pytest
import torch
from torch.nn.modules import module as nn_module

import torchprof
from torchprof.integrations._window import StepWindow, chosen_steps, default_steps


def train(model, prof, first: int, last: int, seen: list[int] | None = None):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 8)
    for _ in range(first, last + 1):
        if seen is not None:
            seen.append(len(nn_module._global_forward_pre_hooks))
        model(x).sum().backward()
        opt.step()
        opt.zero_grad()
        prof.step()


def test_steps_records_exactly_the_chosen_iterations_numbered_from_first_step(mlp):
    seen: list[int] = []
    with torchprof.Profiler(steps=[5, 6, 9], first_step=1) as prof:
        train(mlp, prof, 1, 11, seen)
    assert prof.steps["step"].tolist() == [5, 6, 9]
    steps = sorted(p for p in prof.df.index if p.startswith("ProfilerStep#") and "/" not in p)
    assert steps == ["ProfilerStep#5", "ProfilerStep#6", "ProfilerStep#9"]
    # one call of each layer per recorded step, forward and backward on the layer
    layer = prof.df.loc["ProfilerStep#5/Sequential.0"]
    assert layer["calls"] == 1 and layer["fwd_cpu_us"] > 0 and layer["bwd_cpu_us"] > 0
    # the hooks are in torch's tables only on the warm-up step before each run of chosen steps
    # and on the chosen steps themselves: steps 4-6 and 8-9 of 1-11
    assert seen == [0, 0, 0, 1, 1, 1, 0, 1, 1, 0, 0]


def test_every_marked_step_has_its_wall_time_recorded_or_not(mlp):
    with torchprof.Profiler(steps=range(3, 5), first_step=1) as prof:
        train(mlp, prof, 1, 7)
    times = prof.step_times
    assert list(times.columns) == ["step", "wall_us", "recorded"]
    assert times["step"].tolist() == [1, 2, 3, 4, 5, 6, 7]
    assert times["recorded"].tolist() == [False, False, True, True, False, False, False]
    assert (times["wall_us"] > 0).all()


def test_steps_the_loop_never_reaches_are_named_not_an_empty_profile_of_0us(mlp, recwarn):
    # steps=[50] around a 3-step loop gave "wall 0.00µs · CPU 0.00µs" and no word of why.
    with torchprof.Profiler(steps=[2, 50]) as prof:
        train(mlp, prof, 0, 3)
    said = [str(w.message) for w in recwarn if issubclass(w.category, torchprof.ProfilerWarning)]
    assert said == ["torchprof: step 50 was not recorded: the block ended after step 3 (prof.step() marks each)"]
    assert prof.steps["step"].tolist() == [2] and said[0][len("torchprof: "):] in prof.summary["warnings"]
    with torchprof.Profiler(steps=[50, 51]) as none:
        train(mlp, none, 0, 2)
    assert "steps 50-51 were not recorded: the block ended after step 2" in recwarn.list[-1].message.args[0]
    assert "wall" not in none.summary_line() and none.summary["wall_us"] != 0  # unknown, not a run of 0 µs
    with pytest.raises(KeyboardInterrupt), torchprof.Profiler(steps=[1, 2]) as cut:
        train(mlp, cut, 0, 0)
        raise KeyboardInterrupt  # inside step 1: "stopped by" says why the rest is missing
    assert not any("not recorded" in w for w in cut.summary.get("warnings") or [])


def test_a_schedule_s_idle_steps_run_without_the_hooks(mlp):
    seen: list[int] = []
    with torchprof.Profiler(schedule=torch.profiler.schedule(wait=2, warmup=1, active=1, repeat=1)) as prof:
        train(mlp, prof, 0, 5, seen)
    assert seen == [0, 0, 1, 1, 0, 0]
    assert prof.steps["step"].tolist() == [3]


def test_step_times_survive_save_export_and_a_merged_job(mlp, tmp_path):
    with torchprof.Profiler(steps=[2], first_step=1) as prof:
        train(mlp, prof, 1, 3)
    saved = torchprof.load(prof.save(str(tmp_path / "p.json")))
    assert saved.step_times.equals(prof.step_times)
    trace = tmp_path / "rank0.json.gz"
    prof.export_chrome_trace(str(trace))
    assert torchprof.load_trace(str(trace)).step_times["step"].tolist() == [1, 2, 3]
    other = tmp_path / "rank1.json.gz"
    other.write_bytes(trace.read_bytes())
    job = torchprof.load_trace([str(trace), str(other)])
    assert job.step_times["rank"].tolist() == [0, 0, 0, 1, 1, 1]
    assert job.step_times["step"].tolist() == [1, 2, 3] * 2


def test_a_region_opened_from_outside_is_a_region_of_the_tree(mlp):
    with torchprof.Profiler() as prof:
        with prof.region("[Trainer]data"):
            x = torch.randn(4, 8)
        mlp(x)
    row = prof.df.loc["[Trainer]data"]
    assert row["kind"] == "region" and row["cpu_us"] > 0


def test_bad_steps_are_clear_errors():
    with pytest.raises(ValueError, match="not both"):
        torchprof.Profiler(steps=[1], schedule=torch.profiler.schedule(wait=0, warmup=1, active=1))
    with pytest.raises(ValueError, match="before first_step"):
        torchprof.Profiler(steps=[1, 5], first_step=3)
    with pytest.raises(TypeError, match="whole step numbers"):
        torchprof.Profiler(steps=[1.5])
    with pytest.raises(ValueError, match="first_step"):
        torchprof.Profiler(first_step=-1)
    with pytest.raises(ValueError, match="counted from 1"):
        chosen_steps([0, 1])
    with pytest.raises(ValueError, match="empty"):
        chosen_steps([])
    assert chosen_steps(7) == [7] and chosen_steps(range(3, 1, -1)) == [2, 3]


@pytest.mark.parametrize(("first", "last", "expected"), [
    (1, None, [6, 7, 8]),       # length unknown: skip 5, record 3
    (1, 100, [6, 7, 8]),
    (1, 8, [6, 7, 8]),          # just long enough
    (1, 5, [3, 4, 5]),          # too short: the last 3
    (1, 2, [2]),                # leave the first step (it compiles) out where there are several
    (1, 1, [1]),
    (101, 200, [106, 107, 108]),  # a resumed run counts on
])  # fmt: skip
def test_the_default_steps_skip_the_first_ones(first, last, expected):
    assert default_steps(first, last) == expected


def test_a_window_outside_a_trainer_times_every_step_and_records_only_its_own(mlp):
    window = StepWindow([3, 4], {}, trainer="loop")
    window.begin(1, 6, "mlp", mlp)
    opt = torch.optim.SGD(mlp.parameters(), lr=0.1)
    for _ in range(6):
        with (window.region("[loop]data") or torch.autograd.profiler.record_function("unrecorded")):
            x = torch.randn(4, 8)
        mlp(x).sum().backward()
        opt.step()
        window.boundary()
        assert window.capturing == (2 <= window.step <= 4)
    result = window.end()
    assert result is not None
    assert result.steps["step"].tolist() == [3, 4]
    assert result.step_times["recorded"].tolist() == [False, False, True, True, False, False]
    assert result.df.loc["ProfilerStep#3/[loop]data", "kind"] == "region"
    assert result.meta["steps"] == "3-4" and result.meta["run_steps"] == "1-6"


def test_layers_under_a_forward_redirected_for_one_call_get_their_flops():
    """Lightning's DDP runs ``training_step`` by patching the LightningModule's ``forward`` for one
    call of the DDP wrapper: a later replay of that call cannot run it, so the layers it calls are
    replayed instead, and their FLOPs are those ``shapes=True`` counts."""
    from torch import nn

    class Module(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))

        def training_step(self, x):
            return self.net(x).sum()

    class Wrapper(nn.Module):
        def __init__(self, module):
            super().__init__()
            self.module = module

        def forward(self, *args):
            return self.module(*args)

    def redirected(module, wrapper, x):
        def forward(*args):
            del module.forward  # the patch lasts one call, as Lightning's _ForwardRedirection
            return module.training_step(*args)

        module.forward = forward
        return wrapper(x)

    torch.manual_seed(0)
    module = Module()
    wrapper, x = Wrapper(module), torch.randn(4, 8)
    figures = []
    for shapes in (False, True):
        with torchprof.Profiler(module, shapes=shapes) as prof:
            redirected(module, wrapper, x).backward()
        df = prof.df.set_index("module")
        figures.append({m: (df.loc[m, "flops"], df.loc[m, "macs"]) for m in ("Module.net", "Module.net.0", "Module.net.2")})
    assert figures[0] == figures[1]
    # by hand: forward and both gradients of Linear(32, 1); forward and the weight's gradient of Linear(8, 32)
    assert figures[0]["Module.net.2"][1] == 3 * 4 * 32 and figures[0]["Module.net.0"][1] == 2 * 4 * 8 * 32


def test_a_cell_that_raises_inside_the_recorded_steps_leaves_nothing_running(mlp):
    """In IPython no trainer tells the callback that training raised: when the cell ends with the
    capture still running, it is stopped, keeping the steps recorded until then."""
    from IPython.testing.globalipapp import get_ipython

    shell = get_ipython()
    window = StepWindow([2, 3], {"flops": False}, trainer="loop")
    shell.user_ns.update(window=window, model=mlp, torch=torch)
    cell = """
window.begin(1, 5, "mlp", model)
for step in range(1, 6):
    model(torch.randn(4, 8)).sum().backward()
    if step == 3:
        raise KeyboardInterrupt
    window.boundary()
"""
    try:
        with pytest.warns(torchprof.ProfilerWarning, match="cut short"):
            assert not shell.run_cell(cell).success
        assert not window.capturing
        assert not nn_module._global_forward_pre_hooks
        assert window.result is not None and window.result.steps["step"].tolist() == [2, 3]
    finally:
        for name in ("window", "model"):
            shell.user_ns.pop(name, None)
