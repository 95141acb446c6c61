"""Open traces recorded elsewhere (``load_trace``: one trace, or every rank's trace of a distributed
job as one profile) and profiles saved earlier (``load``)."""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Sequence
from typing import Any

from ._files import TraceError, read_head, read_json
from ._gc import paused_gc
from ._profile import Result
from ._records import Recording
from ._traces.reader import read_trace
from ._tree.builder import TreeBuilder
from ._tree.counts import apply_counts
from ._tree.devices import choose_peak
from ._tree.mfu import set_mfu
from ._tree.ranks import merge_ranks
from ._tree.storage import SAVED_PROFILE_START, from_json

PathLike = str | os.PathLike[str]
#: What a trace file's name may say its rank is: ``rank3``, ``rank_3``, ``rank-3``, else its last number.
_RANK_IN_NAME = re.compile(r"rank[_-]?(\d+)", re.IGNORECASE)
_NUMBER = re.compile(r"(\d+)")
_TRACE_SUFFIXES = (".json", ".json.gz")


def load_trace(path: PathLike | Sequence[PathLike], *, name: str | None = None, flops: bool = True,
               peak_flops: float | str | None = None) -> Result:
    """Read a torch.profiler chrome trace (``.json`` or ``.json.gz``) into the layer tree.

    Works on traces from any machine (a GPU cluster, one rank of a DDP job): operators, regions,
    kernels (linked to the op that launched them), backward ops (linked to their forward op by
    sequence number) and module ranges, when the trace has torchprof's or ``nn.Module:`` events.

    Given a list of traces, a folder of them or a glob (``"out/rank*.json.gz"``), reads them as
    the ranks of one distributed job and returns one profile whose tree is the union of theirs
    (see :func:`load_ranks`).

    ``peak_flops`` is what MFU is measured against: FLOP/s, or a data type (``"bf16"``) of the
    device the trace names in its ``deviceProperties`` (otherwise recognised at the data type
    torchprof's own exports record).
    """
    choose_peak({}, peak_flops, False)  # a bad value is an error before any reading
    sources = _trace_files(path)
    if sources is None:
        return _load_one(os.fspath(path), name, flops, peak_flops)  # type: ignore[arg-type]
    return load_ranks(sources, name=name, flops=flops, peak_flops=peak_flops)


def _load_one(path: str, name: str | None, flops: bool, peak_flops: float | str | None = None) -> Result:
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
        builder.tensors = recording.tensors
        peak = choose_peak(recording.meta, peak_flops, recording.meta["has_device"])
        builder.peak_flops = peak
        for cycle in recording.cycles:
            builder.add(cycle)
        recording.cycles = []  # the tree holds what is needed; drop the raw events
        if name:
            recording.label = name
        tree = builder.finish()
        counts = recording.meta.pop("flops_counts", None)
        if flops and isinstance(counts, dict) and apply_counts(tree, counts):
            set_mfu(tree, peak)
        return Result(tree, recording, trace_files=lambda: [path])


def _trace_files(path: Any) -> list[str] | None:
    """The files a list, a folder or a glob names (sorted); None for one file's path."""
    if isinstance(path, (str, os.PathLike)):
        text = os.fspath(path)
        if os.path.isdir(text):
            found = sorted(os.path.join(text, f) for f in os.listdir(text) if f.endswith(_TRACE_SUFFIXES))
            if not found:
                raise FileNotFoundError(f"no trace files (*.json, *.json.gz) in {text}")
            return found
        if not os.path.exists(text) and any(ch in text for ch in "*?["):
            found = sorted(glob.glob(text))
            if not found:
                raise FileNotFoundError(f"no trace files match {text}")
            return found
        return None
    files = [os.fspath(p) for p in path]
    if not files:
        raise ValueError("load_trace got an empty list of traces")
    return files


def rank_of(meta: dict[str, Any], path: str) -> int | None:
    """A trace's rank: ``distributedInfo.rank`` (torch.profiler writes it when the process group
    existed before profiling started; torchprof's exports add it otherwise), else the rank its
    file name says (``rank3.json.gz``, ``trace_rank_12.json``, else its last number)."""
    info = meta.get("distributedInfo")
    if isinstance(info, dict) and isinstance(info.get("rank"), int):
        return int(info["rank"])
    stem = os.path.basename(path)
    found = _RANK_IN_NAME.search(stem) or (_NUMBER.findall(stem) or [None])[-1]
    if found is None:
        return None
    return int(found.group(1)) if isinstance(found, re.Match) else int(found)


def load_ranks(paths: Sequence[str], *, name: str | None = None, flops: bool = True,
               peak_flops: float | str | None = None) -> Result:
    """Every rank's trace of one distributed job as one profile (``load_trace`` of a list, a folder
    or a glob): the union of the ranks' trees, each figure the mean per rank, with the smallest,
    the largest and the slowest rank of the main times (:func:`~torchprof._tree.ranks.merge_ranks`);
    ``prof.ranks`` and ``prof.by_rank()`` tell them apart. A trace whose rank is known neither
    from its metadata nor from its name takes its place in the list."""
    profiles = [_load_one(p, None, flops, peak_flops) for p in paths]
    ranks: list[int] = []
    seen: dict[int, str] = {}
    for i, (prof, path) in enumerate(zip(profiles, paths)):
        rank = rank_of(prof.meta, path)
        rank = i if rank is None else rank
        if rank in seen:
            raise TraceError(f"{seen[rank]} and {path} are both rank {rank}: give the traces of one job, one per rank")
        seen[rank] = path
        ranks.append(rank)
    order = sorted(range(len(profiles)), key=lambda i: ranks[i])
    profiles = [profiles[i] for i in order]
    ranks = [ranks[i] for i in order]
    paths = [paths[i] for i in order]
    labels = {p.recording.label for p in profiles}
    label = name or (labels.pop() if len(labels) == 1 else os.path.basename(os.path.dirname(os.path.abspath(paths[0]))) or "job")
    label = f"{label} ({len(ranks)} ranks)" if len(ranks) != 1 else label
    with paused_gc():
        tree = merge_ranks([p.tree for p in profiles], ranks, [p.recording.wall_us for p in profiles], label)
        set_mfu(tree, choose_peak(profiles[0].meta, peak_flops, tree.has_cuda))
    modules: dict[str, Any] = {}
    for p in profiles:
        for module_path, module in p.recording.modules.items():
            modules.setdefault(module_path, module)
    walls = [p.recording.wall_us for p in profiles if p.recording.wall_us is not None]
    job = next((p.meta["distributedInfo"] for p in profiles if isinstance(p.meta.get("distributedInfo"), dict)), None)
    meta: dict[str, Any] = {"source": paths[0], "traces": list(paths), "ranks": list(ranks)}
    for key in ("deviceProperties", "compute_dtype"):  # what MFU and the insights read: the first rank's
        if key in profiles[0].meta:
            meta[key] = profiles[0].meta[key]
    if job is not None:
        meta["distributedInfo"] = {k: v for k, v in job.items() if k != "rank"}
    recording = Recording(modules=modules, wall_us=sum(walls) / len(walls) if walls else None, label=label, meta=meta)
    return Result(tree, recording)


def load(path: PathLike, *, peak_flops: float | str | None = None) -> Result:
    """Reopen a profile written by ``prof.save(path)``: no re-run, same tree, table and widget.
    ``peak_flops`` measures its MFU again against that peak (FLOP/s or a data type)."""
    choose_peak({}, peak_flops, False)
    tree, recording = from_json(read_json(path), os.fspath(path))
    if peak_flops is not None:
        set_mfu(tree, choose_peak(recording.meta, peak_flops, tree.has_cuda))
    return Result(tree, recording)


def open_profile_file(path: str | os.PathLike[str], *, flops: bool = True,
                      peak_flops: float | str | None = None) -> tuple[Result, str]:  # fmt: skip
    """A saved profile (``prof.save``) or a chrome trace, told apart by the first bytes of the
    file, and which one it was (``"a saved profile"``, ``"a chrome trace"``)."""
    if SAVED_PROFILE_START.match(read_head(path)):
        return load(path, peak_flops=peak_flops), "a saved profile"
    return load_trace(path, flops=flops, peak_flops=peak_flops), "a chrome trace"
