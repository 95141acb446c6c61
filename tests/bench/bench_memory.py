"""Memory profiling overhead: a torchvision training step (forward, backward, SGD with momentum)
under ``torchprof.Profiler(memory=True)`` vs a bare ``torch.profiler.profile(profile_memory=True)``
with the same options, measured side by side in one process.

    .venv/bin/python tests/bench/bench_memory.py [--model resnet18] [--rounds 15]

Each round times both variants once, in a shuffled order, as the wall time of the whole ``with``
block (entering, one step, leaving: torchprof's optimizer-step hook and its look at the
parameters when the profiler stops included). Reading results is lazy in both, so it is timed
apart: torch's ``key_averages()`` vs torchprof's tree (``prof.df``) and ``memory_breakdown()``.
Prints medians and the ratio torchprof / torch.profiler. Target: <= 1.15.
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
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)  # momentum: optimizer state
    x = torch.randn(args.batch, 3, args.size, args.size)

    def step() -> None:
        model(x).sum().backward()
        opt.step()
        opt.zero_grad()

    variants = {
        "torch.profiler memory": lambda: profile(activities=[ProfilerActivity.CPU], record_shapes=True, profile_memory=True),
        "torchprof memory": lambda: torchprof.Profiler(memory=True),
    }
    for _ in range(2):  # warm-up: allocator, oneDNN kernels, lazy imports, the optimizer's state
        for make in variants.values():
            with make():
                step()
    times: dict[str, list[float]] = {name: [] for name in variants}
    reads: dict[str, list[float]] = {"key_averages": [], "df": [], "memory_breakdown": []}
    rng = random.Random(0)
    for _ in range(args.rounds):
        order = list(variants)
        rng.shuffle(order)
        for name in order:
            ctx = variants[name]()
            t0 = time.perf_counter()
            with ctx:
                step()
            times[name].append(time.perf_counter() - t0)
            t1 = time.perf_counter()
            if name == "torch.profiler memory":
                ctx.key_averages()
                reads["key_averages"].append(time.perf_counter() - t1)
            else:
                ctx.df
                t2 = time.perf_counter()
                ctx.memory_breakdown()
                reads["df"].append(t2 - t1)
                reads["memory_breakdown"].append(time.perf_counter() - t2)
    med = {name: statistics.median(v) * 1e3 for name, v in times.items()}
    print(f"{args.model}, batch {args.batch}x3x{args.size}x{args.size}, {args.rounds} rounds, median wall time of the with block:")
    for name, ms in med.items():
        print(f"  {name:<24} {ms:8.1f} ms")
    ratio = med["torchprof memory"] / med["torch.profiler memory"]
    print(f"overhead ratio torchprof(memory=True) / torch.profiler(profile_memory=True): {ratio:.3f}   (target <= 1.15)")
    print("reading results, median: " + ", ".join(f"{k} {statistics.median(v) * 1e3:.1f} ms" for k, v in reads.items()))


if __name__ == "__main__":
    main()
