"""What the widget's new views read from Python: the execution order of nodes, every step folded
into one tree, the viewed step, the rows rules behind "aten ops never changes a number", and a CPU
run's device memory, which was never recorded (NaN, not 0)."""

from __future__ import annotations

import json
import math

import pytest

from synthetic import build, ev, training_step
from torchprof._tree.aggregate import ALL_STEPS_LABEL, across_steps, step_rows
from torchprof._views.rows import natural_key, row_matcher, shown_values, visible_rows
from torchprof._views.state import check_state, default_expanded


def stepped():
    """Steps #1, #2 and #10 of a Net with fc1 and fc2 (fc2 missing from step #2), an optimizer."""
    events = []
    for k, (step, fc1, fc2) in enumerate(((1, 30, 20), (2, 50, 0), (10, 10, 40))):
        t = 200.0 * k
        events.append(ev("region", f"ProfilerStep#{step}", t, t + 150))
        events.append(ev("module", "Net", t + 1, t + 100, type_="Net"))
        events.append(ev("module", "Net.fc1", t + 2, t + 2 + fc1, type_="Linear"))
        if fc2:
            events.append(ev("module", "Net.fc2", t + 3 + fc1, t + 3 + fc1 + fc2, type_="Linear"))
        events.append(ev("region", "Optimizer.step#SGD.step", t + 110, t + 140))
    return build(events)


def test_exec_order_numbers_nodes_as_they_first_ran():
    tree = build(training_step())
    names, order = tree.columns["name"], tree.columns["exec_order"]
    ran = [names[i] for i in sorted(range(len(tree)), key=lambda i: order[i])]
    # fc2 is the slower layer (tree order puts it first), but fc1 ran first.
    assert [n for n in names if n in ("fc1", "fc2")] == ["fc2", "fc1"]
    assert ran.index("fc1") < ran.index("fc2") < ran.index("Optimizer.step#SGD.step")
    assert sorted(order) == list(range(len(tree)))
    by_exec = [names[i] for i in visible_rows(tree, sort_by="exec_order", ascending=True)]
    assert by_exec == ["profile", "Net", "fc1", "fc2", "(backward, no module)", "Optimizer.step#SGD.step"]


def test_a_profile_saved_before_exec_order_existed_still_loads(tmp_path):
    from torchprof._records import Recording
    from torchprof._result import Result

    prof = Result(build(training_step()), Recording(modules={}, wall_us=220.0))
    path = tmp_path / "old.json"
    prof.save(str(path))
    data = json.loads(path.read_text(encoding="utf-8"))
    del data["columns"]["exec_order"]
    path.write_text(json.dumps(data), encoding="utf-8")
    import torchprof

    old = torchprof.load(str(path))
    assert list(old.df["exec_order"]) == [0] * len(old.df)
    assert list(old.widget(sort_by="exec_order").view_df.index)  # ties keep the saved order


def test_steps_are_found_in_the_order_they_ran():
    tree = stepped()
    assert [tree.columns["name"][r] for r in step_rows(tree)] == ["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#10"]
    # Whatever the sort, the step rows keep that order.
    for sort_by, ascending in (("cpu_us", False), ("cpu_us", True), ("name", True), ("name", False)):
        rows = visible_rows(tree, sort_by=sort_by, ascending=ascending, expanded=set())
        assert [tree.columns["name"][r] for r in rows] == ["profile", "ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#10"]


def test_every_step_folds_into_one_tree_of_means_with_the_least_and_most_of_any_step():
    tree = stepped()
    folded = across_steps(tree)
    assert folded is not None and folded.steps == 3
    t = folded.tree
    cols = t.columns
    row = {p: i for i, p in enumerate(cols["path"])}
    assert cols["path"][0] == ALL_STEPS_LABEL and t.parent_index[0] == -1
    assert set(row) == {ALL_STEPS_LABEL, "Net", "Net.fc1", "Net.fc2", "Optimizer.step#SGD.step"}
    assert cols["cpu_us"][row["Net.fc1"]] == pytest.approx((30 + 50 + 10) / 3)
    assert cols["cpu_us"][row["Net.fc2"]] == pytest.approx((20 + 0 + 40) / 3), "a step without fc2 counts 0"
    assert cols["cpu_us"][0] == pytest.approx(150.0)
    assert folded.low["cpu_us"][row["Net.fc1"]] == pytest.approx(10) and folded.high["cpu_us"][row["Net.fc1"]] == pytest.approx(50)
    assert folded.low["cpu_us"][row["Net.fc2"]] == 0 and folded.runs[row["Net.fc2"]] == 2
    assert cols["calls"][row["Net.fc1"]] == 3 and cols["calls_per_step"][row["Net.fc1"]] == pytest.approx(1)
    # Means add up as the steps do: a parent's mean is its children's plus its own.
    net = row["Net"]
    kids = [i for i in range(len(t)) if t.parent_index[i] == net]
    assert cols["cpu_us"][net] == pytest.approx(cols["self_cpu_us"][net] + sum(cols["cpu_us"][k] for k in kids))
    assert cols["depth"][row["Net.fc1"]] == 2 and cols["parent"][row["Net.fc1"]] == "Net"
    assert across_steps(build(training_step())) is None, "no steps, nothing to fold"


def test_a_view_of_one_step_is_its_subtree_with_percentages_of_that_step():
    tree = stepped()
    state = check_state(tree, {"step": "10"})
    root = step_rows(tree)[2]
    assert state["expanded"] == default_expanded(tree, False, root) == ["ProfilerStep#10/Net"]  # the hot path ends at Net
    rows = visible_rows(tree, min_pct=30, root=root, expanded=None)
    # fc2 is 40 of step #10's 150 (27%): under 30% of the step; fc1 (10) too.
    assert [tree.columns["path"][r] for r in rows] == ["ProfilerStep#10", "ProfilerStep#10/Net"]
    with pytest.raises(ValueError, match=r"no step '4'.*1, 2, 10"):
        check_state(tree, {"step": "4"})
    with pytest.raises(ValueError, match="two recorded steps"):
        check_state(build(training_step()), {"step": "all"})


def test_widget_view_df_follows_the_viewed_step():
    from torchprof._records import Recording
    from torchprof._result import Result

    prof = Result(stepped(), Recording(modules={}, wall_us=600.0))
    w = prof.widget(min_pct=0, step="2", expanded=["ProfilerStep#2/Net"])
    assert list(w.view_df.index) == ["ProfilerStep#2", "ProfilerStep#2/Net", "ProfilerStep#2/Net.fc1",
                                     "ProfilerStep#2/Optimizer.step#SGD.step"]  # fmt: skip
    w.step = "all"
    w.expanded = ["Net"]
    assert list(w.view_df.index) == [ALL_STEPS_LABEL, "Net", "Net.fc1", "Net.fc2", "Optimizer.step#SGD.step"]
    assert w.view_df.loc["Net.fc2", "cpu_us"] == pytest.approx(20.0)
    with pytest.raises(ValueError, match="no step"):
        w.step = "99"
    with pytest.raises(ValueError, match="view must be one of table, insights, flame, top"):
        w.view = "pie"
    with pytest.raises(ValueError, match="metric must be"):
        prof.widget(metric="name")
    assert prof.widget(view="flame", metric="bwd_cpu_us", flame_colour="type").view == "flame"


def test_hidden_op_rows_fold_into_their_layers_self_so_ticking_ops_changes_no_number():
    from torchprof._views.rows import select_rows

    tree = build(training_step())
    names = tree.columns["name"]
    fc1, fc2 = names.index("fc1"), names.index("fc2")

    def self_cpu(min_pct: float, show_ops: bool) -> list[float]:
        return shown_values(tree, "self_cpu_us", select_rows(tree, min_pct=min_pct, show_ops=show_ops))

    # At 14% of 195 µs fc2's two ops (30 µs each) show, fc1's (26 and 20 µs) do not.
    on = visible_rows(tree, min_pct=14, show_ops=True)
    assert fc1 in on and not any(tree.parent_index[i] == fc1 for i in on)
    assert self_cpu(14, True)[fc1] == self_cpu(14, False)[fc1] == 50.0, "no op row of fc1 appeared: its Self stays"
    assert self_cpu(14, False)[fc2] == 70.0 and self_cpu(14, True)[fc2] == 10.0, "its ops (60) now show beside it"
    # At 13% fc1's aten::linear (26) shows and its backward op (20) does not: Self = 4 + 20.
    assert self_cpu(13, True)[fc1] == pytest.approx(24.0)
    # The layer column, exactly, when ops are off.
    assert self_cpu(0, False) == tree.columns["layer_self_cpu_us"]


def test_search_matches_names_and_paths_only_behind_path():
    match = row_matcher("conv2")
    assert match("conv2", "ResNet.layer1.0.conv2") and not match("bn2", "ResNet.layer1.0.conv2/bn2")
    assert not row_matcher("layer1")("conv2", "ResNet.layer1.0.conv2"), "a name search does not match the path"
    assert row_matcher("path:layer1")("conv2", "ResNet.layer1.0.conv2")
    assert row_matcher("path:layer4.*.conv?")("conv1", "ResNet.layer4.0.conv1")
    assert not row_matcher("path:layer4.*.conv?")("conv1", "ResNet.layer3.0.conv1")
    assert row_matcher("conv?")("conv2", "x") and not row_matcher("conv?")("conv22", "x")
    assert row_matcher("  ") is None
    # A module's class matches too ("Conv2d" finds every convolution), never on a path search.
    assert row_matcher("Conv2d")("conv1", "ResNet.conv1", "Conv2d") and not row_matcher("Conv2d")("conv1", "ResNet.conv1")
    assert row_matcher("batchnorm*")("bn1", "x", "BatchNorm2d") and not row_matcher("path:conv2d")("conv1", "x", "Conv2d")
    assert not row_matcher("conv2")("conv1", "ResNet.conv1", "Conv2d"), "a class matches whole: conv2 is not every Conv2d"


def test_natural_sort_orders_numbered_names_as_numbers():
    names = ["10", "2", "1", "0", "100", "layer10", "layer2", "Layer1"]
    assert sorted(names, key=natural_key) == ["0", "1", "2", "10", "100", "Layer1", "layer2", "layer10"]


def test_a_cpu_run_with_memory_records_no_device_memory():
    tree = build([ev("module", "Net", 0, 10, type_="Net"), ev("memory", "[memory]", 2, 2, nbytes=4096)], memory=True)
    assert all(math.isnan(v) for v in tree.columns["cuda_mem"])
    assert all(math.isnan(v) for v in tree.columns["self_cuda_mem"])
    assert tree.columns["cpu_mem"][0] == 4096
    with_device = build([ev("module", "Net", 0, 10, type_="Net"), ev("memory", "[memory]", 2, 2, nbytes=512, cuda=True)], memory=True)
    assert with_device.columns["cuda_mem"][0] == 512


def test_the_steps_of_a_real_ddp_trace_fold_into_their_means_in_the_order_they_ran():
    """A recommendation model trained with DDP on an A100 (six ProfilerSteps, NCCL, backward): the
    tree lists its steps by time (#1014, #1010, ...); every view lists them as they ran."""
    import statistics

    import torchprof
    from conftest import shared_trace

    prof = torchprof.load_trace(str(shared_trace("a100-ddp-training.json.gz")))
    tree = prof.tree
    names, paths = tree.columns["name"], tree.columns["path"]
    steps = step_rows(tree)
    assert [names[r] for r in steps] == [f"ProfilerStep#{n}" for n in range(1009, 1015)]
    assert [names[r] for r in visible_rows(tree, expanded=set())][1:7] == [names[r] for r in steps]
    assert [names[i] for i in tree.children()[0][:6]] != [names[r] for r in steps], "the tree itself orders them by time"
    folded = across_steps(tree)
    assert folded is not None and folded.steps == 6
    t = folded.tree
    checked = 0
    for i in range(1, len(t)):
        if folded.runs[i] != 6 or t.columns["depth"][i] > 2:
            continue
        per_step = [tree.columns["cuda_us"][paths.index(f"{paths[r]}/{t.columns['path'][i]}")] for r in steps]
        assert t.columns["cuda_us"][i] == pytest.approx(statistics.fmean(per_step)), t.columns["path"][i]
        assert folded.low["cuda_us"][i] == min(per_step) and folded.high["cuda_us"][i] == max(per_step)
        checked += 1
    assert checked >= 3
    assert t.columns["cpu_us"][0] == pytest.approx(statistics.fmean(tree.columns["cpu_us"][r] for r in steps))
