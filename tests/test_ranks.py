"""One view of a distributed job: ``load_trace`` of every rank's trace (a list, a folder, a glob)
merges them, figures per rank with their range and the slowest rank; ``prof.by_rank()`` per rank
and step (device busy and communication exact against hand-written and real traces); the rank a
live profile records, also when the process group starts inside the profiled block."""

from __future__ import annotations

import gzip
import json
import math
import os
import socket
from pathlib import Path

import pandas as pd
import pytest
import torch

import torchprof
from conftest import shared_trace
from torchprof._vocab import BY_RANK_COLUMNS, RANK_COLUMNS


def x(name: str, ts: float, dur: float, *, cat: str = "cpu_op", tid: int | str = 1, **args) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}


def rank_trace(folder: Path, rank: int, net_us: float, *, file: str | None = None, info: bool = True) -> Path:
    """Two steps of 1000 µs: the module Net (``net_us`` long, then aten::mm inside it), a kernel
    pair overlapping by 100 µs, an NCCL kernel and a gloo range on c10d's worker thread."""
    events = []
    for k in range(2):
        t = 1000 * k
        events += [
            x(f"ProfilerStep#{k + 1}", t, 1000, cat="user_annotation"),
            x("nn.Module: Net [Net]", t + 100, net_us),  # a module range as torchprof records it
            x("aten::mm", t + 110, 50),
            x("gemm", t + 200, 200, cat="kernel", tid=7),
            x("gemm", t + 300, 200, cat="kernel", tid=8),  # overlaps the first by 100 µs: busy 300
            x("ncclKernel_AllReduce_RING_LL_Sum_float", t + 800, 100, cat="kernel", tid=9),
            x("gloo:all_reduce", t + 850, 100, cat="user_annotation", tid=2),  # comm: 800..950
        ]
    top = {"distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2}} if info else {}
    path = folder / (file or f"rank{rank}.json")
    path.write_text(json.dumps({"traceEvents": events, **top}))
    return path


@pytest.fixture
def job(tmp_path) -> Path:
    rank_trace(tmp_path, 0, 300)
    rank_trace(tmp_path, 1, 500)
    return tmp_path


def test_a_job_merges_into_one_tree_with_the_mean_the_range_and_the_slowest_rank(job):
    prof = torchprof.load_trace(job)
    assert prof.ranks == [0, 1]
    df = prof.df
    net = df.loc["ProfilerStep#1/Net"]
    assert net.cpu_us == 400 and (net.cpu_us_min, net.cpu_us_max, net.cpu_us_max_rank, net.cpu_us_spread) == (300, 500, 1, 200)
    assert net.calls == 1 and net.type == "Net"
    mm = df.loc["ProfilerStep#1/Net/aten::mm"]
    assert (mm.cpu_us, mm.cpu_us_spread, mm.cpu_us_max_rank) == (50, 0, 0)  # a tie: the first rank
    assert prof.summary["name"] == f"{job.name} (2 ranks)"  # the traces' labels differ: the folder names the job
    assert math.isnan(df.loc["ProfilerStep#1", "cuda_us_max_rank"])  # no rank ran device work under it
    # The parent's mean is still the sum of its children's.
    step = df.loc["ProfilerStep#1"]
    kids = df[df.parent == "ProfilerStep#1"]
    assert step.cpu_us == pytest.approx(step.self_cpu_us + kids.cpu_us.sum())
    assert prof.meta["distributedInfo"] == {"backend": "nccl", "world_size": 2}
    for col in RANK_COLUMNS:
        assert col in df.columns


def test_a_layer_known_on_every_rank_keeps_its_flops_where_the_step_total_is_unknown(job):
    """A rank whose run total is NaN (a part of the step torchprof cannot count) still has exact
    layers: the merged job keeps their mean, and the total stays NaN."""
    from torchprof._load import merge_profiles

    profs = [torchprof.load_trace(job / f"rank{r}.json") for r in (0, 1)]
    for r, prof in enumerate(profs):
        cols = prof.tree.columns
        cols["flops"] = [1000.0 * (r + 1) if cols["name"][i] == "Net" else math.nan for i in range(len(prof.tree))]
    df = merge_profiles(profs, [0, 1], [None, None], name="job").df
    nets = df[df["name"] == "Net"]
    assert len(nets) == 2 and (nets["flops"] == 1500.0).all()
    assert math.isnan(df["flops"].iloc[0])


def test_one_rank_leaves_the_rank_columns_empty_and_the_views_without_them(job):
    single = torchprof.load_trace(job / "rank0.json")
    assert single.ranks == [0]
    assert single.df[list(RANK_COLUMNS)].isna().all().all()
    assert "rank spread" not in single.table(min_pct=0)
    assert "CPU rank spread" in torchprof.load_trace(job).table(min_pct=0)  # kept at 120 characters too
    merged = torchprof.load_trace(job).table(min_pct=0, width=None)
    assert "CPU rank spread" in merged and "CPU slowest rank" in merged
    lines = merged.splitlines()
    header = [c.strip() for c in lines[1].split("|")]
    net = [c.strip() for c in next(line for line in lines if "──Net " in line).split("|")]
    assert net[header.index("CPU rank spread")] == "200µs (9.1%)" and net[header.index("CPU slowest rank")] == "1"
    root = [c.strip() for c in lines[3].split("|")]
    assert root[header.index("CPU slowest rank")] == "0"  # rank 0 is written, not left blank as a zero


def test_by_rank_gives_each_rank_and_step_its_wall_cpu_busy_communication_and_idle_time(job):
    by_rank = torchprof.load_trace(job).by_rank()
    assert list(by_rank.columns) == list(BY_RANK_COLUMNS)
    assert list(zip(by_rank["rank"], by_rank.step)) == [(0, 1), (0, 2), (1, 1), (1, 2)]
    assert (by_rank.wall_us == 1000).all()
    assert (by_rank.gpu_busy_us == 400).all()  # 200..500 (two overlapping gemms) and 800..900 (NCCL)
    assert (by_rank.comm_us == 150).all()  # NCCL 800..900 and gloo 850..950: their union
    assert (by_rank.idle_us == 600).all()
    assert list(by_rank.cpu_us) == [1000, 1000, 1000, 1000]


def test_the_rank_comes_from_distributed_info_then_from_the_file_name(tmp_path):
    rank_trace(tmp_path, 5, 300, file="a.json")  # distributedInfo says 5, the name nothing
    rank_trace(tmp_path, 0, 300, file="trace_rank_12.json", info=False)
    rank_trace(tmp_path, 0, 300, file="host-7.json", info=False)
    assert torchprof.load_trace(tmp_path).ranks == [5, 7, 12]


def test_ranks_guessed_from_a_number_in_a_name_or_a_place_in_the_list_are_said(tmp_path):
    # A folder of unrelated runs ("resnet50.json", "run.json") merged as ranks 50 and 1 of one job
    # without a word: where no trace says its rank, the profile says how each was decided.
    rank_trace(tmp_path, 0, 300, file="resnet50.json", info=False)
    rank_trace(tmp_path, 0, 300, file="run.json", info=False)
    prof = torchprof.load_trace(tmp_path)
    assert prof.ranks == [1, 50]
    said = " ".join(prof.summary["warnings"])
    assert ("resnet50.json is rank 50 by the last number in its name, run.json rank 1 by its place in the list" in said
            and "if they are not the ranks of one job, load each alone" in said), said  # fmt: skip
    # a job whose traces say their ranks (or whose names do) is merged without a note
    for job_folder, files in ((tmp_path / "said", ("a.json", "b.json")), (tmp_path / "named", ("rank0.json", "rank1.json"))):
        job_folder.mkdir()
        for rank, file in enumerate(files):
            rank_trace(job_folder, rank, 300, file=file, info=job_folder.name == "said")
        assert not torchprof.load_trace(job_folder).summary.get("warnings"), job_folder


def test_a_list_a_folder_and_a_glob_name_the_same_job(job):
    by_list = torchprof.load_trace([job / "rank1.json", job / "rank0.json"])
    by_glob = torchprof.load_trace(str(job / "rank*.json"))
    by_folder = torchprof.load_trace(job)
    for other in (by_glob, by_folder):
        pd.testing.assert_frame_equal(by_list.df, other.df)
        pd.testing.assert_frame_equal(by_list.by_rank(), other.by_rank())


def test_two_traces_of_one_rank_or_no_trace_at_all_are_errors(job, tmp_path):
    rank_trace(job, 1, 300, file="again.json")
    with pytest.raises(torchprof.TraceError, match="are both rank 1"):
        torchprof.load_trace(job)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="no trace files"):
        torchprof.load_trace(empty)
    with pytest.raises(FileNotFoundError, match="no trace files match"):
        torchprof.load_trace(str(tmp_path / "nothing*.json"))


def test_a_merged_job_saves_and_reopens_with_its_ranks(job, tmp_path):
    prof = torchprof.load_trace(job)
    again = torchprof.load(prof.save(str(tmp_path / "job.profile.json")))
    assert again.ranks == [0, 1]
    pd.testing.assert_frame_equal(prof.df, again.df)
    pd.testing.assert_frame_equal(prof.by_rank(), again.by_rank())


# -- real traces --------------------------------------------------------------------------------------
def _as_rank(src: Path, dest: Path, rank: int) -> Path:
    data = json.loads(gzip.decompress(src.read_bytes()))
    data["distributedInfo"] = {**data["distributedInfo"], "rank": rank}
    dest.write_bytes(gzip.compress(json.dumps(data).encode()))
    return dest


def raw_step_busy(path: Path) -> dict[int, float]:
    """Per ProfilerStep, the union of device intervals inside it, from the raw JSON alone."""
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    steps = {int(e["name"].split("#")[1]): (e["ts"], e["ts"] + e["dur"]) for e in events
             if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")}  # fmt: skip
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
    out = {}
    for step, (lo, hi) in steps.items():
        clipped = [(max(s, lo), min(e, hi)) for s, e in spans if min(e, hi) > max(s, lo)]
        busy, cur = 0.0, None
        for s, e in clipped:
            if cur is None or s > cur[1]:
                if cur is not None:
                    busy += cur[1] - cur[0]
                cur = [s, e]
            else:
                cur[1] = max(cur[1], e)
        out[step] = busy + (cur[1] - cur[0] if cur else 0)
    return out


def test_two_ranks_of_a_real_gpu_job_merge_and_their_busy_time_per_step_is_the_raw_union(tmp_path):
    src = shared_trace("a100-ddp-training.json.gz")
    single = torchprof.load_trace(src)
    merged = torchprof.load_trace([_as_rank(src, tmp_path / "r0.json.gz", 0), _as_rank(src, tmp_path / "r1.json.gz", 1)])
    assert merged.ranks == [0, 1]
    one, both = single.df, merged.df
    assert len(both) == len(one)
    shared = one.index[1:]  # the root is named for the job
    for col in ("cpu_us", "cuda_us", "bwd_cuda_us", "flops", "calls"):
        pd.testing.assert_series_equal(both.loc[shared, col], one.loc[shared, col], check_names=False)
    assert both.iloc[0].cpu_us == one.iloc[0].cpu_us
    assert (both.cuda_us_spread.fillna(0) == 0).all() and (both.cpu_us_min == both.cpu_us_max).all()
    by_rank = merged.by_rank()
    assert len(by_rank) == 2 * len(single.steps)
    expected = raw_step_busy(src)
    for _, r in by_rank.iterrows():
        assert r.gpu_busy_us == pytest.approx(expected[r.step], abs=1e-3), r.step
        assert 0 < r.comm_us < r.wall_us and r.idle_us == pytest.approx(r.wall_us - r.gpu_busy_us)
    assert merged.summary["gpu_busy_us"] == pytest.approx(single.summary["gpu_busy_us"])


def test_by_rank_of_one_trace_without_steps_is_one_row_for_the_run():
    prof = torchprof.load_trace(shared_trace("a100-alexnet-forward.json.gz"))
    by_rank = prof.by_rank()
    assert len(by_rank) == 1 and by_rank["rank"][0] == 0 and pd.isna(by_rank.step[0])
    s = prof.summary
    assert by_rank.gpu_busy_us[0] == s["gpu_busy_us"] and by_rank.idle_us[0] == pytest.approx(s["gpu_idle_us"])


# -- live --------------------------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_live_profile_records_its_rank_when_the_group_starts_inside_the_block(mlp, tmp_path, monkeypatch):
    import torch.distributed as dist

    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(_free_port()))
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")
    try:
        with torchprof.Profiler() as prof:
            dist.init_process_group("gloo", rank=0, world_size=1)
            mlp(torch.randn(2, 8)).sum().backward()
        assert prof.meta["distributedInfo"] == {"backend": "gloo", "rank": 0, "world_size": 1}
        trace = prof.export_chrome_trace(str(tmp_path / "t.json"))
        assert "distributedInfo" not in json.loads(Path(trace).read_text())  # torch did not write it...
        assert torchprof.load_trace(trace).ranks == [0]  # ...torchprof's block did
        assert torchprof.load(prof.save(str(tmp_path / "p.json"))).ranks == [0]
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def test_without_a_group_the_rank_torchrun_gave_the_process_is_recorded(mlp, monkeypatch):
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    with torchprof.Profiler() as prof:
        mlp(torch.randn(2, 8))
    assert prof.meta["distributedInfo"] == {"backend": None, "rank": 3, "world_size": 4} and prof.ranks == [3]
    monkeypatch.delenv("RANK")
    with torchprof.Profiler() as alone:
        mlp(torch.randn(2, 8))
    assert "distributedInfo" not in alone.meta and alone.ranks == []
    assert os.environ.get("RANK") is None


def test_a_job_whose_ranks_recorded_memory_keeps_the_highest_ranks_timeline_and_the_largest_peaks(tmp_path):
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 8))
    traces = []
    for rank, batch in ((0, 16), (1, 64)):  # rank 1 holds four times the activations
        model(torch.randn(batch, 64)).sum().backward()
        with torchprof.Profiler(memory=True) as prof:
            model(torch.randn(batch, 64)).sum().backward()
        traces.append((prof, prof.export_chrome_trace(str(tmp_path / f"rank{rank}.json"))))
    job = torchprof.load_trace([path for _, path in traces])
    one = torchprof.load_trace(traces[1][1])
    assert job.tree.memory["rank"] == 1  # the line of the rank that peaked highest
    assert job.summary["peak_at"]["cpu"]["layer"] == one.summary["peak_at"]["cpu"]["layer"]
    timeline = job.memory_timeline()
    assert timeline.allocated.max() == one.memory_timeline().allocated.max()
    assert set(timeline.path) <= set(job.df.index)  # rows moved to the merged tree's
    df = job.df
    assert df.loc["Sequential.0", "peak_cpu_mem"] == max(p.df.loc["Sequential.0", "peak_cpu_mem"] for p, _ in traces)
    assert all(float(v).is_integer() for v in df.exec_order)  # not a mean of two orders


# -- how ``torchrun -m torchprof`` gets the ranks' trees to rank 0 (the real jobs: test_distributed.py)
def test_trees_travel_through_a_c10d_store_and_a_rank_that_sends_none_is_left_out(job, monkeypatch):
    import threading
    from datetime import timedelta

    from torch.distributed import TCPStore

    from torchprof._files import TraceError
    from torchprof._torchrun import decode_tree, encode_tree, exchange

    for name in ("TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT"):
        monkeypatch.delenv(name, raising=False)
    profs = [torchprof.load_trace(job / f"rank{r}.json") for r in (0, 1)]
    payloads = [encode_tree(p) for p in profs]
    server = TCPStore("127.0.0.1", 0, world_size=1, is_master=True, timeout=timedelta(seconds=30), wait_for_workers=False)
    client = TCPStore("127.0.0.1", server.port, world_size=1, is_master=False, timeout=timedelta(seconds=30))
    sender = threading.Thread(target=exchange, args=(client, payloads[1], 1, 3, 30.0))
    sender.start()
    got = exchange(server, payloads[0], 0, 3, timeout=1.0)  # rank 2 never sends: left out after 1 s
    sender.join()
    assert sorted(got) == [0, 1]
    tree = decode_tree(got[1], "rank 1")
    pd.testing.assert_frame_equal(tree.df, profs[1].df)  # the tree rank 0 gets is the rank's own
    key = "torchprof/job/0/0/tree/1"
    assert tree.ranks == [1] and not server.check([key])  # read, then deleted
    client.set(key, b"x")  # another connection: get() waits for it where check() could race it
    assert server.get(key) == b"x"  # (the key the check looked for)
    with pytest.raises(TraceError, match="rank 2 has no tree: ValueError: broken"):
        decode_tree(b"E" + b"ValueError: broken", "rank 2")


def test_gathering_through_the_scripts_group_closes_it_only_when_asked(job, monkeypatch):
    import torch.distributed as dist

    from torchprof._torchrun import gather_trees

    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1)
    try:
        got = gather_trees(b"T tree", 0, 1, close_group=False)
        assert got is not None and (got.trees, got.how, got.failed) == ({0: b"T tree"}, "the process group's store", {})
        assert dist.is_initialized()  # a caller whose process goes on (a trainer's callback) keeps its group
        got = gather_trees(b"T tree", 0, 1, close_group=True, failed="ValueError: boom")
        assert got is not None and got.trees == {0: b"T tree"} and got.failed == {0: "ValueError: boom"}
        assert not dist.is_initialized()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
