"""Profiling overhead: a torchvision training step under torchprof.Profiler vs a bare
torch.profiler.profile with the same options, measured side by side in one run.

    .venv/bin/python tests/bench/bench_overhead.py [--model resnet18] [--rounds 15]

Each round times every variant once, in a shuffled order, as the wall time of the whole ``with``
block (entering, one forward+backward+optimizer step, leaving). Reading results is lazy in both
(torch builds its FunctionEvents on first use, torchprof its tree), so it is timed separately.
Prints medians and the ratio torchprof / torch.profiler. Target: <= 1.05.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()

    import torch
    import torchvision
    from torch.profiler import ProfilerActivity, profile

    import torchprof

    torch.manual_seed(0)
    model = torchvision.models.get_model(args.model, weights=None)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(args.batch, 3, args.size, args.size)

    def step() -> None:
        model(x).sum().backward()
        opt.step()
        opt.zero_grad()

    def bare(memory: bool):
        return profile(activities=[ProfilerActivity.CPU], record_shapes=True, profile_memory=memory)

    variants = {
        "no profiler": lambda: None,
        "torch.profiler": lambda: bare(False),
        "torchprof": lambda: torchprof.Profiler(),
        "torch.profiler memory": lambda: bare(True),
        "torchprof memory": lambda: torchprof.Profiler(memory=True),
    }
    for _ in range(2):  # warm-up: allocator, oneDNN kernels, lazy imports
        for make in variants.values():
            ctx = make()
            if ctx is None:
                step()
            else:
                with ctx:
                    step()
    times: dict[str, list[float]] = {name: [] for name in variants}
    results: dict[str, list[float]] = {"torch.profiler": [], "torchprof": []}
    rng = random.Random(0)
    for _ in range(args.rounds):
        order = list(variants)
        rng.shuffle(order)
        for name in order:
            ctx = variants[name]()
            t0 = time.perf_counter()
            if ctx is None:
                step()
            else:
                with ctx:
                    step()
            times[name].append(time.perf_counter() - t0)
            if name == "torch.profiler":
                t1 = time.perf_counter()
                ctx.key_averages()
                results[name].append(time.perf_counter() - t1)
            elif name == "torchprof":
                t1 = time.perf_counter()
                ctx.df
                results[name].append(time.perf_counter() - t1)
    med = {name: statistics.median(v) * 1e3 for name, v in times.items()}
    print(f"{args.model}, batch {args.batch}x3x{args.size}x{args.size}, {args.rounds} rounds, median wall time of the with block:")
    for name, ms in med.items():
        print(f"  {name:<24} {ms:8.1f} ms")
    print(f"overhead ratio torchprof / torch.profiler (same options): {med['torchprof'] / med['torch.profiler']:.3f}   (target <= 1.05)")
    print(f"  with memory=True:                                      {med['torchprof memory'] / med['torch.profiler memory']:.3f}")
    print("reading results, median: torch key_averages() "
          f"{statistics.median(results['torch.profiler']) * 1e3:.1f} ms, torchprof prof.df {statistics.median(results['torchprof']) * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
