"""A distributed job's profile: every rank records, and rank 0 sees the job as one (the view
``torchrun -m torchprof`` gives). The one place the integrations call the merge."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .._profiler import Profiler
    from .._result import Result


#: Facts of a trainer's run the integrations keep in a profile's meta, carried into the merged job.
RUN_FACTS = ("trainer", "steps", "run_steps")


def world_size(result: Result) -> int:
    """How many ranks the job that recorded ``result`` has (1 outside a distributed job)."""
    info = result.meta.get("distributedInfo")
    size = info.get("world_size") if isinstance(info, dict) else None
    return size if isinstance(size, int) and size > 0 else 1


def gather_ranks(prof: Profiler | Result, out: str | None = None) -> Result | None:
    """Every rank's profile of a distributed job as one, on rank 0.

    Call it on every rank once its profile is finished (after the ``with`` block): each rank
    writes its trace to ``out/rank<r>.json.gz`` (default: ``./torchprof-<torchrun's run id>``),
    rank 0 waits for the others (through the process group's or torchrun's store when there is one, else
    for their files) and returns the merged job (:func:`torchprof.load_trace` of the folder);
    the other ranks return None. Outside a distributed job, the profile itself.
    """
    from .._result import Result
    from .._torchrun import report_rank

    result = prof if isinstance(prof, Result) else prof.result
    if world_size(result) == 1:
        return result
    merged: list[Result] = []

    def keep(job: Result, args: Any, title: str) -> int:
        merged.append(job)
        return 0

    report_rank(result, argparse.Namespace(out=out), result.recording.label, keep)
    if not merged:
        return None
    job = merged[0]
    for key in RUN_FACTS:  # what the ranks' run was: the same on every rank
        if key in result.meta:
            job.meta[key] = result.meta[key]
    return job
