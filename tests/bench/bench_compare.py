"""Comparing two runs and merging the ranks of a job, on the largest real trace we have.

    .venv/bin/python tests/bench/bench_compare.py            # ranks 2, 4, 8
    .venv/bin/python tests/bench/bench_compare.py --quick    # ranks 2 only

On ../shared/traces/a100-ddp-training.json.gz (109k events, 8.4k tree nodes, 6 steps) it times
(CPU time, best of 3, in this one process):
  compare  - torchprof.compare(a, b) of two loaded profiles of that trace, then cmp.df,
             cmp.by_name() and the table (what a user asks for first); against loading one trace
  merge    - load_trace([N rank copies]) (reading dominates), and the merge itself: N loaded trees
             into one tree and its DataFrame, per rank
  activity - the tree builder's per-step device busy / communication pass on those events, against
             the builder's whole add() of them
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import os
import sys
import tempfile
import time
from pathlib import Path

TRACE = Path(__file__).resolve().parents[3] / "shared" / "traces" / "a100-ddp-training.json.gz"


def best(fn, repeat: int = 3) -> float:
    """The best CPU time of ``repeat`` calls: on a machine shared with other work, wall time
    measures the neighbours (everything here runs on this one thread)."""
    times = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return min(times)


def rank_copies(folder: str, count: int) -> list[str]:
    data = json.loads(gzip.decompress(TRACE.read_bytes()))
    paths = []
    for rank in range(count):
        data["distributedInfo"] = {**data["distributedInfo"], "rank": rank}
        path = os.path.join(folder, f"rank{rank}.json.gz")
        with gzip.open(path, "wt") as f:
            json.dump(data, f)
        paths.append(path)
    return paths


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if not TRACE.exists():
        print(f"{TRACE} is missing", file=sys.stderr)
        return 1
    import torchprof
    from torchprof._traces.reader import read_trace
    from torchprof._tree.builder import TreeBuilder

    load = best(lambda: torchprof.load_trace(TRACE), 2)
    a, b = torchprof.load_trace(TRACE), torchprof.load_trace(TRACE)
    nodes = len(a.tree)

    def compare() -> None:
        cmp = torchprof.compare(a, b)
        cmp.df
        cmp.by_name()
        cmp.table()

    t = best(compare)
    print(f"compare: {nodes} + {nodes} nodes: {t * 1e3:.0f} ms (df, by_name, table included); "
          f"loading one trace {load * 1e3:.0f} ms, ratio {t / load:.2f}")  # fmt: skip

    from torchprof._tree.activity import cycle_activity
    from torchprof._tree.nesting import nest

    events = read_trace(TRACE).cycles[0]
    builder = TreeBuilder(cuda=True)
    order, parent_ev = nest(events)
    node_of = builder._place(events, order, parent_ev)[0]
    steps = builder.steps
    whole = best(lambda: TreeBuilder(cuda=True).add(events))
    alone = best(lambda: cycle_activity(events, [dict(s) for s in steps], node_of, builder.nodes.label))
    print(f"activity: the per-step pass over {len(events)} events: {alone * 1e3:.1f} ms, {alone / len(events) * 1e6:.2f} µs/event, "
          f"{100 * alone / whole:.1f}% of building the tree from them ({whole * 1e3:.0f} ms)")  # fmt: skip

    from torchprof._tree.ranks import merge_ranks
    from torchprof._views.frame import to_dataframe

    with tempfile.TemporaryDirectory() as folder:
        for count in (2,) if args.quick else (2, 4, 8):
            paths = rank_copies(folder, count)
            t0 = time.process_time()
            job = torchprof.load_trace(paths)
            job.df
            total = time.process_time() - t0
            trees = [torchprof.load_trace(p).tree for p in paths]
            merge = best(lambda t=trees: to_dataframe(merge_ranks(t, list(range(len(t))), [None] * len(t), "job")))
            print(f"merge: {count} ranks, {len(job.tree)} nodes: load_trace(list) {total:.2f} s, {total / count:.2f} s per rank; "
                  f"the merge itself (trees -> one tree -> df) {merge * 1e3:.0f} ms, {merge / count * 1e3:.0f} ms per rank")  # fmt: skip
            for p in paths:
                os.unlink(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
