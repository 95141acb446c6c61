"""torch.compile'd models under the Profiler: no crash, no extra compilation, and layers inside
compiled regions get their forward and backward time and their FLOPs."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from torch import nn

import torchprof
from conftest import REPO

STRUCTURAL = ("CompiledFunction", "CompiledFunctionBackward", "Torch-Compiled Region", "Pregraph bytecode",
              "AOTDispatcher Runtime Wrapper Prologue", "TorchDynamo Cache Lookup")  # fmt: skip


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block1 = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
        self.pool = nn.MaxPool2d(2)
        self.block2 = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.block2(self.pool(self.block1(x)))
        return self.fc(x.mean((2, 3)))


class Block(nn.Module):
    """A pre-norm transformer block: attention then an MLP."""

    def __init__(self, d: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        x = x + self.proj(nn.functional.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(torch.relu(self.fc1(self.ln2(x))))


def training_step(model: nn.Module, run, x: torch.Tensor):
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step():
        opt.zero_grad()
        run(x).float().pow(2).mean().backward()
        opt.step()

    return step


def dynamo_counts():
    from torch._dynamo.utils import counters

    return {k: dict(v) for k, v in counters.items() if k in ("stats", "graph_break", "recompiles", "unimplemented")}


@pytest.fixture
def fresh_dynamo():
    import torch._dynamo
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    yield
    torch._dynamo.reset()


def compiled_run(mode: str, model: nn.Module, backend: str = "aot_eager"):
    if mode == "torch.compile(model)":
        return torch.compile(model, backend=backend)
    if mode == "model.compile()":
        model.compile(backend=backend)
        return model
    return torch.compile(lambda x: model(x), backend=backend)


def plan_counts(mode: str, plan: list[str]):
    """Dynamo's counters after running ``plan`` (``run`` plain, ``prof`` under a Profiler)."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    step = training_step(model, compiled_run(mode, model), torch.randn(8, 16))
    profiles = []
    for what in plan:
        if what == "run":
            step()
        else:
            with torchprof.Profiler() as prof:
                step()
            profiles.append(prof)
    return dynamo_counts(), profiles


@pytest.mark.parametrize("mode", ["torch.compile(model)", "compiled function"])
def test_profiling_causes_no_graph_break_and_no_recompilation(fresh_dynamo, mode):
    plain, _ = plan_counts(mode, ["run"] * 4)
    for plan in (["prof", "run", "prof", "run"], ["run", "prof", "prof", "run"]):
        counts, profiles = plan_counts(mode, plan)
        assert counts == plain, plan
        for prof in profiles:
            df = prof.df
            assert "(backward, no module)/autograd::engine::evaluate_function: CompiledFunctionBackward" not in df.index
            assert not any(name.startswith(STRUCTURAL) for name in prof.unsupported_ops), prof.unsupported_ops


def test_module_compile_gets_one_version_with_our_hooks_and_keeps_it(fresh_dynamo):
    # model.compile() compiles nn.Module._call_impl, which reads torch's global hook table itself:
    # Dynamo keeps one version with our hooks and one without, and reuses both from then on.
    plain, _ = plan_counts("model.compile()", ["run"] * 6)
    counts, _ = plan_counts("model.compile()", ["prof", "run", "prof", "run", "prof", "run"])
    assert counts["stats"]["unique_graphs"] == plain["stats"]["unique_graphs"] + 1
    assert not counts.get("graph_break")


def test_the_compiled_model_shows_under_its_own_name(fresh_dynamo):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    compiled = torch.compile(model, backend="aot_eager")
    step = training_step(model, compiled, torch.randn(8, 16))
    step()
    with torchprof.Profiler(labels={compiled: "net"}) as prof:
        step()
    df = prof.df
    modules = df[df.kind == "module"]
    assert list(modules.module) == ["net"] and modules.type.iloc[0] == "Sequential"
    assert not df.type.isin(["OptimizedModule", "GraphModule"]).any()
    assert modules.bwd_cpu_us.iloc[0] > 0 and modules.fwd_cpu_us.iloc[0] > 0
    assert prof.summary["params"] == sum(p.numel() for p in model.parameters())


@pytest.fixture(scope="module")
def inductor_cache(tmp_path_factory):
    """One Inductor code cache for this module's compiles (kernels compiled once per session)."""
    old = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(tmp_path_factory.mktemp("inductor"))
    yield
    if old is None:
        os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
    else:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = old


def compiled_profile(model: nn.Module, x: torch.Tensor):
    """The model compiled with Inductor inside one profiled step (so it is compiled under
    capture), then a second step profiled: ``(that profile, eager profile of the same step)``."""
    import torch._dynamo

    torch._dynamo.reset()
    eager = training_step(model, model, x)
    eager()
    with torchprof.Profiler() as eager_prof:
        eager()
    step = training_step(model, torch.compile(model), x)
    with torchprof.Profiler():
        step()  # compiles
    step()
    with torchprof.Profiler() as prof:
        step()
    return prof, eager_prof


@pytest.mark.slow
def test_layers_inside_a_compiled_cnn_get_forward_and_backward_time_and_exact_macs(inductor_cache, tmp_path):
    torch.manual_seed(0)
    prof, eager = compiled_profile(SmallCNN(), torch.randn(2, 3, 16, 16))
    df = prof.df
    for layer, kind in (("SmallCNN.block1.0", "Conv2d"), ("SmallCNN.block2.0", "Conv2d"), ("SmallCNN.fc", "Linear")):
        row = df.loc[layer]
        assert row.type == kind and row.calls == 1
        assert row.fwd_cpu_us > 0 and row.bwd_cpu_us > 0, layer
        assert f"{layer}/CompiledFunctionBackward" in df.index
    # Kernels that fuse batch norm, ReLU and pooling of several layers go to their common ancestor.
    fused = [p for p in df.index if p.startswith("SmallCNN/") and "cpp_fused" in p]
    assert fused
    s = prof.summary
    assert s["cpu_us"] <= s["wall_us"]
    assert s["macs"] == eager.summary["macs"]  # the graph's matmuls and convolutions, exactly
    # each eager op call counted once (the eager run's FLOPs replayed, the graph's from its map);
    # the model's row holds the backward graph's eager fallback (max pooling's scatter, of
    # unknown cost without shapes): its FLOPs are unknown, not a total that leaves it out
    assert df.loc["SmallCNN", "macs"] == eager.df.loc["SmallCNN", "macs"]
    assert math.isnan(df.loc["SmallCNN", "flops"]) and "aten::scatter_reduce_" in prof.unsupported_ops
    # Without shapes=True only the loss and optimizer ops, outside the model, have unknown FLOPs.
    outside = {"aten::pow", "aten::mean", "aten::add_", "aten::mul", "aten::div"}
    assert set(eager.unsupported_ops) <= outside
    # (and a fallback op Inductor runs eagerly in the backward graph, max pooling's scatter)
    assert set(prof.unsupported_ops) <= outside | {"aten::scatter_reduce_"}
    # A trace written and read back keeps the layer map.
    loaded = torchprof.load_trace(prof.export_chrome_trace(str(tmp_path / "compiled.json.gz")))
    back = loaded.df
    assert back.loc["SmallCNN.block2.0", "bwd_cpu_us"] == pytest.approx(df.loc["SmallCNN.block2.0", "bwd_cpu_us"], rel=1e-6)
    assert loaded.summary["macs"] == s["macs"]


@pytest.mark.slow
def test_layers_inside_a_compiled_transformer_block_get_their_time(inductor_cache):
    torch.manual_seed(0)
    prof, eager = compiled_profile(Block(), torch.randn(2, 8, 32))
    df = prof.df
    for layer in ("Block.qkv", "Block.proj", "Block.fc1", "Block.fc2"):
        assert df.loc[layer, "type"] == "Linear"
        assert df.loc[layer, "fwd_cpu_us"] > 0 and df.loc[layer, "bwd_cpu_us"] > 0, layer
        assert df.loc[layer, "macs"] == eager.df.loc[layer, "macs"], layer
    s = prof.summary
    assert s["cpu_us"] <= s["wall_us"]
    assert s["macs"] == eager.summary["macs"]
    assert df.loc["Block", "flops"] == pytest.approx(eager.df.loc["Block", "flops"], rel=0.01)


@pytest.mark.slow
def test_the_command_line_profiles_a_script_that_compiles_its_model(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import torch
        from torch import nn
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
        compiled = torch.compile(model, backend="aot_eager")
        for _ in range(2):
            compiled(torch.randn(4, 8)).sum().backward()
    """))
    done = subprocess.run([sys.executable, "-m", "torchprof", "--min-pct", "0", str(script)], capture_output=True,
                          text=True, cwd=tmp_path, env={**os.environ, "NO_COLOR": "1"}, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "├──Sequential" in done.stdout.replace("└──", "├──")
    assert "Traceback" not in done.stderr and "OptimizedModule" not in done.stdout
    assert str(REPO) not in done.stderr


@pytest.mark.slow
def test_a_graph_compiled_before_profiling_keeps_its_time_on_the_module_and_says_its_flops_are_unknown(inductor_cache):
    import torch._dynamo

    from torchprof._tree.finish import UNMAPPED_GRAPH

    torch._dynamo.reset()
    torch.manual_seed(0)
    model = SmallCNN()
    step = training_step(model, torch.compile(model), torch.randn(2, 3, 16, 16))
    step()  # compiled with no Profiler running: no layer map
    with torchprof.Profiler() as prof:
        step()
    df = prof.df
    module = df.loc["SmallCNN"]
    assert module.fwd_cpu_us > 0 and module.bwd_cpu_us > 0  # the compiled graph's time, forward and backward
    assert "SmallCNN.block1.0" not in df.index  # no layer is invented
    assert prof.unsupported_ops.get(UNMAPPED_GRAPH) == 2  # the forward and the backward graph ran once
    assert prof.summary["cpu_us"] <= prof.summary["wall_us"]
    # The remedy the listing names: compile under torchprof.capture_compiled(), profile later.
    torch._dynamo.reset()
    step = training_step(model, torch.compile(model), torch.randn(2, 3, 16, 16))
    with torchprof.capture_compiled():
        step()
    with torchprof.Profiler() as again:
        step()
    assert again.df.loc["SmallCNN.block1.0", "bwd_cpu_us"] > 0 and UNMAPPED_GRAPH not in again.unsupported_ops
