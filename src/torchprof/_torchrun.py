"""``torchrun --nproc_per_node=N -m torchprof [--out DIR] script.py``: every rank runs the script
under the profiler (torchrun starts and watches the processes; torchprof launches none) and writes
its own trace to ``DIR/rank<r>.json.gz`` (a folder local to each node is fine). Each rank then
reduces its run to its layer tree, which is small (kilobytes to a few MB, whatever the trace's
size), and sends it to rank 0 over torch.distributed; rank 0 merges the trees and prints the job.

How the trees travel:

* through the job's process group, when the script left one that carries CPU objects (gloo):
  ``gather_object`` to rank 0 (after the script, the group is then closed);
* else through a c10d store: the process group's own (an NCCL group), or, when the script left
  none (it destroyed its group, or never made one), the store torchrun gives every worker for its
  rendezvous (``MASTER_ADDR``/``MASTER_PORT``: the elastic agent's store, or one rank 0 hosts);
  each rank sets its tree under a key of this run, and rank 0 waits for them, at most
  :data:`WAIT_S` seconds, then merges the ranks that sent one;
* without either (a launcher that is not torchrun and gives no master address), rank 0 waits for
  the other ranks' trace files in ``DIR``, which must then be a shared folder.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._views.format import printable

if TYPE_CHECKING:
    from ._result import Result

#: How long rank 0 waits for the other ranks' trees (or, without a store, their trace files).
WAIT_S = 600.0
_POLL_S = 0.2
#: A payload is a tree (zlib of the saved profile's JSON) or why the rank has none.
_TREE, _ERROR = b"T", b"E"


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


# -- a rank's tree as bytes ---------------------------------------------------------------------------
def encode_tree(prof: Result) -> bytes:
    """The rank's finished tree and recording (what ``prof.save`` writes), compressed; or, when the
    tree cannot be built, why (rank 0 then names the rank and merges the others)."""
    from ._tree.storage import to_json

    try:
        text = json.dumps(to_json(prof.tree, prof.recording), separators=(",", ":"))
    except Exception as exc:  # noqa: BLE001 - told to rank 0, which merges the other ranks
        return _ERROR + f"{type(exc).__name__}: {exc}".encode()
    return _TREE + zlib.compress(text.encode(), 1)


def decode_tree(payload: bytes, where: str) -> Result:
    """A tree :func:`encode_tree` made; ``TraceError`` naming ``where`` when it is not one."""
    from ._errors import TraceError
    from ._result import Result
    from ._tree.storage import from_json

    if payload[:1] == _ERROR:
        raise TraceError(f"{where} has no tree: {payload[1:].decode(errors='replace')}")
    try:
        data = json.loads(zlib.decompress(payload[1:]))
    except (zlib.error, ValueError) as exc:
        raise TraceError(f"{where} sent no readable tree ({exc})") from None
    tree, recording = from_json(data, where)
    return Result(tree, recording)


# -- the trees to rank 0 -------------------------------------------------------------------------------
def gather_trees(payload: bytes, rank: int, world: int, timeout: float = WAIT_S,
                 close_group: bool = False) -> tuple[dict[int, bytes], str] | None:  # fmt: skip
    """Every rank's payload at rank 0 (``{rank: payload}``, the ranks that sent one; empty on the
    other ranks) and how they came; None when the job offers no way (no process group, no store).
    ``close_group``: the process is about to end; close the process group after use."""
    group = _gloo_group()
    if group:
        import torch.distributed as dist

        gathered: list[Any] = [None] * world if rank == 0 else []
        dist.gather_object(payload, gathered if rank == 0 else None, dst=0)
        # No rank leaves while another still reads from it: a gloo rank that exits then, or with
        # its group left open, can abort ("terminate called without an active exception").
        dist.barrier()
        if close_group:
            dist.destroy_process_group()
        return {r: p for r, p in enumerate(gathered) if isinstance(p, bytes)}, "the job's process group"
    found = _store(rank, world, timeout)
    if found is None:
        return None
    store, how = found
    global _exchanges
    _exchanges += 1
    return exchange(store, payload, rank, world, timeout, str(_exchanges)), how


def exchange(store: Any, payload: bytes, rank: int, world: int, timeout: float, tag: str = "0") -> dict[int, bytes]:
    """Through a c10d store: each rank sets its payload under its key (``tag`` names the
    exchange); rank 0 waits for the others (at most ``timeout`` seconds in all), reads them and
    deletes their keys."""
    from datetime import timedelta

    if rank != 0:
        store.set(_key(rank, tag), payload)
        return {}
    got = {0: payload}
    deadline = time.monotonic() + timeout
    for r in range(1, world):
        left = deadline - time.monotonic()
        try:
            store.wait([_key(r, tag)], timedelta(seconds=max(left, 0.001)))
        except Exception:  # noqa: BLE001 - a timeout (DistStoreError): merge the ranks that sent theirs
            continue
        got[r] = bytes(store.get(_key(r, tag)))
        with contextlib.suppress(Exception):  # a store without deletes keeps the key; nothing is lost
            store.delete_key(_key(r, tag))
    return got


_exchanges = 0  # this process's exchanges so far: every rank makes them in the same order


def _key(rank: int, tag: str) -> str:
    """Unique to this run and restart of the job (a restarted job never reads an old tree) and to
    the exchange (a process that gathers several profiles, one per trainer, reads each once)."""
    run = os.environ.get("TORCHELASTIC_RUN_ID", "job")
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    return f"torchprof/{run}/{restart}/{tag}/tree/{rank}"


def _gloo_group() -> bool:
    """The script left a default process group that can carry CPU objects."""
    try:
        import torch.distributed as dist

        return bool(dist.is_available() and dist.is_initialized() and "gloo" in str(dist.get_backend()))
    except (ImportError, RuntimeError, ValueError):
        return False


def _store(rank: int, world: int, timeout: float) -> tuple[Any, str] | None:
    """The process group's store when one remains, else the store of torchrun's rendezvous."""
    try:
        import torch.distributed as dist
    except ImportError:  # pragma: no cover - a torch build without distributed
        return None
    try:
        if dist.is_available() and dist.is_initialized():
            return dist.distributed_c10d._get_default_store(), "the process group's store"
    except (RuntimeError, ValueError, AttributeError):
        pass
    host, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
    if not host or not port or not port.isdigit():
        return None
    from datetime import timedelta

    from torch.distributed import TCPStore  # type: ignore[attr-defined]  # in c10d, not in its stubs' exports

    # torchrun's agent serves the store at the master address (TORCHELASTIC_USE_AGENT_STORE);
    # otherwise rank 0 hosts it, as init_process_group would.
    agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == str(True)
    store = TCPStore(host, int(port), world_size=world, is_master=not agent and rank == 0,
                          timeout=timedelta(seconds=timeout), wait_for_workers=False, multi_tenant=True)  # fmt: skip
    return store, "torchrun's store"


def wait_for_files(paths: list[str], timeout: float = WAIT_S) -> list[str]:
    """Without a store: wait until every rank's trace exists in the (shared) folder (traces are
    written to a temporary name and renamed, so one that exists is complete), for at most
    ``timeout`` seconds. Returns the paths still missing."""
    deadline = time.monotonic() + timeout
    missing = [p for p in paths if not os.path.exists(p)]
    while missing and time.monotonic() < deadline:
        time.sleep(_POLL_S)
        missing = [p for p in missing if not os.path.exists(p)]
    return missing


# -- the rank's part -----------------------------------------------------------------------------------
def report_rank(prof: Result, args: argparse.Namespace, title: str, report: Callable[..., int], *,
                close_group: bool = False) -> int:  # fmt: skip
    """This rank's part once its script ended: write its trace to its folder, send its tree to
    rank 0; rank 0 merges every rank's tree and reports the job with ``report`` (the single-run
    report: summary, table, output files). 0, or 1 when this rank's trace or tree could not be
    written, sent or merged. ``close_group``: the process is about to end (``torchrun -m
    torchprof`` after the script), so the process group the trees went through is closed (a gloo
    group left open at exit can abort the process); a caller whose process goes on keeps it."""
    rank, world = job()
    folder = out_dir(getattr(args, "out", None))
    path = trace_path(folder, rank)
    status = 0
    try:
        os.makedirs(folder, exist_ok=True)
        prof.export_chrome_trace(path)
    except (OSError, ValueError) as exc:
        print(printable(f"torchprof: rank {rank}: cannot write its trace {path}: {exc}"), file=sys.stderr)
        status = 1
    if world <= 1:
        return report(prof, args, title=f"{title} · traces in {folder}") or status
    started = time.perf_counter()
    payload = encode_tree(prof)
    try:
        gathered = gather_trees(payload, rank, world, close_group=close_group)
    except Exception as exc:  # noqa: BLE001 - a broken group or store: this rank reports what it can
        print(printable(f"torchprof: rank {rank}: cannot send the trees to rank 0: {type(exc).__name__}: {exc}"), file=sys.stderr)
        gathered = ({0: payload} if rank == 0 else {}), "nothing"
        status = 1
    if rank != 0:
        sent = "sent its tree to rank 0" if gathered is not None and status == 0 else "sent nothing"
        print(printable(f"torchprof: rank {rank} wrote {path}, {sent}"), file=sys.stderr)
        return status
    if gathered is None:
        return _merge_files(prof, args, title, report, folder, world) or status
    trees, how = gathered
    return _merge_trees(prof, trees, how, args, title, report, folder, world, started) or status


def _merge_trees(prof: Result, trees: dict[int, bytes], how: str, args: argparse.Namespace, title: str,
                 report: Callable[..., int], folder: str, world: int, started: float) -> int:  # fmt: skip
    from ._errors import TraceError
    from ._load import merge_profiles

    profiles, ranks, problems = [], [], []
    for r in range(world):
        payload = trees.get(r)
        if payload is None:
            problems.append(f"rank {r} sent no tree within {WAIT_S:.0f}s")
            continue
        try:
            profiles.append(prof if r == 0 and payload[:1] == _TREE else decode_tree(payload, f"rank {r}"))
        except TraceError as exc:
            problems.append(str(exc))
            continue
        ranks.append(r)
    for problem in problems:
        print(printable(f"torchprof: {problem}; merging the ranks that sent theirs"), file=sys.stderr)
    if not profiles:
        return 1
    merged = merge_profiles(profiles, ranks, [trace_path(folder, r) for r in ranks], name=prof.recording.label)
    _ = merged.tree  # built now, so the time below is the whole merge
    size = sum(len(p) for p in trees.values())
    print(printable(f"torchprof: merged {len(ranks)} ranks' trees ({size / 1e6:.2f} MB) from {how} in "
                    f"{time.perf_counter() - started:.2f}s"), file=sys.stderr)  # fmt: skip
    nodes = int(os.environ.get("GROUP_WORLD_SIZE", "1") or 1)
    where = f"traces in {folder}" + (f" on each of {nodes} nodes" if nodes > 1 else "")
    return report(merged, args, title=f"{title} · {world} ranks, {where}") or (1 if problems else 0)


def _merge_files(prof: Result, args: argparse.Namespace, title: str, report: Callable[..., int], folder: str, world: int) -> int:
    """No process group and no store: the other ranks' traces, from a shared folder."""
    from ._errors import TraceError
    from ._load import load_trace

    paths = [trace_path(folder, r) for r in range(world)]
    missing = wait_for_files(paths)
    if missing:
        print(printable(f"torchprof: no trace from {', '.join(missing)} after {WAIT_S:.0f}s; merging the ranks that finished"),
              file=sys.stderr)  # fmt: skip
    try:
        merged = load_trace([p for p in paths if p not in missing], name=prof.recording.label)
    except (OSError, TraceError) as exc:
        print(printable(f"torchprof: cannot merge the ranks' traces: {exc}"), file=sys.stderr)
        return 1
    return report(merged, args, title=f"{title} · {world} ranks, traces in {folder}")
