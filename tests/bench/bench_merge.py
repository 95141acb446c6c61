"""Merging a distributed job's ranks the way ``torchrun -m torchprof`` does, at 2, 8 and 32 ranks.

    .venv/bin/python tests/bench/bench_merge.py            # 2, 8 and 32 ranks
    .venv/bin/python tests/bench/bench_merge.py --quick    # 2 and 8

Each rank's tree is the tree of ../shared/traces/a100-ddp-training.json.gz ($TORCHPROF_SHARED/traces) (a real DDP training
rank: 109k events, 8.4k tree nodes, 6 steps), its times scaled by 1 + rank/100 so the ranks
differ. What ``torchrun -m torchprof`` does after the script, timed on this machine:

  encode  - one rank's tree to bytes (the saved profile's JSON, zlib): every rank does this at
            once, in its own process, so it counts once
  gather  - rank 0 receives the other ranks' trees through a c10d TCPStore (a real TCPStore
            server on 127.0.0.1; the other ranks are threads of this process, each with its own
            client, setting their tree the moment rank 0 starts waiting): the wall time until it
            holds them all
  merge   - rank 0 decodes the trees and merges them into the job's tree (what it then prints)

32 real processes on 2 cores would mostly measure the cores' contention, so the other ranks are
threads: the sends are TCPStore calls (C++), the decode and merge run on rank 0 as in a job.
Wall times, best of 3 (the machine is shared).
"""

from __future__ import annotations

import argparse
import copy
import gc
import os
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

TRACE = Path(os.environ.get("TORCHPROF_SHARED") or Path(__file__).resolve().parents[3] / "shared") / "traces" / "a100-ddp-training.json.gz"
_TIMES = ("cpu_us", "self_cpu_us", "cuda_us", "self_cuda_us", "bwd_cpu_us", "bwd_cuda_us", "fwd_cpu_us", "other_cpu_us")


def rank_result(base, rank: int):
    """Rank ``rank``'s profile: the base tree with its times scaled, and its rank recorded."""
    from torchprof._result import Result

    tree = copy.copy(base.tree)
    scale = 1 + rank / 100
    tree.columns = dict(tree.columns)
    for name in _TIMES:
        tree.columns[name] = [v * scale for v in tree.columns[name]]
    recording = copy.copy(base.recording)
    recording.meta = {**base.recording.meta, "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 0}}
    return Result(tree, recording)


def one_merge(ranks: int, payloads: list[bytes], base, port: int) -> tuple[float, float, float]:
    """(gather, merge) wall seconds of one job of ``ranks`` ranks through a TCPStore, and rank 0's
    CPU seconds for the merge."""
    from torch.distributed import TCPStore

    from torchprof._load import merge_profiles
    from torchprof._torchrun import decode_tree, exchange

    clients = [TCPStore("127.0.0.1", port, world_size=ranks, is_master=False, timeout=timedelta(seconds=60))
               for _ in range(ranks)]  # fmt: skip
    go = threading.Event()

    def send(r: int) -> None:
        go.wait()
        exchange(clients[r], payloads[r], r, ranks, 60.0)

    threads = [threading.Thread(target=send, args=(r,)) for r in range(1, ranks)]
    for t in threads:
        t.start()
    gc.collect()
    t0 = time.perf_counter()
    go.set()
    got = exchange(clients[0], payloads[0], 0, ranks, 60.0)
    t1 = time.perf_counter()
    c1 = time.thread_time()
    profiles = [base if r == 0 else decode_tree(got[r], f"rank {r}") for r in range(ranks)]
    merged = merge_profiles(profiles, list(range(ranks)), [f"rank{r}.json.gz" for r in range(ranks)])
    _ = merged.tree
    t2 = time.perf_counter()
    c2 = time.thread_time()
    for t in threads:
        t.join()
    assert len(got) == ranks and merged.tree.ranks == list(range(ranks))
    return t1 - t0, t2 - t1, c2 - c1


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if not TRACE.exists():
        print(f"{TRACE} is missing", file=sys.stderr)
        return 1
    from torch.distributed import TCPStore

    import torchprof
    from torchprof._torchrun import encode_tree

    base = torchprof.load_trace(TRACE)
    print(f"one rank's tree: {len(base.tree)} nodes ({TRACE.name})")
    counts = (2, 8) if args.quick else (2, 8, 32)
    results = [rank_result(base, r) for r in range(max(counts))]
    t0 = time.perf_counter()
    payloads = [encode_tree(r) for r in results]
    encode = (time.perf_counter() - t0) / len(results)
    print(f"encode  {encode * 1000:7.1f} ms per rank (in parallel on every rank), {len(payloads[1]) / 1e6:.2f} MB each")
    server = TCPStore("127.0.0.1", 0, world_size=1, is_master=True, timeout=timedelta(seconds=60), wait_for_workers=False)
    port = server.port
    print(f"{'ranks':>5} {'gather s':>9} {'merge s':>8} {'total s':>8} {'merge CPU s':>12} {'MB to rank 0':>13}")
    for n in counts:
        best = min((one_merge(n, payloads[:n], results[0], port) for _ in range(3)), key=lambda t: t[0] + t[1])
        size = sum(len(p) for p in payloads[1:n]) / 1e6
        print(f"{n:>5} {best[0]:9.3f} {best[1]:8.3f} {encode + best[0] + best[1]:8.3f} {best[2]:12.3f} {size:13.1f}")
    print("total = encode (once: the ranks encode at the same time) + gather + merge (wall), from the end of the")
    print("slowest rank's script to rank 0 holding the merged job; merge CPU: rank 0's own CPU time for the merge")
    return 0


if __name__ == "__main__":
    sys.exit(main())
