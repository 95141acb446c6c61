"""Trace -> tree -> DataFrame speed, side by side with torch's own path on the same trace.

    .venv/bin/python tests/bench/bench_tree.py            # default sizes up to ~1M events
    .venv/bin/python tests/bench/bench_tree.py --quick    # small sizes only
    .venv/bin/python tests/bench/bench_tree.py --steps 5 20 240 --split   # ~20k/85k/1M events, cProfile split

For each run of a small Transformer training loop (N steps) it records one profile with
torchprof.Profiler and times, on that same recorded trace:
  ours   - the profiler's raw results -> column records -> layer tree -> DataFrame
  torch  - ``prof.events()`` (FunctionEvent objects), torch's path to anything per-event
  file   - the same trace exported to chrome-trace JSON and read back with load_trace
and prints µs per event and the ratio torch/ours, and the time of the FLOP replay (the root
modules' calls run again on meta copies: once per run, not per event). Target: ours <= 4
µs/event, linear in size.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import time


def record(steps: int):
    import torch

    import torchprof

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, batch_first=True)
    model = torch.nn.Sequential(torch.nn.Embedding(100, 64), torch.nn.TransformerEncoder(layer, num_layers=4), torch.nn.Linear(64, 100))
    opt = torch.optim.AdamW(model.parameters())
    x = torch.randint(0, 100, (8, 32))
    with torchprof.Profiler() as prof:
        for _ in range(steps):
            loss = model(x).float().mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
    return prof


def ours(prof) -> tuple[float, int, int]:
    """Seconds for raw results -> DataFrame, number of events, number of tree nodes."""
    gc.collect()
    t0 = time.perf_counter()
    n, rows = build(prof)
    elapsed = time.perf_counter() - t0
    return elapsed, n, rows


def build(prof) -> tuple[int, int]:
    """The timed work: raw results -> columns -> tree -> DataFrame (events, rows)."""
    from torchprof._capture.kineto import result_columns
    from torchprof._gc import paused_gc
    from torchprof._tree.builder import TreeBuilder
    from torchprof._views.frame import to_dataframe

    result = prof.torch_profile.profiler.kineto_results
    with paused_gc():  # as Profile.tree does
        cols = result_columns(result, shapes=prof.options.shapes)
        builder = TreeBuilder(modules=prof._session.modules)
        builder.add(cols)
        tree = builder.finish()
        df = to_dataframe(tree)
    return len(cols), len(df)


def replay_seconds(prof) -> float:
    """The FLOP replay of the root modules' calls (no shapes recorded): once per run, whatever
    its length (each distinct call signature is replayed once), so not part of the per-event cost."""
    session = prof._session
    gc.collect()
    t0 = time.perf_counter()
    session.replays(sorted(session._calls.roots))
    return time.perf_counter() - t0


def torch_events(prof) -> float:
    gc.collect()
    t0 = time.perf_counter()
    prof.torch_profile.events()
    return time.perf_counter() - t0


def from_file(prof) -> float:
    import torchprof

    with tempfile.TemporaryDirectory() as tmp:
        path = prof.export_chrome_trace(os.path.join(tmp, "trace.json"))
        gc.collect()
        t0 = time.perf_counter()
        torchprof.load_trace(path).df
        return time.perf_counter() - t0


def split(prof) -> None:
    """Where ours() spends its time, by phase (own time of the functions of each module)."""
    import cProfile
    import pstats

    gc.collect()
    profiler = cProfile.Profile()
    profiler.runcall(build, prof)
    stats = pstats.Stats(profiler)
    by_file: dict[str, float] = {}
    total = 0.0
    for (path, _line, func), (_cc, _nc, tottime, _ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        where = path.split("/torchprof/")[-1] if "/torchprof/" in path else ("torch/pybind (reading events)" if path == "~" else path.rsplit("/", 1)[-1])
        if where == "torch/pybind (reading events)" and "method" not in func and "built-in" not in func:
            where = func
        by_file[where] = by_file.get(where, 0.0) + tottime
        total += tottime
    print(f"  cProfile split of ours() (own time, cProfile inflates Python calls): {total:.2f} s")
    for where, t in sorted(by_file.items(), key=lambda kv: -kv[1])[:10]:
        print(f"    {t / total:6.1%}  {where}")
    stats.sort_stats("tottime").print_stats(12)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes only (about a minute)")
    parser.add_argument("--torch-max-events", type=int, default=120_000, help="skip torch's path above this size (it takes ~100 µs/event)")
    parser.add_argument("--steps", type=int, nargs="+", help="training steps per recorded profile (5: ~20k events, 20: ~85k, 240: ~1M)")
    parser.add_argument("--split", action="store_true", help="then profile ours() with cProfile on the largest size: where the time goes")
    args = parser.parse_args()
    sizes = args.steps or ([5, 20] if args.quick else [5, 20, 60, 240])
    import pandas  # noqa: F401  (import cost is not part of the per-event figure)

    ours(record(1))  # warm-up: first-call costs (imports, lazy init) are not per-event work
    print(f"{'steps':>6} {'events':>9} {'nodes':>6} | {'ours µs/ev':>10} {'torch µs/ev':>11} {'torch/ours':>10} | "
          f"{'load_trace µs/ev':>16} | {'FLOP replay ms':>14}")
    rows = []
    for steps in sizes:
        prof = record(steps)
        t_ours, n, nodes = min((ours(prof) for _ in range(3)), key=lambda r: r[0])
        t_replay = replay_seconds(prof)  # before the export, which reads the profile (and replays)
        t_file = from_file(prof) if n <= 300_000 else float("nan")
        t_torch = torch_events(prof) if n <= args.torch_max_events else float("nan")
        us = 1e6 / n
        ratio = t_torch / t_ours if t_torch == t_torch else float("nan")
        rows.append((steps, n, t_ours * us))
        print(f"{steps:>6} {n:>9} {nodes:>6} | {t_ours * us:>10.2f} {t_torch * us:>11.2f} {ratio:>10.1f} | {t_file * us:>16.2f} | "
              f"{t_replay * 1e3:>14.0f}", flush=True)
        if args.split and steps == sizes[-1]:
            split(prof)
        del prof
        gc.collect()
    first, last = rows[0], rows[-1]
    print(f"\nlinearity: {last[1] / first[1]:.0f}x the events cost {last[2] / first[2]:.2f}x the time per event")
    print("target: ours <= 4 µs/event, flat per-event cost as the trace grows")


if __name__ == "__main__":
    sys.exit(main())
