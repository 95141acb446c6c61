"""Hand-written event streams for exact tree expectations (no torch needed)."""

from __future__ import annotations

from typing import Any

from torchprof._records import EventColumns, module_range_name
from torchprof._tree.builder import TreeBuilder
from torchprof._vocab import EventKind

DEVICE, MEMORY, MODULE, OP, REGION, RUNTIME = (EventKind.DEVICE, EventKind.MEMORY, EventKind.MODULE, EventKind.OP,
                                               EventKind.REGION, EventKind.RUNTIME)

KINDS = {"op": OP, "region": REGION, "module": MODULE, "runtime": RUNTIME, "kernel": DEVICE, "memory": MEMORY}


def ev(kind: str, name: str, start: float, end: float, *, tid: Any = 1, seq: int = -1, fwd: int = 0,
       ext: int = 0, link: int = 0, corr: int = 0, nbytes: int = 0, cuda: bool = False,
       shapes: list | None = None, concrete: list | None = None, type_: str = "Module",
       addr: int = 0, total: int = 0, device: int | None = None) -> dict:
    """One event; times in µs. Modules take their path as ``name``. Memory events: ``nbytes``
    (negative: freed), ``addr`` of the block, the allocator's ``total`` after it, ``device``
    index (default -1 for host memory, 0 with ``cuda``)."""
    if kind == "module":
        name = module_range_name(name, type_)
    if device is None:
        device = 0 if cuda else -1
    return {"kind": KINDS[kind], "name": name, "start": round(start * 1000), "end": round(end * 1000), "tid": tid, "seq": seq,
                "fwd": fwd, "ext": ext, "link": link, "corr": corr, "nbytes": nbytes, "cuda": cuda, "shapes": shapes, "concrete": concrete,
                "addr": addr, "total": total, "device": device}


def training_step():
    """model.fc1 and model.fc2 forward, then backward on another thread, then an optimizer."""
    return [
        ev("module", "Net", 0, 100, type_="Net"),
        ev("module", "Net.fc1", 10, 40, type_="Linear"),
        ev("op", "aten::linear", 12, 38, seq=0),
        ev("op", "aten::addmm", 15, 35, seq=1, shapes=[[8], [4, 16], [16, 8]]),
        ev("module", "Net.fc2", 50, 90, type_="Linear"),
        ev("op", "aten::addmm", 55, 85, seq=2, shapes=[[2], [4, 8], [8, 2]]),
        ev("op", "aten::sum", 100, 110, seq=3),  # the loss, outside any module
        ev("op", "autograd::engine::evaluate_function: SumBackward0", 120, 130, tid=2, seq=3, fwd=1),
        ev("op", "autograd::engine::evaluate_function: AddmmBackward0", 130, 160, tid=2, seq=2, fwd=1),
        ev("op", "AddmmBackward0", 131, 159, tid=2, seq=2, fwd=1),
        ev("op", "aten::mm", 135, 150, tid=2),
        ev("op", "autograd::engine::evaluate_function: AddmmBackward0", 160, 180, tid=2, seq=1, fwd=1),
        ev("op", "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 180, 185, tid=2),
        ev("region", "Optimizer.step#SGD.step", 200, 220),
        ev("op", "aten::add_", 205, 215, shapes=[[16, 8], [16, 8], []]),
    ]


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
        cols.mem_total.append(e.get("total", 0))
        cols.mem_addr.append(e.get("addr", 0))
        cols.mem_device.append(e.get("device", -1))
    cols.inputs = lambda i: (events[i]["shapes"], events[i]["concrete"] or [None] * len(events[i]["shapes"])) if events[i]["shapes"] is not None else None
    return cols


def build(events: list[dict], **options: Any):
    builder = TreeBuilder(**options)
    builder.add(columns(events))
    return builder.finish()


def frame(events: list[dict], **options: Any):
    from torchprof._views.frame import to_dataframe

    return to_dataframe(build(events, **options))
