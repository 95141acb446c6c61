"""Open traces recorded elsewhere (``load_trace``) and profiles saved earlier (``load``)."""

from __future__ import annotations

import os

from ._files import read_head, read_json
from ._gc import paused_gc
from ._profile import Result
from ._traces.reader import read_trace
from ._tree.builder import TreeBuilder
from ._tree.storage import SAVED_PROFILE_START, from_json


def load_trace(path: str | os.PathLike[str], *, name: str | None = None, flops: bool = True) -> Result:
    """Read a torch.profiler chrome trace (``.json`` or ``.json.gz``) into the layer tree.

    Works on traces from any machine (a GPU cluster, one rank of a DDP job): operators, regions,
    kernels (linked to the op that launched them), backward ops (linked to their forward op by
    sequence number) and module ranges, when the trace has torchprof's or ``nn.Module:`` events.
    """
    with paused_gc():
        recording = read_trace(path)
        recorded = recording.meta.get("recorded") or {}
        builder = TreeBuilder(
            label=name or recording.label,
            modules=recording.modules,
            flops=flops and recorded.get("flops", True),
            shapes=recorded.get("shapes", True),
            memory=recorded.get("memory", recording.meta["has_memory"]),
            cuda=recorded.get("cuda", recording.meta["has_device"]),
            compiled=recording.compiled,
        )
        for cycle in recording.cycles:
            builder.add(cycle)
        recording.cycles = []  # the tree holds what is needed; drop the raw events
        if name:
            recording.label = name
        source = os.fspath(path)
        return Result(builder.finish(), recording, trace_files=lambda: [source])


def load(path: str | os.PathLike[str]) -> Result:
    """Reopen a profile written by ``prof.save(path)``: no re-run, same tree, table and widget."""
    tree, recording = from_json(read_json(path), os.fspath(path))
    return Result(tree, recording)


def open_profile_file(path: str | os.PathLike[str], *, flops: bool = True) -> tuple[Result, str]:
    """A saved profile (``prof.save``) or a chrome trace, told apart by the first bytes of the
    file, and which one it was (``"a saved profile"``, ``"a chrome trace"``)."""
    if SAVED_PROFILE_START.match(read_head(path)):
        return load(path), "a saved profile"
    return load_trace(path, flops=flops), "a chrome trace"
