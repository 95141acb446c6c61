"""Cost per module as models get deeper or wider: the same number of modules arranged as chains
of depth 10 to 3000, and as parents with 10 to 10,000 children, profiled in one run.

    .venv/bin/python tests/bench/bench_depth.py                 # depths 10..3000, widths 10..10000
    .venv/bin/python tests/bench/bench_depth.py --quick         # smaller totals, a few seconds
    .venv/bin/python tests/bench/bench_depth.py --timeout 120   # give up on a slow case
    .venv/bin/python tests/bench/bench_depth.py --repeat 1      # one process per case (default: best of 3)

Every case profiles the same number of modules (``--modules``, 3000 by default; the width cases
10000), so fixed costs (starting the profiler, imports) weigh the same in each and the figures
per module compare directly: depth d is ``modules / d`` chains of d nested modules called one
after the other, width w is ``modules / w`` parents each calling w children (from a ModuleList,
so the children are named through the parent, not by torch calling them). Each module runs one
op. Each case runs in a fresh process (peak memory is per process) and reports, per module:

  run     the ``with Profiler()`` block: hooks naming every call, torch recording it
  tree    events -> layer tree (prof.tree)
  df      prof.df
  table   prof.table(min_pct=0): every row printed
  stacks  prof.export_stacks(): folded stacks
  mem KB  peak resident memory of the process during all of that, minus before it
  saved KB  the size of ``prof.save()``'s file (it stores each path as its parent's and a
          name: it grows with the modules, not with their depth)

and the ratio of each to the first case. Target: every ratio within 2x. Folded stacks are the
exception by their format: a line names every frame from the root down, so a line at depth d has
d frames and its size per module grows with the depth (the ``stack KB`` column shows it).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

PHASES = ("run", "tree", "df", "table", "stacks")


def build(shape: str, size: int, modules: int):
    """A Sequential of ``modules / size`` groups: chains of ``size`` nested modules (``depth``)
    or parents of ``size`` children (``width``)."""
    import torch
    from torch import nn

    class Link(nn.Module):
        """One level of a chain: an op, then the next level (built iteratively, not by recursion)."""

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = x + 1
            inner = self._modules.get("inner")
            return inner(x) if inner is not None else x

    class Leaf(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + 1

    class Fan(nn.Module):
        def __init__(self, n: int) -> None:
            super().__init__()
            self.children_ = nn.ModuleList(Leaf() for _ in range(n))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for child in self.children_:
                x = child(x)
            return x

    groups = []
    for _ in range(max(1, modules // size)):
        if shape == "depth":
            top = Link()
            link = top
            for _ in range(size - 1):
                nxt = Link()
                link.inner = nxt
                link = nxt
            groups.append(top)
        else:
            groups.append(Fan(size))
    return nn.Sequential(*groups)


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def one(shape: str, size: int, modules: int) -> dict:
    """Profile one case in this process; the figures as a dict."""
    import torch

    import torchprof

    model = build(shape, size, modules)
    n = sum(1 for _ in iter_modules(model)) - 1  # without the outer Sequential
    x = torch.zeros(2)
    # The model's own forward recurses through the chain (3 Python frames per level): that is the
    # user's code, so raise the limit for it; torchprof's own code walks trees with stacks.
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * size + 1000))
    with torch.no_grad():
        model(x)  # warm-up of the model
    # and of every stage once on a small model (the profiler's first start, pandas' import)
    small = build(shape, 2, 4)
    with torch.no_grad(), torchprof.Profiler() as warm:
        small(x)
    warm.df, warm.table(min_pct=0)
    with tempfile.TemporaryDirectory() as tmp:
        warm.export_stacks(os.path.join(tmp, "stacks.txt"))
    del warm
    # The process's peak so far is the baseline (the model and the warm-up are not ours).
    base_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    base = rss_mb()
    times = {}
    t0 = time.perf_counter()
    with torch.no_grad(), torchprof.Profiler() as prof:
        model(x)
    times["run"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    tree = prof.tree
    times["tree"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    df = prof.df
    times["df"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    table = prof.table(min_pct=0)
    times["table"] = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        path = prof.export_stacks(os.path.join(tmp, "stacks.txt"))
        times["stacks"] = time.perf_counter() - t0
        stack_bytes = os.path.getsize(path)
        saved_bytes = os.path.getsize(prof.save(os.path.join(tmp, "saved.json")))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    deepest = max(df["depth"])
    return {
        "shape": shape, "size": size, "modules": n, "rows": len(tree), "deepest": int(deepest),
        "table_lines": table.count("\n") + 1, "stack_bytes": stack_bytes, "saved_bytes": saved_bytes,
        "times": times, "mb": max(peak, base_peak) - min(base, base_peak),
    }  # fmt: skip


def iter_modules(model):
    stack = [model]
    while stack:
        m = stack.pop()
        yield m
        stack.extend(m._modules.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--depths", default="10,100,1000,3000")
    parser.add_argument("--widths", default="10,1000,10000")
    parser.add_argument("--modules", type=int, default=3000, help="modules per depth case")
    parser.add_argument("--wide-modules", type=int, default=10000, help="modules per width case")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per case")
    parser.add_argument("--repeat", type=int, default=3, help="processes per case; the best figures are shown")
    parser.add_argument("--quick", action="store_true", help="depths 10..300 of 300 modules, widths 10..1000")
    parser.add_argument("--one", nargs=3, metavar=("SHAPE", "SIZE", "MODULES"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one[0], int(args.one[1]), int(args.one[2]))))
        return
    if args.quick:
        args.depths, args.widths, args.modules, args.wide_modules = "10,100,300", "10,100,1000", 300, 1000
    cases = [("depth", int(d), args.modules) for d in args.depths.split(",") if d]
    cases += [("width", int(w), args.wide_modules) for w in args.widths.split(",") if w]
    print(f"{'case':>12} {'modules':>7} {'rows':>6} | " + " ".join(f"{p + ' µs':>9}" for p in PHASES)
          + f" {'mem KB':>7} {'stack KB':>8} {'saved KB':>8} | ratios to the first case of its kind: " + " ".join(PHASES) + " mem")  # fmt: skip
    first: dict[str, dict] = {}
    env = dict(os.environ)
    for shape, size, modules in cases:
        label = f"{shape} {size}"
        runs = []
        for _ in range(args.repeat):
            try:
                out = subprocess.run([sys.executable, __file__, "--one", shape, str(size), str(modules)], env=env,
                                     capture_output=True, text=True, timeout=args.timeout, check=True)  # fmt: skip
            except subprocess.TimeoutExpired:
                print(f"{label:>12} {modules:>7} {'':>6} | took over {args.timeout:.0f} s", flush=True)
                break
            except subprocess.CalledProcessError as exc:
                print(f"{label:>12} failed (exit {exc.returncode}):\n{exc.stderr[-2000:]}", flush=True)
                break
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        if len(runs) < args.repeat:
            continue
        r = runs[0]
        n = r["modules"]
        # The best of the repeats: the machine's noise only ever adds time.
        per = {p: min(run["times"][p] for run in runs) / n * 1e6 for p in PHASES}
        mb = min(run["mb"] for run in runs) / n
        ref = first.setdefault(shape, {"per": per, "mb": mb})
        ratios = " ".join(f"{per[p] / ref['per'][p]:.2f}" if ref["per"][p] else "-" for p in PHASES)
        mb_ratio = f"{mb / ref['mb']:.2f}" if ref["mb"] > 0 else "-"
        print(f"{label:>12} {n:>7} {r['rows']:>6} | " + " ".join(f"{per[p]:>9.1f}" for p in PHASES)
              + f" {mb * 1024:>7.1f} {r['stack_bytes'] / n / 1024:>8.2f} {r['saved_bytes'] / n / 1024:>8.2f}"
              + f" | {ratios} {mb_ratio}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
