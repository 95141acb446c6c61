"""``torchrun --nproc_per_node=N -m torchprof [--out DIR] script.py``: every rank runs the script
under the profiler (torchrun starts and watches the processes; torchprof launches none) and writes
its own trace to ``DIR/rank<r>.json.gz`` (a folder local to each node is fine). Each rank then
reduces its run to its layer tree, which is small (kilobytes to a few MB, whatever the trace's
size), and sends it to rank 0 over torch.distributed; rank 0 merges the trees and prints the job.

How the trees travel (never by a collective: a rank that failed, or one stuck in the script's
own collective, cannot block the others):

* through a c10d store: the process group's own when the script left one, or, when the script
  left none (it destroyed its group, or never made one), the store torchrun gives every worker
  for its rendezvous (``MASTER_ADDR``/``MASTER_PORT``: the elastic agent's store, or one rank 0
  hosts); each rank sets its tree under a key of this run, and rank 0 waits for them, at most
  :data:`WAIT_S` seconds, then merges the ranks that sent one;
* without one (a launcher that is not torchrun and gives no master address), rank 0 waits for
  the other ranks' trace files in ``DIR``, which must then be a shared folder.

A rank whose script failed says so to rank 0 and waits at most :data:`FAILED_WAIT_S`.
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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._views.format import printable

if TYPE_CHECKING:
    from ._result import Result

#: How long rank 0 waits for the other ranks' trees (or, without a store, their trace files).
WAIT_S = 600.0
_POLL_S = 0.05
#: A payload is a tree (zlib of the saved profile's JSON) or why the rank has none.
_TREE, _ERROR = b"T", b"E"
#: Rank 0's exit status when the launcher stopped the job while it reported (128 + SIGTERM).
EXIT_TERMINATED = 143


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
#: How long a rank whose script failed waits: rank 0 for the other ranks' trees (they may be stuck
#: in a collective the failed rank never joined), another rank for rank 0's script to end (then
#: for its report: torchrun stops every rank once one fails). A job whose rank fails while another
#: is stuck ends at most this much later than it would without torchprof. The environment
#: variable ``TORCHPROF_FAILED_RANK_WAIT_S`` sets it (a cluster whose rank 0 takes longer to stop).
FAILED_WAIT_S = 5.0


def _failed_wait_s() -> float:
    try:
        wait = float(os.environ.get("TORCHPROF_FAILED_RANK_WAIT_S", FAILED_WAIT_S))
    except ValueError:
        return FAILED_WAIT_S
    return wait if wait >= 0 else FAILED_WAIT_S


@dataclass
class Gathered:
    """What rank 0 got (``{rank: payload}``; empty on the other ranks), how it came, the ranks
    whose script failed (``{rank: what it raised}``) and how long rank 0 waited for each rank
    that sent nothing."""

    trees: dict[int, bytes]
    how: str
    failed: dict[int, str] = field(default_factory=dict)
    waited: dict[int, float] = field(default_factory=dict)
    store: Any = None
    tag: str = "0"

    def done(self) -> None:
        """Rank 0 has reported: a failed rank waiting to exit (:data:`FAILED_WAIT_S`) may go."""
        if self.store is not None:
            with contextlib.suppress(Exception):  # a store already gone: nobody waits
                self.store.set(_key("done", self.tag), b"1")


def gather_trees(payload: bytes, rank: int, world: int, timeout: float = WAIT_S, close_group: bool = False,
                 failed: str | None = None) -> Gathered | None:  # fmt: skip
    """Every rank's payload at rank 0, through a c10d store (never a collective: a rank that
    failed, or one stuck in the script's own collective, cannot block the others); None when the
    job offers no store. ``failed``: what this rank's script raised (told to rank 0, and this
    rank waits at most :data:`FAILED_WAIT_S`). ``close_group``: the process is about to end;
    close the script's process group after use."""
    found = _store(rank, world, timeout)
    if found is None:
        return None
    store, how = found
    global _exchanges
    _exchanges += 1
    tag = str(_exchanges)
    if rank == 0:
        with contextlib.suppress(Exception):
            store.set(_key("reporting", tag), b"1")  # its script is over: a failed rank waits for its report
    elif failed is not None:
        store.set(_key(f"failed/{rank}", tag), failed.encode(errors="replace"))
    waited: dict[int, float] = {}
    trees = exchange(store, payload, rank, world, _failed_wait_s() if failed is not None else timeout, tag, waited)
    failures = {}
    if rank == 0:
        if failed is not None:
            failures[0] = failed
        for r in range(1, world):
            with contextlib.suppress(Exception):
                key = _key(f"failed/{r}", tag)
                if store.check([key]):
                    failures[r] = bytes(store.get(key)).decode(errors="replace")
    elif failed is not None and _poll(store, _key("reporting", tag), time.monotonic() + _failed_wait_s()):
        # Rank 0 may be stuck in a collective this rank never joined: this rank waits a little
        # for its script to end and, once it reports, for the report (torchrun stops rank 0
        # when this rank exits). No wait is without an end: it is never why a job hangs.
        _poll(store, _key("done", tag), time.monotonic() + timeout)

    if close_group:
        _close_group()
    return Gathered(trees, how, failures, waited, store, tag)


def _close_group() -> None:
    with contextlib.suppress(Exception):
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()


def exchange(store: Any, payload: bytes, rank: int, world: int, timeout: float, tag: str = "0",
             waited: dict[int, float] | None = None) -> dict[int, bytes]:  # fmt: skip
    """Through a c10d store: each rank sets its payload under its key (``tag`` names the
    exchange); rank 0 waits for the others (at most ``timeout`` seconds in all), reads them and
    deletes their keys. ``waited`` gets, for each rank that sent nothing, the seconds rank 0
    waited for it."""
    if rank != 0:
        store.set(_key(f"tree/{rank}", tag), payload)
        return {}
    got = {0: payload}
    started = time.monotonic()
    deadline = started + timeout
    for r in range(1, world):
        key = _key(f"tree/{r}", tag)
        if _poll(store, key, deadline):
            got[r] = bytes(store.get(key))
            with contextlib.suppress(Exception):  # a store without deletes keeps the key; nothing is lost
                store.delete_key(key)
        elif waited is not None:
            waited[r] = time.monotonic() - started
    return got


def _poll(store: Any, key: str, deadline: float) -> bool:
    """Whether ``key`` is in ``store`` by ``deadline`` (``time.monotonic()``). Polled, not
    waited on: a launcher stopping the job (SIGTERM: another rank died) ends the wait, and so
    does a store whose server is gone; and c10d logs no timeout."""
    while True:
        try:
            if store.check([key]):
                return True
        except Exception:  # noqa: BLE001 - its server is gone (the rank or agent hosting it died)
            return False
        if _STOP.asked or time.monotonic() >= deadline:
            return False
        time.sleep(_POLL_S)


class _StopRequests:
    """Whether the process got SIGTERM while rank 0 gathered and reported (a launcher stopping
    the job)."""

    asked = False


_STOP = _StopRequests()


@contextlib.contextmanager
def _stop_requests() -> Any:
    """While rank 0 waits for trees and reports them, SIGTERM (torchrun stopping every rank once
    one died; SIGKILL follows 30 s later) ends the wait instead of the process, so rank 0 reports
    the ranks it has; the handler before is put back after. Only on the main thread, where
    Python can install one."""
    import signal
    import threading

    _STOP.asked = False

    def asked(signum: int, frame: Any) -> None:
        _STOP.asked = True

    before: Any = None
    if threading.current_thread() is threading.main_thread():
        with contextlib.suppress(ValueError, OSError):
            before = signal.signal(signal.SIGTERM, asked)
    try:
        yield _STOP
    finally:
        if before is not None:
            signal.signal(signal.SIGTERM, before)
        if _STOP.asked:
            print("torchprof: rank 0 was asked to stop (SIGTERM: the launcher ends the job) while it gathered the "
                  "ranks' trees: the job's report has the ranks that sent theirs", file=sys.stderr)  # fmt: skip


_exchanges = 0  # this process's exchanges so far: every rank makes them in the same order


def _key(what: str, tag: str) -> str:
    """Unique to this run and restart of the job (a restarted job never reads an old tree) and to
    the exchange (a process that gathers several profiles, one per trainer, reads each once)."""
    run = os.environ.get("TORCHELASTIC_RUN_ID", "job")
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    return f"torchprof/{run}/{restart}/{tag}/{what}"


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
    while missing and time.monotonic() < deadline and not _STOP.asked:
        time.sleep(_POLL_S)
        missing = [p for p in missing if not os.path.exists(p)]
    return missing


# -- the rank's part -----------------------------------------------------------------------------------
def report_rank(prof: Result, args: argparse.Namespace, title: str, report: Callable[..., int], *,
                close_group: bool = False, failed: str | None = None) -> int:  # fmt: skip
    """This rank's part once its script ended: write its trace to its folder, send its tree to
    rank 0; rank 0 merges every rank's tree and reports the job with ``report`` (the single-run
    report: summary, table, output files). 0, or 1 when this rank's trace or tree could not be
    written, sent or merged. ``close_group``: the process is about to end (``torchrun -m
    torchprof`` after the script), so the process group the trees went through is closed (a gloo
    group left open at exit can abort the process); a caller whose process goes on keeps it.
    ``failed``: what this rank's script raised (rank 0 names the rank; nobody waits long for it)."""
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
    if rank == 0:
        with _stop_requests() as stop:
            status = _report_job(prof, payload, args, title, report, folder, world, started, close_group, failed) or status
        return status or (EXIT_TERMINATED if stop.asked else 0)
    try:
        gathered = gather_trees(payload, rank, world, close_group=close_group, failed=failed)
    except Exception as exc:  # noqa: BLE001 - a broken store (rank 0 gone): this rank reports what it can
        print(printable(f"torchprof: rank {rank}: cannot send its tree to rank 0: {type(exc).__name__}: {exc}"), file=sys.stderr)
        gathered = None
        status = 1
    sent = "sent its tree to rank 0" if gathered is not None and status == 0 else "sent nothing"
    print(printable(f"torchprof: rank {rank} wrote {path}, {sent}"), file=sys.stderr)
    return status


def _report_job(prof: Result, payload: bytes, args: argparse.Namespace, title: str, report: Callable[..., int],
                folder: str, world: int, started: float, close_group: bool, failed: str | None) -> int:  # fmt: skip
    """Rank 0's part: gather the trees, merge and report them."""
    try:
        gathered = gather_trees(payload, 0, world, close_group=close_group, failed=failed)
    except Exception as exc:  # noqa: BLE001 - a broken store: rank 0 reports itself
        print(printable(f"torchprof: rank 0: cannot gather the ranks' trees: {type(exc).__name__}: {exc}"), file=sys.stderr)
        gathered = Gathered({0: payload}, "nothing", {0: failed} if failed else {})
        return _merge_trees(prof, gathered, args, title, report, folder, world, started) or 1
    if gathered is None:
        return _merge_files(prof, args, title, report, folder, world)
    try:
        return _merge_trees(prof, gathered, args, title, report, folder, world, started)
    finally:
        gathered.done()


def _merge_trees(prof: Result, gathered: Gathered, args: argparse.Namespace, title: str,
                 report: Callable[..., int], folder: str, world: int, started: float) -> int:  # fmt: skip
    from ._errors import TraceError
    from ._load import merge_profiles

    trees = gathered.trees
    profiles, ranks, problems = [], [], []
    for r in range(world):
        payload = trees.get(r)
        if payload is None:
            waited = gathered.waited.get(r)
            problems.append(f"rank {r} sent no tree" + (f" (rank 0 waited {waited:.2f}s)" if waited is not None else ""))
            continue
        try:
            profiles.append(prof if r == 0 and payload[:1] == _TREE else decode_tree(payload, f"rank {r}"))
        except TraceError as exc:
            problems.append(str(exc))
            continue
        ranks.append(r)
    for r, what in sorted(gathered.failed.items()):
        problems.append(f"rank {r}'s script failed ({what})")
    for problem in problems:
        print(printable(f"torchprof: {problem}; merging the ranks that sent theirs"), file=sys.stderr)
    if not profiles:
        return 1
    merged = merge_profiles(profiles, ranks, [trace_path(folder, r) for r in ranks], name=prof.recording.label)
    _ = merged.tree  # built now, so the time below is the whole merge
    size = sum(len(p) for p in trees.values())
    print(printable(f"torchprof: merged {len(ranks)} ranks' trees ({size / 1e6:.2f} MB) from {gathered.how} in "
                    f"{time.perf_counter() - started:.2f}s"), file=sys.stderr)  # fmt: skip
    nodes = int(os.environ.get("GROUP_WORLD_SIZE", "1") or 1)
    where = f"traces in {folder}" + (f" on each of {nodes} nodes" if nodes > 1 else "")
    missing = [r for r in range(world) if r not in ranks]
    failed = sorted(gathered.failed)
    notes = []
    if failed:
        notes.append(f"rank{'s' if len(failed) > 1 else ''} {', '.join(map(str, failed))} failed")
    if missing:
        notes.append(f"no tree from rank{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))}")
    if notes:
        title = f"{title} ({'; '.join(notes)})"
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
