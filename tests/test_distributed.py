"""A real 2-process ``torchrun`` gloo DistributedDataParallel job on the CPU, every rank profiled:
the numbers each rank reports are true (parameters once, backward on the layers), and its trace
carries the rank."""

from __future__ import annotations

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


def torchrun(script: Path, *args: str, cwd: Path, nproc: int = 2, timeout: float = 180) -> tuple[int, str]:
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
