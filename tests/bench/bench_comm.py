"""Communication per layer against the raw collectives, on real jobs and the real NCCL trace.

    .venv/bin/python tests/bench/bench_comm.py          # runs two 2-rank gloo jobs (about a minute)
    .venv/bin/python tests/bench/bench_comm.py --trace  # only ../shared's A100 DDP trace

* DDP: ``tests/jobs/ddp_train.py`` under ``torchrun --nproc_per_node=2`` (gloo, a 10 kB bucket cap:
  two buckets), each rank with its own Profiler; per layer, its parts of the all-reduce (the
  ``c10d::allreduce_`` launches and gloo's worker ranges) and the exposed part, against the raw
  all-reduce (the same trace read without moving communication).
* FSDP2: ``tests/jobs/fsdp_train.py`` under ``torchrun -m torchprof``: per layer, the host
  communication in its forward and its backward (FSDP's collectives and gloo's worker ranges).
* NCCL: ``a100-ddp-training.json.gz`` (8 ranks' rank 3, three buckets per step): per layer region,
  the all-reduce kernels' device time with its overlapped part, against the raw kernels.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
JOBS = HERE.parent / "jobs"
TRACE = Path(os.environ.get("TORCHPROF_SHARED") or HERE.parents[2] / "shared") / "traces" / "a100-ddp-training.json.gz"
ALL_REDUCE = ("c10d::allreduce_", "gloo:all_reduce")


def read(path: Path | str, move: bool = True):
    import torchprof
    import torchprof._tree.builder as builder

    keep = builder.attribute_comm
    if not move:
        builder.attribute_comm = lambda *args: None
    try:
        prof = torchprof.load_trace(path)
        _ = prof.tree
        return prof.df
    finally:
        builder.attribute_comm = keep


def torchrun(args: list[str], cwd: str) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo"}
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", *args],
                          cwd=cwd, env=env, capture_output=True, text=True)  # fmt: skip
    if done.returncode:
        raise SystemExit(done.stdout[-3000:] + done.stderr[-3000:])


def ddp(folder: str) -> None:
    torchrun([str(JOBS / "ddp_train.py"), folder], folder)
    for rank in (0, 1):
        trace = Path(folder) / f"rank{rank}.json.gz"
        split, raw = read(trace), read(trace, move=False)
        print(f"\nDDP, gloo, rank {rank}: each bucket's all-reduce on its layers (µs)")
        print(f"{'layer':34} {'c10d::allreduce_':>17} {'gloo:all_reduce':>16} {'exposed':>9}")
        layers = split[split.type.isin(["Conv2d", "Linear"])]
        for path in layers.index:
            parts = [split.loc[f"{path}/{name}", "cpu_us"] if f"{path}/{name}" in split.index else 0.0 for name in ALL_REDUCE]
            print(f"{path:34} {parts[0]:17.3f} {parts[1]:16.3f} {split.loc[path, 'comm_exposed_cpu_us']:9.1f}")
        sums = [split[split.name == name].cpu_us.sum() for name in ALL_REDUCE]
        raws = [raw[raw.name == name].cpu_us.sum() for name in ALL_REDUCE]
        print(f"{'sum of the layers':34} {sums[0]:17.3f} {sums[1]:16.3f}")
        print(f"{'raw (not moved)':34} {raws[0]:17.3f} {raws[1]:16.3f}")


def fsdp(folder: str) -> None:
    torchrun(["-m", "torchprof", "--out", f"{folder}/traces", str(JOBS / "fsdp_train.py")], folder)
    for rank in (0, 1):
        trace = Path(folder) / "traces" / f"rank{rank}.json.gz"
        split, raw = read(trace), read(trace, move=False)
        print(f"\nFSDP2, gloo, rank {rank}: host communication per layer (µs)")
        print(f"{'layer':22} {'fwd comm':>10} {'bwd comm':>10} {'exposed':>10} {'gloo ranges':>12}")
        for path in split[split.type.isin(["FSDPConv2d", "FSDPLinear"])].index:
            below = split.index.str.startswith(path + "/")
            fwd = split[below & ~split.is_backward & split.name.str.startswith(("gloo:", "c10d::"))].cpu_us.sum()
            bwd = split[below & split.is_backward & split.name.str.startswith(("gloo:", "c10d::"))].cpu_us.sum()
            gloo = split[below & split.name.str.startswith("gloo:")].cpu_us.sum()
            print(f"{path:22} {fwd:10.1f} {bwd:10.1f} {split.loc[path, 'comm_exposed_cpu_us']:10.1f} {gloo:12.1f}")
        for name in ("gloo:all_gather", "gloo:all_reduce", "c10d::_allgather_base_", "c10d::_reduce_scatter_base_"):
            rows = split[split.name == name]
            on_layers = rows[rows.parent.str.startswith("FSDPSequential.")].cpu_us.sum()
            print(f"  {name:28} on layers {on_layers:10.1f}  elsewhere {rows.cpu_us.sum() - on_layers:8.1f}"
                  f"  raw {raw[raw.name == name].cpu_us.sum():10.1f}")  # fmt: skip


def nccl() -> None:
    if not TRACE.exists():
        print(f"\n{TRACE} is missing: no NCCL figures")
        return
    split, raw = read(TRACE), read(TRACE, move=False)
    kernel = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"
    print("\nNCCL (A100 DDP trace, 6 steps, 3 buckets each): the all-reduce kernels per layer region (µs of device time)")
    k = split[split.name == kernel]
    layer = k.index.str.split("/c10d::allreduce_").str[0].str.rsplit("/", n=1).str[-1]
    by_layer = k.groupby(layer).agg({"cuda_us": "sum", "comm_overlap_cuda_us": "sum", "comm_exposed_cuda_us": "sum"})
    print(by_layer.round(1).to_string())
    r = raw[raw.name == kernel]
    print(f"sum over layers: {k.cuda_us.sum():.3f} (overlapped {k.comm_overlap_cuda_us.sum():.3f});"
          f" raw kernels: {r.cuda_us.sum():.3f} (overlapped {r.comm_overlap_cuda_us.sum():.3f})")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trace", action="store_true", help="only the NCCL trace (no jobs)")
    args = parser.parse_args()
    if not args.trace:
        with tempfile.TemporaryDirectory() as folder:
            ddp(folder)
        with tempfile.TemporaryDirectory() as folder:
            fsdp(folder)
    nccl()
    return 0


if __name__ == "__main__":
    sys.exit(main())
