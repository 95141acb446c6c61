"""What recording a few steps of a long run costs the rest of it: the HF ``Trainer`` with
``TorchprofCallback``, Lightning with ``TorchprofProfiler`` and a plain loop with
``torchprof.Profiler(steps=...)`` (the accelerate recipe), each against the same run without
torchprof, side by side in one process (rounds alternate which goes first).

    .venv/bin/python tests/bench/bench_integrations.py [--steps 60] [--rounds 5] [--only hf lightning loop]

Per step: the main thread's CPU time (``time.thread_time``, one intra-op thread: what other
processes on a shared machine do not blur) and the wall time, from one step's end to the next as
the trainer reports it. Steps 1-5 are left out of every figure (the first steps warm up). For each
round the ratio of medians is taken over the same step numbers of both runs:

- outside: the steps torchprof does not record, apart from the warm-up step before the window
  and the step right after it (which is where the recorded cycle is folded into the tree);
- between: the loop's steps between two windows (``steps=[20-22, 40-42]``), where the Profiler
  runs with its hooks out (only for the loop);
- inside: the recorded steps;
- after: the step right after the window (its whole cost, in ms, over the baseline's);
- ours: the time spent in torchprof's own entry points per step (the callback's events, the
  Lightning profiler's ``start``/``stop`` on each action, ``prof.step()``), measured around each
  call: the part of the cost that machine noise does not blur.
Prints the median over the rounds and their range.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import random
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "jobs"))

WINDOW = [20, 21, 22]
SECOND = [40, 41, 42]
SKIP = 5


class Meter:
    """Time spent in torchprof's own entry points (the callback's events, Lightning's start/stop,
    ``prof.step()``), per step: ``spent[step]`` in seconds, measured around each call."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.spent: dict[int, float] = {}

    def wrap(self, owner: Any, name: str) -> None:
        method = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                step = len(self.clock.times) + 1  # the step running now
                self.spent[step] = self.spent.get(step, 0.0) + time.perf_counter() - t0

        setattr(owner, name, timed)


class Clock:
    """Marks the end of each step: ``times[step] = (cpu s, wall s)`` since the previous mark."""

    def __init__(self) -> None:
        self.times: dict[int, tuple[float, float]] = {}
        self._last: tuple[float, float] | None = None

    def mark(self, step: int) -> None:
        now = (time.thread_time(), time.perf_counter())
        if self._last is not None:
            self.times[step] = (now[0] - self._last[0], now[1] - self._last[1])
        self._last = now


def hf_run(steps: int, profiled: bool, meters: list[Meter]) -> dict[int, tuple[float, float]]:
    import trainers
    from transformers import TrainerCallback

    from torchprof.integrations.hf import TorchprofCallback

    clock = Clock()

    class Timer(TrainerCallback):
        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            clock.mark(0)

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            clock.mark(state.global_step)

    callbacks: list[Any] = [Timer()]
    if profiled:
        callback = TorchprofCallback(steps=WINDOW, display=False)
        meter = Meter(clock)
        for event in [name for name in dir(callback) if name.startswith("on_")]:
            meter.wrap(callback, event)  # every event the handler calls, the inherited no-ops too
        meters.append(meter)
        callbacks.append(callback)
    with contextlib.redirect_stdout(io.StringIO()):
        trainers.hf_train(callbacks, max_steps=steps, accumulate=1, output_dir=tempfile.gettempdir())
    return clock.times


def lightning_run(steps: int, profiled: bool, meters: list[Meter]) -> dict[int, tuple[float, float]]:
    import lightning.pytorch as pl
    import trainers

    from torchprof.integrations.lightning import TorchprofProfiler

    clock = Clock()

    class Timer(pl.Callback):
        def on_train_start(self, trainer: Any, module: Any) -> None:
            clock.mark(0)

        def on_train_batch_end(self, trainer: Any, module: Any, *args: Any) -> None:
            clock.mark(trainer.global_step)

    profiler = TorchprofProfiler(steps=WINDOW, display=False) if profiled else None
    if profiler is not None:
        meter = Meter(clock)
        meter.wrap(profiler, "start")
        meter.wrap(profiler, "stop")
        meters.append(meter)
    with contextlib.redirect_stdout(io.StringIO()):
        trainers.lightning_train(profiler, max_steps=steps, accumulate=1, callbacks=[Timer()])
    return clock.times


def loop_run(steps: int, profiled: bool, meters: list[Meter]) -> dict[int, tuple[float, float]]:
    import torch
    from torch import nn

    import torchprof

    torch.manual_seed(0)
    import trainers

    width = 64 if trainers.WIDTH == 32 else 512  # the tests' size, or the benchmark's
    model = nn.Sequential(*[m for _ in range(6) for m in (nn.Linear(width, width), nn.ReLU())], nn.Linear(width, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = [(torch.randn(32, width), torch.randint(0, 10, (32,))) for _ in range(8)]
    clock = Clock()
    prof = torchprof.Profiler(steps=WINDOW + SECOND, first_step=1) if profiled else None
    if prof is not None:
        meter = Meter(clock)
        meter.wrap(prof, "step")
        meters.append(meter)
    with prof if prof is not None else contextlib.nullcontext():
        clock.mark(0)
        for step in range(1, steps + 1):
            x, y = data[step % len(data)]
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            opt.zero_grad()
            clock.mark(step)
            if prof is not None:
                prof.step()
    if prof is not None:
        _ = prof.result.tree  # what reading the profile costs happens here, not in the loop
    return clock.times


RUNS: dict[str, Callable[[int, bool, list[Meter]], dict[int, tuple[float, float]]]] = {"hf": hf_run, "lightning": lightning_run, "loop": loop_run}


def ratios(base: dict[int, tuple[float, float]], prof: dict[int, tuple[float, float]], steps: list[int], which: int) -> float:
    shared = [s for s in steps if s in base and s in prof]
    return statistics.median(prof[s][which] for s in shared) / statistics.median(base[s][which] for s in shared)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", nargs="*", default=list(RUNS), choices=list(RUNS))
    parser.add_argument("--tiny", action="store_true", help="the tests' tiny models: sub-ms steps, the worst case for a fixed cost per step")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(1)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "jobs"))
    import trainers

    trainers.quiet_frameworks()
    warnings.filterwarnings("ignore", message=".*were not recorded.*")  # the short warm-up runs
    if not args.tiny:  # steps of a few to tens of ms, as small real models take; --tiny: the tests' models
        trainers.EMBD, trainers.LAYERS, trainers.SEQ, trainers.BATCH = 128, 4, 64, 8
        trainers.FEATURES, trainers.WIDTH, trainers.ROWS = 256, 1024, 64
    last = args.steps
    after = WINDOW[-1] + 1
    window_and_warmup = set(range(WINDOW[0] - 1, after + 1))
    second = set(range(SECOND[0] - 1, SECOND[-1] + 2))
    print(f"{args.steps} steps per run, recording steps {WINDOW[0]}-{WINDOW[-1]} (the loop also {SECOND[0]}-{SECOND[-1]}), "
          f"{args.rounds} rounds; ratios of medians, profiled / no torchprof (CPU time of the main thread; wall)")  # fmt: skip
    for name in args.only:
        run = RUNS[name]
        run(min(args.steps, 8), True, [])  # imports and first-use costs out of the figures
        run(min(args.steps, 8), False, [])
        outside = [s for s in range(SKIP + 1, last + 1) if s not in window_and_warmup and s not in second]
        between = list(range(after + 2, SECOND[0] - 1)) if name == "loop" else []
        figures: dict[str, list[float]] = {}
        for _ in range(args.rounds):
            order = [False, True]
            random.shuffle(order)
            meters: list[Meter] = []
            got = {profiled: run(args.steps, profiled, meters) for profiled in order}
            base, prof = got[False], got[True]
            spent = meters[0].spent
            figures.setdefault("ours outside µs/step", []).append(
                statistics.median(spent.get(s, 0.0) for s in outside if s not in between) * 1e6)
            if between:
                figures.setdefault("ours between µs/step", []).append(statistics.median(spent.get(s, 0.0) for s in between) * 1e6)
            for label, steps in (("outside", [s for s in outside if s not in between]), ("between", between), ("inside", WINDOW)):
                if steps:
                    figures.setdefault(f"{label} cpu", []).append(ratios(base, prof, steps, 0))
                    figures.setdefault(f"{label} wall", []).append(ratios(base, prof, steps, 1))
            figures.setdefault("after +ms", []).append((prof[after][1] - base[after][1]) * 1e3)
            figures.setdefault("step ms", []).append(statistics.median(base[s][1] for s in outside) * 1e3)
        parts = []
        for label, values in figures.items():
            unit = "" if label.endswith(("ms", "/step")) else "x"
            parts.append(f"{label} {statistics.median(values):.3f}{unit} ({min(values):.3f}-{max(values):.3f})")
        print(f"{name:9s} " + " · ".join(parts))


if __name__ == "__main__":
    main()
