"""The terminal table, compared as whole strings on a hand-written profile."""

from __future__ import annotations

import torchprof
from conftest import shared_trace
from synthetic import build, ev, training_step
from torchprof._views.format import printable, summary_line
from torchprof._views.rows import visible_rows
from torchprof._views.table import render_table

#: Every column with its percentages (``width=None``): the type of each module, the legend.
EXPECTED_DEFAULT = """\
+----------------------------+--------+---------------+---------------+--------------+---------------+--------------+-------+-------+
| Node                       | Type   |       Own CPU |     CPU total |      CPU fwd |       CPU bwd |    CPU other | FLOPs | Calls |
|----------------------------+--------+---------------+---------------+--------------+---------------+--------------+-------+-------|
| profile                    |        | 10.0µs (5.1%) |  195µs (100%) |  100µs (51%) |  65.0µs (33%) | 30.0µs (15%) | 1.28k |     1 |
| ├──Net                     | Net    |  30.0µs (15%) |   150µs (77%) |  100µs (51%) |  50.0µs (26%) |              | 1.15k |     1 |
| │ ├──fc2                   | Linear |  70.0µs (36%) |  70.0µs (36%) | 40.0µs (21%) |  30.0µs (15%) |              |   128 |     1 |
| │ └──fc1                   | Linear |  50.0µs (26%) |  50.0µs (26%) | 30.0µs (15%) |  20.0µs (10%) |              | 1.02k |     1 |
| ├──Optimizer.step#SGD.step |        |  20.0µs (10%) |  20.0µs (10%) |              |               | 20.0µs (10%) |   128 |     1 |
| └──(backward, no module)   |        | 15.0µs (7.7%) | 15.0µs (7.7%) |              | 15.0µs (7.7%) |              |       |     2 |
+----------------------------+--------+---------------+---------------+--------------+---------------+--------------+-------+-------+
(x%) = share of the root's CPU total · blank = zero or not recorded"""

EXPECTED_OPS_BY_BACKWARD = """\
+------------------------------------------------------------+--------+---------------+--------------+--------------+--------------+--------------+-------+-------+
| Node                                                       | Type   |      Self CPU |    CPU total |      CPU fwd |      CPU bwd |    CPU other | FLOPs | Calls |
|------------------------------------------------------------+--------+---------------+--------------+--------------+--------------+--------------+-------+-------|
| profile                                                    |        |               | 195µs (100%) |  100µs (51%) | 65.0µs (33%) | 30.0µs (15%) | 1.28k |     1 |
| ├──Net                                                     | Net    |  30.0µs (15%) |  150µs (77%) |  100µs (51%) | 50.0µs (26%) |              | 1.15k |     1 |
| │ ├──fc2                                                   | Linear | 10.0µs (5.1%) | 70.0µs (36%) | 40.0µs (21%) | 30.0µs (15%) |              |   128 |     1 |
| │ │ ├──autograd::engine::evaluate_function: AddmmBackward0 |        | 2.00µs (1.0%) | 30.0µs (15%) |              | 30.0µs (15%) |              |       |     1 |
| │ │ │ └──AddmmBackward0                                    |        | 13.0µs (6.7%) | 28.0µs (14%) |              | 28.0µs (14%) |              |       |     1 |
| │ │ └──aten::addmm                                         |        |  30.0µs (15%) | 30.0µs (15%) | 30.0µs (15%) |              |              |   128 |     1 |
| │ └──fc1                                                   | Linear | 4.00µs (2.1%) | 50.0µs (26%) | 30.0µs (15%) | 20.0µs (10%) |              | 1.02k |     1 |
| │   ├──autograd::engine::evaluate_function: AddmmBackward0 |        |  20.0µs (10%) | 20.0µs (10%) |              | 20.0µs (10%) |              |       |     1 |
| │   └──aten::linear                                        |        | 6.00µs (3.1%) | 26.0µs (13%) | 26.0µs (13%) |              |              | 1.02k |     1 |
| │     └──aten::addmm                                       |        |  20.0µs (10%) | 20.0µs (10%) | 20.0µs (10%) |              |              | 1.02k |     1 |
| └──Optimizer.step#SGD.step                                 |        | 10.0µs (5.1%) | 20.0µs (10%) |              |              | 20.0µs (10%) |   128 |     1 |
+------------------------------------------------------------+--------+---------------+--------------+--------------+--------------+--------------+-------+-------+
(x%) = share of the root's CPU total · blank = zero or not recorded
6 rows under 9% of CPU total hidden (min_pct=0 shows them)"""

#: The same tables in the default 120 characters: percentages stay on the total, then the
#: "CPU other" column goes, and the footer says so.
EXPECTED_FIT_120 = """\
+----------------------------+--------+---------+---------------+---------+---------+-----------+-------+-------+
| Node                       | Type   | Own CPU |     CPU total | CPU fwd | CPU bwd | CPU other | FLOPs | Calls |
|----------------------------+--------+---------+---------------+---------+---------+-----------+-------+-------|
| profile                    |        |  10.0µs |  195µs (100%) |   100µs |  65.0µs |    30.0µs | 1.28k |     1 |
| ├──Net                     | Net    |  30.0µs |   150µs (77%) |   100µs |  50.0µs |           | 1.15k |     1 |
| │ ├──fc2                   | Linear |  70.0µs |  70.0µs (36%) |  40.0µs |  30.0µs |           |   128 |     1 |
| │ └──fc1                   | Linear |  50.0µs |  50.0µs (26%) |  30.0µs |  20.0µs |           | 1.02k |     1 |
| ├──Optimizer.step#SGD.step |        |  20.0µs |  20.0µs (10%) |         |         |    20.0µs |   128 |     1 |
| └──(backward, no module)   |        |  15.0µs | 15.0µs (7.7%) |         |  15.0µs |           |       |     2 |
+----------------------------+--------+---------+---------------+---------+---------+-----------+-------+-------+
(x%) = share of the root's CPU total · blank = zero or not recorded"""

EXPECTED_OPS_FIT_120 = """\
+-----------------------------------------+--------+----------+---------------+---------+---------+-------+-------+
| Node                                    | Type   | Self CPU |     CPU total | CPU fwd | CPU bwd | FLOPs | Calls |
|-----------------------------------------+--------+----------+---------------+---------+---------+-------+-------|
| profile                                 |        |          |  195µs (100%) |   100µs |  65.0µs | 1.28k |     1 |
| ├──Net                                  | Net    |   30.0µs |   150µs (77%) |   100µs |  50.0µs | 1.15k |     1 |
| │ ├──fc2                                | Linear |   10.0µs |  70.0µs (36%) |  40.0µs |  30.0µs |   128 |     1 |
| │ │ ├──aten::addmm                      |        |   30.0µs |  30.0µs (15%) |  30.0µs |         |   128 |     1 |
| │ │ └──autograd::engine… AddmmBackward0 |        |   2.00µs |  30.0µs (15%) |         |  30.0µs |       |     1 |
| │ │   └──AddmmBackward0                 |        |   13.0µs |  28.0µs (14%) |         |  28.0µs |       |     1 |
| │ │     └──aten::mm                     |        |   15.0µs | 15.0µs (7.7%) |         |  15.0µs |       |     1 |
| │ └──fc1                                | Linear |   4.00µs |  50.0µs (26%) |  30.0µs |  20.0µs | 1.02k |     1 |
| │   ├──aten::linear                     |        |   6.00µs |  26.0µs (13%) |  26.0µs |         | 1.02k |     1 |
| │   │ └──aten::addmm                    |        |   20.0µs |  20.0µs (10%) |  20.0µs |         | 1.02k |     1 |
| │   └──autograd::engine… AddmmBackward0 |        |   20.0µs |  20.0µs (10%) |         |  20.0µs |       |     1 |
| ├──Optimizer.step#SGD.step              |        |   10.0µs |  20.0µs (10%) |         |         |   128 |     1 |
| │ └──aten::add_                         |        |   10.0µs | 10.0µs (5.1%) |         |         |   128 |     1 |
| ├──(backward, no module)                |        |          | 15.0µs (7.7%) |         |  15.0µs |       |     2 |
| │ ├──autograd::engine…n: SumBackward0   |        |   10.0µs | 10.0µs (5.1%) |         |  10.0µs |       |     1 |
| │ └──autograd::engine…:AccumulateGrad   |        |   5.00µs | 5.00µs (2.6%) |         |  5.00µs |       |     1 |
| └──aten::sum                            |        |   10.0µs | 10.0µs (5.1%) |         |         |       |     1 |
+-----------------------------------------+--------+----------+---------------+---------+---------+-------+-------+
(x%) = share of the root's CPU total · blank = zero or not recorded
left out to fit 120 characters: CPU other"""


def test_default_table_shows_layers_with_ops_folded_into_self_time():
    # Forward, backward and other add up on every row; the optimizer and the loss outside the
    # model are "other", never forward.
    assert render_table(build(training_step()), min_pct=0, width=None) == EXPECTED_DEFAULT


def test_min_pct_on_cpu_total_whatever_the_sort_keeps_ancestors_and_shows_ops_when_asked():
    # Sorted by backward time, the optimizer (10% of CPU total, no backward) still passes 9%.
    table = render_table(build(training_step()), min_pct=9, sort_by="bwd_cpu_us", show_ops=True, width=None)
    assert table == EXPECTED_OPS_BY_BACKWARD


def test_sort_keeps_the_hierarchy():
    tree = build(training_step())
    names = tree.columns["name"]
    by_cpu = [names[i] for i in visible_rows(tree, sort_by="cpu_us")]
    assert by_cpu == ["profile", "Net", "fc2", "fc1", "Optimizer.step#SGD.step", "(backward, no module)"]
    ascending = [names[i] for i in visible_rows(tree, sort_by="cpu_us", ascending=True)]
    assert ascending == ["profile", "(backward, no module)", "Optimizer.step#SGD.step", "Net", "fc1", "fc2"]
    by_flops = [names[i] for i in visible_rows(tree, sort_by="flops")]
    assert by_flops.index("fc1") < by_flops.index("fc2")


def test_filter_patterns_show_matches_and_their_ancestors():
    tree = build(training_step())
    names = tree.columns["name"]
    assert [names[i] for i in visible_rows(tree, search="fc2")] == ["profile", "Net", "fc2"]
    assert [names[i] for i in visible_rows(tree, search=["fc*", "optim*"])] == ["profile", "Net", "fc2", "fc1", "Optimizer.step#SGD.step"]
    assert [names[i] for i in visible_rows(tree, search="NOTHING")] == ["profile"]


def test_colour_only_when_asked():
    tree = build(training_step())
    assert "\x1b[" not in render_table(tree)
    assert "\x1b[36m├──Net" in render_table(tree, colour=True)


def test_torch_style_sort_names_are_accepted():
    tree = build(training_step())
    assert visible_rows(tree, sort_by=["self_cpu_time_total"]) == visible_rows(tree, sort_by="self_cpu_us")


# -- untrusted names ---------------------------------------------------------------------------------------------
def test_control_characters_in_names_are_printed_as_visible_escapes():
    # A trace from elsewhere can name a region anything: ESC sequences that recolour or clear the
    # terminal, retitle the window (OSC ... BEL), a CR that overwrites the row, a C1 CSI, DEL.
    evil = "load\x1b[2J\x1b]0;pwned\x07\rdata\x9b31m\x7f"
    tree = build([ev("region", evil, 0, 10), ev("op", "aten::add\n", 2, 6)])
    text = render_table(tree, min_pct=0, show_ops=True, width=None)
    assert text == """\
+-------------------------------------------------+--------------+---------------+-------+
| Node                                            |     Self CPU |     CPU total | Calls |
|-------------------------------------------------+--------------+---------------+-------|
| profile                                         |              | 10.0µs (100%) |     1 |
| └──load\\x1b[2J\\x1b]0;pwned\\x07\\rdata\\x9b31m\\x7f | 6.00µs (60%) | 10.0µs (100%) |     1 |
|   └──aten::add\\n                                | 4.00µs (40%) |  4.00µs (40%) |     1 |
+-------------------------------------------------+--------------+---------------+-------+
(x%) = share of the root's CPU total · blank = zero or not recorded"""


def test_the_summary_line_escapes_control_characters_too():
    line = summary_line({"cpu_us": 10.0, "interrupted": "KeyboardInterrupt: \x1b[31mstop\x07"})
    assert line == "CPU 10.0µs · stopped by KeyboardInterrupt: \\x1b[31mstop\\x07"


def test_printable_escapes_c0_del_and_c1_and_keeps_other_text():
    assert printable("a\tb\x00c\x1fd\x7fe\x80f\x9fg") == "a\\tb\\x00c\\x1fd\\x7fe\\x80f\\x9fg"
    assert printable("conv1 · ResNet.layer1 é 日本 …") == "conv1 · ResNet.layer1 é 日本 …"


# -- the type column, the legend, the footer, the width ---------------------------------------------------------
def test_each_module_row_names_its_type_so_sequential_children_are_not_bare_numbers():
    tree = build([
        ev("module", "Seq", 0, 100, type_="Sequential"),
        ev("module", "Seq.0", 10, 60, type_="Linear"),
        ev("module", "Seq.1", 60, 70, type_="ReLU"),
        ev("op", "aten::relu", 61, 69),
    ])  # fmt: skip
    rows = [[cell.strip() for cell in line.split("|")[1:3]] for line in render_table(tree, min_pct=0, show_ops=True).splitlines()[3:-2]]
    assert rows == [["profile", ""], ["└──Seq", "Sequential"], ["├──0", "Linear"], ["└──1", "ReLU"], ["└──aten::relu", ""]]


def test_headers_are_the_registry_labels_the_widget_shows():
    from torchprof._views.payload import vocabulary
    from torchprof._vocab import COLUMN

    tree = build(training_step())
    header = [cell.strip() for cell in render_table(tree, min_pct=0, width=None).splitlines()[1].split("|")[1:-1]]
    widget_labels = {c["name"]: c["label"] for c in vocabulary()["columns"]}
    assert header[:2] == [COLUMN["name"].label, COLUMN["type"].label] == [widget_labels["name"], widget_labels["type"]]
    assert header[2:] == [widget_labels[name] for name in ("layer_self_cpu_us", "cpu_us", "fwd_cpu_us", "bwd_cpu_us", "other_cpu_us", "flops", "calls")]
    with_ops = [cell.strip() for cell in render_table(tree, min_pct=0, width=None, show_ops=True).splitlines()[1].split("|")[1:-1]]
    assert with_ops[2] == widget_labels["self_cpu_us"]  # (the widget names the column by what it shows too)


def test_the_table_fits_120_characters_by_default_and_says_what_it_left_out():
    tree = build(training_step())
    assert render_table(tree, min_pct=0) == EXPECTED_FIT_120
    assert render_table(tree, min_pct=0, show_ops=True) == EXPECTED_OPS_FIT_120
    for text in (EXPECTED_FIT_120, EXPECTED_OPS_FIT_120):
        assert max(map(len, text.splitlines())) <= 120


def test_a_narrow_width_drops_percentages_then_columns_then_the_type_and_never_the_sort_column():
    tree = build(training_step())
    text = render_table(tree, min_pct=0, show_ops=True, width=60, sort_by="flops")
    assert max(map(len, text.splitlines())) <= 60
    header = [cell.strip() for cell in text.splitlines()[1].split("|")[1:-1]]
    assert header == ["Node", "Self CPU", "CPU total", "FLOPs"]
    assert "%" not in text  # no percentages left, so no legend either
    assert text.split("+\n")[-1] == "left out to fit 60 characters: CPU other, CPU fwd, CPU bwd,\nCalls"  # forward and backward together
    assert render_table(tree, min_pct=0, width=None).count("\n") == EXPECTED_DEFAULT.count("\n")  # None: no limit


def test_rows_under_the_threshold_are_counted_in_a_footer():
    tree = build(training_step())
    text = render_table(tree, min_pct=20)
    hidden = len(visible_rows(tree, min_pct=0)) - len(visible_rows(tree, min_pct=20))
    assert hidden == 2
    assert text.splitlines()[-2:] == [
        "(x%) = share of the root's CPU total · blank = zero or not recorded",
        "2 rows under 20% of CPU total hidden (min_pct=0 shows them)",
    ]
    assert "hidden" not in render_table(tree, min_pct=0)


def test_a_real_resnet_step_fits_120_characters_with_types_legend_and_footer(resnet18_step):
    prof, _ = resnet18_step
    text = prof.table()
    lines = text.splitlines()
    assert max(map(len, lines)) <= 120
    types = {line.split("|")[2].strip() for line in lines[3:] if line.startswith("| ")}
    assert {"ResNet", "Sequential", "BasicBlock", "Conv2d"} <= types
    assert "(x%) = share of the root's CPU total · blank = zero or not recorded" in lines
    hidden = len(visible_rows(prof.tree, min_pct=0)) - len(visible_rows(prof.tree, min_pct=1))
    assert hidden > 0 and f"{hidden} rows under 1% of CPU total hidden (min_pct=0 shows them)" in lines


def test_a_real_gpu_trace_fits_120_characters_and_its_legend_names_both_bases():
    prof = torchprof.load_trace(shared_trace("a100-ddp-training.json.gz"))
    lines = prof.table().splitlines()
    assert max(map(len, lines)) <= 120
    assert "CUDA total" in lines[1] and "CPU total" in lines[1]
    assert "(x%) = share of the root's CPU total or CUDA total (the column's own) · blank = zero or not recorded" in lines


def test_unknown_flops_read_as_unknown_not_as_a_blank_zero():
    # A row that holds an op of unknown cost has unknown FLOPs: '?', said in the legend and under
    # the table; a row whose FLOPs are zero stays blank.
    events = [
        ev("op", "mylib::fancy", 0, 10, shapes=[[4, 4]]),
        ev("op", "aten::view", 10, 11, shapes=[[4, 4], []]),
        ev("op", "aten::add", 11, 12, shapes=[[4, 4], [4, 4], []]),
    ]
    text = render_table(build(events), min_pct=0, show_ops=True)
    rows = {line.split("|")[1].strip(" ├└─"): line.split("|")[4].strip() for line in text.splitlines() if line.startswith("| ")}
    assert rows == {"Node": "FLOPs", "profile": "?", "mylib::fancy": "?", "aten::add": "16", "aten::view": ""}
    assert "? = unknown (said below)" in text and "FLOPs are unknown (?) in the rows that hold 1 call of ops of unknown cost (mylib::fancy)" in text


def test_a_filter_that_matches_nothing_says_so_and_a_path_filter_shows_the_rows_under_it(resnet18_step):
    # filter="ResNet.layer4*" matched nothing, with no word; path patterns need "path:".
    prof, _ = resnet18_step
    text = prof.table(filter="ResNet.layer4*", min_pct=0)
    assert "no row matches filter='ResNet.layer4*'" in " ".join(text.split()) and "'path:ResNet.layer4*'" in text
    under = prof.table(filter="path:ResNet.layer4*", min_pct=0, width=None)
    assert "conv1" in under and "layer3" not in under and "no row matches" not in under


def test_by_type_and_insights_print_as_a_person_reads_them(resnet18_step, mlp):
    # print(prof.by_type(depth=2)) printed 35 raw columns cut by pandas; print(prof.insights())
    # printed "Empty DataFrame / Columns: [...]".
    prof, _ = resnet18_step
    types = prof.by_type()
    text = str(types)
    assert text.splitlines()[0].split()[:4] == ["type", "Modules", "Calls", "Params"] and "Conv2d" in text
    assert "CPU total" in text and len(types.columns) > 20  # the frame keeps every column
    assert type(types.head()).__name__ == "DataFrame" and "Conv2d" in repr(types.head())  # what derives from it is plain
    import torch

    with torchprof.Profiler() as small:
        mlp(torch.randn(2, 8))
    assert repr(small.insights()).startswith("no findings") and small.insights().empty


def test_self_cpu_has_one_meaning_and_the_layer_figure_its_own_name():
    """With op rows hidden the table shows each layer's time with its ops folded in: that is
    ``prof.df``'s ``layer_self_cpu_us``, headed "Own CPU"; "Self CPU" heads
    ``self_cpu_us`` (op rows shown), as in the df. The two once shared one header (204 ms and 127
    µs for one row)."""
    from torchprof._vocab import COLUMN

    tree = build(training_step())
    folded = render_table(tree, min_pct=0, width=None).splitlines()
    with_ops = render_table(tree, min_pct=0, width=None, show_ops=True).splitlines()
    assert COLUMN["layer_self_cpu_us"].label in folded[1] and "| Self CPU" not in folded[1].replace(" ", " ")
    assert " Self CPU |" in with_ops[1] and COLUMN["layer_self_cpu_us"].label not in with_ops[1]
    fc2 = tree.paths.index("Net.fc2")
    layer, own = tree.columns["layer_self_cpu_us"][fc2], tree.columns["self_cpu_us"][fc2]
    assert layer == 70.0 and own == 10.0
    assert any("fc2" in line and " 70.0µs (36%) " in line.split("|")[3] for line in folded)
    assert any("fc2" in line and " 10.0µs (5.1%) " in line.split("|")[3] for line in with_ops)


def test_a_big_tree_shows_the_columns_with_data_and_only_those():
    # From 2,000 rows a column is read as an array (a table asks every column): the same answer.
    from synthetic import build, ev
    from torchprof._views.cells import has_data

    tree = build([ev("op", f"aten::op{k}", 2 * k, 2 * k + 1) for k in range(2_500)])
    n = len(tree)
    cols = tree.columns
    cols["flops"] = [float("nan")] * n
    cols["params"] = [0] * (n - 1) + [3]
    cols["peak_cpu_mem"] = [None] * n
    cols["mfu"] = [5.0] + [0.0] * (n - 1)  # the root's own does not count
    cols["cpu_us_max_rank"] = [None] * (n - 1) + ["rank-a"]
    got = {name: has_data(tree, name) for name in ("flops", "params", "peak_cpu_mem", "mfu", "cpu_us_max_rank", "cpu_us", "calls")}
    assert got == {"flops": False, "params": True, "peak_cpu_mem": False, "mfu": False, "cpu_us_max_rank": True,
                   "cpu_us": True, "calls": True}  # fmt: skip
