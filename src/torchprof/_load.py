"""Open traces recorded elsewhere (``load_trace``: one trace, or every rank's trace of a distributed
job as one profile) and profiles saved earlier (``load``)."""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ._errors import TraceError
from ._files import read_head, read_json
from ._gc import paused_gc
from ._records import Recording
from ._result import Result
from ._traces.reader import read_trace
from ._tree.builder import TreeBuilder
from ._tree.comm import comm_note
from ._tree.devices import choose_peak
from ._tree.flops.trace_counts import apply_counts
from ._tree.mfu import set_mfu
from ._tree.ranks import merge_ranks
from ._tree.storage import SAVED_PROFILE_START, from_json
from ._vocab import DEVICE_RANGES, STEP_TIME_COLUMNS

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
        builder.comm.ddp = recording.meta.get("ddp_buckets") or []
        peak = choose_peak(recording.meta, peak_flops, recording.meta["has_device"])
        builder.peak_flops = peak
        for cycle in recording.cycles:
            builder.add(cycle)
        recording.cycles = []  # the tree holds what is needed; drop the raw events
        note = comm_note(builder.comm)
        if note:
            recording.meta["warnings"] = [*recording.meta.get("warnings", []), note]
        if name:
            recording.label = name
        notes = [outside_window_note(builder.outside_window), outside_window_note(builder.host_outside_window, host=True)]
        if builder.device_ranges and not builder.cuda:
            notes.append(f"{builder.device_ranges} CUPTI range-profiler ranges (kernels replayed to read hardware counters) "
                         f"are listed under {DEVICE_RANGES} without time: the trace records no kernel's own run, so device "
                         "time is unknown")  # fmt: skip
        recording.meta.setdefault("warnings", []).extend(note for note in notes if note)
        if not recording.meta["warnings"]:
            del recording.meta["warnings"]
        tree = builder.finish()
        counts = recording.meta.pop("flops_counts", None)
        if flops and isinstance(counts, dict) and apply_counts(tree, counts):
            set_mfu(tree, peak)  # the counts a trace without op shapes carries (an export of an older torchprof's profile)
        return Result(tree, recording, trace_files=_kept(path))


def _kept(path: str) -> Callable[[], list[str]]:
    """The trace files a loaded profile came from (what ``export_chrome_trace`` copies)."""
    return lambda: [path]


def outside_window_note(outside: list[int], host: bool = False) -> str | None:
    """What the window rule left out (``TreeBuilder.outside_window``, or with ``host`` its host
    ranges' ``host_outside_window``), for the summary's notes."""
    whole, part, ns = outside
    if not whole and not part:
        return None
    def things(n: int) -> str:
        return (("host range" if host else "device activity") if n == 1 else ("host ranges" if host else "device activities"))

    what = " and ".join(t for t in (f"{whole} {things(whole)}" if whole else "", f"part of {part} {'more' if whole else things(part)}" if part else "") if t)
    return (f"{what} ({ns / 1e6:.3f} ms) ran outside the profiled window (kineto's span): every "
            f"{'CPU' if host else 'device'} figure counts only the window")


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
    what = "load_trace takes the path of a trace (str or os.PathLike), a folder, a glob or a list of paths"
    if isinstance(path, (bytes, bytearray)) or not isinstance(path, Iterable):
        raise TypeError(f"{what}, not {type(path).__name__}")
    items = list(path)
    bad = [type(p).__name__ for p in items if not isinstance(p, (str, os.PathLike))]
    if bad:
        raise TypeError(f"{what}, not a list holding {bad[0]}")
    files = [os.fspath(p) for p in items]
    if not files:
        raise ValueError("load_trace got an empty list of traces")
    return files


def rank_of(meta: dict[str, Any], path: str) -> int | None:
    """A trace's rank: ``distributedInfo.rank`` (torch.profiler writes it when the process group
    existed before profiling started; torchprof's exports add it otherwise), else the rank its
    file name says (``rank3.json.gz``, ``trace_rank_12.json``, else its last number)."""
    return _rank_and_how(meta, path)[0]


def _rank_and_how(meta: dict[str, Any], path: str) -> tuple[int | None, str]:
    """:func:`rank_of`, and how it was found: ``said`` (its metadata, or "rank" in its name), or
    ``number`` (the last number in its name: a guess)."""
    info = meta.get("distributedInfo")
    if isinstance(info, dict) and isinstance(info.get("rank"), int):
        return int(info["rank"]), "said"
    stem = os.path.basename(path)
    named = _RANK_IN_NAME.search(stem)
    if named is not None:
        return int(named.group(1)), "said"
    numbers = _NUMBER.findall(stem)
    return (int(numbers[-1]), "number") if numbers else (None, "order")


def load_ranks(paths: Sequence[str], *, name: str | None = None, flops: bool = True,
               peak_flops: float | str | None = None) -> Result:
    """Every rank's trace of one distributed job as one profile (``load_trace`` of a list, a folder
    or a glob): the union of the ranks' trees, each figure the mean per rank, with the smallest,
    the largest and the slowest rank of the main times (:func:`~torchprof._tree.ranks.merge_ranks`);
    ``prof.ranks`` and ``prof.by_rank()`` tell them apart. A trace whose rank is known neither
    from its metadata nor from its name takes its place in the list."""
    profiles = _load_each(paths, flops)  # each rank's own peak; the merged tree's MFU is measured below
    ranks: list[int] = []
    seen: dict[int, str] = {}
    guessed: list[str] = []  # how each rank no trace says was decided
    for i, (prof, path) in enumerate(zip(profiles, paths)):
        found, how = _rank_and_how(prof.meta, path)
        rank = i if found is None else found
        if rank in seen:
            raise TraceError(f"{seen[rank]} and {path} are both rank {rank}: give the traces of one job, one per rank")
        seen[rank] = path
        ranks.append(rank)
        if how != "said":
            by = "the last number in its name" if how == "number" else "its place in the list"
            guessed.append(f"{os.path.basename(path)} {'is rank' if not guessed else 'rank'} {rank} by {by}")
    merged = merge_profiles(profiles, ranks, paths, name=name, peak_flops=peak_flops)
    if guessed and len(paths) > 1:
        # Any folder of traces merges: a job's, or unrelated runs' read as its ranks.
        merged.recording.meta.setdefault("warnings", []).append(
            f"no rank in the metadata or name of {len(guessed)} of the {len(paths)} traces: {', '.join(guessed)}; "
            "if they are not the ranks of one job, load each alone")
    return merged


def merge_profiles(profiles: Sequence[Result], ranks: Sequence[int], sources: Sequence[str], *, name: str | None = None,
                   peak_flops: float | str | None = None) -> Result:  # fmt: skip
    """The profiles of a job's ranks (each rank's own tree, however it came: read from its trace,
    or sent by ``torchrun -m torchprof``) as one profile, ordered by rank (see :func:`load_ranks`).
    ``sources`` names where each came from (its trace file); the merged tree's MFU is measured
    against ``peak_flops`` (else the first rank's device at its data type)."""
    order = sorted(range(len(profiles)), key=lambda i: ranks[i])
    profiles = [profiles[i] for i in order]
    ranks = [ranks[i] for i in order]
    paths = [sources[i] for i in order]
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
    recording = Recording(modules=modules, wall_us=sum(walls) / len(walls) if walls else None, label=label, meta=meta,
                          step_times=_ranks_step_times([p.recording.step_times for p in profiles], ranks))  # fmt: skip
    return Result(tree, recording)


#: Below this many bytes of trace files in all, ranks are read one after the other: starting a
#: reader process costs more than it saves.
PARALLEL_FROM_BYTES = 32 << 20


def _load_each(paths: Sequence[str], flops: bool) -> list[Result]:
    """Each trace's profile, read in parallel across cores (one reader process per trace, as many
    at a time as there are cores) when there are several and they are big enough to gain."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        size = sum(os.path.getsize(p) for p in paths)
    except OSError:
        size = 0  # a missing file: the serial path says which
    if len(paths) < 2 or cores < 2 or size < PARALLEL_FROM_BYTES:
        return [_load_one(p, None, flops) for p in paths]
    return _load_in_processes(paths, flops, min(cores, len(paths)))


def _load_in_processes(paths: Sequence[str], flops: bool, workers: int) -> list[Result]:
    """Each trace read by ``python -m torchprof._load`` in a process of its own, its tree and
    recording sent back pickled (a child process of our own, not multiprocessing: that would run
    the user's script again in each child). A reader's error is raised here as it was there."""
    import json
    import pickle
    import subprocess
    import sys

    # The reader runs isolated (-I: no working folder, no PYTHON* variables, no user site first
    # on sys.path), with the parent's own import path less the folders a stranger's files can be
    # in (the working folder, the traces' folders): a module planted beside the traces
    # (``orjson.py``) is never imported.
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the folder torchprof is in
    unsafe = {os.path.realpath(os.getcwd()), *(os.path.realpath(os.path.dirname(os.path.abspath(p))) for p in paths)}
    import_path = [here, *(p for p in sys.path if p and os.path.realpath(p) not in unsafe and p != here)]
    child = [sys.executable, "-I", "-c", _READER, json.dumps(import_path)]
    results: list[Result | None] = [None] * len(paths)
    pending = list(enumerate(paths))
    running: dict[int, subprocess.Popen[bytes]] = {}
    try:
        while pending or running:
            while pending and len(running) < workers:
                k, path = pending.pop(0)
                running[k] = subprocess.Popen([*child, path, "1" if flops else "0"],
                                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
            k = min(running)
            out, err = running[k].communicate()
            code = running.pop(k).returncode
            if code != 0 or not out:
                raise TraceError(f"reading {paths[k]} failed: {err.decode(errors='replace').strip()[-2000:]}")
            outcome = pickle.loads(out)
            if isinstance(outcome, BaseException):
                raise outcome
            tree, recording = outcome
            results[k] = Result(tree, recording, trace_files=_kept(paths[k]))
    finally:
        for proc in running.values():
            proc.kill()
            proc.wait()
    return [r for r in results if r is not None]


#: A reader process's program (``python -I -c``): argv is the import path (JSON), the trace, the
#: FLOPs flag.
_READER = (
    "import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
    "from torchprof._load import _read_for_parent; _read_for_parent(sys.argv[2], sys.argv[3] == '1')"
)


def _read_for_parent(path: str, flops: bool) -> None:
    """In a reader process: one trace's tree and recording (or the error reading it raised),
    pickled to stdout for :func:`_load_in_processes`."""
    import pickle
    import sys

    try:
        prof = _load_one(path, None, flops)
        outcome: Any = (prof.tree, prof.recording)
    except (TraceError, OSError, ValueError) as exc:
        outcome = exc
    sys.stdout.buffer.write(pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL))


def _ranks_step_times(per_rank: list[dict[str, list[Any]]], ranks: list[int]) -> dict[str, list[Any]]:
    """The ranks' step times one after the other, each row with its rank."""
    out: dict[str, list[Any]] = {name: [] for name in STEP_TIME_COLUMNS}
    for times, rank in zip(per_rank, ranks):
        if not times:
            continue
        out["rank"] += [rank] * len(times["step"])
        for name in STEP_TIME_COLUMNS[1:]:
            out[name] += times[name]
    return out if out["step"] else {}


def load(path: PathLike, *, peak_flops: float | str | None = None) -> Result:
    """Reopen a profile written by ``prof.save(path)``: no re-run, same tree, table and widget.
    ``peak_flops`` measures its MFU again against that peak (FLOP/s or a data type)."""
    choose_peak({}, peak_flops, False)
    with paused_gc():  # millions of small objects, no cycles (see _gc.py)
        tree, recording = from_json(read_json(path, expected="a profile written by prof.save()"), os.fspath(path))
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
