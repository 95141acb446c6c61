"""Exports: chrome traces (Perfetto), folded stacks (flamegraphs), HTML, and save/load."""

from __future__ import annotations

import gzip
import json
import math
import re
import sys

import pandas as pd
import pytest
import torch

import torchprof
from synthetic import build, columns, ev, training_step
from torchprof import TraceError
from torchprof._capture.session import _exports_twice
from torchprof._options import write_outputs
from torchprof._records import Recording
from torchprof._tree.builder import TreeBuilder
from torchprof._views.frame import csv_text


def synthetic_profile() -> torchprof.Result:
    builder = TreeBuilder()
    builder.add(columns(training_step()))
    return torchprof.Result(builder.finish(), Recording(label="profile", wall_us=220.0))


@pytest.fixture
def trained(mlp):
    x = torch.randn(4, 8)
    mlp(x).sum().backward()  # warm-up
    with torchprof.Profiler(shapes=True, memory=True) as prof:
        mlp(x).sum().backward()
    return prof


# -- chrome trace --------------------------------------------------------------------------------------------------
def x_events(path) -> list[dict]:
    raw = open(path, "rb").read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    data = json.loads(raw)
    assert isinstance(data["traceEvents"], list)
    return [e for e in data["traceEvents"] if e.get("ph") == "X"]


def test_chrome_trace_shows_every_module_call_as_a_named_span(trained, tmp_path):
    path = trained.export_chrome_trace(str(tmp_path / "run.json"))
    events = x_events(path)
    # What Perfetto and chrome://tracing need of a complete event: numeric ts/dur, pid, tid.
    for e in events:
        assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float)) and e["dur"] >= 0
        assert "pid" in e and "tid" in e and isinstance(e["name"], str)
    spans = {e["name"]: e for e in events if e["name"].startswith("nn.Module: ")}
    assert set(spans) == {"nn.Module: Sequential [Sequential]", "nn.Module: Sequential.0 [Linear]",
                          "nn.Module: Sequential.1 [ReLU]", "nn.Module: Sequential.2 [Linear]"}  # fmt: skip
    outer = spans["nn.Module: Sequential [Sequential]"]
    for name in ("nn.Module: Sequential.0 [Linear]", "nn.Module: Sequential.2 [Linear]"):
        inner = spans[name]
        assert inner["tid"] == outer["tid"]
        assert outer["ts"] <= inner["ts"] and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"]
        # the layer's ops sit inside its span
        assert any(e["name"] == "aten::addmm" and inner["ts"] <= e["ts"] <= inner["ts"] + inner["dur"] for e in events)


def test_chrome_trace_reads_back_into_the_same_tree(trained, tmp_path):
    path = trained.export_chrome_trace(str(tmp_path / "run.json.gz"))
    assert open(path, "rb").read(2) == b"\x1f\x8b"  # .gz means gzip
    back = torchprof.load_trace(path).df
    df = trained.df
    modules = df[df.kind == "module"].index
    assert set(back[back.kind == "module"].index) == set(modules)
    for col in ("calls", "params", "macs", "flops"):
        assert back.loc[modules, col].tolist() == df.loc[modules, col].tolist(), col
    assert back.loc[modules, "type"].tolist() == df.loc[modules, "type"].tolist()
    assert back.loc["Sequential.0", "bwd_cpu_us"] > 0
    assert back.loc["profile", "cpu_us"] == pytest.approx(df.loc["profile", "cpu_us"], rel=0.02)


def test_a_loaded_trace_exports_again_unchanged(trained, tmp_path):
    first = trained.export_chrome_trace(str(tmp_path / "a.json"))
    again = torchprof.load_trace(first).export_chrome_trace(str(tmp_path / "b.json"))
    a, b = torchprof.load_trace(first).df, torchprof.load_trace(again).df
    pd.testing.assert_frame_equal(a, b)


def test_chrome_trace_exports_any_number_of_times_in_both_formats(trained, tmp_path):
    paths = [trained.export_chrome_trace(str(tmp_path / name)) for name in ("a.json", "b.json.gz", "c.json", "d.json.gz")]
    assert [open(p, "rb").read(2) == b"\x1f\x8b" for p in paths] == [False, True, False, True]
    first = x_events(paths[0])
    for p in paths[1:]:
        assert x_events(p) == first
    pd.testing.assert_frame_equal(torchprof.load_trace(paths[3]).df, torchprof.load_trace(paths[0]).df)


def test_torch_s_own_export_before_or_after_ours_breaks_neither_the_tree_nor_our_export(mlp, tmp_path):
    # kineto writes a cycle's trace once ("Trace is already saved"): reading the tree must not
    # spend that write, and our export must still work after torch's own.
    x = torch.randn(2, 8)
    with torchprof.Profiler() as prof:
        mlp(x)
    prof.torch_profile.export_chrome_trace(str(tmp_path / "torch.json"))
    assert "Sequential.0" in prof.df.index
    if _exports_twice():
        ours = prof.export_chrome_trace(str(tmp_path / "ours.json"))
        assert set(torchprof.load_trace(ours).df.index) == set(prof.df.index)
    else:  # torch 2.11 has no second writer of a trace kineto wrote: say so, and how to export
        with pytest.raises(ValueError, match="export with torchprof first"):
            prof.export_chrome_trace(str(tmp_path / "ours.json"))
    with torchprof.Profiler() as again:
        mlp(x)
    assert "Sequential.0" in again.df.index
    again.torch_profile.export_chrome_trace(str(tmp_path / "torch2.json"))  # the tree did not spend kineto's write
    assert {e["name"] for e in x_events(tmp_path / "torch2.json")} >= {"nn.Module: Sequential.0 [Linear]"}


def test_a_schedule_run_exports_every_recorded_cycle(mlp, tmp_path):
    x = torch.randn(2, 8)
    schedule = torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=2)
    with torchprof.Profiler(schedule=schedule) as prof:
        for _ in range(9):
            mlp(x).sum().backward()
            prof.step()
    steps = list(prof.steps["step"])
    assert len(steps) == 4
    for name in ("s.json", "s.json.gz", "again.json"):
        path = prof.export_chrome_trace(str(tmp_path / name))
        names = {e["name"] for e in x_events(path)}
        assert {f"ProfilerStep#{n}" for n in steps} <= names
        back = torchprof.load_trace(path)
        assert list(back.steps["step"]) == steps
        assert back.df.loc["ProfilerStep#3/Sequential", "calls"] == prof.df.loc["ProfilerStep#3/Sequential", "calls"]


def test_a_loaded_trace_exports_any_number_of_times_in_both_formats(trained, tmp_path):
    loaded = torchprof.load_trace(trained.export_chrome_trace(str(tmp_path / "run.json.gz")))
    first = loaded.export_chrome_trace(str(tmp_path / "a.json"))
    second = loaded.export_chrome_trace(str(tmp_path / "b.json.gz"))
    pd.testing.assert_frame_equal(torchprof.load_trace(first).df, torchprof.load_trace(second).df)
    pd.testing.assert_frame_equal(torchprof.load_trace(second).df, loaded.df)


def test_chrome_trace_of_a_reopened_profile_is_a_clear_error(trained, tmp_path):
    trained.save(str(tmp_path / "p.json"))
    with pytest.raises(ValueError, match="no trace events of its own to export"):
        torchprof.load(str(tmp_path / "p.json")).export_chrome_trace(str(tmp_path / "t.json"))


def test_export_into_a_missing_folder_fails_before_writing(trained, tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        trained.export_chrome_trace(str(tmp_path / "nope" / "t.json"))


# -- folded stacks -------------------------------------------------------------------------------------------------
def test_folded_stacks_have_each_node_s_own_name_as_its_frame_forward_and_backward(tmp_path):
    # A module's frame is its attribute name (fc2), not its full path: the stack above it already
    # spells the path, and a full path per frame made a line at depth d cost O(d²).
    path = synthetic_profile().export_stacks(str(tmp_path / "stacks.txt"))
    assert open(path, encoding="utf-8").read() == (
        "profile;Net 30\n"
        "profile;Net;fc2 10\n"
        "profile;Net;fc2;aten::addmm 30\n"
        "profile;Net;fc2;autograd::engine::evaluate_function: AddmmBackward0 2\n"
        "profile;Net;fc2;autograd::engine::evaluate_function: AddmmBackward0;AddmmBackward0 13\n"
        "profile;Net;fc2;autograd::engine::evaluate_function: AddmmBackward0;AddmmBackward0;aten::mm 15\n"
        "profile;Net;fc1 4\n"
        "profile;Net;fc1;aten::linear 6\n"
        "profile;Net;fc1;aten::linear;aten::addmm 20\n"
        "profile;Net;fc1;autograd::engine::evaluate_function: AddmmBackward0 20\n"
        "profile;Optimizer.step#SGD.step 10\n"
        "profile;Optimizer.step#SGD.step;aten::add_ 10\n"
        "profile;(backward, no module);autograd::engine::evaluate_function: SumBackward0 10\n"
        "profile;(backward, no module);autograd::engine::evaluate_function: torch::autograd::AccumulateGrad 5\n"
        "profile;aten::sum 10\n"
    )


def test_folded_stack_counts_add_up_to_the_total(trained, tmp_path):
    path = trained.export_stacks(str(tmp_path / "stacks.txt"), "self_cpu_time_total")  # torch's metric name works
    lines = open(path, encoding="utf-8").read().splitlines()
    counts = [int(line.rsplit(" ", 1)[1]) for line in lines]
    assert sum(counts) == pytest.approx(trained.df.loc["profile", "cpu_us"], abs=len(lines))  # rounding per line
    assert all(line.startswith("profile;") for line in lines)
    assert any(line.startswith("profile;Sequential;0;autograd::engine::evaluate_function: AddmmBackward0") for line in lines)
    assert all(";;" not in line for line in lines)


def test_frames_never_contain_the_separator(tmp_path):
    builder = TreeBuilder()
    builder.add(columns([ev("region", "load;decode", 0, 10), ev("op", "aten::add", 2, 6)]))
    prof = torchprof.Result(builder.finish(), Recording(label="profile"))
    path = prof.export_stacks(str(tmp_path / "s.txt"))
    assert open(path).read() == "profile;load:decode 6\nprofile;load:decode;aten::add 4\n"


def test_stacks_of_a_metric_that_was_not_recorded_is_a_clear_error(trained, tmp_path):
    with pytest.raises(ValueError, match="no CUDA time"):
        trained.export_stacks(str(tmp_path / "s.txt"), "self_cuda_us")
    with pytest.raises(ValueError, match="unknown metric 'wall'; choose one of"):
        trained.export_stacks(str(tmp_path / "s.txt"), "wall")


def test_memory_stacks_keep_allocations_per_layer(trained, tmp_path):
    path = trained.export_stacks(str(tmp_path / "mem.txt"), "self_cpu_mem")
    lines = open(path).read().splitlines()
    assert lines and all(int(line.rsplit(" ", 1)[1]) > 0 for line in lines)


# -- HTML ------------------------------------------------------------------------------------------------------------
def test_html_report_is_one_self_contained_file(trained, tmp_path):
    path = tmp_path / "report.html"
    assert trained.to_html(str(path)) == str(path)  # the path, not the page: a notebook shows the name
    html = path.read_text(encoding="utf-8")
    assert trained.to_html() == html  # without a path, the page itself
    assert html.lstrip().lower().startswith("<!doctype html")
    for text in ("Sequential", "Linear", "AddmmBackward0"):  # the profile's data is in the page
        assert text in html
    for remote in ('src="http', "src='http", 'href="http', "@import url(http"):
        assert remote not in html  # opens without a network


# -- save / load ------------------------------------------------------------------------------------------------------
def summaries_equal(a: dict, b: dict) -> bool:
    if a.keys() != b.keys():
        return False
    for k in a:
        x, y = a[k], b[k]
        if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
            continue
        if x != y:
            return False
    return True


@pytest.mark.parametrize("name", ["profile.json", "profile.json.gz"])
def test_saved_profile_reopens_identically_without_rerunning(trained, tmp_path, name):
    path = trained.save(str(tmp_path / name))
    loaded = torchprof.load(path)
    assert type(loaded) is torchprof.Result  # nothing of torch's, nothing re-run
    pd.testing.assert_frame_equal(loaded.df, trained.df)
    assert loaded.table(min_pct=0, show_ops=True) == trained.table(min_pct=0, show_ops=True)
    assert str(loaded) == str(trained)
    assert summaries_equal(loaded.summary, trained.summary), (loaded.summary, trained.summary)
    pd.testing.assert_frame_equal(loaded.by_type(), trained.by_type())
    assert loaded.unsupported_ops == trained.unsupported_ops


def test_reopened_profile_keeps_steps_and_works_in_the_widget(mlp, tmp_path):
    opt = torch.optim.SGD(mlp.parameters(), lr=0.1)
    with torchprof.Profiler(schedule=torch.profiler.schedule(wait=0, warmup=1, active=2)) as prof:
        for _ in range(3):
            mlp(torch.randn(2, 8)).sum().backward()
            opt.step()
            prof.step()
    loaded = torchprof.load(prof.save(str(tmp_path / "p.json")))
    pd.testing.assert_frame_equal(loaded.steps, prof.steps)
    widget = loaded.widget(min_pct=0)
    assert widget is not None
    html = loaded.to_html()
    assert "Sequential" in html and "AddmmBackward0" in html


def test_loading_something_else_is_a_clear_error(trained, tmp_path):
    trace = trained.export_chrome_trace(str(tmp_path / "t.json"))
    with pytest.raises(TraceError, match=re.escape("not a profile written by prof.save() (a chrome trace? use torchprof.load_trace)")):
        torchprof.load(trace)
    broken = tmp_path / "broken.json"
    broken.write_text('{"format": "torchprof-profile", "version": 1, "columns": {}}')
    with pytest.raises(TraceError, match="is damaged"):
        torchprof.load(broken)
    with pytest.raises(FileNotFoundError):
        torchprof.load(tmp_path / "missing.json")


# -- CSV ---------------------------------------------------------------------------------------------------------------
def test_csv_text_cells_that_start_like_a_formula_are_written_behind_a_quote(tmp_path):
    # Names from an untrusted trace that a spreadsheet would run as formulas (OWASP's CSV injection).
    link = '=HYPERLINK("http://evil.example","open")'
    tree = build([
        ev("region", link, 0, 10),
        ev("op", "@SUM(A1)", 1, 3),
        ev("memory", "[memory]", 5, 5, nbytes=-512),  # a negative number: stays a number
        ev("region", "-2+3", 20, 25),
        ev("region", "\tx", 30, 31),
        ev("region", "plain", 40, 41),
    ], label="+root")  # fmt: skip
    prof = torchprof.Result(tree, Recording(label="+root"))
    path = str(tmp_path / "p.csv")
    assert write_outputs(prof, csv=path) == [path]
    back = pd.read_csv(path, index_col=0, keep_default_na=False)
    assert list(back.index) == ["'+root", f"'{link}", f"'{link}/@SUM(A1)", "'-2+3", "'\tx", "plain"]
    assert back.loc[f"'{link}", "name"] == f"'{link}" and back.loc[f"'{link}/@SUM(A1)", "name"] == "'@SUM(A1)"
    assert back.loc[f"'{link}/@SUM(A1)", "parent"] == f"'{link}"
    assert back.loc[f"'{link}", "self_cpu_mem"] == -512.0 and back["cpu_us"].dtype == float
    # prof.df is data, not a file: unchanged
    assert list(prof.df.index) == ["+root", link, f"{link}/@SUM(A1)", "-2+3", "\tx", "plain"]


def test_csv_text_leaves_numbers_and_ordinary_text_alone():
    assert csv_text("=1+1") == "'=1+1" and csv_text("\rx") == "'\rx" and csv_text("+") == "'+"
    assert csv_text("a=b") == "a=b" and csv_text("") == "" and csv_text(-1.5) == -1.5 and csv_text(None) is None


def test_a_trace_of_a_default_run_keeps_the_replays_flops(mlp, tmp_path):
    """Without shapes the trace cannot count FLOPs again: the replay's counts go with it."""
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is not None:  # compiled code of earlier tests would leave the .sum() outside modules unknown
        dynamo.reset()
    x = torch.randn(4, 8)
    mlp(x).sum().backward()
    with torchprof.Profiler() as prof:  # the default: FLOPs from replays, no shapes recorded
        mlp(x).sum().backward()
    df = prof.df
    assert df["flops"].iloc[0] > 0
    back = torchprof.load_trace(prof.export_chrome_trace(str(tmp_path / "t.json.gz"))).df
    layers = df.index[df.kind == "module"]
    assert back.loc[layers, "flops"].tolist() == df.loc[layers, "flops"].tolist()
    assert back.loc[layers, "macs"].tolist() == df.loc[layers, "macs"].tolist()


def test_every_file_torchprof_writes_gets_the_umasks_mode(trained, tmp_path):
    import os

    old = os.umask(0o027)
    try:
        paths = [trained.export_chrome_trace(str(tmp_path / "t.json.gz")), trained.save(str(tmp_path / "p.json.gz")),
                 trained.export_stacks(str(tmp_path / "s.txt")), trained.to_html(tmp_path / "r.html"),
                 trained.to_markdown(tmp_path / "m.md") and str(tmp_path / "m.md")]  # fmt: skip
        modes = {os.path.basename(p): oct(os.stat(p).st_mode & 0o777) for p in paths}
        assert set(modes.values()) == {oct(0o640)}, modes
        os.chmod(paths[1], 0o600)  # an existing file keeps its own mode when written again
        trained.save(paths[1])
        assert os.stat(paths[1]).st_mode & 0o777 == 0o600
    finally:
        os.umask(old)
