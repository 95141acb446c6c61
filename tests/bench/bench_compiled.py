"""What profiling a ``torch.compile``d model costs, measured side by side in one run.

    .venv/bin/python tests/bench/bench_compiled.py [--rounds 201] [--stack-rounds 51] [--cold-rounds 3] [--threads 1] [--torch-first]

For a small CNN, a transformer block and a stack of four wider blocks (Inductor on the CPU; the
stack's step takes milliseconds, as a real model's does, where the small ones' take about one),
each training step in a ``with``
block under ``torchprof.Profiler()`` (every op's shapes recorded, for its FLOPs),
``torchprof.Profiler(flops=False)`` (the layers' time alone: no shapes), a bare
``torch.profiler.profile()`` (its defaults), the same with ``record_shapes=True`` (torch's own
cost of what torchprof's default records) and no profiler; each round runs every variant once,
shuffled; medians of the wall time and of the process's CPU time of ``with <profiler>(): step()``
(the profiler's construction included) are printed with the ratio torchprof / torch.profiler,
what torchprof adds to torch.profiler's wall time, in ms, and the target for a warm step: at most
0.5 ms plus 5% of torch.profiler's step:

1. **warm:** the model compiled and warmed up before the block (steady-state profiling);
2. **cold:** the first step after ``torch._dynamo.reset()``, which compiles inside the block
   (Inductor's caches warm, as after the first compile of a session);
3. **first read:** reading the warm profile the first time (``prof.df``: the layer maps of its
   graphs are learnt then, outside the block) and again (maps kept).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any


def timed(variants: dict[str, Callable[[], Any]], step: Callable[[], None], rounds: int, skip: int,
          before: Callable[[], None] | None = None) -> dict[str, tuple[float, float]]:  # fmt: skip
    """Median (wall s, CPU s) of ``step`` in each variant's block, rounds shuffled."""
    wall: dict[str, list[float]] = {name: [] for name in variants}
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    for round_ in range(rounds + skip):
        order = list(variants)
        random.shuffle(order)
        for name in order:
            if before is not None:
                before()
            # From the profiler's construction on, as a user's ``with Profiler():`` pays it (each
            # tool makes some of its set-up in its constructor: torch makes its own there).
            t0, c0 = time.perf_counter(), time.process_time()
            ctx = variants[name]()
            if ctx is None:
                step()
            else:
                with ctx:
                    step()
            if round_ >= skip:
                wall[name].append(time.perf_counter() - t0)
                cpu[name].append(time.process_time() - c0)
    return {name: (statistics.median(wall[name]), statistics.median(cpu[name])) for name in variants}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=201,
                        help="warm rounds (a warm step takes milliseconds: many rounds keep the medians steady)")  # fmt: skip
    parser.add_argument("--cold-rounds", type=int, default=3)
    parser.add_argument("--stack-rounds", type=int, default=51, help="warm rounds of the wider stack (its step is slower)")
    parser.add_argument("--torch-first", action="store_true",
                        help="start kineto with a torch.profiler session before torchprof's first (kineto then keeps "
                             "logging, and torchprof swaps fd 2 around each start and stop); by default torchprof's "
                             "first start is kineto's, and sets it silent for the process")  # fmt: skip
    parser.add_argument("--threads", type=int, default=1,
                        help="intra-op threads (default 1: on a shared machine OpenMP's spinning threads swamp the timings)")  # fmt: skip
    args = parser.parse_args()
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="torchprof-bench-inductor-"))

    import torch

    torch.set_num_threads(args.threads)
    import torch._dynamo
    from torch.profiler import ProfilerActivity, profile

    import torchprof

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
    from compiled_models import Block, SmallCNN  # models of the compile tests

    variants = {
        "no profiler": lambda: None,
        "torch.profiler": lambda: profile(activities=[ProfilerActivity.CPU]),
        # The same recording as torchprof's default: every op's shapes (torch's own cost of them).
        "torch shapes": lambda: profile(activities=[ProfilerActivity.CPU], record_shapes=True),
        "torchprof": lambda: torchprof.Profiler(),
        # The layers' time alone, without the shapes FLOPs are counted from.
        "flops=False": lambda: torchprof.Profiler(flops=False),
    }
    cases = {
        "SmallCNN (2x3x32x32)": (SmallCNN, (2, 3, 32, 32), args.rounds),
        "transformer block (4x32x32)": (Block, (4, 32, 32), args.rounds),
        "4 blocks, d=128 (4x64x128)": (lambda: torch.nn.Sequential(*(Block(128, 8) for _ in range(4))), (4, 64, 128),
                                       args.stack_rounds),
    }
    # Which session starts kineto decides how it logs for the whole process (docs/limits.md):
    # decided here, before any timed round, not by whichever variant a shuffle puts first.
    with profile(activities=[ProfilerActivity.CPU]) if args.torch_first else torchprof.Profiler():
        torch.ones(1).sum()
    with torchprof.Profiler():  # the stop after torchprof's first start completes its judgement
        torch.ones(1).sum()
    from torchprof._capture import quiet

    print("kineto:", "silent (set by torchprof's first start)" if quiet._kineto_silent == [True]
          else "logging (fd 2 swapped around torch's start and stop)")  # fmt: skip
    print(f"{'model':28} {'step':6} {'variant':15} {'wall ms':>9} {'ratio':>6} {'added':>7} {'CPU ms':>9} {'ratio':>6} {'target':>8}")
    for label, (make, shape, rounds) in cases.items():
        torch.manual_seed(0)
        model = make()
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        x = torch.randn(*shape)
        compiled: list[Any] = []

        def compile_model() -> None:
            torch._dynamo.reset()
            compiled[:] = [torch.compile(model)]  # noqa: B023 - this case's model

        def step() -> None:
            compiled[0](x).pow(2).mean().backward()  # noqa: B023
            opt.step()  # noqa: B023
            opt.zero_grad()  # noqa: B023

        compile_model()
        step()  # compiles (Inductor's caches now hold this model's graphs)
        results = {"warm": timed(variants, step, rounds, skip=10)}
        if args.cold_rounds > 0:
            results["cold"] = timed(variants, step, args.cold_rounds, skip=0, before=compile_model)
        for kind, medians in results.items():
            base_wall, base_cpu = medians["torch.profiler"]
            allowed = 0.5 + 0.05 * base_wall * 1e3  # ms above torch.profiler a warm step may cost
            shapes_wall = medians["torch shapes"][0]
            for name, (wall, cpu) in medians.items():
                added = (wall - base_wall) * 1e3
                verdict = "" if kind != "warm" or not name.startswith("torchprof") else (
                    f"{'met' if added <= allowed else 'missed'} {allowed:.2f}")
                if kind == "warm" and name == "torchprof":  # and against the same recording
                    verdict += f"; {(wall - shapes_wall) * 1e3:+.2f} vs torch shapes"
                print(f"{label:28} {kind:6} {name:15} {wall * 1e3:9.2f} {wall / base_wall:6.2f} {added:7.2f} {cpu * 1e3:9.2f} "
                      f"{cpu / base_cpu:6.2f} {verdict:>8}")
        compile_model()
        step()
        step()
        with torchprof.Profiler() as prof:
            step()
        t0 = time.perf_counter()
        prof.df
        first = time.perf_counter() - t0
        with torchprof.Profiler() as again:
            step()
        t0 = time.perf_counter()
        again.df
        later = time.perf_counter() - t0
        print(f"{label:28} first read of a warm profile {first:.2f}s (layer maps learnt), a later profile's {later:.3f}s")


if __name__ == "__main__":
    main()
