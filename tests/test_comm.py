"""Communication on the layers it serves (``_tree/comm.py``), exact against hand-written events and
the real A100 DDP trace: DDP's bucketed all-reduce split over the layers its bucket carries, by
the bytes of their gradients (from the layout the capture recorded, else from the order gradients
became ready and their recorded shapes), a CPU backend's worker range with it, FSDP2's collectives
on the layer they name, and the exposed part of host communication. The real torchrun jobs are in
``test_distributed.py``."""

from __future__ import annotations

import random

import pytest

import torchprof
import torchprof._tree.builder as builder_module
from conftest import shared_trace
from synthetic import columns, ev
from torchprof._tree.builder import TreeBuilder
from torchprof._tree.comm import comm_note
from torchprof._tree.moves import shares
from torchprof._views.frame import to_dataframe

GRAD = "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"
INNER = "torch::autograd::AccumulateGrad"


def frame(events: list[dict], ddp: list | None = None, **options):
    builder = TreeBuilder(**options)
    builder.comm.ddp = ddp or []
    builder.add(columns(events))
    return to_dataframe(builder.finish()), builder


def ddp_step(launch_after: tuple[int, ...] = (4,), shapes: bool = False) -> list[dict]:
    """Net.a and Net.b (Linear) forward, then backward on the same thread: b's function, its two
    gradients, a's function, its two gradients; an all-reduce launched (``c10d::allreduce_``)
    from inside the gradient hook after the gradients numbered in ``launch_after``, each run by
    one of gloo's two worker threads (tids 2, 3) 1 µs after it starts, for 50 µs. ``shapes``: the
    gradients' recorded shapes."""
    sizes = [[10, 10], [10], [40, 10], [40]]  # b.weight, b.bias, a.weight, a.bias
    out = [
        ev("module", "Net", 0, 100, type_="Net"),
        ev("module", "Net.a", 10, 40, type_="Linear"),
        ev("op", "aten::addmm", 15, 35, seq=1),
        ev("module", "Net.b", 50, 90, type_="Linear"),
        ev("op", "aten::addmm", 55, 85, seq=2),
        ev("op", "autograd::engine::evaluate_function: AddmmBackward0", 120, 140, seq=2, fwd=1),
    ]
    times = [(140, 145), (145, 150), (170, 175), (175, 190)]
    worker = 2
    for k, (s, e) in enumerate(times, 1):
        if k == 3:
            out.append(ev("op", "autograd::engine::evaluate_function: AddmmBackward0", 150, 170, seq=1, fwd=1))
        out.append(ev("op", GRAD, s, e))
        out.append(ev("op", INNER, s + 0.5, s + 1.5, shapes=[sizes[k - 1]] if shapes else None))
        if k in launch_after:
            out.append(ev("op", "c10d::allreduce_", e - 4, e - 2))
            out.append(ev("region", "gloo:all_reduce", e - 3, e + 47, tid=worker))
            worker = 5 - worker
    return out


#: The layout DDP's reducer records for ddp_step: parameters in module order, one bucket in the
#: order gradients become ready (b's first).
PARAMS = [["Net.a", 1600], ["Net.a", 160], ["Net.b", 400], ["Net.b", 40]]


def test_shares_add_up_exactly_and_follow_the_weights():
    rng = random.Random(0)
    for _ in range(500):
        weights = [rng.randint(0, 10**6) for _ in range(rng.randint(1, 6))]
        value = rng.randint(0, 10**9)
        parts = shares(value, weights)
        assert sum(parts) == value and all(p >= 0 for p in parts)
        if sum(weights):
            assert all(abs(p - value * w / sum(weights)) < 1 for p, w in zip(parts, weights))
    assert shares(10, [1, 1, 1]) == [4, 3, 3]


def test_a_ddp_all_reduce_is_split_over_its_buckets_layers_by_their_gradient_bytes():
    layout = {"module": "DDP", "params": PARAMS, "maps": [[[3, 2, 1, 0]]]}
    df, builder = frame(ddp_step(), [layout])
    # Net.a holds 1760 of the bucket's 2200 bytes, Net.b 440: 4/5 and 1/5 of each event.
    assert df.loc["Net.a/c10d::allreduce_", "cpu_us"] == pytest.approx(1.6)
    assert df.loc["Net.b/c10d::allreduce_", "cpu_us"] == pytest.approx(0.4)
    assert df.loc["Net.a/gloo:all_reduce", "cpu_us"] == pytest.approx(40.0)
    assert df.loc["Net.b/gloo:all_reduce", "cpu_us"] == pytest.approx(10.0)
    comm = df[df.name.isin(["c10d::allreduce_", "gloo:all_reduce"])]
    assert set(comm.parent) == {"Net.a", "Net.b"} and comm.is_backward.all()
    # Each all-reduce counts its call once, on the layer with the larger part: calls by name stay torch's.
    assert comm.groupby("name").calls.sum().to_dict() == {"c10d::allreduce_": 1, "gloo:all_reduce": 1}
    assert df.loc["Net.a/gloo:all_reduce", "calls"] == 1 and df.loc["Net.b/gloo:all_reduce", "calls"] == 0
    assert comm.cpu_us.sum() == pytest.approx(52.0)  # the raw all-reduce: 2 µs launching, 50 µs in flight
    # Backward communication of the layers; nothing left at the root or in the unattributed row.
    assert df.loc["Net.a", "bwd_cpu_us"] == pytest.approx(20 + 1.6 + 40)
    assert df.loc["Net.a", "comm_cpu_us"] == pytest.approx(41.6)
    assert not any(p.startswith("gloo:") for p in df.index) and builder.comm.unsplit == 0
    # The worker ran 187..237 while backward ran until 190 (the launch 186..188 aside): 2 µs of
    # it beside compute, 48 exposed; the launch itself had nothing beside it.
    assert df.loc["profile", "comm_exposed_cpu_us"] == pytest.approx(48 + 2)
    assert df.loc["Net.a/gloo:all_reduce", "comm_exposed_cpu_us"] == pytest.approx(48 * 0.8)
    split = df.fwd_cpu_us + df.bwd_cpu_us + df.other_cpu_us
    assert ((split - df.cpu_us).abs() < 1e-9).all() and (df.self_cpu_us >= 0).all()


def test_a_recorded_layout_is_used_when_its_buckets_fit_the_launches():
    # Two buckets launched after gradients 2 and 4: b's two gradients, then a's.
    events = ddp_step(launch_after=(2, 4))
    initial = [[0, 1, 2, 3]]  # one bucket: does not fit two launches
    wrong = [[3, 0], [2, 1]]  # two buckets of two, but mixing layers: fits as well by counts
    ready = [[3, 2], [1, 0]]
    df, _ = frame(events, [{"module": "DDP", "params": PARAMS, "maps": [ready, initial]}])
    assert df.loc["Net.b/gloo:all_reduce", "cpu_us"] == pytest.approx(50.0)  # the first launch, all b's
    assert df.loc["Net.a/gloo:all_reduce", "cpu_us"] == pytest.approx(50.0)
    # b's bucket ran 147..197 beside backward work of 148..186 and 188..190 (the second launch
    # aside): 10 µs exposed; a's, 187..237, 2 µs beside it: 48. The launches had nothing beside them.
    assert df.loc["Net.b/gloo:all_reduce", "comm_exposed_cpu_us"] == pytest.approx(10.0)
    assert df.loc["Net.a/gloo:all_reduce", "comm_exposed_cpu_us"] == pytest.approx(48.0)
    assert df.loc["profile", "comm_exposed_cpu_us"] == pytest.approx(10 + 48 + 2 + 2)
    assert df.loc["Net.a/c10d::allreduce_", "calls"] == 1 and df.loc["Net.b/c10d::allreduce_", "calls"] == 1
    df, _ = frame(events, [{"module": "DDP", "params": PARAMS, "maps": [wrong]}])
    # Its buckets also hold two gradients each, so it fits: b has 40 of the first's 1640 bytes
    # and 400 of the second's 560.
    assert df.loc["Net.b/gloo:all_reduce", "cpu_us"] == pytest.approx(50 * 40 / 1640 + 50 * 400 / 560, abs=1e-3)


def test_without_a_layout_gradients_are_bucketed_in_ready_order_and_sized_by_their_shapes():
    df, builder = frame(ddp_step(launch_after=(2, 4), shapes=True))
    assert df.loc["Net.b/gloo:all_reduce", "cpu_us"] == pytest.approx(50.0)
    assert df.loc["Net.a/gloo:all_reduce", "cpu_us"] == pytest.approx(50.0)
    # One bucket for all four: a holds 440 of 550 elements.
    df, _ = frame(ddp_step(shapes=True))
    assert df.loc["Net.a/gloo:all_reduce", "cpu_us"] == pytest.approx(40.0)
    # Without shapes or a layout the sizes are unknown: the all-reduce stays where it ran.
    df, builder = frame(ddp_step())
    assert builder.comm.unsplit == 1 and "1 DDP all-reduce(s) stay" in (comm_note(builder.comm) or "")
    assert any(p.endswith(f"{GRAD}/c10d::allreduce_") for p in df.index)
    # ... and its worker range goes to the launching op's place: no layer, so it stays at the root.
    assert df.loc["gloo:all_reduce", "cpu_us"] == pytest.approx(50.0)


def fsdp_events() -> list[dict]:
    """FSDP2 on M.0 and M.1: forward all-gathers in each layer's pre_forward; in M.1's backward a
    prefetch of M.0's parameters; M.0's reduce-scatter run by the root's post-backward callback
    outside any layer. gloo's worker (tid 3) runs each collective after its c10d op; a broadcast
    launched before the model, outside every layer, queued no work."""
    return [
        ev("op", "c10d::broadcast_", 1, 2),
        ev("module", "M", 5, 100, type_="M"),
        ev("module", "M.0", 10, 40, type_="Linear"),
        ev("region", "FSDP::pre_forward (0)", 11, 30),
        ev("region", "FSDP::all_gather (0)", 12, 28),
        ev("op", "c10d::_allgather_base_", 13, 15),
        ev("op", "aten::addmm", 31, 39, seq=1),
        ev("module", "M.1", 50, 90, type_="Linear"),
        ev("region", "FSDP::pre_forward (1)", 51, 70),
        ev("region", "FSDP::all_gather (1)", 52, 68),
        ev("op", "c10d::_allgather_base_", 53, 55),
        ev("op", "aten::addmm", 71, 89, seq=2),
        ev("op", "autograd::engine::evaluate_function: AddmmBackward0", 120, 160, seq=2, fwd=1),
        ev("region", "FSDP::pre_backward (1)", 121, 140),
        ev("region", "FSDP::backward_prefetch for 0", 122, 139),
        ev("region", "FSDP::all_gather (0)", 123, 138),
        ev("op", "c10d::_allgather_base_", 124, 126),
        ev("op", "autograd::engine::evaluate_function: AddmmBackward0", 160, 180, seq=1, fwd=1),
        ev("region", "FSDP::root_post_backward_callback", 190, 220),
        ev("region", "FSDP::post_backward_reduce (0)", 191, 219),
        ev("op", "c10d::_reduce_scatter_base_", 192, 194),
        ev("region", "gloo:all_gather", 16, 26, tid=3),
        ev("region", "gloo:all_gather", 56, 66, tid=3),
        ev("region", "gloo:all_gather", 127, 137, tid=3),
        ev("region", "gloo:all_reduce", 195, 215, tid=3),
    ]


def test_fsdp_collectives_go_to_the_forward_and_backward_of_the_layer_they_name():
    df, _ = frame(fsdp_events())
    # The prefetch issued from M.1's backward hook gathers M.0's parameters: M.0's backward.
    assert "M.0/FSDP::backward_prefetch for 0" in df.index
    assert df.loc["M.0/FSDP::backward_prefetch for 0", "bwd_cpu_us"] == pytest.approx(17.0)
    assert not any("backward_prefetch" in p for p in df.index if p.startswith("M.1"))
    # The last reduce-scatter, run by the root's callback outside every layer: M.0's backward.
    assert df.loc["M.0/FSDP::post_backward_reduce (0)", "is_backward"]
    assert df.loc["FSDP::root_post_backward_callback", "cpu_us"] == pytest.approx(2.0)  # its own time only
    # gloo's worker ranges follow their c10d op: forward gathers forward, backward ones backward.
    gathers = df[(df.name == "gloo:all_gather") & (df.parent == "M.0")]
    assert sorted(zip(gathers.is_backward, gathers.cpu_us)) == [(False, 10.0), (True, 10.0)]
    assert df.loc["M.1/gloo:all_gather", "fwd_cpu_us"] == pytest.approx(10.0)
    reduce = df[(df.name == "gloo:all_reduce")]
    assert list(reduce.parent) == ["M.0"] and reduce.is_backward.all()
    assert df.loc["M.0", "bwd_cpu_us"] == pytest.approx(20 + 17 + 28 + 10 + 20)
    # Nothing of FSDP's or gloo's is left at the root but the callback's own time and the
    # broadcast, whose queue position no worker range took (each took its own collective's).
    top = df[df.depth == 1]
    assert [name for name in top.name if name.startswith(("gloo:", "c10d::"))] == ["c10d::broadcast_"]
    assert df.loc["profile", "comm_cpu_us"] == pytest.approx(1 + 8 + 10 * 3 + 20)


def test_a_real_nccl_ddp_trace_keeps_every_figure_while_its_all_reduces_move_to_the_layers(monkeypatch):
    path = shared_trace("a100-ddp-training.json.gz")
    split = torchprof.load_trace(path).df
    monkeypatch.setattr(builder_module, "attribute_comm", lambda *args: None)
    raw = torchprof.load_trace(path).df

    def kernels(df):
        k = df[df.name.str.startswith("ncclKernel_AllReduce")]
        return k.cuda_us.sum(), k.comm_overlap_cuda_us.sum(), k.idle_cuda_us.sum(), k.calls.sum()

    assert kernels(split)[:3] == pytest.approx(kernels(raw)[:3], abs=1e-6)
    root = ["cpu_us", "cuda_us", "bwd_cpu_us", "bwd_cuda_us", "comm_cuda_us", "comm_overlap_cuda_us", "idle_cuda_us"]
    assert split.iloc[0][root].tolist() == pytest.approx(raw.iloc[0][root].tolist(), abs=1e-6)
    # Every step's three bucket all-reduces left "(backward, no module)" for the layers (regions
    # such as "## forward:over_arch ##") whose gradients they carry, by the recorded shapes.
    ddp = lambda df: df[df.name.eq("c10d::allreduce_") & df.is_backward]  # noqa: E731
    assert ddp(raw).parent.str.contains("AccumulateGrad").all() and ddp(raw).calls.sum() == 18
    moved = ddp(split)
    assert not moved.parent.str.contains("AccumulateGrad").any() and moved.cpu_us.sum() == pytest.approx(ddp(raw).cpu_us.sum())
    assert moved.cuda_us.sum() == pytest.approx(ddp(raw).cuda_us.sum(), abs=1e-6)
    assert set(moved.parent.str.rsplit("/", n=1).str[-1]) >= {"## forward:over_arch ##", "DistributedDataParallel.forward"}
    assert (split.self_cpu_us >= -1e-9).all() and (split.self_cuda_us.fillna(0) >= -1e-9).all()
