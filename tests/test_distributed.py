"""Real 2-process ``torchrun`` jobs on the CPU (gloo), every rank profiled: a DistributedDataParallel
training whose ranks each run a Profiler (the numbers each rank reports are true, its trace carries
the rank, the ranks merge into one view), and ``torchrun -m torchprof`` profiling a DDP and an FSDP2
training from outside (one trace per rank, rank 0 prints the merged job)."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import torchprof

JOBS = Path(__file__).resolve().parent / "jobs"
pytestmark = pytest.mark.slow


def torchrun(script: Path | str, *args: str, cwd: Path, nproc: int = 2, timeout: float = 180) -> tuple[int, str]:
    """``python -m torch.distributed.run --standalone``: output to a file (ranks that outlive a
    killed launcher would hold a pipe open), its own session, SIGTERM before SIGKILL."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo", "PYTHONUNBUFFERED": "1",
           "TMPDIR": str(cwd)}  # fmt: skip
    log = cwd / "torchrun.log"
    with open(log, "w+") as out:
        proc = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
                                 str(script), *args], cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            out.seek(0)
            pytest.fail(f"torchrun did not finish in {timeout}s:\n{out.read()[-4000:]}")
        out.seek(0)
        return code, out.read()


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


def test_the_ranks_merge_into_one_view_with_their_communication(ddp_job):
    prof = torchprof.load_trace(str(ddp_job / "rank*.json.gz"))
    assert prof.ranks == [0, 1]
    df = prof.df
    layers = df[df.type.isin(["Conv2d", "Linear"])]
    assert (layers.bwd_cpu_us > 0).all() and set(layers.cpu_us_max_rank) <= {0, 1}
    assert (layers.cpu_us_min <= layers.cpu_us).all() and (layers.cpu_us <= layers.cpu_us_max).all()
    by_rank = prof.by_rank()
    assert list(by_rank["rank"]) == [0, 1] and (by_rank.comm_us > 0).all()
    assert "CPU rank spread" in prof.table(min_pct=0)
    for rank in (0, 1):  # the live profile kept its rank, saved
        assert torchprof.load(ddp_job / f"rank{rank}.profile.json").ranks == [rank]


def _profiled_job(tmp_path_factory, name: str, script: str, *args: str) -> tuple[Path, str]:
    """``torchrun --nproc_per_node=2 -m torchprof --out DIR script``: its folder and output."""
    out = tmp_path_factory.mktemp(name)
    code, log = torchrun("-m", "torchprof", "--out", str(out / "traces"), str(JOBS / script), *args, cwd=out)
    assert code == 0, log[-6000:]
    return out / "traces", log


@pytest.fixture(scope="module")
def cli_ddp(tmp_path_factory) -> tuple[Path, str]:
    return _profiled_job(tmp_path_factory, "cli-ddp", "ddp_train.py", "--plain")


@pytest.fixture(scope="module")
def cli_fsdp(tmp_path_factory) -> tuple[Path, str]:
    return _profiled_job(tmp_path_factory, "cli-fsdp", "fsdp_train.py")


def test_torchrun_m_torchprof_writes_a_trace_per_rank_and_rank_0_prints_the_merged_job(cli_ddp):
    traces, log = cli_ddp
    assert sorted(p.name for p in traces.iterdir()) == ["rank0.json.gz", "rank1.json.gz"]
    assert log.count("torchprof: ddp_train.py · 2 ranks, traces in") == 1  # rank 0 only
    assert "torchprof: rank 1 wrote" in log and "CPU rank spread" in log and "└──DistributedDataParallel" in log
    for rank in (0, 1):
        data = json.loads(gzip.decompress((traces / f"rank{rank}.json.gz").read_bytes()))
        # The group began inside the profiled run: torch wrote no rank, torchprof's block did.
        assert "distributedInfo" not in data
        assert data["torchprof"]["distributedInfo"] == {"backend": "gloo", "rank": rank, "world_size": 2}
    prof = torchprof.load_trace(traces)
    assert prof.ranks == [0, 1] and prof.summary["name"] == "ddp_train.py (2 ranks)"
    layers = prof.df[prof.df.type.isin(["Conv2d", "Linear"])]
    assert len(layers) == 3 and (layers.bwd_cpu_us > 0).all()
    assert (prof.by_rank().comm_us > 0).all()


def test_torchrun_m_torchprof_profiles_an_fsdp2_job(cli_fsdp):
    traces, log = cli_fsdp
    assert log.count("torchprof: fsdp_train.py · 2 ranks, traces in") == 1
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
