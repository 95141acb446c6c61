"""``torchprof.compare(base, new)``: two real runs of one model, a layer changed or added, a profile
against itself, kernel deltas against the raw JSON of two GPU traces, runs of different step
counts, and every view of the comparison (df, by_name, the table, the widget, the page, the CLI)."""

from __future__ import annotations

import base64
import collections
import gzip
import json
import math
import zlib

import pandas as pd
import pytest
import torch
from torch import nn

import torchprof
from conftest import shared_trace
from synthetic import build, ev
from torchprof._records import Recording
from torchprof._result import Result
from torchprof._tree.diff import compare_trees
from torchprof._views import format as fmt
from torchprof._views.compare import compare_rows, view_tree
from torchprof._vocab import COMPARE_COLUMNS, COMPARE_METRICS, STEP_FOLDED

STEPS = 2
SLOW_KERNEL = 21  # against 3x3: ~50x the arithmetic, far above any timing noise


def conv_net(kernel: int = 3, extra: bool = False) -> nn.Module:
    """Three 3x3 convolutions; the middle one's kernel is ``kernel`` (same output shape), and with
    ``extra`` two more layers at the end."""
    torch.manual_seed(0)
    layers: list[nn.Module] = [nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, kernel, padding=kernel // 2),
                               nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1)]  # fmt: skip
    if extra:
        layers += [nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1)]
    return nn.Sequential(*layers)


def run(model: nn.Module, name: str) -> Result:
    x = torch.randn(2, 16, 48, 48)
    model(x).sum().backward()  # warm-up
    with torchprof.Profiler(name=name) as prof:
        for _ in range(STEPS):
            model(x).sum().backward()
    return prof.result


@pytest.fixture(scope="module")
def runs() -> dict[str, Result]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # on a busy machine, intra-op threads waiting on each other drown every layer's time
    try:
        return {"base": run(conv_net(), "base"), "slow": run(conv_net(kernel=SLOW_KERNEL), "slow"),
                "extra": run(conv_net(extra=True), "extra")}  # fmt: skip
    finally:
        torch.set_num_threads(threads)


# -- real runs ----------------------------------------------------------------------------------------
def test_the_layer_changed_between_two_real_runs_tops_the_diff(runs):
    cmp = torchprof.compare(runs["base"], runs["slow"])
    df = cmp.df
    assert list(df.columns) == [c.name for c in COMPARE_COLUMNS]
    assert df.index[0] == "base → slow" and df.iloc[0]["status"] == "both"
    layers = df[df.kind == "module"]
    assert layers.index[0] == "Sequential" and layers.index[1] == "Sequential.2"  # the biggest change first
    changed = df.loc["Sequential.2"]
    assert changed.cpu_us_delta > 0 and changed.bwd_cpu_us_delta > 0
    assert changed.cpu_us_delta == changed.cpu_us_new - changed.cpu_us_base
    for col in ("cpu_us", "flops", "calls"):
        assert changed[f"{col}_base"] == runs["base"].df.loc["Sequential.2", col]
        assert changed[f"{col}_new"] == runs["slow"].df.loc["Sequential.2", col]
    assert changed.flops_delta > 10 * df.loc["Sequential.0", "flops_base"]
    assert (df.loc[["Sequential.0", "Sequential.4"], "flops_delta"] == 0).all()
    assert (df.status == "both").all() and not cmp.per_step
    # print(cmp): the summary line, then the tree with the changed layer first under the model
    # (min_pct=0: against the 21x21 run's total, the other layers sit near 1%, shown or not by timing).
    lines = cmp.table(min_pct=0).splitlines()
    assert lines[0].startswith("base base · new slow · ")
    names = [line.split("|")[1].strip() for line in lines if line.startswith("| ")][1:]  # the rows under the header
    assert names[0] == "base → slow" and names[1].endswith("──Sequential") and names[2].endswith("├──2")


def test_a_layer_only_the_new_run_has_is_added_and_counts_zero_in_the_base(runs):
    df = torchprof.compare(runs["base"], runs["extra"]).df
    assert list(df.loc[["Sequential.5", "Sequential.6"], "status"]) == ["added", "added"]
    added = df.loc["Sequential.6"]
    assert (added.cpu_us_base, added.calls_base, added.flops_base) == (0, 0, 0)
    assert added.calls_new == STEPS and added.cpu_us_delta == added.cpu_us_new > 0
    assert (df.loc[df.index.str.startswith("Sequential.6/"), "status"] == "added").all()
    assert (df.loc[["Sequential.0", "Sequential.2", "Sequential.4"], "status"] == "both").all()
    back = torchprof.compare(runs["extra"], runs["base"]).df
    assert back.loc["Sequential.6", "status"] == "removed"
    assert back.loc["Sequential.6", "cpu_us_delta"] == -added.cpu_us_new


def test_a_profile_against_itself_changes_nothing(resnet18_step):
    prof = resnet18_step[0].result
    cmp = torchprof.compare(prof, prof)
    df, original = cmp.df, prof.df
    assert set(df.index[1:]) == set(original.index[1:]) and len(df) == len(original)
    assert (df.status == "both").all()
    for m in COMPARE_METRICS:
        assert (df[f"{m}_delta"].fillna(0) == 0).all(), m
        pd.testing.assert_series_equal(df[f"{m}_base"], df[f"{m}_new"], check_names=False)
        if m != "calls":
            rows = df.index[1:]
            assert list(df.loc[rows, f"{m}_base"].fillna(-1)) == list(original.loc[rows, m].fillna(-1)), m
    cpu = fmt.time_us(prof.summary["cpu_us"])
    assert f"CPU {cpu} → {cpu} (no change)" in cmp.summary_line()


# -- real GPU traces ------------------------------------------------------------------------------------
def raw_kernels(path) -> tuple[dict[str, float], collections.Counter]:
    """Device time (µs) and count per kernel, memcpy and memset name, straight from the JSON."""
    data = json.loads(gzip.decompress(path.read_bytes()))
    time: dict[str, float] = collections.defaultdict(float)
    calls: collections.Counter = collections.Counter()
    for e in data["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            time[e["name"]] += e["dur"]
            calls[e["name"]] += 1
    return time, calls


def test_kernel_deltas_are_the_sums_of_the_raw_json_of_two_gpu_traces():
    base_path, new_path = shared_trace("a100-alexnet-forward.json.gz"), shared_trace("a100-ddp-training.json.gz")
    (bt, bc), (nt, nc) = raw_kernels(base_path), raw_kernels(new_path)
    cmp = torchprof.compare(str(base_path), str(new_path))
    kernels = cmp.by_name("kernel")
    assert set(kernels.index) == set(bt) | set(nt) and (kernels.kind == "kernel").all()
    for name in kernels.index:
        got = kernels.loc[name]
        assert math.isclose(got.cuda_us_delta, nt.get(name, 0) - bt.get(name, 0), rel_tol=1e-9, abs_tol=1e-6), name
        assert math.isclose(got.cuda_us_base, bt.get(name, 0), rel_tol=1e-9, abs_tol=1e-6), name
        assert got.calls_delta == nc.get(name, 0) - bc.get(name, 0), name
    first = kernels.iloc[0]
    assert abs(first.cuda_us_delta) == kernels.cuda_us_delta.abs().max()  # biggest change first
    both = cmp.by_name()
    assert set(both.kind) == {"op", "kernel"} and set(kernels.index) <= set(both.index)
    # The whole device time of each run is in the tree's kernel rows.
    df = cmp.df
    assert math.isclose(df.iloc[0]["cuda_us_delta"], sum(nt.values()) - sum(bt.values()), rel_tol=1e-9)


def test_a_gpu_trace_against_itself_folds_its_steps_and_changes_nothing():
    prof = torchprof.load_trace(shared_trace("a100-ddp-training.json.gz"))
    df = torchprof.compare(prof, prof).df
    assert (df.cuda_us_delta.fillna(0) == 0).all() and (df.cpu_us_delta == 0).all()
    step = df.loc[STEP_FOLDED]
    assert step["name"] == STEP_FOLDED and step.calls_base == len(prof.steps)
    assert step.cpu_us_base == pytest.approx(prof.steps.cpu_us.sum())
    assert "ProfilerStep#*/## forward ##" in df.index


# -- steps ------------------------------------------------------------------------------------------------
def stepped(numbers: list[int], layer_us: float) -> Result:
    """A run of ``ProfilerStep#N`` ranges, each 100 µs with the module Net inside for ``layer_us``."""
    events = []
    for k, number in enumerate(numbers):
        t = 1000 * k
        events += [ev("region", f"ProfilerStep#{number}", t, t + 100), ev("module", "Net", t + 10, t + 10 + layer_us, type_="Net"),
                   ev("op", "aten::mm", t + 12, t + 12 + layer_us / 2)]  # fmt: skip
    return Result(build(events), Recording(wall_us=100.0 * len(numbers), label=f"{len(numbers)} steps"))


def test_runs_with_different_step_counts_are_compared_per_step():
    cmp = torchprof.compare(stepped([1, 2], 50), stepped([7, 8, 9, 10], 70))
    df = cmp.df
    assert cmp.per_step
    net = df.loc[f"{STEP_FOLDED}/Net"]
    assert (net.cpu_us_base, net.cpu_us_new, net.cpu_us_delta) == (50, 70, 20)
    assert (net.calls_base, net.calls_new, net.calls_delta) == (1, 1, 0)
    assert df.loc[f"{STEP_FOLDED}/Net/aten::mm", "cpu_us_delta"] == 10
    assert (df.iloc[0].cpu_us_base, df.iloc[0].cpu_us_new) == (100, 100)
    assert "per step base 2 steps, new 4 steps" in cmp.summary_line()
    assert "per step base 2 steps, new 4 steps" in str(cmp).splitlines()[0]


def test_runs_with_as_many_steps_are_compared_whole_whatever_their_numbers():
    cmp = torchprof.compare(stepped([1, 2], 50), stepped([7, 8], 70))
    net = cmp.df.loc[f"{STEP_FOLDED}/Net"]
    assert not cmp.per_step and (net.cpu_us_base, net.cpu_us_new, net.calls_new) == (100, 140, 2)
    assert "per step" not in cmp.summary_line()


# -- matching -----------------------------------------------------------------------------------------------
def test_a_layer_matches_by_path_wherever_the_run_called_it_from():
    # Net.act ran inside Net.enc in the base run and inside Net.dec in the new one.
    def events(inside: str) -> list[dict]:
        enc, dec = (10, 40), (50, 90)
        at = enc if inside == "Net.enc" else dec
        return [ev("module", "Net", 0, 100, type_="Net"), ev("module", "Net.enc", *enc, type_="Enc"), ev("module", "Net.dec", *dec, type_="Dec"),
                ev("module", "Net.act", at[0] + 5, at[0] + 15, type_="ReLU"), ev("op", "aten::relu", at[0] + 6, at[0] + 14)]  # fmt: skip

    diff = compare_trees(build(events("Net.enc")), build(events("Net.dec")), "x")
    cols = diff.tree.columns
    row = cols["path"].index("Net.act")
    assert cols["status"][row] == "both" and cols["cpu_us_delta"][row] == 0
    assert cols["path"][diff.tree.parent_index[row]] == "Net"  # under the module that holds it by name, in both runs
    assert cols["status"][cols["path"].index("Net.act/aten::relu")] == "both"


def test_an_op_matches_by_name_under_its_matched_parent_and_a_repeated_path_by_its_layer():
    base = build([ev("module", "Net", 0, 100, type_="Net"), ev("op", "aten::mm", 10, 20), ev("op", "aten::add", 30, 35),
                  ev("region", "Net", 100, 110)])  # fmt: skip
    new = build([ev("region", "Net", 0, 10), ev("module", "Net", 20, 120, type_="Net"), ev("op", "aten::mm", 30, 45)])
    # The region's path is "Net #2" in the base run and "Net" in the new one: it is still the region.
    diff = compare_trees(base, new, "x")
    cols = diff.tree.columns
    by_key = {(k, n): i for i, (k, n) in enumerate(zip(cols["kind"], cols["path"]))}
    module, region = by_key[("module", "Net")], by_key[("region", "Net #2")]
    assert cols["cpu_us_delta"][module] == 0 and cols["cpu_us_delta"][region] == 0
    mm = by_key[("op", "Net/aten::mm")]
    assert (cols["cpu_us_base"][mm], cols["cpu_us_new"][mm], cols["status"][mm]) == (10, 15, "both")
    assert cols["status"][by_key[("op", "Net/aten::add")]] == "removed"


# -- views ------------------------------------------------------------------------------------------------
def test_the_table_is_the_diff_tree_sorted_by_the_size_of_the_change():
    base = build([ev("module", "Net", 0, 100, type_="Net"), ev("module", "Net.a", 10, 40, type_="Linear"),
                  ev("module", "Net.b", 50, 60, type_="Linear")], label="before")  # fmt: skip
    new = build([ev("module", "Net", 0, 100, type_="Net"), ev("module", "Net.a", 10, 30, type_="Linear"),
                 ev("module", "Net.b", 50, 65, type_="Linear"), ev("module", "Net.c", 70, 71, type_="ReLU")], label="after")  # fmt: skip
    cmp = torchprof.compare(Result(base, Recording(wall_us=100.0, label="before")), Result(new, Recording(wall_us=100.0, label="after")))
    assert cmp.table(colour=False) == "\n".join([
        "base before · new after · wall 100µs → 100µs (no change) · CPU 100µs → 100µs (no change) · rows 1 added, 0 removed",
        "+----------------+----------------+---------------+-----------------+------------+-----------+",
        "| Node           | CPU total base | CPU total new |     Δ CPU total | Calls base | Calls new |",
        "|----------------+----------------+---------------+-----------------+------------+-----------|",
        "| before → after |          100µs |         100µs |                 |          1 |         1 |",
        "| └──Net         |          100µs |         100µs |                 |          1 |         1 |",
        "|   ├──a         |         30.0µs |        20.0µs |  -10.0µs (-10%) |          1 |         1 |",
        "|   ├──b         |         10.0µs |        15.0µs | +5.00µs (+5.0%) |          1 |         1 |",
        "|   └──c (added) |                |        1.00µs | +1.00µs (+1.0%) |            |         1 |",
        "+----------------+----------------+---------------+-----------------+------------+-----------+",
    ])  # fmt: skip
    coloured = cmp.table(colour=True)
    assert "\x1b[32m -10.0µs (-10%)\x1b[0m" in coloured and "\x1b[31m+5.00µs (+5.0%)\x1b[0m" in coloured


def test_the_widget_payload_carries_the_comparison_columns_and_flags_the_time_deltas(runs):
    cmp = torchprof.compare(runs["base"], runs["slow"])
    w = cmp.widget()
    assert w.sort_by == "abs_cpu_us_delta" and w.min_pct == 1
    blob = zlib.decompress(w.data)
    head = json.loads(blob[8 : 8 + int.from_bytes(blob[4:8], "little")])
    vocab = head["vocab"]
    specs = {c["name"]: c for c in vocab["columns"]}
    assert {c.name for c in COMPARE_COLUMNS} <= set(specs)
    assert specs["cpu_us_delta"]["delta"] is True and "delta" not in specs["flops_delta"] and "delta" not in specs["cpu_us_base"]
    assert specs["cpu_us"]["threshold"] is True and not specs["cpu_us_delta"]["threshold"]
    assert vocab["view_columns"][:3] == ["cpu_us_base", "cpu_us_new", "cpu_us_delta"]
    assert [label for label, _, _ in head["summary_items"]][:2] == ["base", "new"]
    # view_df is what the front end shows for the state; sorting by the signed delta works too.
    assert list(w.view_df.index[:3]) == ["base → slow", "Sequential", "Sequential.2"]
    w.sort_by, w.ascending = "cpu_us_delta", True
    assert w.view_df.index[0] == "base → slow"
    with pytest.raises(Exception, match="cannot sort a comparison by 'nope'"):
        w.sort_by = "nope"


def test_added_rows_say_so_in_every_view_and_a_search_finds_them(runs):
    cmp = torchprof.compare(runs["base"], runs["extra"])
    tree = view_tree(cmp._diff)
    rows = compare_rows(tree, sort_by="abs_cpu_us_delta", min_pct=0, search="added")
    assert {tree.columns["path"][i] for i in rows} >= {"Sequential.5", "Sequential.6"}
    assert "6 (added)" in cmp.table(min_pct=0)


def test_the_report_page_embeds_the_comparison(runs, tmp_path):
    cmp = torchprof.compare(runs["base"], runs["slow"])
    path = tmp_path / "diff.html"
    assert cmp.to_html(str(path), min_pct=0, sort_by="cpu_us_delta") == str(path)  # as a profile's
    page = path.read_text(encoding="utf-8")
    assert cmp.to_html(min_pct=0, sort_by="cpu_us_delta") == page  # without a path, the page
    data = json.loads(page.split('id="torchprof-data">', 1)[1].split("</script>", 1)[0])
    assert data["state"]["sort_by"] == "cpu_us_delta" and data["state"]["min_pct"] == 0
    assert data["payload"]["summary"]["name"] == "base → slow"
    with pytest.raises(ValueError, match="cannot sort a comparison"):
        cmp.to_html(sort_by="bogus")


def test_compare_opens_traces_and_saved_profiles(runs, tmp_path):
    prof = runs["base"]
    trace = prof.export_chrome_trace(str(tmp_path / "base.json.gz"))
    saved = prof.save(str(tmp_path / "base.profile.json"))
    cmp = torchprof.compare(trace, saved)
    df = cmp.df
    assert cmp.labels == ("base (base)", "base (new)")
    layers = df[df.kind == "module"]
    assert (layers.status == "both").all() and (layers.cpu_us_delta.abs() < 1e-6).all()
    with pytest.raises(TypeError, match="compare: base must be"):
        torchprof.compare(42, prof)


def test_the_command_line_compares_two_files(runs, tmp_path):
    from test_cli import run_here

    a = runs["base"].export_chrome_trace(str(tmp_path / "a.json.gz"))
    b = runs["slow"].save(str(tmp_path / "b.profile.json"))
    result = run_here("--compare", a, b, "--csv", str(tmp_path / "d.csv"), "--html", str(tmp_path / "d.html"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "torchprof: base → slow" and lines[1].startswith("base base · new slow")
    assert "Δ CPU total" in result.stdout and "──Sequential" in result.stdout  # first or last of its siblings
    csv = pd.read_csv(tmp_path / "d.csv", index_col=0)
    assert csv.loc["Sequential.2", "cpu_us_delta"] > 0
    assert (tmp_path / "d.html").read_text().startswith("<!DOCTYPE html>")
    bad = run_here("--compare", a, b, "--sort", "nope", cwd=tmp_path)
    assert bad.returncode == 2 and "cannot sort a comparison by 'nope'" in bad.stderr
    extra = run_here("--compare", a, b, "train.py", cwd=tmp_path)
    assert extra.returncode == 2 and "unrecognized arguments: train.py" in extra.stderr


def test_the_js_delta_class_marks_faster_and_slower(tmp_path):
    import subprocess

    from test_widget import REPO, node_binary

    script = ("import { deltaClass } from './js/widget.js';"
              "console.log(JSON.stringify([deltaClass(-1), deltaClass(2), deltaClass(0), deltaClass(NaN)]));")  # fmt: skip
    out = subprocess.run([node_binary(), "--input-type=module", "-e", script], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert json.loads(out.stdout) == ["tp-faster", "tp-slower", "", ""], out.stderr


def test_payload_bytes_of_a_comparison_decode_in_the_front_end(runs, tmp_path):
    """The front end's own decoder and view rules on a comparison payload: the same rows as
    Python's for a few states (a comparison is only a different vocabulary)."""
    import subprocess

    from test_widget import REPO, node_binary
    from torchprof._views.compare import compare_payload
    from torchprof._views.payload import payload_bytes

    cmp = torchprof.compare(runs["base"], runs["extra"])
    diff = cmp._diff
    tree = view_tree(diff)
    states = [{"min_pct": 0, "sort_by": "abs_cpu_us_delta", "ascending": False, "show_ops": False, "search": ""},
              {"min_pct": 5, "sort_by": "cpu_us_delta", "ascending": True, "show_ops": True, "search": ""},
              {"min_pct": 0, "sort_by": "name", "ascending": False, "show_ops": True, "search": "added"}]  # fmt: skip
    cases = [{"state": s, "rows": [tree.columns["path"][i] for i in compare_rows(tree, **s)]} for s in states]
    packed = base64.b64encode(payload_bytes(compare_payload(diff, cmp.summary_items, cmp.label))).decode("ascii")
    fixture = tmp_path / "cases.json"
    fixture.write_text(json.dumps({"packed": packed, "cases": cases}))
    script = f"""
import {{ loadPayload, visibleRows }} from './js/widget.js';
import {{ readFileSync }} from 'node:fs';
const f = JSON.parse(readFileSync({json.dumps(str(fixture))}, 'utf-8'));
const bytes = new Uint8Array(Buffer.from(f.packed, 'base64'));
const data = await loadPayload(new DataView(bytes.buffer));
console.log(JSON.stringify(f.cases.map((c) => visibleRows(data, {{ ...c.state, expanded: null }}).rows.map((i) => data.path[i]))));
"""
    out = subprocess.run([node_binary(), "--input-type=module", "-e", script], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [c["rows"] for c in cases]


def test_a_comparison_offers_the_table_and_flame_views_and_refuses_the_others(runs):
    cmp = torchprof.compare(runs["base"], runs["slow"])
    widget = cmp.widget(view="flame")
    assert widget.view == "flame" and widget.flame_colour == "delta"  # bars coloured by their change
    assert widget.metric == "cpu_us_new"  # and as wide as the new run's CPU total
    with pytest.raises(ValueError, match="flame_colour must be one of delta, type"):
        cmp.widget(flame_colour="phase")
    with pytest.raises(ValueError, match="view must be one of table, flame for a comparison"):
        cmp.widget(view="top")
    with pytest.raises(ValueError, match="no step"):
        cmp.widget(step="*")  # its steps are folded into one ProfilerStep#* row: none to pick
    import traitlets

    for name, bad in (("view", "memory"), ("metric", "cpu_us"), ("flame_colour", "phase"), ("step", "*")):
        with pytest.raises((ValueError, traitlets.TraitError)):
            setattr(widget, name, bad)  # the same checks when a trait is set later


# -- runs named differently, and the width ----------------------------------------------------------------------
def test_a_notebooks_root_label_matches_a_scripts_class_name(runs):
    """A notebook cell's profile names its root by the variable (``model``), a script's by the class
    (``Sequential``): every layer used to come out added and removed."""
    from dataclasses import replace

    base = runs["base"]
    cols = dict(base.tree.columns)
    for column in ("path", "module", "parent"):
        cols[column] = [v.replace("Sequential", "model", 1) if isinstance(v, str) else v for v in cols[column]]
    renamed = Result(replace(base.tree, columns=cols), base.recording)
    assert "model.2" in renamed.df.index
    cmp = torchprof.compare(renamed, runs["slow"])
    df = cmp.df
    layers = df[df.kind == "module"]
    assert (layers.status == "both").all() and "Sequential.2" in layers.index
    assert df.loc["Sequential.2", "cpu_us_base"] == runs["base"].df.loc["Sequential.2", "cpu_us"]
    assert "matched roots model = Sequential" in cmp.summary_line() and "little matched" not in cmp.summary_line()


def test_a_comparison_of_runs_that_share_few_layers_says_so(runs, resnet18_step):
    prof, _ = resnet18_step
    cmp = torchprof.compare(runs["base"], prof)  # a conv stack against a ResNet: one root each, few layers alike
    line = cmp.summary_line()
    assert "little matched only " in line and " layers are in both runs" in line


def test_the_comparison_table_fits_120_characters_and_says_what_it_left_out(resnet18_step):
    from dataclasses import replace

    prof, _ = resnet18_step
    cols = dict(prof.tree.columns)
    for column in ("cpu_us", "self_cpu_us", "bwd_cpu_us", "flops"):  # a slower run, and one counting more FLOPs
        cols[column] = [v * 1.3 for v in cols[column]]
    slower = Result(replace(prof.tree, columns=cols), prof.recording)
    cmp = torchprof.compare(prof, slower)
    text = cmp.table(min_pct=0)
    assert max(len(line) for line in text.splitlines()) <= 120
    wide = cmp.table(min_pct=0, width=None)
    assert max(len(line) for line in wide.splitlines()) > 120  # ResNet's paths and seven columns
    assert text.splitlines()[-1].startswith("left out to fit 120 characters: ")
    assert "CPU total base" in text.splitlines()[2] or "CPU total new" in text  # the CPU totals stay longest
