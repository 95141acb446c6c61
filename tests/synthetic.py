"""Hand-written event streams for exact tree expectations (no torch needed)."""

from __future__ import annotations

from typing import Any

from torchprof._records import DEVICE, MEMORY, MODULE, OP, REGION, RUNTIME, EventColumns, module_range_name
from torchprof._tree import TreeBuilder

KINDS = {"op": OP, "region": REGION, "module": MODULE, "runtime": RUNTIME, "kernel": DEVICE, "memory": MEMORY}


def ev(kind: str, name: str, start: float, end: float, *, tid: Any = 1, seq: int = -1, fwd: int = 0,
       ext: int = 0, link: int = 0, corr: int = 0, nbytes: int = 0, cuda: bool = False,
       shapes: list | None = None, concrete: list | None = None, type_: str = "Module") -> dict:
    """One event; times in µs. Modules take their path as ``name``."""
    if kind == "module":
        name = module_range_name(name, type_)
    return dict(kind=KINDS[kind], name=name, start=round(start * 1000), end=round(end * 1000), tid=tid, seq=seq,
                fwd=fwd, ext=ext, link=link, corr=corr, nbytes=nbytes, cuda=cuda, shapes=shapes, concrete=concrete)


def columns(events: list[dict]) -> EventColumns:
    cols = EventColumns()
    for e in events:
        cols.name.append(e["name"])
        cols.kind.append(e["kind"])
        cols.tid.append(e["tid"])
        cols.start.append(e["start"])
        cols.end.append(e["end"])
        cols.seq.append(e["seq"])
        cols.fwd_tid.append(e["fwd"])
        cols.ext_id.append(e["ext"])
        cols.link.append(e["link"])
        cols.corr.append(e["corr"])
        cols.nbytes.append(e["nbytes"])
        cols.on_cuda.append(e["cuda"])
        cols.mem_total.append(0)
    cols.inputs = lambda i: (events[i]["shapes"], events[i]["concrete"] or [None] * len(events[i]["shapes"])) if events[i]["shapes"] is not None else None
    return cols


def build(events: list[dict], **options: Any):
    builder = TreeBuilder(**options)
    builder.add(columns(events))
    return builder.finish()


def frame(events: list[dict], **options: Any):
    from torchprof._frame import to_dataframe

    return to_dataframe(build(events, **options))
