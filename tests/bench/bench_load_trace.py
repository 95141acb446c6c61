"""Loading a big trace: time against Python's own ``json.load`` of the same file, and peak memory
against the file's size, each measured in a fresh process; and the ranks of one job, read in
parallel against one after the other.

    .venv/bin/python tests/bench/bench_load_trace.py                     # 5M events (~620 MB; the issue measured a 366 MB one)
    .venv/bin/python tests/bench/bench_load_trace.py --events 500000     # a smaller one, a minute
    .venv/bin/python tests/bench/bench_load_trace.py --shape kineto      # kineto's own layout (args, spaces: ~2x the bytes)
    .venv/bin/python tests/bench/bench_load_trace.py --ranks 4           # also 4 rank files of a job (each events/4)
    .venv/bin/python tests/bench/bench_load_trace.py --trace t.json.gz   # a trace of your own instead

The synthetic trace is a training loop as kineto records it, written to a temporary folder and
deleted after (never committed): per step a ``ProfilerStep#N`` region, four linear layers (op,
transpose, addmm, its kernel launch and the kernel on a stream, with sequence numbers and
correlation ids) 50 times, their backward on autograd's thread, and an optimizer step. ``compact`` writes
each event on one line without spaces or unused args (~74 bytes an event: 5M events are the
issue's 366 MB file); ``kineto`` writes every arg kineto writes, as kineto spaces them.

Each figure comes from its own process (peak memory is per process):

  json.load     ``json.load`` of the file (the target: load_trace within 1.2x its time); each time
                is the best of --repeat processes, the two taken in turns, as wall and CPU time
                (CPU time says the same where other work shares the machine)
  load_trace    ``torchprof.load_trace(path).df``: parse, tree and the DataFrame
  memory        peak resident memory of that process above what it held before loading,
                divided by the file's size (the target: at most 3x)
  ranks         ``load_trace([rank files])`` against the same files loaded one by one
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

#: Linear layers per step, each 6 events forward and 2 backward: ~1,600 events a step.
LAYERS_PER_STEP = 50
#: Run in a fresh process: time and peak memory (VmHWM) of one way of loading the file.
MEASURE = r"""
import gc, json, sys, time
what, path = sys.argv[1], sys.argv[2:]
def peak_kb():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
if what in ("load_trace", "one_by_one"):
    import pandas, torchprof, torchprof._load, torchprof._traces.reader  # imports are not the load
gc.collect()
before = peak_kb()
t0, c0 = time.perf_counter(), time.process_time()
if what == "json":
    with open(path[0], "rb") as f:
        data = json.load(f)
elif what == "load_trace":
    prof = torchprof.load_trace(path[0] if len(path) == 1 else path)
    df = prof.df
    rows = len(df)
elif what == "one_by_one":
    for p in path:
        torchprof.load_trace(p).df
seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
print(json.dumps({"seconds": seconds, "cpu": cpu, "peak_bytes": (peak_kb() - before) * 1024}))
"""


def write_trace(path: str, events: int, shape: str = "compact", rank: int | None = None) -> int:
    """A synthetic training-loop trace of about ``events`` events; returns how many it has."""
    compact = shape == "compact"
    sep, colon = (",", ":") if compact else (", ", ": ")

    def event(cat: str, name: str, ts: int, dur: int, tid: int = 1, pid: int = 1, **args: int) -> str:
        fields = [("ph", '"X"'), ("cat", f'"{cat}"'), ("name", f'"{name}"'), ("pid", str(pid)), ("tid", str(tid)),
                  ("ts", str(ts)), ("dur", str(dur))]  # fmt: skip
        if args:
            inner = sep.join(f'"{k}"{colon}{v}' for k, v in args.items())
            fields.append(("args", "{" + inner + "}"))
        return "{" + sep.join(f'"{k}"{colon}{v}' for k, v in fields) + "}"

    written = 0
    t, ext, corr, seq, step = 1_000_000, 0, 0, 0, 0
    with open(path, "w") as out:
        head: dict = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA A100"}]}
        if rank is not None:
            head["distributedInfo"] = {"rank": rank, "world_size": 4, "backend": "nccl"}
        out.write(json.dumps(head)[:-1] + ', "traceEvents": [\n')
        first = True
        while written < events:
            batch: list[str] = []
            for _ in range(8):
                step += 1
                step_start = t
                lines: list[str] = []
                t += 1
                for _ in range(4 * LAYERS_PER_STEP):
                    seq += 1
                    ext += 1
                    corr += 1
                    lines.append(event("cpu_op", "aten::linear", t, 30, **({"Sequence number": seq} if compact else
                                       {"External id": ext, "Ev Idx": ext, "Sequence number": seq, "Fwd thread id": 0})))  # fmt: skip
                    lines.append(event("cpu_op", "aten::t", t + 1, 3, **({} if compact else {"External id": ext + 1})))
                    lines.append(event("cpu_op", "aten::transpose", t + 2, 1, **({} if compact else {"External id": ext + 2})))
                    lines.append(event("cpu_op", "aten::addmm", t + 5, 20, **{"External id": ext + 3, "Sequence number": seq}))
                    lines.append(event("cuda_runtime", "cudaLaunchKernel", t + 10, 5, **{"External id": ext + 3, "correlation": corr}))
                    lines.append(event("kernel", "ampere_sgemm_128x64_tn", t + 20, 15, pid=0, tid=7,
                                       **{"External id": ext + 3, "correlation": corr}))  # fmt: skip
                    ext += 3
                    t += 32
                for layer in range(4 * LAYERS_PER_STEP):
                    lines.append(event("cpu_op", "autograd::engine::evaluate_function: AddmmBackward0", t, 25, tid=2,
                                       **{"Sequence number": seq - layer, "Fwd thread id": 1}))  # fmt: skip
                    lines.append(event("cpu_op", "aten::mm", t + 2, 10, tid=2))
                    t += 27
                lines.append(event("user_annotation", "Optimizer.step#SGD.step", t, 10))
                lines.append(event("cpu_op", "aten::add_", t + 1, 5))
                t += 12
                batch.append(event("user_annotation", f"ProfilerStep#{step}", step_start, t - step_start))
                batch.extend(lines)
                t += 1
            out.write(("" if first else ",\n") + ",\n".join(batch))
            first = False
            written += len(batch)
        span = {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler",
                "ts": 999_999, "dur": t - 999_999 + 10}  # fmt: skip
        out.write(",\n" + json.dumps(span) + '\n], "traceName": "bench"}\n')
    return written + 1


def measure(what: str, paths: list[str]) -> dict:
    out = subprocess.run([sys.executable, "-c", MEASURE, what, *paths], capture_output=True, text=True, env=os.environ)
    if out.returncode != 0:
        raise SystemExit(f"{what} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def best(what: str, paths: list[str], repeat: int) -> dict:
    runs = [measure(what, paths) for _ in range(repeat)]
    return {key: min(r[key] for r in runs) for key in ("seconds", "cpu", "peak_bytes")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=5_000_000)
    parser.add_argument("--shape", choices=("compact", "kineto"), default="compact")
    parser.add_argument("--ranks", type=int, default=0, help="also load this many rank files of a job (0: skip)")
    parser.add_argument("--repeat", type=int, default=1, help="processes per figure; the best is shown")
    parser.add_argument("--trace", help="measure this trace instead of a synthetic one")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.trace:
            path, count = args.trace, None
        else:
            path = os.path.join(tmp, "trace.json")
            t0 = time.perf_counter()
            count = write_trace(path, args.events, args.shape)
            print(f"wrote {count} events in {time.perf_counter() - t0:.0f} s", flush=True)
        size = os.path.getsize(path)
        plain = path
        if path.endswith(".gz"):  # json.load reads the JSON itself: compare on the decompressed file
            import gzip

            plain = os.path.join(tmp, "plain.json")
            with gzip.open(path, "rb") as src, open(plain, "wb") as dst:
                dst.write(src.read())
            size = os.path.getsize(plain)
        print(f"{os.path.basename(path)}: {size / 1e6:.0f} MB" + (f", {count} events ({size / count:.0f} bytes each)" if count else ""))
        # Taken in turns, so a load on the shared machine that comes and goes weighs on both.
        runs: dict[str, list[dict]] = {"json": [], "load_trace": []}
        for _ in range(args.repeat):
            for what, found in runs.items():
                found.append(measure(what, [plain]))
        ref, ours = ({key: min(r[key] for r in found) for key in ("seconds", "cpu", "peak_bytes")} for found in runs.values())
        print(f"  json.load   {ref['seconds']:7.2f} s ({ref['cpu']:.2f} s CPU)  {ref['peak_bytes'] / 1e6:7.0f} MB  {ref['peak_bytes'] / size:4.1f}x the file")
        print(f"  load_trace  {ours['seconds']:7.2f} s ({ours['cpu']:.2f} s CPU)  {ours['peak_bytes'] / 1e6:7.0f} MB  {ours['peak_bytes'] / size:4.1f}x the file"
              f"   time {ours['seconds'] / ref['seconds']:.2f}x json.load (CPU {ours['cpu'] / ref['cpu']:.2f}x; target 1.2x), "
              f"memory {ours['peak_bytes'] / size:.2f}x the file (target 3x)", flush=True)  # fmt: skip
        if args.ranks:
            files = [os.path.join(tmp, f"rank{r}.json") for r in range(args.ranks)]
            for r, f in enumerate(files):
                write_trace(f, max(1, args.events // args.ranks), args.shape, rank=r)
            together = best("load_trace", files, args.repeat)
            apart = best("one_by_one", files, args.repeat)
            print(f"  {args.ranks} ranks   one by one {apart['seconds']:.2f} s, as one job {together['seconds']:.2f} s "
                  f"({apart['seconds'] / together['seconds']:.2f}x faster, {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
