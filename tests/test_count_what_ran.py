"""FLOPs counted from what ran: every op the profiler recorded, by its recorded shapes and
arguments, on the layer that ran it. Exact on the setups people train in (DDP, Lightning, MoE
routing, diffusers, a loss module made inside forward, shared and twice-called layers), checked
against an independent count (``tests/flop_reference.py``: every op dispatched, with its real
arguments) and by hand; one convention for what costs nothing; reading a profile never runs the
user's code again."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap
import traceback
from dataclasses import dataclass

import pytest
import torch
from torch import nn

import torchprof
from conftest import IN_CI, REPO
from flop_reference import ReferenceCount
from model_zoo import ZOO


@pytest.fixture(autouse=True)
def no_process_group_left():
    """The DDP cases make a one-process gloo group: it goes with the test (a later test in this
    worker may start one of its own)."""
    import torch.distributed as dist

    had = dist.is_available() and dist.is_initialized()
    yield
    if not had and dist.is_available() and dist.is_initialized():
        import gc

        gc.collect()  # (the DDP model first: its reducer holds the group)
        dist.destroy_process_group()


def module_rows(df) -> dict[str, tuple[float, float]]:
    """path -> (macs, flops) of each module row."""
    rows = df[df["kind"] == "module"]
    return {m: (float(a), float(b)) for m, a, b in zip(rows["module"], rows["macs"], rows["flops"])}


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def profile_against_reference(name: str):
    """One training step (forward, loss, backward, an AdamW step of lr 0: every run the same step,
    MoE routing included) of a zoo model, counted by the reference and profiled."""
    try:
        model, step = ZOO[name]()
    except ImportError as exc:
        if IN_CI:  # (timm, diffusers and transformers are test extras: CI must count every model)
            pytest.fail(f"{name} needs {exc.name}, which the test extras install")
        pytest.skip(f"{name} needs {exc.name}")
    opt = torch.optim.AdamW(model.parameters(), lr=0.0)

    def run():
        step()
        opt.step()
        opt.zero_grad(set_to_none=True)

    torch.manual_seed(0)
    run()
    torch.manual_seed(0)
    with ReferenceCount(model) as ref:
        run()
    torch.manual_seed(0)
    with torchprof.Profiler() as prof:
        run()
    return prof, ref


#: Real models built from configs, and the setups around them, each of which read NaN or a wrong
#: count before FLOPs were counted from what ran.
REAL = ["DDP", "ConvTwice", "EmbeddingBag", "EmbeddingBag-weighted", "Mixtral", "Mixtral-eager", "Qwen2-MoE",
        "Qwen2-MoE-eager", "LeViT", "CoaT-shared", "AutoencoderKL", "UNet2D", "RoBERTa-cls", "Llava", "MobileNetV3-S",
        "GPT-2-generate"]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("name", REAL)
def test_every_layer_of_a_real_training_step_has_the_flops_of_an_independent_count(name):
    prof, ref = profile_against_reference(name)
    ours, theirs = module_rows(prof.df), ref.rows()
    assert set(theirs) <= set(ours), sorted(set(theirs) - set(ours))  # every layer that ran is a row, by its named_modules() name
    wrong = {p: (ours[p], theirs[p]) for p in theirs if not (same(ours[p][0], theirs[p][0]) and same(ours[p][1], theirs[p][1]))}
    assert wrong == {}
    root = prof.df.iloc[0]
    assert (root["macs"], root["flops"]) == ref.total
    assert prof.unsupported_ops == {} and not prof.df["flops"].isna().any()
    assert not any("FLOPs" in note for note in prof.summary.get("warnings", []))


def test_a_layer_called_twice_counts_each_calls_own_gradients():
    # Its first call's input needs no gradient, its second's does: the backward of the first
    # computes the weight's gradient only (every call got the first call's mask before).
    _model, step = ZOO["ConvTwice"]()
    step()
    with torchprof.Profiler() as prof:
        step()
    per_call = 2 * 4 * 4 * 9 * 8 * 8  # batch * C_out * C_in * kernel * positions
    df = prof.df
    assert df.loc["ConvTwice.conv", "calls"] == 2
    assert df.loc["ConvTwice.conv", "macs"] == 2 * per_call + per_call + 2 * per_call  # forward twice; weight; input and weight
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as fcm:
        step()
    assert df.loc["ConvTwice", "macs"] == fcm.get_total_flops() / 2


@pytest.mark.parametrize("weighted", [False, True], ids=["sum", "per_sample_weights"])
def test_an_embedding_bag_counts_its_lookups_and_its_gradient(weighted):
    _model, step = ZOO["EmbeddingBag-weighted" if weighted else "EmbeddingBag"]()
    step()
    with torchprof.Profiler() as prof:
        step()
    looked_up = 10 * 16  # indices * embedding size
    bag = prof.df.loc["Bags.bag"]
    if weighted:  # a multiply-add per element forward, into the weight's gradient, and per weight's gradient
        assert (bag["macs"], bag["flops"]) == (3 * looked_up, 6 * looked_up)
    else:  # an add per element forward, one into the weight's gradient
        assert (bag["macs"], bag["flops"]) == (0, 2 * looked_up)
    assert prof.unsupported_ops == {}


@pytest.mark.parametrize("call", ["positional", "keyword"])
def test_a_ddp_model_has_the_flops_of_the_model_it_wraps(call):
    model, _ = ZOO["DDP"]()
    net = model.module
    x, y = torch.randn(8, 32), torch.arange(8) % 8

    def step(m, wrapped):
        net.zero_grad(set_to_none=True)  # both the same step: no gradient to add into
        out = m(input=x) if wrapped and call == "keyword" else m(x)
        nn.functional.cross_entropy(out, y).backward()

    step(model, True)
    with torchprof.Profiler() as plain:
        step(net, False)
    with torchprof.Profiler() as wrapped:
        step(model, True)
    a, b = module_rows(plain.df), module_rows(wrapped.df)
    for path, counts in a.items():
        assert b[path.replace("Sequential", "DistributedDataParallel.module", 1)] == counts
    assert wrapped.summary["flops"] == plain.summary["flops"] and not math.isnan(wrapped.summary["flops"])


class InlineLoss(nn.Module):
    """A classifier whose loss module is made inside forward, as Hugging Face's are."""

    def __init__(self) -> None:
        super().__init__()
        self.head = nn.Linear(8, 3)

    def forward(self, x, labels):
        return nn.CrossEntropyLoss()(self.head(x), labels)


def test_a_loss_module_made_inside_forward_is_counted_on_its_callers_row_with_model_given():
    model = InlineLoss()
    x, y = torch.randn(4, 8), torch.tensor([0, 1, 2, 0])
    model(x, y).backward()
    with torchprof.Profiler(model=model) as prof:
        model(x, y).backward()
    df = prof.df
    # model= attributes only the model's own layers: the loss module's work is its caller's own,
    # log_softmax 5 per score, nll_loss 1 per target; their gradients 10 per score and 1 per target.
    assert df.loc["InlineLoss", "flops"] - df.loc["InlineLoss.head", "flops"] == 5 * 12 + 4 + 10 * 12 + 4
    assert not math.isnan(df.loc["profile", "flops"]) and prof.unsupported_ops == {}
    with torchprof.Profiler() as every:  # without model=, it is a row of its own under its caller
        model(x, y).backward()
    assert every.df.loc["InlineLoss.(CrossEntropyLoss)", "flops"] == 5 * 12 + 4 + 10 * 12 + 4


class Shared(nn.Module):
    """Two blocks calling one layer their parent holds first (CoaT's shared positional encodings)."""

    def __init__(self) -> None:
        super().__init__()
        self.pos = nn.Conv2d(4, 4, 3, padding=1, groups=4)
        self.blocks = nn.ModuleList(Block(self.pos) for _ in range(2))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


class Block(nn.Module):
    def __init__(self, pos: nn.Module) -> None:
        super().__init__()
        self.pos = pos
        self.mix = nn.Conv2d(4, 4, 1)

    def forward(self, x):
        return self.mix(self.pos(x) + x)


def test_a_layer_shared_by_two_blocks_is_one_row_under_its_named_modules_name_in_every_run():
    model = Shared()
    x = torch.randn(2, 4, 8, 8, requires_grad=True)
    indexes = []
    for _ in range(3):
        with torchprof.Profiler() as prof:
            model(x).sum().backward()
        df = prof.df
        indexes.append(list(df.index[df.kind == "module"]))
        called = [f"Shared{'.' + n if n else ''}" for n, _ in model.named_modules() if n != "blocks"]  # (a ModuleList is never called)
        assert sorted(df.module[df.kind == "module"]) == sorted(called)
    assert sorted(indexes[0]) == sorted(indexes[1]) == sorted(indexes[2])  # (rows are ordered by time, which varies)
    assert not any("#" in path for path in indexes[0])
    row = prof.df.loc["Shared.pos"]
    depthwise = 2 * 4 * 9 * 64  # batch * channels * kernel * positions
    assert row["calls"] == 2 and row["macs"] == 2 * 3 * depthwise  # two calls, forward and both gradients
    assert prof.df.loc["Shared.pos", "parent"] == "Shared"


def test_ops_that_only_move_compare_or_select_count_zero_and_are_never_unknown():
    class Router(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gate = nn.Linear(8, 4)

        def forward(self, x):
            scores = self.gate(x)
            top, picked = scores.topk(2, dim=-1)
            order = picked.flatten().sort().indices
            chosen = torch.nonzero(picked[:, 0] == 1).flatten()
            gathered = x.gather(0, order[:, None].expand(-1, 8) % x.shape[0])
            return top.softmax(-1).sum() + gathered[chosen].sum() + torch.unique(picked).numel()

    model = Router()
    x = torch.randn(6, 8)
    with torchprof.Profiler() as prof:
        model(x).backward()
    assert prof.unsupported_ops == {}
    df = prof.df
    for op in ("aten::topk", "aten::sort", "aten::nonzero", "aten::gather", "aten::_unique2"):
        rows = df[df.name == op]
        assert len(rows) and (rows.flops == 0).all(), op
    assert df.loc["Router.gate", "macs"] == 2 * 6 * 8 * 4  # forward and the weight's gradient (x needs none)


def _unknown_cost_op():
    """A custom op that does arithmetic torchprof has no formula for (its work in NumPy)."""
    if _LIBS:  # defined by an earlier test in this process
        return torch.ops.torchprof_test.blur
    lib = torch.library.Library("torchprof_test", "DEF")
    lib.define("blur(Tensor x) -> Tensor")
    lib.impl("blur", lambda x: torch.from_numpy(x.detach().numpy() * 0.5 + 1.0), "CPU")
    _LIBS.append(lib)
    return torch.ops.torchprof_test.blur


_LIBS: list = []


def test_one_op_of_unknown_cost_leaves_every_row_that_does_not_hold_it_counted():
    blur = _unknown_cost_op()

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.first = nn.Linear(8, 8)
            self.second = nn.Linear(8, 8)
            self.head = nn.Linear(8, 2)

        def forward(self, x):
            return self.head(blur(self.second(self.first(x))))

    model = Net()
    with torch.no_grad(), torchprof.Profiler() as prof:
        model(torch.randn(4, 8))
    df = prof.df
    assert prof.unsupported_ops == {"torchprof_test::blur": 1}
    assert math.isnan(df.loc["Net", "flops"]) and math.isnan(df.loc["profile", "flops"])
    for layer in ("Net.first", "Net.second", "Net.head"):
        assert df.loc[layer, "macs"] == 4 * 8 * (2 if layer == "Net.head" else 8)
    assert math.isnan(df.loc["Net", "macs"])  # an op of no formula may multiply-add: its rows' MACs are unknown too
    assert any("torchprof_test::blur" in note for note in prof.summary["warnings"])


def test_reading_a_profile_never_runs_the_users_code_again(tmp_path):
    log = tmp_path / "calls.txt"

    class Counting(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.calls = 0
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            self.calls += 1
            with open(log, "a") as f:
                f.write("called\n")
            return self.lin(x)

    model = Counting()
    x = torch.randn(2, 4)
    with torchprof.Profiler() as prof:
        model(x).sum().backward()
        model(x).sum().backward()
    assert model.calls == 2 and log.read_text().count("called") == 2
    prof.df
    str(prof)
    prof.summary
    assert model.calls == 2 and log.read_text().count("called") == 2
    assert prof.df.loc["Counting.lin", "macs"] == 2 * 2 * (2 * 4 * 4)  # two calls: forward, weight gradient


def test_a_users_error_in_a_custom_backward_carries_no_torchprof_frame():
    class Fails(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            raise ValueError("the user's backward")

    lin = nn.Linear(4, 4)
    with pytest.raises(ValueError, match="the user's backward") as info, torchprof.Profiler():
        Fails.apply(lin(torch.randn(2, 4))).sum().backward()
    frames = traceback.extract_tb(info.value.__traceback__)
    package = os.path.dirname(torchprof.__file__) + os.sep
    assert [f"{f.filename}:{f.lineno}" for f in frames if f.filename.startswith(package)] == []


@dataclass
class Pair:
    a: torch.Tensor
    b: torch.Tensor


class TwoHeads(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.left = nn.Linear(64, 64)
        self.right = nn.Linear(64, 64)

    def forward(self, x):
        return Pair(self.left(x), self.right(x))


def test_a_model_returning_a_dataclass_counts_what_ran_by_hand():
    model = TwoHeads()
    x = torch.randn(32, 64)
    with torchprof.Profiler() as prof:
        out = model(x)
        (out.a.sum() + out.b.sum()).backward()
    df = prof.df
    matmul = 32 * 64 * 64
    # Per head: its forward and its weight's gradient (x needs none) are multiply-adds; the bias's
    # gradient sums 32 x 64; each loss sum reads 32 x 64; the two sums are added once.
    for head in ("TwoHeads.left", "TwoHeads.right"):
        assert (df.loc[head, "macs"], df.loc[head, "flops"]) == (2 * matmul, 4 * matmul + 32 * 64)
    outside = 2 * 32 * 64 + 1  # the two sums and their add, outside every layer
    assert df.loc["profile", "flops"] == 2 * (4 * matmul + 32 * 64) + outside


def test_every_op_torch_tags_pointwise_has_a_formula_and_every_view_costs_nothing():
    """The convention holds for every op this torch has, not only those the tests met: each
    elementwise op is 1 FLOP per element or more (a formula), and each op that only returns a
    view of its input is free, so neither reads NaN in a model never seen."""
    from torchprof._tree.flops.formulas import FORMULAS
    from torchprof._tree.flops.kinds import DATA_DEPENDENT, is_free

    missing, views = [], []
    registered = {name.split("::", 1)[1].split(".", 1)[0] for name in torch._C._dispatch_get_all_op_names() if name.startswith("aten::")}
    for name in sorted(registered):  # (not dir(torch.ops.aten): it lists only the ops asked for so far)
        packet = getattr(torch.ops.aten, name, None)
        if not hasattr(packet, "overloads"):
            continue
        full = f"aten::{name}"
        ops = [getattr(packet, overload) for overload in packet.overloads()]
        if any(torch.Tag.pointwise in op.tags for op in ops) and full not in FORMULAS and not is_free(full):
            missing.append(full)
        aliasing = [op for op in ops if op._schema.returns and all(r.alias_info is not None and not r.alias_info.is_write
                                                                    for r in op._schema.returns)]  # fmt: skip
        if aliasing and len(aliasing) == len(ops) and not is_free(full) and full not in FORMULAS and full not in DATA_DEPENDENT:
            views.append(full)
    assert (missing, views) == ([], [])


LIGHTNING_SCRIPT = textwrap.dedent(
    """
    import warnings, math, torch
    import lightning.pytorch as pl
    from torch import nn
    from torchprof.integrations.lightning import TorchprofProfiler

    class Model(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))

        def forward(self, x):
            return self.net(x)

        def training_step(self, batch, _):
            x, y = batch
            return nn.functional.cross_entropy(self(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    torch.manual_seed(0)
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(64, 16), torch.randint(0, 4, (64,))), batch_size=8)
    profiler = TorchprofProfiler(steps=[3], display=False)
    trainer = pl.Trainer(max_steps=4, profiler=profiler, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, accelerator="cpu")
    trainer.fit(Model(), data)
    df = profiler.result.df
    layers = df[df.kind == "module"].set_index("module")  # (under the trainer's regions)
    print("MACS", layers.loc["Model.net.0", "macs"] == 2 * 8 * 16 * 32, layers.loc["Model", "macs"])
    print("ROOT", df.iloc[0]["flops"], math.isnan(df.iloc[0]["flops"]), sorted(profiler.result.unsupported_ops))
    """
)


@pytest.mark.slow
def test_a_lightning_training_step_calling_self_counts_the_whole_step_and_prints_nothing_of_ours(tmp_path):
    pytest.importorskip("lightning")
    script = tmp_path / "fit.py"
    script.write_text(LIGHTNING_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in res.stdout.splitlines() if line.startswith(("MACS", "ROOT")))
    # The first layer's input needs no gradient: forward and weight gradient only.
    assert lines["MACS"].startswith("True"), lines
    assert "False []" in lines["ROOT"], lines
    assert "Exception ignored" not in res.stderr and "Traceback" not in res.stderr, res.stderr[-3000:]


def test_a_gan_step_counts_both_networks_and_both_optimizers_as_the_independent_count():
    # The discriminator runs on real and fake data in one backward, then on fake data again with
    # its gradients still there (the generator's step); two optimizers of one class step.
    torch.manual_seed(0)
    gen = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8))
    disc = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1))
    opt_g, opt_d = torch.optim.Adam(gen.parameters(), lr=0.0), torch.optim.Adam(disc.parameters(), lr=0.0)
    real, z = torch.randn(4, 8), torch.randn(4, 4)

    def step():
        fake = gen(z)
        opt_d.zero_grad()
        (disc(real).mean() - disc(fake.detach()).mean()).backward()
        opt_d.step()
        opt_g.zero_grad()
        (-disc(fake).mean()).backward()
        opt_g.step()

    step()
    with ReferenceCount(gen) as ref:
        step()
    with torchprof.Profiler() as prof:
        step()
    df = prof.df
    assert (df.loc["profile", "macs"], df.loc["profile", "flops"]) == ref.total
    for net in ("Sequential", "Sequential#2"):  # the generator, the discriminator
        assert (df.loc[net, "macs"], df.loc[net, "flops"]) == ref.rows()[net]
    assert df.loc["Optimizer.step#Adam.step", "calls"] == 2 and df.loc["Optimizer.step#Adam.step", "flops"] > 0
    assert prof.unsupported_ops == {}


def test_a_model_run_inside_torch_func_reads_unknown_and_says_why_never_one_examples_count():
    # torch records a vmapped op once, with one example's sizes: the batch's FLOPs are not in them.
    from torch.func import functional_call, grad, vmap

    torch.manual_seed(0)
    lin = nn.Linear(128, 128)
    params = {k: v.detach() for k, v in lin.named_parameters()}
    x = torch.randn(8, 4, 128)

    def loss(p, xi):
        return functional_call(lin, p, (xi,)).sum()

    for name, run in (("vmap", lambda: vmap(lambda p, xi: functional_call(lin, p, (xi,)), in_dims=(None, 0))(params, x)),
                      ("per-sample gradients", lambda: vmap(grad(loss), in_dims=(None, 0))(params, x))):  # fmt: skip
        with torchprof.Profiler() as prof:
            run()
        df = prof.df
        assert math.isnan(df.loc["Linear", "macs"]) and math.isnan(df.loc["profile", "macs"]), name  # not 1/8 of the truth
        assert "ran inside torch.func" in " ".join(prof.summary["warnings"]), name
        assert "aten::addmm" in prof.unsupported_ops or "aten::mm" in prof.unsupported_ops, name


def test_a_forward_that_reads_tensor_values_is_counted_down_the_branch_that_ran():
    # A data-free copy cannot answer ``if mask.all()``: what ran can.
    class Masked(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.full, self.part = nn.Linear(8, 8), nn.Linear(8, 4)

        def forward(self, x, mask):
            if mask.all():
                return self.full(x)
            return self.part(x[mask])

    model = Masked()
    x = torch.randn(6, 8)
    with torch.no_grad(), torchprof.Profiler() as prof:
        model(x, torch.tensor([True, False, True, True, False, True]))
    df = prof.df
    assert "Masked.full" not in df.index and df.loc["Masked.part", "macs"] == 4 * 8 * 4  # the four rows kept
    assert prof.unsupported_ops == {}


def test_an_import_time_query_of_a_library_is_not_an_op_of_unknown_cost():
    # A script that imports torchvision under `python -m torchprof` ran torchvision::_cuda_version
    # (3 calls) as it imported, and the whole run's FLOPs read unknown.
    torchvision = pytest.importorskip("torchvision")
    lin = nn.Linear(4, 4)
    with torchprof.Profiler() as prof:
        torch.ops.torchvision._cuda_version()
        lin(torch.randn(2, 4))
    assert prof.unsupported_ops == {} and prof.df.loc["profile", "flops"] == 2 * 2 * 4 * 4
    assert torchvision is not None

