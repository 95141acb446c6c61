"""The integrations on a real 2-rank job (``torchrun``, gloo on the CPU): one job trains a tiny GPT-2
under the Hugging Face ``Trainer``, a LightningModule under Lightning's ``Trainer`` (DDP) and an
``accelerate`` loop, each recording steps 2-3 on every rank; rank 0 holds each merged job."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

for extra in ("transformers", "lightning", "accelerate"):
    pytest.importorskip(extra, reason=f"the trainer extras are not installed ({extra})")

import torchprof  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent / "jobs"))
import trainers  # noqa: E402

# The job is shared by the module's tests, whichever xdist worker runs them.
pytestmark = pytest.mark.slow
JOB = Path(__file__).resolve().parent / "jobs" / "trainers.py"
FRAMEWORKS = ("hf", "lightning", "accelerate")


def run_job(out: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo", "PYTHONUNBUFFERED": "1", "TMPDIR": str(out)}
    with open(out / "torchrun.log", "w+") as sink:
        # the output goes to a file and the job to its own session: ranks that outlive a killed
        # launcher hold no pipe open, and the whole group can be stopped
        proc = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                                 str(JOB), str(out)], cwd=out, env=env, stdout=sink, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip
        try:
            code = proc.wait(timeout=300)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code = None
        sink.seek(0)
        assert code == 0, sink.read()[-6000:]


@pytest.fixture(scope="session")
def job(tmp_path_factory) -> tuple[Path, str]:
    out = trainers.once_per_session(tmp_path_factory, "integrations-job", run_job)
    return out, (out / "torchrun.log").read_text()


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_rank_0_holds_the_merged_job_of_exactly_the_chosen_steps(job, framework):
    out, _ = job
    merged = torchprof.load(out / f"{framework}.job.json")
    assert merged.ranks == [0, 1]
    assert merged.steps["step"].tolist() == [2, 3]
    by_rank = merged.by_rank()
    assert sorted(zip(by_rank["rank"], by_rank["step"])) == [(0, 2), (0, 3), (1, 2), (1, 3)]
    assert (by_rank["comm_us"] > 0).all()  # DDP's gradient all-reduce, in every step of every rank
    df = merged.df
    layers = df[(df["kind"] == "module") & (df["bwd_cpu_us"] > 0)]
    assert len(layers) >= 2  # the model's layers, forward and backward, averaged over the ranks
    # FLOPs counted from the shapes each rank's trace carries: the merged job's too.
    assert df["flops"].notna().all() and df["flops"].iloc[0] > 0 and merged.unsupported_ops == {}
    times = merged.step_times  # every step of both ranks, recorded or not
    assert sorted(set(times["rank"])) == [0, 1]
    recorded = times[times["recorded"]]
    assert sorted(zip(recorded["rank"], recorded["step"])) == [(0, 2), (0, 3), (1, 2), (1, 3)]


@pytest.mark.parametrize("framework", ("hf", "lightning"))
def test_each_rank_keeps_its_own_profile_with_exact_flops(job, framework):
    out, _ = job
    ranks = [torchprof.load(out / f"{framework}.rank{r}.json") for r in (0, 1)]
    assert [r.ranks for r in ranks] == [[0], [1]]
    for prof in ranks:
        assert prof.steps["step"].tolist() == [2, 3]
        # Lightning steps the optimizer with a closure that computes the loss in the
        # LightningModule's training_step (under DDP, inside the wrapper's forward), and the
        # second micro-batch adds into the gradients: all of it counted from what ran.
        assert prof.summary["flops"] > 0 and prof.unsupported_ops == {}, prof.unsupported_ops
        assert not any("FLOPs" in w for w in prof.summary.get("warnings", [])), prof.summary["warnings"]
    # the ranks ran the same shapes: the same FLOPs on every layer
    a, b = (r.df[(r.df["kind"] == "module") & (r.df.index.str.contains(".net") | (framework == "hf"))] for r in ranks)
    assert a["flops"].notna().all() and b["flops"].notna().all()
    assert a["flops"].sum() == b["flops"].sum() > 0


def test_rank_0_reports_the_job_and_the_other_rank_says_where_its_trace_is(job):
    out, text = job
    assert "torchprof: GPT2LMHeadModel (2 ranks) under the Trainer, steps 2-3 recorded (of 1-4)" in text
    assert "torchprof: Regressor (2 ranks) under the Lightning Trainer, steps 2-3 recorded (of 1-4)" in text
    assert f"torchprof: rank 1 wrote {out / 'hf' / 'traces' / 'rank1.json.gz'}" in text
    assert (out / "hf" / "torchprof.html").exists() and (out / "lightning" / "fit-torchprof.html").exists()
    assert "USDT" not in text
