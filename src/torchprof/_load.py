"""Open traces recorded elsewhere (``load_trace``) and profiles saved earlier (``load``)."""

from __future__ import annotations

import os

from ._gc import paused_gc
from ._profile import Profile
from ._trace_file import load_capture
from ._tree import TreeBuilder


def load_trace(path: str | os.PathLike[str], *, name: str | None = None, flops: bool = True) -> Profile:
    """Read a torch.profiler chrome trace (``.json`` or ``.json.gz``) into the layer tree.

    Works on traces from any machine (a GPU cluster, one rank of a DDP job): operators, regions,
    kernels (linked to the op that launched them), backward ops (linked to their forward op by
    sequence number) and module ranges, when the trace has torchprof's or ``nn.Module:`` events.
    """
    with paused_gc():
        return _load_trace(path, name, flops)


def _load_trace(path: str | os.PathLike[str], name: str | None, flops: bool) -> Profile:
    cap = load_capture(path)
    recorded = cap.meta.get("recorded") or {}
    builder = TreeBuilder(
        label=name or cap.label,
        modules=cap.modules,
        flops=flops and recorded.get("flops", True),
        shapes=recorded.get("shapes", True),
        memory=recorded.get("memory", cap.meta["has_memory"]),
        cuda=recorded.get("cuda", cap.meta["has_device"]),
    )
    for cycle in cap.cycles:
        builder.add(cycle)
    cap.cycles = []  # the tree holds what is needed; drop the raw events
    if name:
        cap.label = name
    return Profile._from_parts(builder, cap)


def load(path: str | os.PathLike[str]) -> Profile:
    """Reopen a profile written by ``prof.save(path)``: no re-run, same tree, table and widget."""
    from ._exports import load_profile

    return load_profile(path)
