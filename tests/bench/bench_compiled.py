"""What profiling a ``torch.compile``d model costs, measured side by side in one run.

    .venv/bin/python tests/bench/bench_compiled.py [--rounds 9]

Two costs:
1. **Steady state:** a compiled training step (small CNN, transformer block; Inductor on the CPU)
   under ``torchprof.Profiler()`` vs a bare ``torch.profiler.profile()`` (its defaults, which
   are what torchprof's default records: no shapes) and vs no profiler. Each round times every variant once, shuffled;
   medians are printed with the ratio torchprof / torch.profiler.
2. **First compile:** the first (compiling) step of a fresh ``torch.compile``: cold (empty
   caches), again after ``torch._dynamo.reset()`` (warm: Inductor's FX-graph cache hits), and
   under ``capture_compiled()`` (what a Profiler does): capture makes Inductor lower the graphs
   again rather than reuse its FX-graph cache, so compare it with the warm compile.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="torchprof-bench-inductor-"))

    import torch
    import torch._dynamo
    from torch.profiler import ProfilerActivity, profile

    import torchprof

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
    from compiled_models import Block, SmallCNN  # models of the compile tests

    cases = {"SmallCNN (2x3x32x32)": (SmallCNN, (2, 3, 32, 32)), "transformer block (4x32x32)": (Block, (4, 32, 32))}
    print(f"{'model':28} {'variant':16} {'median ms':>10} {'ratio':>7}")
    for label, (make, shape) in cases.items():
        torch._dynamo.reset()
        torch.manual_seed(0)
        model = make()
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        x = torch.randn(*shape)

        def build(model=model, opt=opt, x=x):  # bound now: one model per case
            compiled = torch.compile(model)

            def train_step() -> None:
                compiled(x).pow(2).mean().backward()
                opt.step()
                opt.zero_grad()

            return train_step

        # First compile: cold, warm (after a reset), then under capture.
        compile_s = []
        for _ in range(2):
            torch._dynamo.reset()
            step = build()
            t0 = time.perf_counter()
            step()
            compile_s.append(time.perf_counter() - t0)
        cold, plain_compile = compile_s
        torch._dynamo.reset()
        step = build()
        t0 = time.perf_counter()
        with torchprof.capture_compiled():
            step()
        captured_compile = time.perf_counter() - t0

        variants = {
            "no profiler": lambda: None,
            "torch.profiler": lambda: profile(activities=[ProfilerActivity.CPU]),
            "torchprof": lambda: torchprof.Profiler(),
        }
        times: dict[str, list[float]] = {name: [] for name in variants}
        for round_ in range(args.rounds + 2):  # two warm-up rounds
            order = list(variants)
            random.shuffle(order)
            for name in order:
                ctx = variants[name]()
                t0 = time.perf_counter()
                if ctx is None:
                    step()
                else:
                    with ctx:
                        step()
                elapsed = time.perf_counter() - t0
                if round_ >= 2:
                    times[name].append(elapsed)
        medians = {name: statistics.median(ts) * 1e3 for name, ts in times.items()}
        for name, ms in medians.items():
            ratio = ms / medians["torch.profiler"]
            print(f"{label:28} {name:16} {ms:10.2f} {ratio:7.2f}")
        print(f"{label:28} {'first compile':16} cold {cold:.1f}s, warm {plain_compile:.1f}s, under capture "
              f"{captured_compile:.1f}s ({captured_compile / plain_compile:.2f}x warm)")


if __name__ == "__main__":
    main()
