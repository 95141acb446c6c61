"""Loading a real trace: parse time against orjson alone, and memory against the file size.

    .venv/bin/python tests/bench/bench_traces.py [trace.json.gz]   # default: ../shared/traces/a100-ddp-training.json.gz

Times (best of 3, each run interleaved with the others so machine load hits all alike):
  orjson        - ``orjson.loads`` of the decompressed JSON alone (the floor)
  json          - the standard library's ``json.loads``
  json exact    - ``json.loads(parse_float=Decimal)``: what a trace with epoch decimals costs
  read_trace    - torchprof's reader: JSON -> column records (exact integer ns)
  load_trace    - reader + layer tree + DataFrame
and the same reader on two copies of the trace: ``ts`` as decimals from zero (as kineto writes
since 2024: parsed by orjson, every double checked), and as epoch decimals (the digits path).
Memory: peak RSS above the interpreter's, in a fresh process, divided by the JSON's size.
"""

from __future__ import annotations

import gc
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path

DEFAULT = Path(__file__).resolve().parents[3] / "shared" / "traces" / "a100-ddp-training.json.gz"


def decimal_copy(raw: bytes, dest: str, shift_us: int, fraction: str) -> None:
    data = json.loads(raw)
    parts = []
    for e in data.pop("traceEvents"):
        ts = e.pop("ts", None)
        body = json.dumps(e)
        parts.append(body if ts is None else body[:-1] + f', "ts": {ts + shift_us}{fraction}}}')
    with open(dest, "w") as f:
        f.write('{"traceEvents": [' + ",\n".join(parts) + "], " + json.dumps(data)[1:])


def best_of(fns: dict, repeat: int = 3) -> dict[str, float]:
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeat):
        for name, fn in fns.items():
            gc.collect()
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best


# The high-water mark of this process's own memory (ru_maxrss would carry the parent's over fork).
MEASURE = """
import sys, gc
import torchprof, torchprof._traces.reader, pandas
def peak():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
gc.collect()
before = peak()
prof = torchprof.load_trace(sys.argv[1])
prof.df
print(before, peak())
"""


def peak_rss_bytes(path: str) -> int:
    out = subprocess.run([sys.executable, "-c", MEASURE, path], capture_output=True, text=True, check=True, env=os.environ)
    before, after = map(int, out.stdout.split())  # KiB
    return (after - before) * 1024


def main() -> None:
    import orjson

    import torchprof
    from torchprof._traces.reader import read_trace

    path = sys.argv[1] if len(sys.argv) > 1 else str(DEFAULT)
    raw = gzip.open(path).read() if path.endswith(".gz") else open(path, "rb").read()
    events = len(orjson.loads(raw)["traceEvents"])
    print(f"{path}: {len(raw) / 1e6:.1f} MB of JSON, {events} events")
    with tempfile.TemporaryDirectory() as tmp:
        plain = os.path.join(tmp, "plain.json")
        Path(plain).write_bytes(raw)
        first = min(e["ts"] for e in orjson.loads(raw)["traceEvents"] if isinstance(e.get("ts"), (int, float)))
        relative = os.path.join(tmp, "relative.json")
        decimal_copy(raw, relative, -first, ".125")
        epoch = os.path.join(tmp, "epoch.json")
        decimal_copy(raw, epoch, 0, ".125")
        times = best_of({
            "orjson": lambda: orjson.loads(raw),
            "json": lambda: json.loads(raw),
            "json exact": lambda: json.loads(raw, parse_float=Decimal),
            "read_trace": lambda: read_trace(plain),
            "load_trace": lambda: torchprof.load_trace(plain).df,
            "read_trace, decimals from zero": lambda: read_trace(relative),
            "read_trace, epoch decimals": lambda: read_trace(epoch),
        })  # fmt: skip
        for name, seconds in times.items():
            print(f"  {name:32s} {seconds * 1000:7.0f} ms  {seconds / times['orjson']:5.2f}x orjson")
        for name, file in (("", plain), (", epoch decimals", epoch)):
            peak = peak_rss_bytes(file)
            size = os.path.getsize(file)
            print(f"  peak RSS of load_trace + df{name:17s} {peak / 1e6:5.0f} MB  {peak / size:5.1f}x the JSON ({size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
