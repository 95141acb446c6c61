"""The tree builder on hand-written events: exact numbers, no torch run."""

from __future__ import annotations

import math

import pytest

from synthetic import build, ev, frame, training_step
from torchprof._vocab import UNATTRIBUTED_BACKWARD


def test_backward_time_lands_on_the_layer_that_ran_forward():
    df = frame(training_step())
    assert df.loc["Net.fc2", "bwd_cpu_us"] == pytest.approx(30.0)
    assert df.loc["Net.fc1", "bwd_cpu_us"] == pytest.approx(20.0)
    # The backward op sits under the module, in the backward columns only.
    bwd = df.loc["Net.fc2/autograd::engine::evaluate_function: AddmmBackward0"]
    assert bwd.kind == "op" and bwd.parent == "Net.fc2" and bool(bwd.is_backward)
    assert bwd.cpu_us == pytest.approx(30.0) and bwd.bwd_cpu_us == pytest.approx(30.0)
    assert df.loc["Net.fc2", "cpu_us"] == pytest.approx(40.0 + 30.0)


def test_nested_forward_op_is_found_through_its_layer_level_op():
    # seq 1 was created by aten::addmm nested inside aten::linear (seq 0): still fc1.
    df = frame(training_step())
    assert "Net.fc1/autograd::engine::evaluate_function: AddmmBackward0" in df.index


def test_backward_without_a_module_goes_to_a_visible_unattributed_node():
    df = frame(training_step())
    node = df.loc[UNATTRIBUTED_BACKWARD]
    assert node.kind == "region" and node.parent == "profile"
    # SumBackward0 (the loss is outside modules) and AccumulateGrad
    assert node.bwd_cpu_us == pytest.approx(10.0 + 5.0)
    assert df.loc["profile", "bwd_cpu_us"] == pytest.approx(30.0 + 20.0 + 15.0)


def test_totals_are_self_plus_children_for_every_node():
    df = frame(training_step())
    kids = df.groupby("parent")[["cpu_us", "bwd_cpu_us", "macs", "flops"]].sum()
    for total, own in (("cpu_us", "self_cpu_us"), ("bwd_cpu_us", "bwd_self_cpu_us"), ("macs", None), ("flops", None)):
        if own is None:
            continue
        expected = df[own] + kids[total].reindex(df.index).fillna(0.0)
        assert (expected - df[total]).abs().max() < 1e-9


def test_root_total_is_the_time_covered_by_top_level_events():
    df = frame(training_step())
    # top-level: Net 100 + sum 10 + backward 10+30+20+5 on thread 2 + optimizer 20
    assert df.loc["profile", "cpu_us"] == pytest.approx(100 + 10 + 10 + 30 + 20 + 5 + 20)
    assert df.loc["profile", "calls"] == 1


def test_self_time_excludes_children_and_layer_self_folds_ops_in():
    df = frame(training_step())
    fc2 = df.loc["Net.fc2"]
    assert fc2.self_cpu_us == pytest.approx(40 - 30)  # the addmm is a child row
    assert fc2.layer_self_cpu_us == pytest.approx(40 + 30)  # ops (forward and backward) folded in


def test_repeated_calls_aggregate_into_one_node_with_a_count():
    events = [ev("module", "M", 0, 10), ev("module", "M", 20, 25), ev("module", "M", 30, 31)]
    df = frame(events)
    assert df.loc["M", "calls"] == 3
    assert df.loc["M", "cpu_us"] == pytest.approx(16.0)


def test_flops_count_the_outermost_op_with_a_formula_only():
    events = [
        ev("op", "aten::linear", 0, 10, shapes=[[4, 16], [8, 16], [8]]),
        ev("op", "aten::addmm", 1, 9, shapes=[[8], [4, 16], [16, 8]]),
        ev("op", "aten::mm", 2, 8, shapes=[[4, 16], [16, 8]]),  # hypothetical inner call
    ]
    df = frame(events)
    assert df.loc["profile", "macs"] == 4 * 16 * 8
    assert df.loc["profile", "flops"] == 2 * 4 * 16 * 8


def test_ops_without_a_formula_are_listed_not_silently_zero():
    events = [
        ev("op", "mylib::fancy", 0, 10, shapes=[[4, 4]]),
        ev("op", "aten::view", 10, 11, shapes=[[4, 4], []]),
        ev("op", "aten::add", 11, 12, shapes=[[4, 4], [4, 4], []]),
    ]
    tree = build(events)
    assert tree.unsupported_ops == {"mylib::fancy": 1}
    # The root holds the unknown op: its FLOPs are unknown (NaN), never the 16 counted beside it,
    # and so are its MACs (an op of no formula may multiply-add); the add's own row keeps its count.
    df = frame(events)
    assert math.isnan(df.loc["profile", "flops"]) and math.isnan(df.loc["profile", "macs"])
    assert math.isnan(df.loc["mylib::fancy", "flops"]) and df.loc["aten::add", "flops"] == 16
    assert df.loc["aten::add", "macs"] == 0


def test_ranges_torch_opens_around_dispatch_to_python_are_not_ops_of_unknown_cost():
    # A compiled graph's first run (and any TorchDispatchMode or tensor subclass) records these
    # ranges under an op, with nothing below them when the mode only passed the call on.
    events = [
        ev("op", "aten::_unsafe_view", 0, 10, shapes=[[4, 4], []]),
        ev("op", "PythonDispatchMode", 1, 9),
        ev("op", "aten::add", 10, 20, shapes=[[4, 4], [4, 4], []]),
        ev("op", "PythonSubclass", 11, 19),
    ]
    tree = build(events)
    assert tree.unsupported_ops == {}
    assert tree.columns["flops"][0] == 16


def test_kernels_attach_to_the_op_that_launched_them():
    events = [
        ev("module", "M.conv", 0, 50, type_="Conv2d"),
        ev("op", "aten::conv2d", 5, 45, ext=7),
        ev("runtime", "cudaLaunchKernel", 10, 15, corr=100, link=7),
        ev("kernel", "implicit_gemm", 60, 90, tid="stream 7", corr=100, link=7),
        ev("kernel", "orphan_kernel", 95, 96, tid="stream 7", corr=555),
        ev("kernel", "by_external_id", 100, 104, tid="stream 7", link=7),
    ]
    df = frame(events, cuda=True)
    kernel = df.loc["M.conv/aten::conv2d/implicit_gemm"]
    assert kernel.kind == "kernel" and kernel.self_cuda_us == pytest.approx(30.0)
    assert df.loc["M.conv/aten::conv2d/by_external_id", "cuda_us"] == pytest.approx(4.0)
    assert df.loc["M.conv", "cuda_us"] == pytest.approx(34.0)
    # inside the window, its launch recorded nowhere: a labelled row, not loose under the root
    assert df.loc["(device, no launching op)/orphan_kernel", "cuda_us"] == pytest.approx(1.0)
    assert df.loc["(device, no launching op)", "parent"] == "profile"
    assert df.loc["(device, no launching op)", "kind"] == "region"
    assert df.loc["profile", "cuda_us"] == pytest.approx(35.0)
    assert df.loc["M.conv", "layer_self_cuda_us"] == pytest.approx(34.0)


def test_backward_kernels_count_as_backward_gpu_time():
    events = [
        ev("module", "M", 0, 10),
        ev("op", "aten::mm", 1, 9, seq=5, ext=1),
        ev("op", "autograd::engine::evaluate_function: MmBackward0", 20, 30, tid=2, seq=5, fwd=1, ext=2),
        ev("runtime", "cudaLaunchKernel", 22, 24, tid=2, corr=9, link=2),
        ev("kernel", "gemm_bwd", 40, 52, tid="s", corr=9, link=2),
    ]
    df = frame(events, cuda=True)
    assert df.loc["M", "bwd_cuda_us"] == pytest.approx(12.0)
    assert df.loc["M", "cuda_us"] == pytest.approx(12.0)


def test_memory_is_attributed_to_the_innermost_open_range():
    events = [
        ev("module", "M", 0, 10),
        ev("op", "aten::empty", 1, 3),
        ev("memory", "[memory]", 2, 2, nbytes=4096),
        ev("memory", "[memory]", 5, 5, nbytes=-1024),
        ev("memory", "[memory]", 20, 20, nbytes=512, cuda=True),
    ]
    df = frame(events, memory=True)
    assert df.loc["M/aten::empty", "self_cpu_mem"] == 4096
    assert df.loc["M", "self_cpu_mem"] == -1024
    assert df.loc["M", "cpu_mem"] == 3072
    assert df.loc["profile", "cuda_mem"] == 512


def test_columns_not_recorded_are_nan():
    df = frame([ev("op", "aten::relu", 0, 1)], flops=False)
    for col in ("self_cuda_us", "cuda_us", "cpu_mem", "macs", "flops"):
        assert math.isnan(df.loc["profile", col])


def test_rows_are_pre_order_with_siblings_by_descending_total():
    df = frame(training_step())
    position = {p: i for i, p in enumerate(df.index)}
    for path, parent in df["parent"].items():
        if parent is not None and isinstance(parent, str):
            assert position[parent] < position[path]
    top = df[df.parent == "profile"]["cpu_us"].tolist()
    assert top == sorted(top, reverse=True)
    assert df.index.is_unique


def test_module_called_inside_a_region_keeps_its_dotted_path_under_the_region():
    events = [ev("region", "ProfilerStep#3", 0, 100), ev("module", "Net", 1, 50), ev("module", "Net.fc", 2, 40)]
    df = frame(events)
    assert list(df.index) == ["profile", "ProfilerStep#3", "ProfilerStep#3/Net", "ProfilerStep#3/Net.fc"]
    assert df.loc["ProfilerStep#3/Net.fc", "name"] == "fc"


def test_unordered_events_with_equal_start_nest_longest_first():
    # µs-resolution traces often start a parent and its child in the same microsecond
    events = [ev("op", "aten::_to_copy", 5, 9), ev("op", "aten::to", 5, 10)]
    df = frame(events)
    assert df.loc["aten::to/aten::_to_copy", "parent"] == "aten::to"


def fsdp_backward() -> list[dict]:
    """fc1, fc2 forward on thread 1; backward as FSDP2 records it: each ``evaluate_function``
    range without a sequence number (-1), the op inside it carrying the number, and FSDP's own
    region first."""
    return [
        ev("module", "Net", 0, 100, type_="Net"),
        ev("module", "Net.fc1", 10, 40, type_="Linear"),
        ev("op", "aten::addmm", 15, 35, seq=1),
        ev("module", "Net.fc2", 50, 90, type_="Linear"),
        ev("op", "aten::addmm", 55, 85, seq=2),
        ev("op", "autograd::engine::evaluate_function: AddmmBackward0", 130, 160, tid=2),
        ev("region", "FSDP::pre_backward (2)", 131, 135, tid=2),
        ev("op", "AddmmBackward0", 136, 159, tid=2, seq=2, fwd=1),
        ev("op", "autograd::engine::evaluate_function: AddmmBackward0", 160, 180, tid=2),
        ev("op", "AddmmBackward0", 161, 179, tid=2, seq=1, fwd=1),
    ]


def test_a_backward_range_without_sequence_number_is_owned_through_the_op_inside_it():
    df = frame(fsdp_backward())  # a trace: nested by time
    assert df.loc["Net.fc2/autograd::engine::evaluate_function: AddmmBackward0", "bwd_cpu_us"] == pytest.approx(30.0)
    assert df.loc["Net.fc1/autograd::engine::evaluate_function: AddmmBackward0", "bwd_cpu_us"] == pytest.approx(20.0)
    assert UNATTRIBUTED_BACKWARD not in df.index


def test_a_backward_range_without_sequence_number_is_owned_through_its_first_op_in_the_live_tree():
    from synthetic import columns
    from torchprof._tree.builder import TreeBuilder
    from torchprof._views.frame import to_dataframe

    cols = columns(fsdp_backward())
    cols.parent = [-1, 0, 1, 0, 3, -1, 5, 5, -1, 8]  # the live capture gives the nesting, in pre-order
    cols.fwd_tid = [0] * len(cols)  # and no forward thread (it is only asked when threads collide)
    builder = TreeBuilder()
    builder.add(cols)
    df = to_dataframe(builder.finish())
    assert df.loc["Net.fc2/autograd::engine::evaluate_function: AddmmBackward0", "bwd_cpu_us"] == pytest.approx(30.0)
    assert df.loc["Net.fc1/autograd::engine::evaluate_function: AddmmBackward0", "bwd_cpu_us"] == pytest.approx(20.0)


def test_colliding_sequence_numbers_of_two_forward_threads_are_told_apart_by_the_forward_thread():
    from synthetic import columns
    from torchprof._tree.builder import TreeBuilder
    from torchprof._views.frame import to_dataframe

    # Threads 3 and 4 each number their forward ops from 0; backward runs on thread 1. Only a
    # lazy lookup (the live capture's) names the forward thread of each backward range.
    events = [
        ev("module", "A", 0, 40, tid=3, type_="Linear"),
        ev("op", "aten::addmm", 5, 35, tid=3, seq=0),
        ev("module", "B", 50, 90, tid=4, type_="Linear"),
        ev("op", "aten::addmm", 55, 85, tid=4, seq=0),
        ev("op", "autograd::engine::evaluate_function: AddmmBackward0", 100, 110, tid=1, seq=0),  # B's
        ev("op", "autograd::engine::evaluate_function: AddmmBackward0", 110, 130, tid=1, seq=0),  # A's
    ]
    cols = columns(events)
    cols.parent = [-1, 0, -1, 2, -1, -1]
    asked = []
    cols.fwd_tid_of = lambda i: asked.append(i) or {4: 4, 5: 3}[i]
    builder = TreeBuilder()
    builder.add(cols)
    df = to_dataframe(builder.finish())
    assert df.loc["A/autograd::engine::evaluate_function: AddmmBackward0", "bwd_cpu_us"] == pytest.approx(20.0)
    assert df.loc["B/autograd::engine::evaluate_function: AddmmBackward0", "bwd_cpu_us"] == pytest.approx(10.0)
    assert asked == [4, 5]


def test_paths_that_meet_again_get_a_number_whatever_builds_them():
    df = frame([
        ev("region", "x", 0, 10),  # a region and a module of one name under the root
        ev("module", "x", 20, 25, type_="X"),
        ev("op", "x #2", 30, 32),  # a label that looks like a renamed path
        ev("module", "Net", 40, 60, type_="Net"),
        ev("region", "step", 70, 100),
        ev("module", "Net", 71, 80, type_="Net"),  # the same module below a region: its own scope
        ev("region", "Net", 81, 90),  # a region named like the module, in that scope
    ])  # fmt: skip
    assert list(df.index) == ["profile", "step", "step/Net", "step/Net #2", "Net", "x", "x #2", "x #2 #2"]


def test_a_label_holding_a_slash_cannot_pass_for_a_nested_path():
    df = frame([
        ev("region", "a/b", 0, 10),
        ev("region", "a", 20, 40),
        ev("region", "b", 21, 30),
    ])  # fmt: skip
    assert list(df.index) == ["profile", "a", "a/b", "a/b #2"]
    assert df.loc["a/b #2", "parent"] == "profile" and df.loc["a/b", "parent"] == "a"


def test_backward_of_no_module_on_another_thread_stays_in_the_step_it_ran_in():
    # Two steps; each one's loss backward (no module) runs on the autograd thread (tid 2) while
    # the step is open on the main thread: DDP's gradient all-reduce and AccumulateGrad do this.
    events = []
    for n, t0 in ((1, 0), (2, 200)):
        events += [
            ev("region", f"ProfilerStep#{n}", t0, t0 + 190),
            ev("module", "Net", t0 + 10, t0 + 50, type_="Net"),
            ev("op", "aten::addmm", t0 + 15, t0 + 45, seq=2 * n),
            ev("op", "aten::sum", t0 + 60, t0 + 70, seq=2 * n + 1),
            ev("op", "autograd::engine::evaluate_function: SumBackward0", t0 + 80, t0 + 90, tid=2, seq=2 * n + 1, fwd=1),
            ev("op", "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", t0 + 100, t0 + 125, tid=2),
        ]
    df = frame(events)
    for n in (1, 2):
        row = df.loc[f"ProfilerStep#{n}/{UNATTRIBUTED_BACKWARD}"]
        assert row.parent == f"ProfilerStep#{n}" and row.bwd_cpu_us == pytest.approx(10.0 + 25.0)
        assert df.loc[f"ProfilerStep#{n}", "bwd_cpu_us"] == pytest.approx(35.0)
    assert UNATTRIBUTED_BACKWARD not in df.index  # nothing left beside the steps
