"""Profiling overhead and per-layer distortion, measured side by side in one process.

    .venv/bin/python tests/bench/bench_overhead.py                  # EfficientNet-B0 and a small transformer
    .venv/bin/python tests/bench/bench_overhead.py --model efficientnet_b0 --rounds 5

For each model (EfficientNet-B0 from torchvision, weights=None, batch 2x3x96x96; a 4-layer
transformer encoder, batch 8x32 tokens), a block of ``--steps`` training steps runs under each
variant; every round times each variant once, in a shuffled order, and the best round counts.
It prints:

1. The wall time of the whole ``with`` block (entering, the steps, leaving), split into the steps
   and the exit (where torch post-processes what it recorded), for: no profiler,
   ``torch.profiler.profile()`` with its defaults, ``torchprof.Profiler()`` with its defaults
   (FLOPs on: every op's shapes recorded), ``Profiler(flops=False)`` (no shapes),
   ``Profiler(shapes=True)`` (the module calls' shapes too) and
   ``torch.profiler.profile(record_shapes=True)``; and the ratio of torchprof's default to
   torch's defaults.
2. The per-layer distortion: each module's own CPU time (its ops, forward and backward, not its
   child modules), best of the rounds, under the default Profiler divided by the same under
   ``Profiler(flops=False)``, which runs torch's profiler without shapes with the same module hooks
   (torch alone has no module ranges to compare); median and p90 over modules (target median
   <= 1.05), and the same ratio per op name against bare ``torch.profiler`` defaults
   (``key_averages()`` self CPU time, no hooks at all).
3. Time to a printed table after the block: ``str(prof)`` (raw results -> tree, FLOPs counted
   -> table) against torch's ``key_averages().table()`` on the same recorded run (target <= 0.3x).

``bench_flops.py`` measures the same on steps of 20 ms or more, and how exact the FLOPs are.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import time
from collections.abc import Callable
from typing import Any


def efficientnet() -> tuple[Any, Callable[[], None]]:
    import torch
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.efficientnet_b0(weights=None)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(2, 3, 96, 96)

    def step() -> None:
        model(x).sum().backward()
        opt.step()
        opt.zero_grad()

    return model, step


def transformer() -> tuple[Any, Callable[[], None]]:
    import torch

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, batch_first=True)
    model = torch.nn.Sequential(torch.nn.Embedding(100, 64), torch.nn.TransformerEncoder(layer, num_layers=4), torch.nn.Linear(64, 100))
    opt = torch.optim.AdamW(model.parameters())
    x = torch.randint(0, 100, (8, 32))

    def step() -> None:
        model(x).float().mean().backward()
        opt.step()
        opt.zero_grad()

    return model, step


MODELS = {"efficientnet_b0": efficientnet, "transformer": transformer}


def quantile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * (len(values) - 1) + 0.5))]


def layer_times(prof: Any) -> dict[str, float]:
    """Each module's own CPU time in µs (forward and backward, child modules excluded)."""
    df = prof.df
    mods = df[df["kind"] == "module"]
    own = mods["layer_self_cpu_us"].fillna(0) + mods["layer_bwd_self_cpu_us"].fillna(0)
    return dict(zip(mods["path"], own))


def op_times(torch_prof: Any) -> dict[str, float]:
    return {e.key: e.self_cpu_time_total for e in torch_prof.key_averages()}


def bench(model_name: str, steps: int, rounds: int) -> None:
    from torch.profiler import profile

    import torchprof

    _, step = MODELS[model_name]()

    def block() -> None:
        for _ in range(steps):
            step()

    variants: dict[str, Callable[[], Any]] = {
        "no profiler": lambda: None,
        "torch.profiler defaults": lambda: profile(),
        "torchprof.Profiler() defaults": lambda: torchprof.Profiler(),
        "torchprof.Profiler(flops=False)": lambda: torchprof.Profiler(flops=False),
        "torch.profiler record_shapes=True": lambda: profile(record_shapes=True),
        "torchprof.Profiler(shapes=True)": lambda: torchprof.Profiler(shapes=True),
    }
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
    layers: dict[str, dict[str, list[float]]] = {"default": {}, "flops=False": {}}
    ops: dict[str, dict[str, list[float]]] = {"default": {}, "torch": {}}
    to_table: list[tuple[float, float]] = []

    def keep(into: dict[str, list[float]], values: dict[str, float]) -> None:
        for key, v in values.items():
            into.setdefault(key, []).append(v)

    rng = random.Random(0)
    for r in range(rounds + 1):  # round 0 warms up (allocator, oneDNN kernels, lazy imports)
        order = list(variants)
        rng.shuffle(order)
        for name in order:
            ctx = variants[name]()
            gc.collect()
            t0 = time.perf_counter()
            if ctx is None:
                block()
                t1 = t2 = time.perf_counter()
            else:
                ctx.__enter__()
                block()
                t1 = time.perf_counter()
                ctx.__exit__(None, None, None)
                t2 = time.perf_counter()
            if r == 0:
                continue
            times[name].append((t1 - t0, t2 - t1))
            if name == "torchprof.Profiler() defaults":
                t3 = time.perf_counter()
                str(ctx)
                t4 = time.perf_counter()
                ctx.torch_profile.key_averages().table()
                t5 = time.perf_counter()
                to_table.append((t4 - t3, t5 - t4))
                keep(layers["default"], layer_times(ctx))
                keep(ops["default"], op_times(ctx.torch_profile))
            elif name == "torchprof.Profiler(flops=False)":
                keep(layers["flops=False"], layer_times(ctx))
            elif name == "torch.profiler defaults":
                keep(ops["torch"], op_times(ctx))
            del ctx

    print(f"\n{model_name}: {steps} training step(s) per block, best of {rounds} rounds")
    best = {name: min(v, key=lambda t: t[0] + t[1]) for name, v in times.items()}
    base = sum(best["torch.profiler defaults"])
    print(f"  {'run':<36} {'block ms':>9} {'steps ms':>9} {'exit ms':>8} {'/ torch defaults':>17}")
    for name, (run, stop) in best.items():
        print(f"  {name:<36} {(run + stop) * 1e3:9.1f} {run * 1e3:9.1f} {stop * 1e3:8.1f} {(run + stop) / base:17.2f}")
    ratio = sum(best["torchprof.Profiler() defaults"]) / base
    print(f"  overhead: torchprof default / torch.profiler defaults = {ratio:.2f}x")

    def distortion(a: dict[str, list[float]], b: dict[str, list[float]], floor_us: float) -> list[float]:
        return [min(a[k]) / min(b[k]) for k in a if k in b and min(b[k]) >= floor_us]

    per_layer = distortion(layers["default"], layers["flops=False"], 20.0)
    per_op = distortion(ops["default"], ops["torch"], 20.0)
    print(f"  per-layer own CPU time, default / flops=False (no shapes), {len(per_layer)} modules >= 20 µs: "
          f"median {statistics.median(per_layer):.3f}, p90 {quantile(per_layer, 0.9):.3f} (target median <= 1.05)")
    print(f"  per-op self CPU time, default / bare torch.profiler defaults, {len(per_op)} ops >= 20 µs: "
          f"median {statistics.median(per_op):.3f}, p90 {quantile(per_op, 0.9):.3f}")
    ours, theirs = min(t for t, _ in to_table), min(t for _, t in to_table)
    print(f"  time to a printed table: str(prof) {ours * 1e3:.0f} ms, torch key_averages().table() {theirs * 1e3:.0f} ms "
          f"= {ours / theirs:.2f}x (target <= 0.3)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=[*MODELS, "both"], default="both")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads (1: steadier figures on a shared machine)")
    args = parser.parse_args()
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    import torchprof._capture.quiet  # noqa: F401  (import cost is not profiling overhead)

    for name in MODELS if args.model == "both" else [args.model]:
        bench(name, args.steps, args.rounds)


if __name__ == "__main__":
    main()
