"""The default capture records no op shapes: FLOPs come from replaying each root module call on a
data-free copy after the run (``_capture/replay.py``, ``_tree/replay_match.py``). These tests check
what a user relies on there: the same FLOPs as ``shapes=True`` wherever the call can be
replayed (keyword arguments, several argument sizes, autocast, schedules, a loss on one of
several outputs), FLOPs said to be unknown where it cannot, and the user's state untouched."""

from __future__ import annotations

import math
import random
import sys

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

import torchprof
from torchprof._tree import flops as _flops
from torchprof._vocab import OPTIMIZER_CLOSURE


@pytest.fixture(autouse=True)
def no_compiled_code():
    """Calls outside modules are noted only in a process holding no torch.compile'd code (Dynamo
    would compile it again): earlier tests' compiled code is dropped, as a fresh process has none."""
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is not None:
        dynamo.reset()


def both(run, **options):
    """``run`` under the default capture and under ``shapes=True``."""
    with torchprof.Profiler(**options) as replayed:
        run()
    with torchprof.Profiler(shapes=True, **options) as recorded:
        run()
    return replayed, recorded


def layer_rows(prof) -> dict[str, tuple[float, float]]:
    df = prof.df
    return {p: (df.loc[p, "flops"], df.loc[p, "macs"]) for p in df.index[df["kind"] == "module"]}


class Scaled(nn.Module):
    """FLOPs that depend on a keyword argument and on which outputs the loss uses."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.calls = 0
        self.seen: list[tuple[int, ...]] = []

    def forward(self, x, *, repeat: int = 1):
        self.calls += 1
        self.seen.append(tuple(x.shape))
        for _ in range(repeat):
            x = self.proj(x) @ self.proj.weight
        return x, x.relu() * 2


def test_keyword_arguments_and_several_argument_sizes_count_as_recorded_shapes_do():
    torch.manual_seed(0)
    model = Scaled()

    def run():
        for batch, repeat in ((4, 3), (2, 1), (4, 3)):
            model(torch.randn(batch, 8), repeat=repeat)[0].sum().backward()

    replayed, recorded = both(run)
    assert layer_rows(replayed) == layer_rows(recorded)
    assert replayed.df.loc["Scaled.proj", "calls"] == 7
    assert replayed.df.loc["Scaled", "flops"] > 0


def test_a_loss_on_one_output_replays_only_that_outputs_backward():
    torch.manual_seed(0)
    model = Scaled()
    x = torch.randn(4, 8)

    def run():
        model(x)[1].sum().backward()  # the second output only: its relu and mul get gradients

    replayed, recorded = both(run)
    assert layer_rows(replayed) == layer_rows(recorded)
    assert (recorded.df["is_backward"] & (recorded.df["flops"] > 0)).any()


def test_autocast_and_a_schedule_count_as_recorded_shapes_do():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 4))
    x = torch.randn(8, 16)

    def run_autocast():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            model(x).float().sum().backward()

    replayed, recorded = both(run_autocast)
    assert layer_rows(replayed) == layer_rows(recorded)

    def scheduled(**options):
        with torchprof.Profiler(schedule=torch.profiler.schedule(wait=1, warmup=1, active=2), **options) as prof:
            for _ in range(4):
                model(x).sum().backward()
                prof.step()
        return prof

    rep, rec = scheduled(), scheduled(shapes=True)
    assert layer_rows(rep) == layer_rows(rec) and all(flops > 0 for flops, _ in layer_rows(rep).values())


class DropsAnAllTrueMask(nn.Module):
    """As Hugging Face's masking does: a mask that masks nothing is dropped, except for a fake
    tensor (taken for tracing), so only the meta replay can take the path the run took."""

    def __init__(self) -> None:
        super().__init__()
        self.lin, self.norm, self.out = nn.Linear(16, 32, bias=False), nn.LayerNorm(32), nn.Linear(32, 4)

    def forward(self, x, mask):
        from torch._subclasses.fake_tensor import FakeTensor

        if not isinstance(mask, FakeTensor) and bool(mask.all()):
            mask = None
        y = self.out(self.norm(self.lin(x)).softmax(-1))
        return y if mask is None else y.masked_fill(~mask, 0.0)


@pytest.mark.parametrize("train", [True, False], ids=["training", "inference"])
def test_cpu_autocast_is_replayed_on_the_meta_device_as_the_cpu_runs_it(train):
    # CPU autocast runs each op it casts as a wrapper that calls the op again inside it; a meta
    # tensor has no autocast, so the meta replay's ops sat one level higher than the run's and
    # only the fake-tensor replay could match them (Hugging Face models' top rows were unknown).
    torch.manual_seed(0)
    model, x, mask = DropsAnAllTrueMask(), torch.randn(8, 16), torch.ones(8, 4, dtype=torch.bool)

    def run():
        with torch.autocast("cpu", dtype=torch.bfloat16), torch.set_grad_enabled(train):
            y = model(x, mask)
        if train:
            y.float().sum().backward()

    replayed, recorded = both(run)
    assert replayed.unsupported_ops == {}
    assert layer_rows(replayed) == layer_rows(recorded)


def test_a_forward_that_reads_tensor_values_has_unknown_flops_and_says_why():
    class Gate(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(8, 8)

        def forward(self, x):
            for _ in range(int(x.abs().sum().item()) % 3 + 1):  # a number: no data-free copy knows it
                x = self.lin(x)
            return x

    gate, plain = Gate(), nn.Linear(8, 8)
    with torchprof.Profiler() as prof:
        gate(plain(torch.ones(2, 8)))
    warning = " ".join(prof.summary.get("warnings", []))
    assert "FLOPs of Gate are unknown" in warning and "real data" in warning and "shapes=True" in warning
    assert "test_replay.py" in warning and "in forward" in warning  # where the value was read
    # the gate's ops (its read, its linears): listed, never a guess
    assert {"aten::sum", "aten::addmm"} <= set(prof.unsupported_ops)
    # its row and the profile's, which hold those ops, are unknown: never a number that leaves them out
    assert prof.df.loc["Linear", "flops"] > 0
    assert prof.df.loc[["Gate", "Gate.lin", "profile"], "flops"].isna().all()
    with torchprof.Profiler() as alone:
        gate(torch.ones(2, 8))
    rows = alone.df.loc[["profile", "Gate", "Gate.lin", "Gate/aten::sum"], "flops"]
    assert rows.isna().all()  # nothing of the gate could be counted: unknown, not zero


def test_why_a_roots_flops_are_unknown_is_under_the_table_and_in_the_markdown_alone_or_beside_counted_work():
    # A detector's postprocessing or a CTC loss reads values: the whole root is unknown. Its ops
    # were listed only when something else was counted (an optimizer step), and neither the table
    # nor the Markdown said why: print(prof) of an inference showed no FLOPs and no reason.
    class Gate(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(8, 8)

        def forward(self, x):
            return self.lin(x) * (int(x.abs().sum().item()) % 3 + 1)

    gate = Gate()
    opt = torch.optim.SGD(gate.parameters(), lr=0.1)
    with torchprof.Profiler() as trained:
        gate(torch.ones(2, 8)).sum().backward()
        opt.step()
    with torchprof.Profiler() as inferred, torch.no_grad():
        gate(torch.ones(2, 8))
    for prof in (trained, inferred):
        assert "aten::addmm" in prof.unsupported_ops  # alone or not: listed the same
        assert prof.df.loc[["profile", "Gate", "Gate.lin"], "flops"].isna().all()
        for text in (str(prof), prof.to_markdown()):
            flat = " ".join(text.split())
            assert "FLOPs of Gate are unknown: its forward cannot run without real data" in flat, text
            assert "test_replay.py" in flat
    # beside counted work, the note on the listed ops points at the reason under it
    assert "in a layer that could not be replayed (said below)" in " ".join(str(trained).split())


def test_a_forward_that_branches_on_a_yes_or_no_value_is_replayed_down_the_branch_that_ran():
    class Gate(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin, self.other = nn.Linear(8, 8), nn.Linear(8, 8)

        def forward(self, x):
            if (x.sum(-1) > 0).all():  # a yes/no read: each answer is tried, the one that ran kept
                return self.lin(x).relu()
            return self.other(x * 2)

    torch.manual_seed(0)
    gate = Gate()
    for x in (torch.ones(2, 8), -torch.ones(2, 8)):
        def run(x=x):
            gate(x).sum().backward()

        replayed, recorded = both(run)
        assert layer_rows(replayed) == layer_rows(recorded)
        assert not replayed.summary.get("warnings")


class MaskedLayer(nn.Module):
    """Skips its mask where it masks nothing (a read of its values), as Hugging Face's layers do."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x, mask):
        if mask.all():
            return self.lin(x)
        return self.lin(x) * mask.unsqueeze(-1)


class Stack(nn.Module):
    def __init__(self, depth: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(MaskedLayer() for _ in range(depth))

    def forward(self, x, mask):
        for layer in self.layers:
            x = layer(x, mask)
        return x


@pytest.mark.parametrize("depth", [2, 6])
def test_one_mask_read_in_every_layer_is_replayed_down_the_path_that_ran(depth):
    # Every layer reads the same mask: with padding the run answered "no" six times, a path the
    # eight tries of mixed answers (three reads deep) never reached, and every layer was unknown.
    torch.manual_seed(0)
    model = Stack(depth)
    x = torch.randn(2, 5, 8)
    for mask in (torch.ones(2, 5), torch.tensor([[1.0] * 5, [1.0, 1.0, 1.0, 0.0, 0.0]])):
        def run(mask=mask):
            model.zero_grad(set_to_none=True)
            model(x, mask.bool()).sum().backward()

        replayed, recorded = both(run)
        assert layer_rows(replayed) == layer_rows(recorded)
        assert not replayed.unsupported_ops


def test_calls_of_growing_sizes_that_read_the_same_values_are_replayed_down_the_path_that_ran():
    # generate() without a cache calls the model once per new token, each call a size of its own
    # that reads the mask the same way: the replays' ways to combine the signatures' answers were
    # cut at 16, all of them with the first signature's first answers (Llama's and GPT-2's
    # top rows were unknown).
    torch.manual_seed(0)
    model = Stack(2)

    def run():
        with torch.no_grad():
            for n in (5, 6, 7, 8):
                mask = torch.ones(2, n, dtype=torch.bool)
                mask[1, 3:] = False  # padding: the run answers "no" to each layer's read
                model(torch.randn(2, n, 8), mask)

    replayed, recorded = both(run)
    assert layer_rows(replayed) == layer_rows(recorded)
    assert not replayed.unsupported_ops


def test_a_value_read_whose_branches_run_the_same_ops_on_other_sizes_is_unknown_not_guessed():
    # Both answers replay the same ops, on 2 rows or on 12: each matches the run's ops, so the
    # first that matched was taken, and a run that took the other branch got its FLOPs wrong.
    class Branch(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(8, 8)

        def forward(self, x, flag):
            return self.lin(x[:2] if flag.all() else x[:12])

    torch.manual_seed(0)
    model, x = Branch(), torch.randn(16, 8)
    for flag in (torch.tensor([True, False]), torch.tensor([True, True])):
        replayed, _ = both(lambda flag=flag: model(x, flag).sum().backward())
        assert pd.isna(replayed.df.loc["Branch", "flops"])
        assert "replays down different branches match the run equally" in " ".join(str(replayed).split())


def layer_flops(prof) -> float:
    return prof.df.loc["Linear", "flops"]


def test_code_outside_every_module_is_counted_from_the_calls_it_made():
    torch.manual_seed(0)
    w = torch.randn(8, 8, requires_grad=True)
    layer = nn.Linear(8, 8)

    def run():
        w.grad = None
        layer.zero_grad(set_to_none=True)  # the same step twice (not a second one accumulating)
        out = layer(torch.randn(2, 8)) @ w  # a matmul and its backward, outside every module
        nn.functional.cross_entropy(out, torch.tensor([1, 2])).div(2).backward()

    replayed, recorded = both(run)
    assert replayed.df.loc["profile", "flops"] == recorded.df.loc["profile", "flops"] > 0
    assert replayed.df.loc["Linear", "flops"] == recorded.df.loc["Linear", "flops"] > 0
    assert not replayed.unsupported_ops and "of ops of unknown cost" not in str(replayed)
    with torchprof.Profiler() as then:
        layer(torch.randn(2, 8))
        (torch.randn(2, 8) @ w).sum()  # calls are noted from the first module call's end on
    assert then.df.loc["profile", "flops"] == 2 * 2 * 8 * 8 + 2 * 8 + layer_flops(then)
    nested = _nested(torch.jagged)
    with torchprof.Profiler() as unknown:
        layer(torch.randn(2, 8)).sum()
        torch.mul(nested, 2.0)  # a call that cannot be replayed: unknown, and said
    assert pd.isna(unknown.df.loc["profile", "flops"]) and unknown.df.loc["Linear", "flops"] > 0
    listed = ", ".join(unknown.unsupported_ops)
    assert f"ops of unknown cost ({listed}): no formula, or no shapes" in str(unknown).replace("\n", " ")


def test_the_replay_leaves_the_users_model_random_state_and_output_as_they_were(capsys):
    torch.manual_seed(0)
    model = Scaled()

    class Loud(nn.Module):
        def forward(self, x):
            print("forward ran")
            return x * random.random()

    loud = Loud()
    x = torch.randn(3, 8)
    with torchprof.Profiler() as prof:
        model(x)
        loud(x)
    assert capsys.readouterr().out == "forward ran\n"
    random.seed(1)
    torch.manual_seed(1)
    expected = (random.random(), torch.rand(1).item())
    random.seed(1)
    torch.manual_seed(1)
    weight = model.proj.weight.detach().clone()
    hooks_before = dict(model._forward_hooks)
    assert prof.df.loc["Scaled", "flops"] > 0  # the replay runs here
    assert (random.random(), torch.rand(1).item()) == expected
    assert capsys.readouterr().out == ""
    assert model.calls == 1 and model.seen == [(3, 8)]
    assert torch.equal(model.proj.weight, weight) and model.proj.weight.device.type == "cpu"
    assert dict(model._forward_hooks) == hooks_before
    assert not torch.autograd.profiler._is_profiler_enabled


def test_a_call_that_raised_is_not_replayed():
    class Fails(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            self.lin(x)
            raise ValueError("bad input")

    model = Fails()
    with pytest.raises(ValueError), torchprof.Profiler() as prof:
        model(torch.randn(2, 4))
    assert "FLOPs of Fails are unknown: a call of it raised" in " ".join(prof.summary.get("warnings", []))
    assert prof.df.loc[["profile", "Fails", "Fails.lin"], "flops"].isna().all()


def test_a_module_passed_the_same_tensor_twice_is_replayed_with_one_tensor():
    # nn.MultiheadAttention projects q, k and v in one matmul only when they are one tensor.
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(16, 4)
    x = torch.randn(5, 2, 16)
    replayed, recorded = both(lambda: mha(x, x, x)[0].sum().backward())
    assert layer_rows(replayed) == layer_rows(recorded)
    df = replayed.df
    assert df.loc["MultiheadAttention/aten::linear", "calls"] == 2  # in_proj once, out_proj once
    counted = df.name.isin(_flops.FORMULAS) & (df.flops > 0)
    assert counted.any()


def test_a_forward_that_branches_otherwise_without_data_keeps_its_layers_and_lists_the_rest():
    # As Hugging Face models drop an all-ones attention mask, which they cannot tell on data-free
    # tensors: the replay adds the mask, the real run did not.
    class Masked(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.q, self.k = nn.Linear(8, 8), nn.Linear(8, 8)

        def forward(self, x, mask):
            scores = self.q(x) @ self.k(x).T
            data_free = mask.device.type == "meta" or type(mask).__name__ == "FakeTensor"
            if data_free or not bool(torch.all(mask == 1)):
                scores = scores + mask
            return scores.softmax(-1)

    torch.manual_seed(0)
    model, x, mask = Masked(), torch.randn(4, 8), torch.ones(4, 4)
    replayed, recorded = both(lambda: model(x, mask).sum().backward())
    got, want = layer_rows(replayed), layer_rows(recorded)
    assert got["Masked.q"] == want["Masked.q"] and got["Masked.k"] == want["Masked.k"]  # forward and backward
    assert pd.isna(got["Masked"][0])  # never the replay's extra addition, nor a total without the check
    assert {"aten::eq", "aten::all"} <= set(replayed.unsupported_ops)  # the real run's own check
    df, rec = replayed.df, recorded.df
    assert df.loc["Masked/aten::matmul", "flops"] == rec.loc["Masked/aten::matmul", "flops"] > 0


class ReshapedTwice(nn.Module):
    """One output read through a view and through a reshape (or flatten) of its transpose, which
    is not contiguous but viewable: the CPU's reshape makes a ``_reshape_alias`` (its backward a
    ``ReshapeAliasBackward0``) where a meta tensor's makes a ``view``. Its gradient's two parts are
    summed in the backward of whichever view runs last (Longformer's and LED's einsums)."""

    def __init__(self, how: str) -> None:
        super().__init__()
        self.lin, self.how = nn.Linear(8, 8), how

    def forward(self, x):
        h = self.lin(x)  # (4, 2, 8)
        viewed = h.view(8, 8)  # made first: its backward runs last and sums the gradient's two parts
        t = h.transpose(0, 1)  # (2, 4, 8): not contiguous, viewable as (2, 4, 2, 4) without a copy
        if self.how == "reshape":
            r = t.reshape(2, 4, 2, -1)
        elif self.how == "flatten":
            r = h.unflatten(2, (2, 4)).transpose(0, 1).flatten(2)  # (2, 4, 2, 4) -> (2, 4, 8), no copy
        else:
            r = torch.einsum("bij,bkj->bik", t, t)
        return viewed.sum() + (r * 2).sum()


@pytest.mark.parametrize("how", ["reshape", "flatten", "einsum"])
def test_a_reshape_that_the_cpu_makes_an_alias_is_replayed_as_the_cpu_runs_it(how):
    torch.manual_seed(0)
    model, x = ReshapedTwice(how), torch.randn(4, 2, 8)
    replayed, recorded = both(lambda: model(x).backward())
    assert replayed.unsupported_ops == {}
    assert layer_rows(replayed) == layer_rows(recorded)
    assert "aten::_reshape_alias" in set(replayed.df.name)
    meta = torch.empty(4, 2, 8, device="meta", requires_grad=True).transpose(0, 1)
    assert type(meta.reshape(2, 4, 2, 4).grad_fn).__name__ == "ViewBackward0"  # torch's own again after the replay


class MaskedSet(nn.Module):
    """``x[mask] = value`` with one boolean mask and one value: the CPU runs it as a
    ``masked_fill_`` inside ``index_put_`` (Longformer's attention mask), which a meta tensor's
    ``index_put_`` never runs; its backward runs ``index_put`` again, out of place."""

    def __init__(self, how: str) -> None:
        super().__init__()
        self.lin, self.how = nn.Linear(8, 8), how

    def forward(self, x, mask):
        y = self.lin(x)
        if self.how == "scalar":
            y[mask] = -1.0
        elif self.how == "tensor":
            y[mask] = torch.tensor(2.0)
        elif self.how == "leading":
            y[mask[:, 0]] = 0.5  # a mask over the first dimension: the rest of each row filled
        else:
            y = y.index_put((mask,), torch.tensor(0.0))
        return y


@pytest.mark.parametrize("how", ["scalar", "tensor", "leading", "out of place"])
@pytest.mark.parametrize("train", [True, False], ids=["training", "inference"])
def test_a_boolean_mask_set_that_the_cpu_fills_is_replayed_as_the_cpu_runs_it(how, train):
    torch.manual_seed(0)
    model, x = MaskedSet(how), torch.randn(4, 8)
    mask = x > 0

    def run():
        if train:
            model(x, mask).sum().backward()
        else:
            with torch.no_grad():
                model(x, mask)

    replayed, recorded = both(run)
    assert replayed.unsupported_ops == {}
    assert layer_rows(replayed) == layer_rows(recorded)
    assert "aten::masked_fill_" in set(replayed.df.name)
    meta = torch.empty(4, 8, device="meta")
    with torch.profiler.profile() as p:
        meta[torch.empty(4, 8, dtype=torch.bool, device="meta")] = 0.0
    assert "aten::masked_fill_" not in {e.name for e in p.events()}  # torch's own meta kernel again


class Checkpointed(nn.Module):
    """Each block's layers under ``torch.utils.checkpoint`` (as Hugging Face checkpoints a
    decoder layer's forward): recomputed in the backward, where they are called outside every
    module, so each is a root of its own there."""

    def __init__(self, reentrant: bool) -> None:
        super().__init__()
        self.reentrant = reentrant
        self.blocks = nn.ModuleList([nn.ModuleDict({"a": nn.Linear(8, 8), "b": nn.Linear(8, 8)}) for _ in range(2)])

    def forward(self, x):
        from torch.utils.checkpoint import checkpoint

        for block in self.blocks:
            x = checkpoint(lambda h, block=block: block["b"](block["a"](h).relu()), x, use_reentrant=self.reentrant)
        return x


@pytest.mark.parametrize("reentrant", [False, True], ids=["non-reentrant", "reentrant"])
def test_gradient_checkpointing_is_counted_by_the_models_replay_with_its_recomputation(reentrant):
    torch.manual_seed(0)
    model, x = Checkpointed(reentrant), torch.randn(4, 8, requires_grad=reentrant)  # (reentrant: an input needs one)
    model(x).sum().backward()
    replayed, recorded = both(lambda: model(x).sum().backward())
    got, want = layer_rows(replayed), layer_rows(recorded)
    layers = [p for p in want if p.count(".") == 3]  # Checkpointed.blocks.0.a ...
    assert len(layers) == 4 and all(got[p] == want[p] and want[p][0] > 0 for p in layers)
    assert "(recompute)" in set(replayed.df.name)
    if not reentrant:  # (a reentrant checkpoint is a custom autograd function: unknown with shapes=True too)
        assert got == want and replayed.unsupported_ops == {}
    assert not [w for w in replayed.summary.get("warnings", []) if "blocks" in w]  # no layer said unknown


class ScatteredFeatures(nn.Module):
    """Image features scattered into the text's embeddings where a token mask says (as LLaVA and
    Hugging Face's other vision-language models merge them): the backward's
    ``masked_scatter_backward`` counts the mask on the CPU (a ``sum`` inside ``masked_select``),
    which a meta tensor's runs none of."""

    def __init__(self) -> None:
        super().__init__()
        self.text, self.image = nn.Embedding(16, 8), nn.Linear(4, 8)

    def forward(self, ids, pixels):
        embeds = self.text(ids)
        mask = (ids == 15).unsqueeze(-1).expand_as(embeds)
        return embeds.masked_scatter(mask, self.image(pixels))


def test_features_scattered_by_a_mask_have_their_backward_counted():
    torch.manual_seed(0)
    model = ScatteredFeatures()
    ids = torch.randint(0, 15, (2, 6))
    ids[:, 1:4] = 15  # three image tokens per row
    pixels = torch.randn(2, 3, 4)
    replayed, recorded = both(lambda: model(ids, pixels).sum().backward())
    assert replayed.unsupported_ops == {}
    assert layer_rows(replayed) == layer_rows(recorded)
    mask = torch.empty(2, 6, 8, dtype=torch.bool, device="meta")
    with pytest.raises(NotImplementedError):  # torch's own meta kernels again after the replay
        torch.masked_select(torch.empty(2, 6, 8, device="meta"), mask)


class KeyCache:
    """A cache passed to each call and grown by it, as Hugging Face's ``DynamicCache`` is by
    ``generate()``: by the time the profile is read it holds what the last call left."""

    def __init__(self) -> None:
        self.keys: torch.Tensor | None = None
        self.seen = 0

    def update(self, k: torch.Tensor) -> torch.Tensor:
        self.keys = k if self.keys is None else torch.cat([self.keys, k], dim=1)
        self.seen += k.shape[1]
        return self.keys


class Cached(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q, self.k = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x, cache: KeyCache):
        keys = cache.update(self.k(x))
        return self.q(x) @ keys.transpose(1, 2)  # each step attends to every key so far


def test_a_cache_argument_is_replayed_as_it_was_at_each_call_and_never_changed():
    torch.manual_seed(0)
    model = Cached()

    def generate():
        cache = KeyCache()
        with torch.no_grad():
            model(torch.randn(2, 4, 8), cache)  # the prompt, then one token at a time
            for _ in range(3):
                model(torch.randn(2, 1, 8), cache)
        return cache

    with torchprof.Profiler() as replayed:
        cache = generate()
    with torchprof.Profiler(shapes=True) as recorded:
        generate()
    keys = cache.keys
    assert replayed.unsupported_ops == {}
    assert layer_rows(replayed) == layer_rows(recorded)
    assert cache.keys is keys and cache.keys.shape == (2, 7, 8) and cache.seen == 7  # the user's cache as the run left it


class Crop:
    """A plain argument object (no tensors) whose value sets sizes."""

    def __init__(self, n: int) -> None:
        self.n = n


class Cropped(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x, crop):
        return self.lin(x[: crop.n])


def test_an_argument_object_is_replayed_as_it_was_at_each_call():
    # A review found three wrong numbers here: a fresh object per call took the id of the freed
    # one and shared its signature; one object changed between calls was replayed as at its first
    # call; and an object's key left out values that set sizes (a NumPy integer, a slice, which
    # list held how many tensors). Every part is now in the signature, and the replay never calls
    # or copies the user's object with code of its own.
    torch.manual_seed(0)
    model, x = Cropped(), torch.randn(16, 8)
    crop = Crop(2)

    def fresh():  # the first object is freed before the second is made: one id for both
        for n in (2, 12):
            c = Crop(n)
            model(x, c).sum().backward()
            del c

    def changed():
        for n in (2, 12):
            crop.n = n
            model(x, crop).sum().backward()

    class Sliced(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(8, 8)

        def forward(self, parts, cut):
            return self.lin(torch.cat(parts)[cut])

    sliced = Sliced()
    t = torch.randn(4, 8)

    def held():  # objects holding tensors: lists of other lengths, a NumPy integer, a slice
        for parts, cut in (([t], slice(0, 2)), ([t, t], slice(0, np.int64(7))), ([t, t, t], slice(1, 12))):
            sliced(parts, cut).sum().backward()

    for run in (fresh, changed, held):
        run()
        replayed, recorded = both(run)
        assert layer_rows(replayed) == layer_rows(recorded), run.__name__
        assert not replayed.unsupported_ops, run.__name__


def test_a_module_passed_as_an_argument_is_replayed_as_a_copy_never_run_itself():
    # A student given its teacher: the replay ran the user's own teacher on data-free tensors,
    # which counted a batch in its batch norm at every read of the profile.
    class Student(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(8, 8)

        def forward(self, x, teacher):
            with torch.no_grad():
                target = teacher(x)
            return (self.lin(x) - target).pow(2).mean()

    torch.manual_seed(0)
    teacher, student, x = nn.Sequential(nn.BatchNorm1d(8), nn.Linear(8, 8)), Student(), torch.randn(4, 8)

    def run():
        student(x, teacher).backward()

    run()
    replayed, recorded = both(run)
    counted = int(teacher[0].num_batches_tracked)
    assert layer_rows(replayed) == layer_rows(recorded) and replayed.df.loc["Student", "flops"] > 0
    assert int(teacher[0].num_batches_tracked) == counted  # reading the profile ran nothing of the user's


class MadeInForward(nn.Module):
    """Modules made inside the forward, a fresh one per call, as Hugging Face's sequence
    classifiers make their loss (and DistilBERT its ReLU)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc, self.out = nn.Linear(16, 8), nn.Linear(8, 4)

    def forward(self, x, y):
        h = nn.ReLU()(self.fc(x))
        return nn.CrossEntropyLoss()(self.out(h), y)


def test_modules_made_inside_a_forward_are_one_row_under_their_caller_and_counted():
    # Each was a root per instance (CrossEntropyLoss, CrossEntropyLoss#2 for the second
    # micro-batch), never replayed with its caller: the whole model read NaN, with no warning.
    # Unheld, a later one could also take a freed one's id and its name (CE's ops under ReLU).
    torch.manual_seed(0)
    model, x, y = MadeInForward(), torch.randn(8, 16), torch.randint(0, 4, (8,))

    def run():
        for _ in range(2):  # micro-batches: a fresh loss module each
            model(x, y).backward()

    run()
    replayed, recorded = both(run)
    for prof in (replayed, recorded):
        df = prof.df
        assert df.loc["MadeInForward.(CrossEntropyLoss)", "calls"] == 2 and df.loc["MadeInForward.(ReLU)", "calls"] == 2
        assert not any(path.startswith(("CrossEntropyLoss", "ReLU")) for path in df.index)
        assert not any(path.startswith("MadeInForward.(ReLU)/aten::cross_entropy") for path in df.index)
    assert layer_rows(replayed) == layer_rows(recorded) and not replayed.unsupported_ops
    assert replayed.df.loc["profile", "flops"] == recorded.df.loc["profile", "flops"] > 0


def test_calls_before_the_first_module_call_and_in_a_block_without_modules_are_counted():
    # The noting mode went on only once a root call or a step had returned: an input normalised
    # before the model, or a block with no module at all, read NaN with nothing said.
    torch.manual_seed(0)
    lin, x, a = nn.Linear(16, 16), torch.randn(8, 16), torch.randn(32, 32)

    def normalised():
        lin((x - x.mean(0)) / x.std(0)).sum().backward()

    def bare():
        (a @ a).relu().sum()

    for run in (normalised, bare):
        run()  # gradients there in both profiles
        replayed, recorded = both(run)
        got, want = replayed.df, recorded.df
        assert got.loc["profile", "flops"] == want.loc["profile", "flops"] > 0, run.__name__
        assert not replayed.unsupported_ops and not replayed.summary.get("warnings")


def test_a_model_profiled_inside_an_except_block_is_counted():
    # A fallback or retry runs the model while an exception is being handled: its calls were
    # judged to have raised (root NaN, "a call of it raised an exception").
    torch.manual_seed(0)
    model, x = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2)), torch.randn(4, 8)

    def run():
        model(x).sum().backward()

    run()
    try:
        raise ValueError("the first try failed")
    except ValueError:
        replayed, recorded = both(run)
    assert replayed.df.loc["Sequential", "flops"] == recorded.df.loc["Sequential", "flops"] > 0
    assert not replayed.summary.get("warnings")


def test_an_argument_object_that_changes_at_every_call_is_unknown_past_the_signatures_kept():
    class Counter:
        def __init__(self) -> None:
            self.calls = 0

    class Counted(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(8, 8)

        def forward(self, x, counter):
            counter.calls += 1
            return self.lin(x)

    model, counter, x = Counted(), Counter(), torch.randn(2, 8)
    for calls, exact in ((4, True), (20, False)):
        def run(calls=calls):
            for _ in range(calls):
                model(x, counter).sum().backward()

        before = counter.calls
        replayed, recorded = both(run)
        assert counter.calls == before + 2 * calls  # the replay never called the user's object
        if exact:
            assert layer_rows(replayed) == layer_rows(recorded) and not replayed.unsupported_ops
        else:  # each state is a signature of its own: more than are kept, unknown (never a guess)
            assert pd.isna(replayed.df.loc["Counted", "flops"]) and replayed.unsupported_ops
            assert "more than 16 distinct argument sizes" in " ".join(str(replayed).split())


# -- arguments of every kind: the forward unchanged, the profile readable, FLOPs exact or unknown ---------
class Deq(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, q):
        return self.lin(q.dequantize())


class Keyed(nn.Module):
    """A dict of tensors in, None among the arguments, a dict out."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, batch, extra=None):
        out = self.lin(batch["x"])
        return {"y": out if extra is None else out + extra}


def _nested(layout):
    return torch.nested.nested_tensor([torch.randn(2, 8), torch.randn(3, 8)], layout=layout)


def _kinds():
    from torch.testing._internal.two_tensor import TwoTensor

    class Logged(torch.Tensor):
        """A subclass that runs the plain ops (no dispatch of its own)."""

    lin = nn.Linear(8, 8)
    complex_lin = nn.Linear(8, 8, dtype=torch.cfloat)
    meta_lin = nn.Linear(8, 8, device="meta")
    return {
        "strided nested": (lin, lambda: (_nested(torch.strided),)),
        "jagged nested": (lin, lambda: (_nested(torch.jagged),)),
        "sparse": (lin, lambda: (torch.randn(4, 8).to_sparse(),)),
        "quantized": (Deq(), lambda: (torch.quantize_per_tensor(torch.randn(4, 8), 0.1, 0, torch.qint8),)),
        "complex": (complex_lin, lambda: (torch.randn(4, 8, dtype=torch.cfloat),)),
        "wrapper subclass": (lin, lambda: (TwoTensor(torch.randn(4, 8), torch.randn(4, 8)),)),
        "plain subclass": (lin, lambda: (torch.randn(4, 8).as_subclass(Logged),)),
        "meta": (meta_lin, lambda: (torch.empty(4, 8, device="meta"),)),
        "dict and None": (Keyed(), lambda: ({"x": torch.randn(4, 8)}, None)),
        "symbolic sizes": (_Traced(lin), lambda: (torch.randn(4, 8),)),
    }


class _Traced(nn.Module):
    """Traces a layer with symbolic sizes (``make_fx``): the layer is called with fake tensors
    whose sizes are symbols; the output is the traced graph."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def __call__(self, x):  # not a module call itself: the traced layer is the root
        from torch.func import functional_call
        from torch.fx.experimental.proxy_tensor import make_fx

        params = dict(self.inner.named_parameters())
        return make_fx(lambda p, t: functional_call(self.inner, p, (t,)), tracing_mode="symbolic")(params, x).code


def _plain(value):
    """A comparable form of an output (nested and subclass tensors as their parts)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if value.is_nested:
        return [t.detach() for t in value.unbind()]
    if value.device.type == "meta":
        return tuple(value.shape)
    if value.layout != torch.strided:
        return value.to_dense().detach()
    if hasattr(value, "__tensor_flatten__"):  # a wrapper subclass: its inner tensors
        return [getattr(value, name).detach() for name in value.__tensor_flatten__()[0]]
    return value.as_subclass(torch.Tensor).detach()


def _same(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))
    return a == b if isinstance(a, (tuple, str)) else torch.equal(a, b)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("kind", list(_kinds()))
def test_arguments_of_every_kind_leave_the_forward_unchanged_and_flops_exact_or_unknown(kind):
    torch.manual_seed(0)
    module, make = _kinds()[kind]
    args = make()
    expected = _plain(module(*args))
    counted = {}
    for shapes in (False, True):
        with torchprof.Profiler(shapes=shapes) as prof:
            out = module(*args)
        assert _same(_plain(out), expected), kind  # our hooks changed nothing
        df = prof.df  # readable
        modules = df.index[df["kind"] == "module"]
        if not len(modules):
            continue  # a trace with fake tensors is not a module call torch records
        row = modules[0]
        counted[shapes] = df.loc[row, "flops"]
        if pd.isna(counted[shapes]):
            notes = " ".join(prof.summary.get("warnings", []))
            assert f"FLOPs of {row} are unknown" in notes or prof.unsupported_ops, kind  # unknown, and why
        str(prof)
    # the default counts what shapes=True counts, or says it cannot
    assert pd.isna(counted.get(False)) or counted[False] == counted[True], kind


def test_a_dtensor_argument_leaves_the_forward_unchanged_and_flops_unknown_by_default():
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, distribute_module, distribute_tensor
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        pytest.skip("a process group is already set up in this process")
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=1)
    try:
        mesh = init_device_mesh("cpu", (1,))
        lin = distribute_module(nn.Linear(8, 8), mesh)
        x = distribute_tensor(torch.randn(4, 8), mesh, [Replicate()])
        expected = lin(x).to_local()
        with torchprof.Profiler() as prof:
            out = lin(x)
        assert torch.equal(out.to_local(), expected)
        # a DTensor runs each op on its shard: the replay cannot know the shards' sizes
        assert pd.isna(prof.df.loc["Linear", "flops"])
        assert "a DTensor, a tensor subclass that runs its own ops" in " ".join(prof.summary["warnings"])
    finally:
        dist.destroy_process_group()


def test_a_transformer_encoder_with_a_padding_mask_in_inference_names_why_and_shapes_true_counts_it():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 4, 32, batch_first=True)
    encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=True).eval()
    x, mask = torch.randn(2, 5, 16), torch.zeros(2, 5, dtype=torch.bool)
    mask[0, 3:] = True
    with torch.no_grad():
        expected = encoder(x, src_key_padding_mask=mask)
        with torchprof.Profiler() as default:
            encoder(x, src_key_padding_mask=mask)
        with torchprof.Profiler(shapes=True) as recorded:
            out = encoder(x, src_key_padding_mask=mask)  # nested tensors inside: recorded, not a crash
    assert torch.equal(out, expected)
    note = " ".join(default.summary["warnings"])
    # which ran depends on the mask's values (padding skipped): a data-free copy cannot tell
    assert "aten::_nested_tensor_from_mask_left_aligned has no kernel for tensors without data" in note
    assert "transformer.py" in note and pd.isna(default.df.loc["TransformerEncoder", "flops"])
    # shapes=True counts each layer; the encoder's own row holds torch.equal on the mask (its
    # comparisons stop where the values differ): unknown there, listed, never a partial count
    assert recorded.df.loc["TransformerEncoder.layers.0", "flops"] > 0 and recorded.df.loc["TransformerEncoder.layers.1", "flops"] > 0
    assert recorded.unsupported_ops == {"aten::equal": 1} and pd.isna(recorded.df.loc["TransformerEncoder", "flops"])


def test_a_failure_in_torchprofs_own_hook_is_a_warning_and_unknown_flops(monkeypatch):
    from torchprof._capture import replay

    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU())
    x = torch.randn(2, 8)
    expected = model(x)

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in torchprof")

    monkeypatch.setattr(replay.CallRecorder, "root_output", broken)
    with torchprof.Profiler() as prof:
        out = model(x)  # the hook fails as the root call returns: the forward never sees it
    assert torch.equal(out, expected)
    with pytest.warns(UserWarning, match="torchprof's module hooks failed .*a bug in torchprof"):
        df = prof.df
    # unknown, never a count of what the hooks half saw
    assert df.loc[["profile", "Sequential", "Sequential.0"], "flops"].isna().all()
    assert any("module hooks failed" in w for w in prof.summary["warnings"])


# -- the replay describes what ran ------------------------------------------------------------------
def test_a_layer_replaced_or_resized_before_the_profile_is_read_makes_flops_unknown_never_zero():
    torch.manual_seed(0)
    for change in ("replace", "resize"):
        model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64))
        with torchprof.Profiler() as prof:
            model(torch.randn(32, 64)).sum().backward()
        if change == "replace":
            model[2] = nn.Linear(64, 64)  # same sizes, another layer: not the one that ran
        else:
            model[2].weight = nn.Parameter(torch.randn(16, 64))  # resized: it would count 16 outputs, 64 ran
        df = prof.df
        assert pd.isna(df.loc["Sequential", "flops"]) and pd.isna(df.loc["Sequential.2", "macs"]), change
        assert "changed after it ran" in " ".join(prof.summary["warnings"]), change


class _Out:
    """A custom container of outputs (neither a tuple nor a dict)."""

    def __init__(self, hidden, logits) -> None:
        self.hidden, self.logits = hidden, logits


def _structured(kind: str):
    from dataclasses import dataclass

    @dataclass
    class Output:
        hidden: torch.Tensor
        logits: torch.Tensor

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body, self.head = nn.Linear(64, 64), nn.Linear(64, 64)

        def forward(self, x):
            hidden = self.body(x)
            logits = self.head(hidden.relu())
            if kind == "dataclass":
                return Output(hidden, logits)
            if kind == "object":
                return _Out(hidden, logits)
            return (t for t in (hidden, logits))  # a generator

    return Net()


@pytest.mark.parametrize("kind", ["dataclass", "object", "generator"])
def test_outputs_of_any_structure_get_their_backward_counted(kind):
    torch.manual_seed(0)
    model = _structured(kind)
    x = torch.randn(32, 64)

    def run():
        out = model(x)
        logits = list(out)[1] if kind == "generator" else out.logits
        logits.sum().backward()

    replayed, recorded = both(run)
    assert layer_rows(replayed) == layer_rows(recorded)
    assert (recorded.df["is_backward"] & (recorded.df["macs"] > 0)).any()


def test_the_users_global_hooks_and_anomaly_mode_stay_out_of_the_replay():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 8))
    x = torch.randn(4, 8)
    seen: list[str] = []

    def reads_values(module, args, output):
        seen.append(type(module).__name__)
        output[0, 0].item()  # a value: impossible on a data-free copy

    def run():
        model(x).sum().backward()

    run()  # gradients there in both profiles
    handle = nn.modules.module.register_module_forward_hook(reads_values)
    try:
        with torch.autograd.detect_anomaly():
            replayed, recorded = both(run)
            calls = len(seen)
            rows = layer_rows(replayed)  # the replay runs here
        assert len(seen) == calls  # the user's hook ran in the user's calls only
    finally:
        handle.remove()
    assert rows == layer_rows(recorded) and not replayed.summary.get("warnings")
    # The loss's sum outside the model, whose backward anomaly mode checks too (was NaN, unsaid).
    assert replayed.df.loc["profile", "flops"] == recorded.df.loc["profile", "flops"] > 0
    assert not torch.is_anomaly_enabled()


def test_a_hook_of_the_model_reading_values_is_named_as_the_cause():
    model = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 8))
    model[1].register_forward_pre_hook(lambda module, args: None)  # the user's hooks are dropped on the copy
    model[1].forward = lambda x: nn.functional.linear(x, model[1].weight) * float(x.sum())  # reads a value
    with torchprof.Profiler() as prof:
        model(torch.randn(2, 8))
    note = " ".join(prof.summary["warnings"])
    assert "its forward cannot run without real data" in note and "test_replay.py" in note and "in <lambda>" in note


@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.parametrize("reparametrise", ["weight_norm", "spectral_norm", "prune"])
def test_torchs_own_forward_hooks_that_compute_a_weight_run_on_the_copy(reparametrise):
    # weight_norm, spectral_norm and pruning compute the layer's weight in a forward pre-hook of
    # their own: part of the layer's arithmetic, not the user watching it. Dropped from the copy,
    # the replay skipped that work and the layer's FLOPs were unknown.
    import torch.nn.utils.prune as prune

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 4))
    if reparametrise == "prune":
        prune.l1_unstructured(model[0], "weight", amount=0.5)
    else:
        getattr(nn.utils, reparametrise)(model[0])
    x = torch.randn(2, 8)
    replayed, recorded = both(lambda: model(x).sum().backward())
    rows = layer_rows(replayed)
    assert not math.isnan(rows["Sequential.0"][0])
    assert rows == layer_rows(recorded) and not replayed.summary.get("warnings")


def test_hugging_face_output_capturing_hooks_run_on_the_copy():
    # transformers installs forward hooks once per model to collect hidden states (a flag on the
    # model says they are there): SegFormer's decode head reads them. The copy kept the flag but
    # not the hooks, so its replay failed (IndexError) and every row of the model was unknown.
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.SegformerConfig(num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[8, 16],
                                          num_attention_heads=[1, 2], decoder_hidden_size=16, patch_sizes=[3, 3],
                                          strides=[2, 2], mlp_ratios=[2, 2], num_labels=3)  # fmt: skip
    model = transformers.SegformerForSemanticSegmentation(config).eval()
    x = torch.randn(1, 3, 16, 16)

    def run():
        with torch.no_grad():
            model(pixel_values=x)

    replayed, recorded = both(run)
    rows = layer_rows(replayed)
    assert not math.isnan(rows["SegformerForSemanticSegmentation"][0])
    assert rows == layer_rows(recorded) and not replayed.summary.get("warnings")


def test_a_packed_sequence_argument_is_replayed_with_its_batch_sizes():
    # A PackedSequence's batch sizes are its layout (which rows each time step holds), a CPU
    # tensor by contract: rebuilt on the meta device, reading the profile raised ValueError.
    from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence

    class Tagger(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Linear(4, 4)
            self.rnn = nn.LSTM(4, 6)
            self.head = nn.Linear(6, 3)

        def forward(self, packed):
            out, _ = self.rnn(PackedSequence(self.embed(packed.data), *packed[1:]))
            return self.head(out.data)

    torch.manual_seed(0)
    model = Tagger()
    packed = pack_padded_sequence(torch.randn(5, 3, 4), torch.tensor([5, 3, 2]), enforce_sorted=False)
    replayed, recorded = both(lambda: model(packed).sum().backward())
    rows, want = layer_rows(replayed), layer_rows(recorded)
    assert rows["Tagger.embed"] == want["Tagger.embed"] and rows["Tagger.head"] == want["Tagger.head"]
    # the CPU computes the input projection of every step at once, a meta copy step by step:
    # the LSTM's row is its shapes=True count or unknown with its ops listed, never a guess
    assert rows["Tagger.rnn"] == want["Tagger.rnn"] or (math.isnan(rows["Tagger.rnn"][0]) and "aten::mm" in replayed.unsupported_ops)


def test_tensors_and_arrays_a_module_holds_are_never_copied_with_their_data():
    import numpy as np

    from torchprof._capture import replay

    class Holder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(8, 8)
            self.table = np.ones((64, 64))
            self.cache = [torch.ones(64, 64), {"k": torch.ones(32)}]
            self.state = _Out(torch.ones(16), np.zeros(3))
            self.alias = self.lin.weight  # the same tensor twice: one stand-in

        def forward(self, x):
            return self.lin(x) + self.cache[0][:1, :8]

    model = Holder()
    tensors = replay._Tensors(fake=False)
    copy = replay.tensor_copy(model, tensors, replay.modules_below(model))
    assert copy.table is model.table and copy.state.logits is model.state.logits  # shared, not copied
    assert copy.cache is not model.cache and copy.cache[0].is_meta and copy.cache[1]["k"].is_meta
    assert copy.state is not model.state and copy.state.hidden.is_meta
    assert copy.lin.weight.is_meta and copy.alias is copy.lin.weight
    assert not model.cache[0].is_meta and model.lin.weight.device.type == "cpu"
    replayed, recorded = both(lambda: model(torch.randn(2, 8)))
    assert layer_rows(replayed) == layer_rows(recorded)


def test_fx_and_exported_roots_are_replayed_or_unknown_never_zero():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    x = torch.randn(4, 8)
    exported = torch.export.export(model, (x,)).module()
    replayed, recorded = both(lambda: exported(x))
    root = "GraphModule"
    assert replayed.df.loc[root, "flops"] == recorded.df.loc[root, "flops"] > 0
    traced = torch.fx.symbolic_trace(model)

    def train():
        traced.zero_grad(set_to_none=True)
        traced(x).sum().backward()

    replayed, recorded = both(train)
    got, want = layer_rows(replayed), layer_rows(recorded)
    assert got == want and all(flops > 0 for flops, _ in got.values())


# -- the whole step: optimizer steps and the calls outside every module --------------------------------
OPTIMIZERS = {
    "SGD momentum": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4),
    "Adam": lambda p: torch.optim.Adam(p),
    "AdamW foreach": lambda p: torch.optim.AdamW(p, foreach=True),
    "AdamW fused": lambda p: torch.optim.AdamW(p, fused=True),
    "Adam amsgrad": lambda p: torch.optim.Adam(p, amsgrad=True),
    "RMSprop": lambda p: torch.optim.RMSprop(p, momentum=0.5),
    "Adagrad": lambda p: torch.optim.Adagrad(p),
}


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_a_training_step_counts_its_optimizer_and_its_functional_loss_as_shapes_true_does(name):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 5))
    opt = OPTIMIZERS[name](model.parameters())
    x, y = torch.randn(2, 3, 8, 8), torch.tensor([1, 3])

    def step():
        loss = nn.functional.cross_entropy(model(x), y) / 2  # outside every module
        loss.backward()
        opt.step()
        opt.zero_grad()

    step()  # the optimizer's state exists from here on, as in steady training
    replayed, recorded = both(step)
    got, want = replayed.df, recorded.df
    region = f"Optimizer.step#{type(opt).__name__}.step"
    assert got.loc[region, "flops"] == want.loc[region, "flops"] > 0
    assert got.loc["profile", "flops"] == want.loc["profile", "flops"]  # the whole step
    assert not replayed.unsupported_ops


@pytest.mark.parametrize("name", ["SGD momentum", "Adam"])
def test_an_optimizer_step_is_counted_as_it_ran_when_its_parameters_change_after_the_block(name):
    # A step's parameters are specced when the profile is read, from what was kept at the step:
    # a layer resized, cast or moved after the block (before the first read) does not change it.
    def run(change):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
        opt = OPTIMIZERS[name](model.parameters())
        x = torch.randn(4, 8)

        def step():
            model(x).sum().backward()
            opt.step()
            opt.zero_grad()

        step()
        with torchprof.Profiler() as prof:
            step()
        if change:
            model[0].weight.data = torch.randn(64, 32, dtype=torch.float64)  # the same Parameter object
        return prof.df.loc[f"Optimizer.step#{type(opt).__name__}.step", "flops"]

    kept = run(change=False)
    assert kept > 0
    assert run(change=True) == kept


def test_zero_grad_runs_with_the_mode_that_notes_calls_outside_modules_off():
    # zero_grad's gradient reads, writes and zeroings cost nothing, and each went through the
    # mode (a 100-parameter zero_grad read 7x its time without FLOPs); torch's own methods are
    # back after the block.
    model = nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, foreach=True)
    x = torch.randn(2, 4)
    originals = (torch.optim.Optimizer.__dict__["zero_grad"], nn.Module.__dict__["zero_grad"])
    with torchprof.Profiler() as prof:
        model(x).sum().backward()  # the mode goes on once this root call returns
        opt.zero_grad(set_to_none=False)
        model.zero_grad(set_to_none=False)
        (model(x) * 2).sum().backward()
    noted = {getattr(key[0], "__name__", "") for key in prof._session._calls.outside.calls}
    assert noted == {"sum", "mul"}  # not _foreach_zero_ nor zero_
    assert (torch.optim.Optimizer.__dict__["zero_grad"], nn.Module.__dict__["zero_grad"]) == originals
    assert prof.df.loc["profile", "flops"] > 0 and not prof.unsupported_ops


def test_a_parameter_resized_between_two_steps_of_a_block_makes_another_step():
    # The step's key once held the parameter's identity alone: the second step was replayed
    # with the first one's sizes (72 FLOPs where 104 ran).
    def run(shapes):
        torch.manual_seed(0)
        model = nn.Linear(8, 4)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)

        def step(n):
            model.zero_grad(set_to_none=True)
            model(torch.randn(5, n)).pow(2).mean().backward()
            opt.step()

        step(8)
        with torchprof.Profiler(shapes=shapes) as prof:
            step(8)
            model.weight.data = torch.randn(4, 16)
            model.in_features = 16
            step(16)
        return prof.df.loc["Optimizer.step#SGD.step", "flops"]

    assert run(False) == run(True) == 104


def test_calls_of_one_root_whose_backward_ran_together_are_replayed_together():
    # A siamese or contrastive step calls the encoder twice and runs one backward: autograd sums
    # the two calls' gradients of each parameter, work a replay of one call lacks, and the
    # encoder's FLOPs were unknown. Calls that shared an autograd pass are now replayed together.
    torch.manual_seed(0)
    encoder = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    views = [torch.randn(4, 8) for _ in range(3)]

    def contrastive():
        encoder.zero_grad(set_to_none=True)
        z1, z2 = encoder(views[0]), encoder(views[1])
        (z1 * z2).sum().backward()

    def multi_crop():  # three calls in each of two backward passes (micro-batches)
        encoder.zero_grad(set_to_none=True)
        for _ in range(2):
            sum(encoder(v) for v in views).sum().backward()

    def apart():  # each call its own backward: replayed one at a time, as before
        encoder.zero_grad(set_to_none=True)
        for v in views:
            encoder(v).sum().backward()

    small = torch.randn(2, 8)

    def global_and_local_crops():  # calls of two sizes in each pass (DINO): replayed as one group
        encoder.zero_grad(set_to_none=True)
        for _ in range(2):
            (encoder(views[0]).sum() + encoder(views[1]).sum() + encoder(small).sum()).backward()

    for run in (contrastive, multi_crop, apart, global_and_local_crops):
        run()
        replayed, recorded = both(run)
        assert layer_rows(replayed) == layer_rows(recorded), run.__name__
        assert replayed.df.loc["profile", "flops"] == recorded.df.loc["profile", "flops"], run.__name__
        assert not replayed.unsupported_ops, run.__name__


def test_a_gan_step_counts_both_networks_and_both_optimizers():
    # The discriminator runs on real and fake data in one backward, then on fake data again with
    # its gradients still there (the generator's step); two optimizers of one class step.
    torch.manual_seed(0)
    gen = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8))
    disc = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1))
    opt_g, opt_d = torch.optim.Adam(gen.parameters()), torch.optim.Adam(disc.parameters())
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
    replayed, recorded = both(step)
    got, want = replayed.df, recorded.df
    for path in ("profile", "Sequential", "Sequential#2", "Optimizer.step#Adam.step"):
        assert got.loc[path, "flops"] == want.loc[path, "flops"] > 0, path
    assert not replayed.unsupported_ops


@pytest.mark.parametrize("sizes", [(8, 16), (8, 8)], ids=["different sizes", "same sizes"])
@pytest.mark.parametrize("name", ["SGD momentum", "Adam"])
def test_two_optimizers_of_one_class_are_each_counted(name, sizes):
    # A GAN steps a generator's and a discriminator's optimizer of one class: torch names both
    # ranges Optimizer.step#Adam.step. Their steps were unknown; now each is replayed as one
    # signature of that range, matched by how often each ran.
    torch.manual_seed(0)
    a, b = nn.Linear(8, sizes[0]), nn.Linear(sizes[0], sizes[1])
    opt_a, opt_b = OPTIMIZERS[name](a.parameters()), OPTIMIZERS[name](b.parameters())
    x = torch.randn(4, 8)

    def step():
        for opt in (opt_a, opt_b):
            b(a(x)).sum().backward()
            opt.step()
            opt_a.zero_grad()
            opt_b.zero_grad()

    step()
    replayed, recorded = both(step)
    region = f"Optimizer.step#{type(opt_a).__name__}.step"
    got, want = replayed.df, recorded.df
    assert got.loc[region, "calls"] == 2
    assert got.loc[region, "flops"] == want.loc[region, "flops"] > 0
    assert got.loc["profile", "flops"] == want.loc["profile", "flops"]
    assert not replayed.unsupported_ops and not replayed.summary.get("warnings")


@pytest.mark.parametrize("name", ["SGD momentum", "Adam"])
def test_a_step_given_a_closure_counts_the_closures_loss_and_the_update_as_shapes_true_does(name):
    """Lightning (and LBFGS) step the optimizer with a closure that runs the forward, the loss
    and the backward inside the step: the closure's work is noted as any, in a range of its own,
    and the step's update is replayed once the closure made the gradients."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    opt = OPTIMIZERS[name](model.parameters())
    x, y = torch.randn(4, 8), torch.randn(4, 1)

    def closure():
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)  # outside every module, inside the step
        loss.backward()
        return loss

    opt.step(closure)  # the optimizer's state exists from here on

    def step():
        opt.step(closure)

    replayed, recorded = both(step)
    got, want = replayed.df, recorded.df
    region = f"Optimizer.step#{type(opt).__name__}.step"
    assert got.loc[region, "flops"] == want.loc[region, "flops"] > got.loc[f"{region}/{OPTIMIZER_CLOSURE}", "flops"] > 0
    assert got.loc["profile", "flops"] == want.loc["profile", "flops"]
    assert not replayed.unsupported_ops and "warnings" not in replayed.summary


def test_a_loss_inside_a_users_range_is_counted_forward_and_backward():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    x, y = torch.randn(4, 8), torch.tensor([0, 2, 1, 0])

    def step():
        model.zero_grad(set_to_none=True)  # each run alike: no gradient to accumulate into
        with torch.profiler.record_function("loss"):
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()

    replayed, recorded = both(step)
    assert replayed.df.loc["loss", "flops"] == recorded.df.loc["loss", "flops"] > 0
    assert replayed.df.loc["profile", "flops"] == recorded.df.loc["profile", "flops"]
    assert not replayed.unsupported_ops


def test_a_closure_that_raises_leaves_the_users_error_and_nothing_running():
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def closure():
        raise ValueError("the user's own error")

    with pytest.raises(ValueError, match="the user's own error"):
        with torchprof.Profiler():
            opt.step(closure)
    with torchprof.Profiler() as prof:  # nothing was left running
        model(torch.randn(2, 4)).sum().backward()
        opt.step()
    assert prof.df.loc["profile", "flops"] > 0


def test_with_compiled_code_in_the_process_calls_outside_modules_are_still_counted():
    """Compiled code in the process no longer makes the calls outside modules unknown (a
    compiled model's code runs inside its own call, where the mode that notes them is off:
    tests/test_compiled.py checks whole compiled steps)."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    double = torch.compile(lambda t: t * 2, backend="eager")
    double(torch.randn(3))
    model = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 4))
    x = torch.randn(8, 16)
    frames = dict(counters["frames"])

    def step():
        model.zero_grad(set_to_none=True)
        model(x).pow(2).mean().backward()

    replayed, recorded = both(step)
    assert replayed.df.loc["profile", "flops"] == recorded.df.loc["profile", "flops"] > 0
    assert "warnings" not in replayed.summary and not replayed.unsupported_ops
    assert dict(counters["frames"]) == frames  # nothing compiled again

    # A compiled function called outside every module: the mode comes off before Dynamo checks
    # its guards (nothing compiles again) until the next root call; the calls it misses (the
    # sum after it) and the graph's own ops (no map with this backend) are unknown, said so.
    def with_compiled_call():
        model.zero_grad(set_to_none=True)
        double(model(x)).sum().backward()

    with_compiled_call()
    frames = dict(counters["frames"])
    with torchprof.Profiler() as prof:
        with_compiled_call()
    assert dict(counters["frames"]) == frames
    assert math.isnan(prof.df.loc["profile", "flops"])
    assert any("FLOPs are unknown (NaN)" in w for w in prof.summary["warnings"])
    from torch._dynamo import eval_frame

    assert not getattr(eval_frame._maybe_set_eval_frame, "torchprof_watch", False)  # put back
    assert torch._C._len_torch_function_stack() == 0
    torch._dynamo.reset()


def test_gradient_accumulation_adds_are_counted():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 4))
    x = torch.randn(8, 16)

    def micro_batches():
        model.zero_grad(set_to_none=True)
        for part in x.chunk(2):  # the second backward adds into the gradients of the first
            model(part).sum().backward()

    replayed, recorded = both(micro_batches)
    assert replayed.df.loc["profile", "flops"] == recorded.df.loc["profile", "flops"]
    accumulated = recorded.df.index.str.contains("AccumulateGrad") & (recorded.df["flops"] > 0)
    assert accumulated.any() and not replayed.unsupported_ops


@pytest.mark.parametrize("params_have_grads", [True, False], ids=["with", "without parameter gradients"])
def test_an_input_that_had_a_gradient_has_its_gradient_add_counted(params_have_grads):
    # An input that requires a gradient (an input-gradient attack, inputs_embeds being tuned)
    # already holding one from the previous step: its AccumulateGrad adds, which the replay,
    # whose input had none, only stored; every add no module owns was then unknown.
    torch.manual_seed(0)
    model, x = nn.Linear(8, 8), torch.randn(4, 8, requires_grad=True)
    model(x).sum().backward()

    def step():
        if not params_have_grads:
            model.zero_grad(set_to_none=True)
        model(x).sum().backward()

    replayed, recorded = both(step)
    assert not replayed.unsupported_ops
    assert replayed.df.loc["profile", "flops"] == recorded.df.loc["profile", "flops"]


def test_accumulation_in_one_root_keeps_every_roots_gradient_adds_exact():
    """The gradient adds of all roots land in one "(backward, no module)" node: one root that
    accumulates (two micro-batches) and one that does not are replayed alike, so both count."""
    torch.manual_seed(0)
    first, second = nn.Linear(16, 16), nn.Linear(16, 4)
    x = torch.randn(8, 16)

    def run():
        first.zero_grad(set_to_none=True)
        second.zero_grad(set_to_none=True)
        for part in x.chunk(2):  # the second backward adds into the gradients of the first
            first(part).sum().backward()
        second(x).sum().backward()  # stores its gradients, adds nothing

    replayed, recorded = both(run)
    assert replayed.df.loc["profile", "flops"] == recorded.df.loc["profile", "flops"]
    assert layer_rows(replayed) == layer_rows(recorded) and not replayed.unsupported_ops


def test_gradient_adds_no_forward_saw_coming_are_counted():
    """Two forwards, then two backwards: neither forward found a gradient, but the second
    backward adds into the first's. The replays run their backward as it ran, adds included."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 4))
    x = torch.randn(8, 16)

    def run():
        model.zero_grad(set_to_none=True)
        first, second = model(x[:4]), model(x[4:])
        first.sum().backward()
        second.sum().backward()

    replayed, recorded = both(run)
    assert replayed.df.loc["profile", "flops"] == recorded.df.loc["profile", "flops"]
    assert layer_rows(replayed) == layer_rows(recorded) and not replayed.unsupported_ops


def test_a_replay_without_accumulation_records_no_gradient_stores():
    """Parameters without gradients: the replay takes the gradients at the leaves, so its
    profile holds each parameter's engine range but not the store inside it (three events per
    parameter that cost their reading and placing), and the FLOPs are still the recorded ones."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 4))
    x = torch.randn(8, 16)

    def run():
        model.zero_grad(set_to_none=True)
        model(x).sum().backward()

    replayed, recorded = both(run)
    assert layer_rows(replayed) == layer_rows(recorded)
    assert replayed.df.loc["profile", "flops"] == recorded.df.loc["profile", "flops"]
    (run_,) = replayed._session.replays(["Sequential"])
    names = set(run_.events.name)
    assert "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad" in names
    assert "torch::autograd::AccumulateGrad" not in names and "aten::detach" not in names


def _micro_batches(where: str):
    """One optimizer step of two micro-batches (gradient accumulation), the way ``where`` runs
    them: a plain loop, a loop that clears the gradients between the first forward and its
    backward, or Lightning's way (that order, the first micro-batch in a range of its own, the
    second in the optimizer's closure, so its gradient adds run in another place)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    xs, ys = torch.randn(2, 4, 8), torch.randn(2, 4, 1)

    def micro(i: int, zero_grad: bool = False) -> torch.Tensor:
        with torch.profiler.record_function("micro-batch"):
            loss = nn.functional.mse_loss(model(xs[i]), ys[i]) / 2  # outside every module
            if zero_grad:  # Lightning clears them after the forward, before the backward
                opt.zero_grad()
            loss.backward()
        return loss

    def step():
        if where == "plain loop":
            micro(0), micro(1)
            opt.step()
            opt.zero_grad()
        elif where == "zero_grad before the backward":
            micro(0, zero_grad=True), micro(1)
            opt.step()
        else:
            micro(0, zero_grad=True)
            opt.step(lambda: micro(1))

    step()  # the gradients and the optimizer's state exist from here on, as in steady training
    return step


@pytest.mark.parametrize("where", ["plain loop", "zero_grad before the backward", "Lightning's closure"])
def test_a_step_of_accumulated_micro_batches_counts_every_gradient_add_as_shapes_true_does(where):
    """Whether a micro-batch's backward adds into a gradient depends on the gradients that exist
    when its backward runs, not when its forward did; and the adds run where its backward ran
    (two places under Lightning). The step's total equals shapes=True, and so does every row."""
    step = _micro_batches(where)

    def recorded_steps(**options):  # steps 2 and 3 of 4, as a trainer's profiler records them
        with torchprof.Profiler(steps=[2, 3], **options) as prof:
            for _ in range(4):
                step()
                prof.step()
        return prof

    replayed, recorded = recorded_steps(), recorded_steps(shapes=True)
    got, want = replayed.df, recorded.df
    assert not replayed.unsupported_ops and "warnings" not in replayed.summary
    adds = want.index[want["name"].eq("aten::add_") & want.index.str.contains("AccumulateGrad")]
    assert len(adds) == 2 and (want.loc[adds, "flops"] > 0).all()  # one row per recorded step
    # (the default capture runs the closure in a range of its own, under the optimizer's step)
    mine = {path.replace(f"/{OPTIMIZER_CLOSURE}", ""): flops for path, flops in got["flops"].items() if not path.endswith(OPTIMIZER_CLOSURE)}
    for path in [*adds, *want.index[want["kind"] != "op"]]:
        assert mine[path] == want.loc[path, "flops"], path
    assert got.loc["ProfilerStep#3", "flops"] == want.loc["ProfilerStep#3", "flops"]



def test_gradient_adds_that_could_be_split_two_ways_stay_unknown_never_a_guess():
    """Two backward passes in two ranges, one adding into the first layer's gradient (64
    elements) and copying the second's, the other the other way round: each range holds one add
    and one copy, and either split of the replays fits the ops that ran. Which add ran where is
    not known, so neither is counted: the adds are listed, their rows unknown, the layers exact."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8, bias=False), nn.Linear(8, 2, bias=False))
    first, second = model[0].weight, model[1].weight
    x, seed = torch.randn(4, 8), torch.ones(4, 2)

    def step():
        first.grad, second.grad = torch.zeros_like(first), None
        with torch.profiler.record_function("adds into the first layer"):
            model(x).backward(seed)
        first.grad, second.grad = None, torch.zeros_like(second)
        with torch.profiler.record_function("adds into the second layer"):
            model(x).backward(seed)

    replayed, recorded = both(step)
    got, want = replayed.df, recorded.df
    adds = want.index[want["name"].eq("aten::add_")]
    assert sorted(want.loc[adds, "flops"]) == [16, 64]
    assert got.loc[adds, "flops"].isna().all() and replayed.unsupported_ops == {"aten::add_": 2}
    assert math.isnan(got.loc["profile", "flops"])
    for layers in want.index[want["kind"] == "module"]:
        assert got.loc[layers, "flops"] == want.loc[layers, "flops"] > 0, layers


@pytest.mark.parametrize("shapes", [False, True])
def test_vmap_and_per_sample_gradients_are_unknown_and_say_why_never_one_examples_count(shapes):
    from torch.func import functional_call, grad, vmap

    torch.manual_seed(0)
    lin = nn.Linear(128, 128)
    params = {k: v.detach() for k, v in lin.named_parameters()}
    x = torch.randn(8, 4, 128)

    def loss(p, xi):
        return functional_call(lin, p, (xi,)).sum()

    for name, run in (("vmap", lambda: vmap(lambda p, xi: functional_call(lin, p, (xi,)), in_dims=(None, 0))(params, x)),
                      ("per-sample gradients", lambda: vmap(grad(loss), in_dims=(None, 0))(params, x))):  # fmt: skip
        with torchprof.Profiler(shapes=shapes) as prof:
            run()
        df = prof.df
        assert pd.isna(df.loc["Linear", "macs"]) and pd.isna(df.loc["profile", "macs"]), name  # not 1/8 of the truth
        assert "ran inside torch.func" in " ".join(prof.summary["warnings"]), name
        listed = "aten::addmm" in prof.unsupported_ops or "aten::mm" in prof.unsupported_ops
        assert listed or df["macs"].isna().all(), name  # its ops listed, or nothing known at all


def test_a_tracer_entered_in_the_block_leaves_no_mode_behind():
    from torch.func import functional_call
    from torch.fx.experimental.proxy_tensor import make_fx

    lin = nn.Linear(8, 8)
    params = dict(lin.named_parameters())
    before = torch._C._len_torch_function_stack()
    for first in (False, True):
        with torchprof.Profiler() as prof:
            if first:
                lin(torch.randn(2, 8))
            make_fx(lambda p, t: functional_call(lin, p, (t,)), tracing_mode="symbolic")(params, torch.randn(4, 8))
            lin(torch.randn(2, 8)).sum()
        prof.df
        assert torch._C._len_torch_function_stack() == before, first
