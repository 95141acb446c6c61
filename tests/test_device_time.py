"""Where device time goes, per layer: compute, communication, memcpy/memset, the part of each
layer's communication hidden behind compute, and the idle gaps of the device, checked on tiny
hand-written timelines and against Holistic Trace Analysis on a real 8-rank DDP trace."""

from __future__ import annotations

import gzip
import json
import math
import re

import pytest

import torchprof
from conftest import shared_trace
from synthetic import build, columns, ev, frame
from torchprof._records import Recording
from torchprof._tree.builder import TreeBuilder
from torchprof._tree.summary import summarize
from torchprof._views.cells import view_columns

SPLIT = ("compute_cuda_us", "comm_cuda_us", "memcpy_cuda_us")
COMM_PARTS = ("comm_overlap_cuda_us", "comm_exposed_cuda_us")
DEVICE_TIME = (*SPLIT, *COMM_PARTS, "idle_cuda_us")
NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"


def kernel(name: str, start: float, end: float, link: int, *, device: int = 0, stream: int = 7) -> dict:
    """A device activity launched by the op whose External id is ``link``; tid is (device, stream)
    as the trace reader writes it."""
    return ev("kernel", name, start, end, tid=(device, stream), link=link)


def two_layers() -> list[dict]:
    """Net.a computes and copies; Net.b all-reduces on its own stream while it computes.

    Device 0, every stream together:  gemm_a [20,50]  memcpy [50,55]  . idle .  nccl [60,100]
    with gemm_b [70,90] beside the all-reduce, and a memset of Net.a late at [105,110]; device 1
    runs gemm_remote [90,100] for Net.b, beside the all-reduce but on another GPU.
    """
    return [
        ev("module", "Net", 0, 100, type_="Net"),
        ev("module", "Net.a", 0, 40, type_="Linear"),
        ev("op", "aten::mm", 5, 10, ext=1),
        ev("op", "aten::copy_", 12, 15, ext=2),
        ev("module", "Net.b", 40, 90, type_="Linear"),
        ev("op", "c10d::allreduce_", 45, 50, ext=3),
        ev("op", "aten::mm", 60, 65, ext=4),
        kernel("gemm_a", 20, 50, 1),
        kernel("Memcpy HtoD (Pageable -> Device)", 50, 55, 2),
        kernel(NCCL, 60, 100, 3, stream=9),
        kernel("gemm_b", 70, 90, 4),
        kernel("gemm_remote", 90, 100, 4, device=1),
        kernel("Memset (Device)", 105, 110, 1),
    ]


def test_device_time_of_every_row_splits_into_compute_communication_and_memcpy_by_kernel_name():
    df = frame(two_layers())
    assert df.loc["Net.a", list(SPLIT)].tolist() == [30, 0, 10]
    assert df.loc["Net.b", list(SPLIT)].tolist() == [30, 40, 0]
    assert df.loc["Net", list(SPLIT)].tolist() == [60, 40, 10]
    assert df.loc[f"Net.b/c10d::allreduce_/{NCCL}", "comm_cuda_us"] == 40
    # the three parts are the device time, on every row
    assert (df[list(SPLIT)].sum(axis=1) == df.cuda_us).all()


def test_communication_overlaps_compute_of_any_stream_of_its_own_device_only():
    df = frame(two_layers())
    # the all-reduce [60,100] runs beside gemm_b [70,90] (another stream, same GPU): 20 hidden;
    # gemm_remote [90,100] ran on another GPU, so the last 10 were exposed all the same
    assert df.loc["Net.b", list(COMM_PARTS)].tolist() == [20, 20]
    assert df.loc["Net", list(COMM_PARTS)].tolist() == [20, 20]
    assert df.loc["Net.a", list(COMM_PARTS)].tolist() == [0, 0]
    assert (df.comm_overlap_cuda_us + df.comm_exposed_cuda_us == df.comm_cuda_us).all()


def test_a_live_capture_names_streams_only_so_its_streams_are_one_device():
    events = [ev("op", "c10d::allreduce_", 0, 5, ext=1), ev("op", "aten::mm", 5, 10, ext=2),
              ev("kernel", NCCL, 10, 30, tid=13, link=1), ev("kernel", "gemm", 20, 40, tid=7, link=2)]  # fmt: skip
    df = frame(events)
    assert df.loc["c10d::allreduce_", list(COMM_PARTS)].tolist() == [10, 10]


def test_each_device_idle_gap_goes_to_the_row_whose_work_ended_it_and_rows_add_up_to_the_run_idle():
    tree = build(two_layers())
    df = frame(two_layers())
    # busy [20,55] [60,100] [105,110]: the gap [55,60] ended when Net.b's all-reduce started, the gap
    # [100,105] when Net.a's late memset did; the first kernel of the window ends no gap
    assert df.loc["Net.a", "idle_cuda_us"] == 5
    assert df.loc["Net.b", "idle_cuda_us"] == 5
    assert df.loc["Net.b/c10d::allreduce_", "idle_cuda_us"] == 5
    assert df.loc["Net.a/aten::mm/Memset (Device)", "idle_cuda_us"] == 5
    assert df.loc["Net.a/aten::mm/gemm_a", "idle_cuda_us"] == 0
    s = summarize(tree, Recording())
    assert (s["gpu_window_us"], s["gpu_busy_us"], s["gpu_idle_us"]) == (90, 80, 5 + 5)
    assert df.iloc[0]["idle_cuda_us"] == s["gpu_idle_us"]
    # every row holds exactly the idle time its children hold (only kernels end gaps)
    kids = df.groupby("parent").idle_cuda_us.sum()
    inner = df[df.kind != "kernel"]
    assert (inner.idle_cuda_us == kids.reindex(inner.index).fillna(0)).all()


def test_the_summary_has_the_time_the_device_computed_communicated_and_copied():
    s = summarize(build(two_layers()), Recording())
    # unions per device, summed over devices: compute [20,50] [70,90] on GPU 0 and [90,100] on GPU 1
    assert s["gpu_compute_us"] == 30 + 20 + 10
    assert s["gpu_comm_us"] == 40
    assert s["gpu_memcpy_us"] == 5 + 5
    assert s["gpu_comm_overlap_us"] == 20


def test_idle_gaps_tie_to_the_first_recorded_of_two_kernels_starting_together():
    events = [ev("op", "aten::a", 0, 10, ext=1), ev("op", "aten::b", 10, 20, ext=2),
              kernel("k0", 0, 5, 1), kernel("ka", 30, 40, 1, stream=8), kernel("kb", 30, 35, 2)]  # fmt: skip
    df = frame(events)
    assert (df.loc["aten::a", "idle_cuda_us"], df.loc["aten::b", "idle_cuda_us"]) == (25, 0)


def test_device_time_columns_are_nan_without_a_device_and_shown_only_where_they_hold_something():
    cpu_only = build([ev("module", "Net", 0, 10, type_="Net"), ev("op", "aten::mm", 1, 9)])
    for name in DEVICE_TIME:
        assert all(math.isnan(v) for v in cpu_only.columns[name]), name
    assert not {c.spec.name for c in view_columns(cpu_only, False)} & set(DEVICE_TIME)
    s = summarize(cpu_only, Recording())
    assert all(math.isnan(s[k]) for k in ("gpu_compute_us", "gpu_comm_us", "gpu_memcpy_us", "gpu_comm_overlap_us"))
    # one GPU, no communication: the compute part would repeat CUDA total, so it is left out with comm
    single = build([ev("op", "aten::mm", 0, 10, ext=1), kernel("gemm", 2, 4, 1), kernel("Memcpy DtoH", 6, 8, 1)])
    shown = [c.spec.name for c in view_columns(single, True)]
    assert "memcpy_cuda_us" in shown and "idle_cuda_us" in shown
    assert not {"compute_cuda_us", "comm_cuda_us", "comm_overlap_cuda_us", "comm_exposed_cuda_us"} & set(shown)
    shown = [c.spec.name for c in view_columns(build(two_layers()), False)]
    assert [n for n in shown if n in DEVICE_TIME] == [
        "compute_cuda_us", "comm_cuda_us", "comm_overlap_cuda_us", "comm_exposed_cuda_us", "memcpy_cuda_us", "idle_cuda_us"]  # fmt: skip


def test_idle_leaves_out_the_time_between_the_cycles_of_a_schedule_and_device_work_outside_the_span():
    cycle = [ev("op", "aten::mm", 0, 100, ext=1), kernel("k", 10, 30, 1), kernel("k2", 40, 45, 1)]
    later = [dict(e, start=e["start"] + 10**9, end=e["end"] + 10**9) for e in cycle]
    builder = TreeBuilder(cuda=True)
    builder.add(columns(cycle))
    builder.add(columns(later))
    tree = builder.finish()
    assert tree.columns["idle_cuda_us"][0] == 10 + 10 == tree.gpu_window_us - tree.gpu_busy_us
    # a kernel wholly before the profiled span ends no gap; one starting before it counts from its start
    clipped = columns([ev("op", "aten::mm", 0, 100, ext=1), kernel("early", 0, 5, 1), kernel("k", 8, 30, 1), kernel("k2", 40, 45, 1)])
    clipped.span = (10_000, 100_000)
    builder = TreeBuilder(cuda=True)
    builder.add(clipped)
    tree = builder.finish()
    assert (tree.gpu_window_us, tree.gpu_busy_us) == (35, 25)
    assert tree.columns["idle_cuda_us"][0] == 10


def test_a_saved_profile_keeps_the_device_time_columns_and_summary(tmp_path):
    path = shared_trace("a100-alexnet-forward.json.gz")
    prof = torchprof.load_trace(path)
    again = torchprof.load(prof.save(str(tmp_path / "p.json")))
    for key in ("gpu_compute_us", "gpu_comm_us", "gpu_memcpy_us", "gpu_comm_overlap_us"):
        assert again.summary[key] == prof.summary[key], key
    assert again.df[list(DEVICE_TIME)].equals(prof.df[list(DEVICE_TIME)])
    assert prof.summary["gpu_memcpy_us"] > 0 and prof.summary["gpu_comm_us"] == 0


# -- Holistic Trace Analysis on the DDP trace ----------------------------------------------------------
# HolisticTraceAnalysis 0.5.0 on a100-ddp-training.json.gz (rank 3 of 8; the same file as HTA's
# tests/data/distributed/...), run as
#     a = TraceAnalysis(trace_dir=DIR, include_last_profiler_step=True)
#     a.get_temporal_breakdown(visualize=False); a.get_comm_comp_overlap(visualize=False)
# gave (µs): idle 76,007 / compute 281,336 / non-compute 107,251 of a 464,594 window
# (16.36 / 60.56 / 23.08%) and a comm/comp overlap of 46.24%: 75,614 of the 163,535 µs the NCCL
# kernels ran. HTA's kernel breakdown sums durations per type: compute 283,278, communication
# 163,535, memory 54,754. HTA's default (include_last_profiler_step=False) leaves out the device
# work launched in the last ProfilerStep: idle 62,119 / compute 234,760 / non-compute 86,525 of a
# 383,404 window, overlap 47.03% (62,313 of 132,510 µs).
HTA_LAST = {"idle": 76_007, "compute": 281_336, "non_compute": 107_251, "window": 464_594, "overlap": 75_614, "comm": 163_535}
HTA_SUMS = {"compute": 283_278, "comm": 163_535, "memcpy": 54_754}
HTA_DEFAULT = {"idle": 62_119, "compute": 234_760, "non_compute": 86_525, "window": 383_404, "overlap": 62_313, "comm": 132_510}
HTA_COMM, HTA_MEMORY = re.compile(r"^nccl.*Kernel"), re.compile(r"(^Memcpy)|(^Memset)|(^dma)")  # hta/utils/utils.py


def _union(spans):
    out: list[list[int]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def _length(spans):
    return sum(e - s for s, e in spans)


def _overlap(a, b):
    return sum(max(0, min(x[1], y[1]) - max(x[0], y[0])) for x in a for y in b)


@pytest.fixture(scope="module")
def ddp():
    path = shared_trace("a100-ddp-training.json.gz")
    with gzip.open(path) as f:
        raw = [e for e in json.load(f)["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    return torchprof.load_trace(path), raw


def test_the_run_figures_match_holistic_trace_analysis_temporal_breakdown_and_overlap_on_the_ddp_trace(ddp):
    prof, raw = ddp
    # recomputed here from the raw JSON with HTA's classifiers, and as HTA itself reported them
    by = {"comm": [], "memcpy": [], "compute": []}
    for e in raw:
        cls = "comm" if HTA_COMM.match(e["name"]) else "memcpy" if HTA_MEMORY.match(e["name"]) else "compute"
        by[cls].append((e["ts"], e["ts"] + e["dur"]))
    busy = _union([x for spans in by.values() for x in spans])
    window = busy[-1][1] - busy[0][0]
    compute, comm = _union(by["compute"]), _union(by["comm"])
    mine = {"idle": window - _length(busy), "compute": _length(compute), "non_compute": _length(busy) - _length(compute),
            "window": window, "overlap": _overlap(comm, compute), "comm": _length(comm)}  # fmt: skip
    assert mine == HTA_LAST
    assert {k: sum(e - s for s, e in v) for k, v in by.items()} == HTA_SUMS
    s = prof.summary
    assert (s["gpu_idle_us"], s["gpu_compute_us"], s["gpu_busy_us"] - s["gpu_compute_us"], s["gpu_window_us"]) == (
        HTA_LAST["idle"], HTA_LAST["compute"], HTA_LAST["non_compute"], HTA_LAST["window"])  # fmt: skip
    assert (s["gpu_comm_overlap_us"], s["gpu_comm_us"]) == (HTA_LAST["overlap"], HTA_LAST["comm"])
    assert round(100 * s["gpu_comm_overlap_us"] / s["gpu_comm_us"], 2) == 46.24
    assert s["gpu_memcpy_us"] == _length(_union(by["memcpy"]))


def test_per_layer_device_time_adds_up_to_holistic_trace_analysis_figures_on_the_ddp_trace(ddp):
    prof, _ = ddp
    df = prof.df
    root = df.iloc[0]
    # the root's parts are HTA's per-type kernel sums; its idle and overlap HTA's temporal figures
    # (NCCL kernels of one rank never overlap each other, so the sum over kernels is the union)
    assert (root.compute_cuda_us, root.comm_cuda_us, root.memcpy_cuda_us) == (HTA_SUMS["compute"], HTA_SUMS["comm"], HTA_SUMS["memcpy"])
    assert (root.idle_cuda_us, root.comm_overlap_cuda_us) == (HTA_LAST["idle"], HTA_LAST["overlap"])
    # Exact in ns; in µs floats to their last bit (a DDP all-reduce split over layers has ns parts).
    assert ((df[list(SPLIT)].sum(axis=1) - df.cuda_us).abs() < 1e-9).all()
    assert ((df.comm_overlap_cuda_us + df.comm_exposed_cuda_us - df.comm_cuda_us).abs() < 1e-9).all()
    kids = df.groupby("parent")
    for name in DEVICE_TIME:
        inner = df[df.kind != "kernel"]
        assert (inner[name] == kids[name].sum().reindex(inner.index).fillna(0)).all(), name
    # the all-to-alls of the sparse embedding exchange are communication, under their layer
    emb = df.loc["ProfilerStep#1014/## forward ##/## forward:all2all_global_emb ##"]
    assert emb.comm_cuda_us == emb.cuda_us > 0
    assert emb.comm_overlap_cuda_us + emb.comm_exposed_cuda_us == emb.comm_cuda_us
    # DDP's gradient all-reduces run from AccumulateGrad hooks on the autograd thread; they go to
    # the layers whose gradients their bucket carries, in the step they ran in, so the steps
    # before the last hold all of HTA's communication (its default counts the device work
    # launched before the last step).
    steps = df[(df.depth == 1) & df.name.str.startswith("ProfilerStep#")]
    assert steps[steps.name != "ProfilerStep#1014"].comm_cuda_us.sum() == pytest.approx(HTA_DEFAULT["comm"], abs=1e-6)
    all_reduce = df[(df.kind == "kernel") & df.name.str.startswith("ncclKernel_AllReduce")]
    assert set(all_reduce.parent.str.split("/").str[1]) == {"## forward ##"}
    assert set(all_reduce.parent.str.split("/").str[0]) <= set(steps.name)


def test_without_the_last_steps_device_work_the_figures_are_holistic_trace_analysis_defaults(ddp, tmp_path):
    # HTA's default keeps the device work whose launch (the runtime call with its correlation id)
    # started before the last ProfilerStep; the same trace without the rest gives its figures.
    path = shared_trace("a100-ddp-training.json.gz")
    with gzip.open(path) as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    last = max(e["ts"] for e in events if e.get("name", "").startswith("ProfilerStep#"))
    launched = {e["args"]["correlation"] for e in events if e.get("cat") == "cuda_runtime" and e["ts"] < last}
    device = ("kernel", "gpu_memcpy", "gpu_memset")
    trace["traceEvents"] = [e for e in events if e.get("cat") not in device or e["args"].get("correlation") in launched]
    (tmp_path / "t.json").write_text(json.dumps(trace))
    s = torchprof.load_trace(tmp_path / "t.json").summary
    assert (s["gpu_idle_us"], s["gpu_compute_us"], s["gpu_busy_us"] - s["gpu_compute_us"], s["gpu_window_us"]) == (
        HTA_DEFAULT["idle"], HTA_DEFAULT["compute"], HTA_DEFAULT["non_compute"], HTA_DEFAULT["window"])  # fmt: skip
    assert (s["gpu_comm_overlap_us"], s["gpu_comm_us"]) == (HTA_DEFAULT["overlap"], HTA_DEFAULT["comm"])
    assert round(100 * s["gpu_comm_overlap_us"] / s["gpu_comm_us"], 2) == 47.03


def test_the_summary_line_states_compute_communication_with_its_overlap_and_memcpy_time():
    from torchprof._views.format import summary_line

    s = summarize(build(two_layers()), Recording())
    line = summary_line(s)
    assert "GPU busy 80.0µs (89% of 90.0µs) · compute 60.0µs (67%) · comm 40.0µs (50% overlapped) · memcpy 10.0µs" in line
    # without communication or copies, only the compute share is said
    line = summary_line(summarize(build([ev("op", "aten::mm", 0, 10, ext=1), kernel("gemm", 2, 4, 1)]), Recording()))
    assert "compute 2.00µs (100%)" in line and "comm" not in line and "memcpy" not in line
    assert "compute" not in summary_line({"cpu_us": 10.0})
