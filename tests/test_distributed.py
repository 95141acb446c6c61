"""Real ``torchrun`` jobs on the CPU (gloo), every rank profiled: a DistributedDataParallel training
on one node whose 2 ranks each run a Profiler (the numbers each rank reports are true, its trace
carries the rank, the ranks merge into one view, each bucket's all-reduce lands on its layers), and
``torchrun -m torchprof`` profiling from outside a 4-rank DDP training on two nodes and an FSDP2
training on one node and on two (one trace per rank in each node's own folder, the trees sent to
rank 0 over torch.distributed, rank 0 prints the merged job). Two nodes are two torchrun launchers
on 127.0.0.1 sharing no folder."""

from __future__ import annotations

import gzip
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import torchprof
import torchprof._tree.builder as builder_module

JOBS = Path(__file__).resolve().parent / "jobs"
pytestmark = pytest.mark.slow


def _env(cwd: Path) -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo", "PYTHONUNBUFFERED": "1", "TMPDIR": str(cwd)}


def _launch(args: list[str], cwd: Path, log: Path) -> tuple[subprocess.Popen, object]:
    """One torchrun launcher: output to a file (ranks that outlive a killed launcher would hold a
    pipe open), its own session."""
    out = open(log, "w+")  # closed by _finish
    proc = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", *args], cwd=cwd, env=_env(cwd), stdout=out,
                            stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    return proc, out


def _finish(launched: list[tuple[subprocess.Popen, object]], timeout: float) -> list[tuple[int, str]]:
    """Wait for every launcher; one still running after ``timeout`` gets SIGTERM, then SIGKILL,
    and the test fails with the logs."""
    results = []
    for proc, out in launched:
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            for other, _ in launched:
                if other.poll() is None:
                    other.send_signal(signal.SIGTERM)
            for other, _ in launched:
                try:
                    other.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    other.kill()
                    other.wait()
            logs = []
            for _, log in launched:
                log.seek(0)  # type: ignore[attr-defined]
                logs.append(log.read()[-3000:])  # type: ignore[attr-defined]
            pytest.fail(f"torchrun did not finish in {timeout}s:\n" + "\n----\n".join(logs))
        out.seek(0)  # type: ignore[attr-defined]
        results.append((code, out.read()))  # type: ignore[attr-defined]
        out.close()  # type: ignore[attr-defined]
    return results


def torchrun(script: Path | str, *args: str, cwd: Path, nproc: int = 2, timeout: float = 180) -> tuple[int, str]:
    """``python -m torch.distributed.run --standalone``: one node, ``nproc`` ranks."""
    launched = [_launch(["--standalone", f"--nproc_per_node={nproc}", str(script), *args], cwd, cwd / "torchrun.log")]
    return _finish(launched, timeout)[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def torchrun_nodes(script: list[str], folders: list[Path], nproc: int, timeout: float = 240) -> list[tuple[int, str]]:
    """A job of ``len(folders)`` nodes on this machine: one torchrun launcher per node (static
    rendezvous on a free port of 127.0.0.1, node ranks in order), each working in its own folder
    (``{folder}`` in ``script`` becomes it). Returns each node's exit code and output."""
    port = free_port()
    launched = []
    for node, folder in reversed(list(enumerate(folders))):  # node 0 last: the others wait for it
        args = [f"--nnodes={len(folders)}", f"--nproc_per_node={nproc}", f"--node_rank={node}", "--master_addr=127.0.0.1",
                f"--master_port={port}", *(a.replace("{folder}", str(folder)) for a in script)]  # fmt: skip
        launched.append(_launch(args, folder, folder / "torchrun.log"))
    return list(reversed(_finish(launched, timeout)))


def raw(path: Path | str) -> torchprof.Result:
    """The trace read without moving communication (as torchprof did before it put it on layers)."""
    keep = builder_module.attribute_comm
    builder_module.attribute_comm = lambda *args: None  # type: ignore[assignment]
    try:
        prof = torchprof.load_trace(path)
        _ = prof.tree  # built while the pass is off
        return prof
    finally:
        builder_module.attribute_comm = keep


@pytest.fixture(scope="module")
def ddp_job(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ddp")
    code, log = torchrun(JOBS / "ddp_train.py", str(out), cwd=out)
    assert code == 0, log[-4000:]
    return out


def test_each_rank_counts_parameters_once_and_puts_backward_on_the_layers(ddp_job):
    facts = json.loads((ddp_job / "facts.json").read_text())
    for rank in range(facts["world_size"]):
        prof = torchprof.load(ddp_job / f"rank{rank}.profile.json")
        df = prof.df
        assert prof.summary["params"] == facts["params"]
        assert df.iloc[0]["params"] == facts["params"]
        layers = df[df.type.isin(["Conv2d", "Linear"])]
        assert list(layers.module.sort_values()) == [f"DistributedDataParallel.module.{i}" for i in (0, 3, 5)]
        assert (layers.bwd_cpu_us > 0).all() and (layers.fwd_cpu_us > 0).all()
        split = df.fwd_cpu_us + df.bwd_cpu_us + df.other_cpu_us
        assert ((split - df.cpu_us).abs() < 1e-6 * df.cpu_us.max()).all()


def test_each_rank_trace_carries_its_rank_and_reloads_to_the_same_tree(ddp_job):
    for rank in (0, 1):
        trace = ddp_job / f"rank{rank}.json.gz"
        prof = torchprof.load_trace(trace)
        info = prof.meta["distributedInfo"]
        assert (info["backend"], info["rank"], info["world_size"]) == ("gloo", rank, 2)
        saved = torchprof.load(ddp_job / f"rank{rank}.profile.json")
        modules = prof.df[prof.df.kind == "module"]
        assert set(modules.index) == set(saved.df[saved.df.kind == "module"].index)
        assert prof.summary["params"] == saved.summary["params"]
        assert any(name.startswith(("gloo:", "c10d::")) for name in prof.df.name)


ALL_REDUCE = ("c10d::allreduce_", "gloo:all_reduce")


def _bucket_bytes(layout: dict, path: str) -> dict[str, int]:
    """Per module path, the gradient bytes of the bucket that holds ``path`` (of the first layout
    the capture recorded: the one DDP uses once it rebuilt its buckets)."""
    for bucket in layout["maps"][0]:
        paths = [layout["params"][i] for i in bucket]
        if any(p == path for p, _ in paths):
            out: dict[str, int] = {}
            for p, nbytes in paths:
                out[p] = out.get(p, 0) + nbytes
            return out
    raise AssertionError(f"{path} in no bucket")


def test_each_bucket_all_reduce_lands_on_its_layers_split_by_their_gradient_bytes(ddp_job):
    net = "DistributedDataParallel.module"
    for rank in (0, 1):
        trace = ddp_job / f"rank{rank}.json.gz"
        layout = json.loads(gzip.decompress(trace.read_bytes()))["torchprof"]["ddp_buckets"][0]  # from DDP's reducer
        assert len(layout["maps"][0]) == 2  # Linear 3's weight fills the first bucket, Conv2d 0 is the second
        assert torchprof.load_trace(trace).unsupported_ops == {}  # every FLOP of the rank's steps, from its trace
        split, before = torchprof.load_trace(trace).df, raw(trace).df
        # Before: the all-reduce under "(backward, no module)", gloo's worker range at the root.
        assert before[before.name == "c10d::allreduce_"].parent.str.contains("AccumulateGrad").all()
        assert "gloo:all_reduce" in before.index and not before.loc["gloo:all_reduce", "is_backward"]
        comm = split[split.name.isin(ALL_REDUCE)]
        assert set(comm.parent) == {f"{net}.0", f"{net}.3", f"{net}.5"} and comm.is_backward.all()
        for name in ALL_REDUCE:  # the layers' parts add up to the raw all-reduce
            assert comm[comm.name == name].cpu_us.sum() == pytest.approx(before[before.name == name].cpu_us.sum(), abs=1e-3)
        # Linear 3 and Linear 5 share the first bucket by their bytes (32832 and 272).
        shared = _bucket_bytes(layout, f"{net}.5")
        for name in ALL_REDUCE:
            # Linear 5's part is under 1% of the bucket's: compared in µs to the trace's own
            # precision (ns), not as a ratio, which a short all-reduce's rounding moves by 0.1%.
            parts = split.loc[f"{net}.5/{name}", "cpu_us"], split.loc[f"{net}.3/{name}", "cpu_us"]
            share = shared[f"{net}.5"] / (shared[f"{net}.5"] + shared[f"{net}.3"])
            assert parts[0] == pytest.approx(sum(parts) * share, abs=2e-3)
        assert set(_bucket_bytes(layout, f"{net}.0")) == {f"{net}.0"}
        # Shown as the layers' backward communication, partly exposed; the live profile agrees.
        assert (split.comm_exposed_cpu_us <= split.comm_cpu_us + 1e-9).all()
        assert split.loc[f"{net}.3", "comm_cpu_us"] >= split.loc[f"{net}.3/gloo:all_reduce", "cpu_us"] > 0
        # The live profile splits the same way. (A worker range still running when the profiler
        # stopped can end at another time in the live events than in the trace: compare shares.)
        live = torchprof.load(ddp_job / f"rank{rank}.profile.json").df
        assert set(live[live.name.isin(ALL_REDUCE)].index) == set(comm.index)
        for name in ALL_REDUCE:
            parts = live.loc[f"{net}.5/{name}", "cpu_us"], live.loc[f"{net}.3/{name}", "cpu_us"]
            share = shared[f"{net}.5"] / (shared[f"{net}.5"] + shared[f"{net}.3"])
            assert parts[0] == pytest.approx(sum(parts) * share, abs=2e-3)


def test_the_ranks_merge_into_one_view_with_their_communication(ddp_job):
    prof = torchprof.load_trace(str(ddp_job / "rank*.json.gz"))
    assert prof.ranks == [0, 1]
    df = prof.df
    layers = df[df.type.isin(["Conv2d", "Linear"])]
    assert (layers.bwd_cpu_us > 0).all() and set(layers.cpu_us_max_rank) <= {0, 1}
    assert (layers.cpu_us_min <= layers.cpu_us).all() and (layers.cpu_us <= layers.cpu_us_max).all()
    assert (layers.comm_cpu_us > 0).all()
    by_rank = prof.by_rank()
    assert list(by_rank["rank"]) == [0, 1] and (by_rank.comm_us > 0).all()
    assert "CPU rank spread" in prof.table(min_pct=0, width=0)
    for rank in (0, 1):  # the live profile kept its rank, saved
        assert torchprof.load(ddp_job / f"rank{rank}.profile.json").ranks == [rank]


def _nodes(tmp_path_factory, name: str, script: str, *args: str, nodes: int, nproc: int) -> tuple[list[Path], list[str]]:
    """``torchrun --nnodes=N -m torchprof --out <node folder>/traces script``, each node in a folder
    of its own (no shared disk): the nodes' trace folders and outputs."""
    top = tmp_path_factory.mktemp(name)
    folders = [top / f"node{n}" for n in range(nodes)]
    for folder in folders:
        folder.mkdir()
    command = ["-m", "torchprof", "--width", "0", "--out", "{folder}/traces", str(JOBS / script), *args]
    results = torchrun_nodes(command, folders, nproc)
    for (code, log), folder in zip(results, folders):
        assert code == 0, f"{folder.name}:\n{log[-6000:]}"
    return [f / "traces" for f in folders], [log for _, log in results]


@pytest.fixture(scope="module")
def cli_ddp(tmp_path_factory) -> tuple[list[Path], list[str]]:
    """4 ranks on 2 nodes; the script leaves its process group open (the trees go through it)."""
    return _nodes(tmp_path_factory, "cli-ddp", "ddp_train.py", "--plain", nodes=2, nproc=2)


@pytest.fixture(scope="module")
def cli_fsdp(tmp_path_factory) -> tuple[Path, str]:
    """2 ranks on one node; the script destroys its group (the trees go through torchrun's store)."""
    out = tmp_path_factory.mktemp("cli-fsdp")
    code, log = torchrun("-m", "torchprof", "--out", str(out / "traces"), str(JOBS / "fsdp_train.py"), cwd=out)
    assert code == 0, log[-6000:]
    return out / "traces", log


@pytest.fixture(scope="module")
def cli_fsdp_nodes(tmp_path_factory) -> tuple[list[Path], list[str]]:
    return _nodes(tmp_path_factory, "cli-fsdp-nodes", "fsdp_train.py", nodes=2, nproc=1)


def test_torchrun_m_torchprof_on_two_nodes_without_a_shared_folder_merges_through_the_process_groups_store(cli_ddp):
    folders, logs = cli_ddp
    # Each node keeps its own ranks' traces; rank 0 got the others' trees, not their files.
    assert [sorted(p.name for p in f.iterdir()) for f in folders] == [["rank0.json.gz", "rank1.json.gz"],
                                                                      ["rank2.json.gz", "rank3.json.gz"]]  # fmt: skip
    assert logs[0].count("torchprof: ddp_train.py · 4 ranks, traces in") == 1 and "on each of 2 nodes" in logs[0]
    assert "merged 4 ranks' trees" in logs[0] and "from the process group's store" in logs[0]
    assert "· 4 ranks" not in logs[1] and "torchprof: rank 3 wrote" in logs[1] and "sent its tree to rank 0" in logs[1]
    assert "CPU rank spread" in logs[0] and "──DistributedDataParallel " in logs[0]
    for rank in range(4):
        data = json.loads(gzip.decompress((folders[rank // 2] / f"rank{rank}.json.gz").read_bytes()))
        # The group began inside the profiled run: torch wrote no rank, torchprof's block did.
        assert "distributedInfo" not in data
        assert data["torchprof"]["distributedInfo"] == {"backend": "gloo", "rank": rank, "world_size": 4}
    prof = torchprof.load_trace([t for f in folders for t in sorted(f.iterdir())])
    assert prof.ranks == [0, 1, 2, 3] and prof.summary["name"] == "ddp_train.py (4 ranks)"
    layers = prof.df[prof.df.type.isin(["Conv2d", "Linear"])]
    assert len(layers) == 3 and (layers.bwd_cpu_us > 0).all() and (layers.comm_cpu_us > 0).all()
    assert (prof.by_rank().comm_us > 0).all()


def test_every_ddp_bucket_of_a_4_rank_job_lands_on_its_layers_also_before_the_buckets_were_rebuilt(cli_ddp):
    folders, _ = cli_ddp
    for rank in range(4):
        trace = folders[rank // 2] / f"rank{rank}.json.gz"
        split, before = torchprof.load_trace(trace).df, raw(trace).df
        # The first step all-reduces DDP's initial layout (one bucket of every gradient), the two
        # later ones its rebuilt layout (two buckets): every layer takes part in three.
        assert before[before.name == "c10d::allreduce_"].calls.sum() == 1 + 2 + 2
        comm = split[split.name.isin(ALL_REDUCE) & split.is_backward]
        assert set(comm.parent) == {f"DistributedDataParallel.module.{i}" for i in (0, 3, 5)}
        for name in ALL_REDUCE:
            # Before: the launches in AccumulateGrad, the worker's ranges at the root.
            moved = before[(before.name == name) & (before.parent.str.contains("AccumulateGrad") | (before.depth == 1))]
            assert comm[comm.name == name].cpu_us.sum() == pytest.approx(moved.cpu_us.sum(), abs=1e-3)
            assert comm[comm.name == name].calls.sum() == moved.calls.sum() == 5  # each counted once


def _layer_of(df, path: str) -> str | None:
    """The nearest module row at or above ``path``."""
    while path is not None:
        if df.loc[path, "kind"] == "module":
            return path
        path = df.loc[path, "parent"]
    return None


def _check_fsdp(trace: Path) -> None:
    """FSDP's ranges sit in the layer they name, forward or backward as their phase; gloo's worker
    ranges in the layer of their c10d op; nothing is lost on the way."""
    import re

    loaded = torchprof.load_trace(trace)
    split, before = loaded.df, raw(trace).df
    # FLOPs counted from what ran on each rank: FSDP's packing and its hooks cost none.
    assert loaded.unsupported_ops == {} and split.iloc[0].flops > 0, loaded.unsupported_ops
    named = re.compile(r"^FSDP::(\w+) \((\d+)\)$|^FSDP::(\w+) for (\d+)$")
    for path, name in split.name.items():
        m = named.match(name)
        if m is None:
            continue
        layer = m.group(2) or m.group(4)
        assert (_layer_of(split, path) or "").endswith(f".{layer}"), path
        if "backward" in name:
            assert split.loc[path, "is_backward"], path
    # The last reduce-scatter: run by the root's callback, before at the root, now layer 0's backward.
    assert "FSDP::root_post_backward_callback/FSDP::post_backward_reduce (0)" in before.index
    reduce0 = split[split.name == "FSDP::post_backward_reduce (0)"]
    assert list(reduce0.parent) == ["FSDPSequential.0"] and reduce0.is_backward.all()
    for name in ("gloo:all_gather", "gloo:all_reduce"):
        rows = split[split.name == name]
        root = split.index[0]  # (outside every layer: the script's own calls, what FSDP's setup ran)
        assert set(rows.parent) <= {"FSDPSequential.0", "FSDPSequential.3", "FSDPSequential.5", None, root}
        outside = rows.parent.isna() | (rows.parent == root)
        assert rows[outside].cpu_us.sum() < 0.05 * rows.cpu_us.sum()  # only what FSDP's setup ran
        assert rows.cpu_us.sum() == pytest.approx(before[before.name == name].cpu_us.sum(), abs=1e-3)
    assert split.iloc[0].cpu_us == pytest.approx(before.iloc[0].cpu_us, abs=1e-3)


def test_torchrun_m_torchprof_profiles_an_fsdp2_job_and_its_collectives_land_on_their_layers(cli_fsdp):
    traces, log = cli_fsdp
    assert log.count("torchprof: fsdp_train.py · 2 ranks, traces in") == 1
    assert "merged 2 ranks' trees" in log and "from torchrun's store" in log  # the script destroyed its group
    prof = torchprof.load_trace(traces)
    assert prof.ranks == [0, 1]
    df = prof.df
    assert {"FSDP::all_gather (0)", "FSDP::all_gather (3)", "FSDP::all_gather (5)"} <= set(df.name)
    assert set(df.loc[df.kind == "module", "type"]) >= {"FSDPSequential", "FSDPConv2d", "FSDPLinear"}
    gathers = df[df.name.str.startswith("gloo:all_gather")]
    assert len(gathers) and (gathers.cpu_us_max >= gathers.cpu_us_min).all()
    assert (prof.by_rank().comm_us > 0).all()
    for rank in (0, 1):  # the group was gone when the profile stopped: the rank torchrun gave
        data = json.loads(gzip.decompress((traces / f"rank{rank}.json.gz").read_bytes()))
        assert data["torchprof"]["distributedInfo"] == {"backend": None, "rank": rank, "world_size": 2}
        _check_fsdp(traces / f"rank{rank}.json.gz")


def test_an_fsdp2_job_on_two_nodes_merges_through_torchruns_store(cli_fsdp_nodes):
    folders, logs = cli_fsdp_nodes
    assert [sorted(p.name for p in f.iterdir()) for f in folders] == [["rank0.json.gz"], ["rank1.json.gz"]]
    assert logs[0].count("torchprof: fsdp_train.py · 2 ranks, traces in") == 1 and "from torchrun's store" in logs[0]
    assert "FSDPSequential" in logs[0] and "torchprof: rank 1 wrote" in logs[1]
    _check_fsdp(folders[1] / "rank1.json.gz")
