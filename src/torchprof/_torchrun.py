"""``torchrun --nproc_per_node=N -m torchprof [--out DIR] script.py``: every rank runs the script
under the profiler (torchrun starts and watches the processes; torchprof launches none), writes its
trace to ``DIR/rank<r>.json.gz``, and rank 0 prints the merged view of the job once every rank's
trace is there."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ._views.format import printable

if TYPE_CHECKING:
    from ._profile import Result

#: How long rank 0 waits for the other ranks' traces when no process group is left to wait on.
WAIT_S = 600.0
_POLL_S = 0.2


def launched_by_torchrun() -> bool:
    """The process is a rank that torchrun (torch.distributed.run) started: it sets these."""
    return all(key in os.environ for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK"))


def job() -> tuple[int, int]:
    """This process's rank and the job's world size (0 and 1 outside torchrun)."""
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


def out_dir(given: str | None) -> str:
    """Where the ranks write their traces: ``--out``, else ``torchprof-<torchrun's run id>`` in the
    working folder (every rank of one job computes the same name)."""
    if given:
        return os.path.abspath(os.path.expanduser(given))
    return os.path.abspath(f"torchprof-{os.environ.get('TORCHELASTIC_RUN_ID') or 'job'}")


def trace_path(folder: str, rank: int) -> str:
    return os.path.join(folder, f"rank{rank}.json.gz")


def wait_for_ranks(paths: list[str], timeout: float = WAIT_S) -> list[str]:
    """Wait until every rank's trace exists (traces are written to a temporary name and renamed,
    so one that exists is complete): through a barrier of the default process group when the
    script left one running, else by watching the files, for at most ``timeout`` seconds.
    Returns the paths still missing."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.barrier()
    except (ImportError, RuntimeError) as exc:  # a group that is broken: the files still tell
        print(printable(f"torchprof: no barrier ({exc}); waiting for the traces"), file=sys.stderr)
    deadline = time.monotonic() + timeout
    missing = [p for p in paths if not os.path.exists(p)]
    while missing and time.monotonic() < deadline:
        time.sleep(_POLL_S)
        missing = [p for p in missing if not os.path.exists(p)]
    return missing


def report_rank(prof: Result, args: argparse.Namespace, title: str, report: Callable[..., int]) -> int:
    """This rank's part once its script ended: write its trace; rank 0 then waits for all the
    others' and reports the merged job with ``report`` (the single-run report: summary, table,
    output files). 0, or 1 when a trace could not be written or read."""
    from ._files import TraceError
    from ._load import load_trace

    rank, world = job()
    folder = out_dir(getattr(args, "out", None))
    path = trace_path(folder, rank)
    try:
        os.makedirs(folder, exist_ok=True)
        prof.export_chrome_trace(path)
    except (OSError, ValueError) as exc:
        print(printable(f"torchprof: rank {rank}: cannot write its trace {path}: {exc}"), file=sys.stderr)
        return 1
    paths = [trace_path(folder, r) for r in range(world)]
    if rank != 0:
        wait_for_ranks([])  # the barrier rank 0 waits on, when the script left a process group
        print(printable(f"torchprof: rank {rank} wrote {path}"), file=sys.stderr)
        return 0
    missing = wait_for_ranks(paths)
    if missing:
        print(printable(f"torchprof: no trace from {', '.join(missing)} after {WAIT_S:.0f}s; merging the ranks that finished"),
              file=sys.stderr)  # fmt: skip
    try:
        merged = load_trace([p for p in paths if p not in missing], name=prof.recording.label)
    except (OSError, TraceError) as exc:
        print(printable(f"torchprof: cannot merge the ranks' traces: {exc}"), file=sys.stderr)
        return 1
    return report(merged, args, title=f"{title} · {world} ranks, traces in {folder}")
