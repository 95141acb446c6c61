"""The terminal table, compared as whole strings on a hand-written profile."""

from __future__ import annotations

from synthetic import build, ev, training_step
from torchprof._views.format import printable, summary_line
from torchprof._views.rows import visible_rows
from torchprof._views.table import render_table

EXPECTED_DEFAULT = """\
+----------------------------+---------------+---------------+--------------+---------------+--------------+-------+-------+
| Node                       |      Self CPU |     CPU total |      CPU fwd |       CPU bwd |    CPU other | FLOPs | Calls |
|----------------------------+---------------+---------------+--------------+---------------+--------------+-------+-------|
| profile                    | 10.0µs (5.1%) |  195µs (100%) |  100µs (51%) |  65.0µs (33%) | 30.0µs (15%) | 1.28k |     1 |
| ├──Net                     |  30.0µs (15%) |   150µs (77%) |  100µs (51%) |  50.0µs (26%) |              | 1.15k |     1 |
| │ ├──fc2                   |  70.0µs (36%) |  70.0µs (36%) | 40.0µs (21%) |  30.0µs (15%) |              |   128 |     1 |
| │ └──fc1                   |  50.0µs (26%) |  50.0µs (26%) | 30.0µs (15%) |  20.0µs (10%) |              | 1.02k |     1 |
| ├──Optimizer.step#SGD.step |  20.0µs (10%) |  20.0µs (10%) |              |               | 20.0µs (10%) |   128 |     1 |
| └──(backward, no module)   | 15.0µs (7.7%) | 15.0µs (7.7%) |              | 15.0µs (7.7%) |              |       |     2 |
+----------------------------+---------------+---------------+--------------+---------------+--------------+-------+-------+"""

EXPECTED_OPS_BY_BACKWARD = """\
+------------------------------------------------------------+---------------+--------------+--------------+--------------+--------------+-------+-------+
| Node                                                       |      Self CPU |    CPU total |      CPU fwd |      CPU bwd |    CPU other | FLOPs | Calls |
|------------------------------------------------------------+---------------+--------------+--------------+--------------+--------------+-------+-------|
| profile                                                    |               | 195µs (100%) |  100µs (51%) | 65.0µs (33%) | 30.0µs (15%) | 1.28k |     1 |
| ├──Net                                                     |  30.0µs (15%) |  150µs (77%) |  100µs (51%) | 50.0µs (26%) |              | 1.15k |     1 |
| │ ├──fc2                                                   | 10.0µs (5.1%) | 70.0µs (36%) | 40.0µs (21%) | 30.0µs (15%) |              |   128 |     1 |
| │ │ ├──autograd::engine::evaluate_function: AddmmBackward0 | 2.00µs (1.0%) | 30.0µs (15%) |              | 30.0µs (15%) |              |       |     1 |
| │ │ │ └──AddmmBackward0                                    | 13.0µs (6.7%) | 28.0µs (14%) |              | 28.0µs (14%) |              |       |     1 |
| │ │ └──aten::addmm                                         |  30.0µs (15%) | 30.0µs (15%) | 30.0µs (15%) |              |              |   128 |     1 |
| │ └──fc1                                                   | 4.00µs (2.1%) | 50.0µs (26%) | 30.0µs (15%) | 20.0µs (10%) |              | 1.02k |     1 |
| │   ├──autograd::engine::evaluate_function: AddmmBackward0 |  20.0µs (10%) | 20.0µs (10%) |              | 20.0µs (10%) |              |       |     1 |
| │   └──aten::linear                                        | 6.00µs (3.1%) | 26.0µs (13%) | 26.0µs (13%) |              |              | 1.02k |     1 |
| │     └──aten::addmm                                       |  20.0µs (10%) | 20.0µs (10%) | 20.0µs (10%) |              |              | 1.02k |     1 |
| └──Optimizer.step#SGD.step                                 | 10.0µs (5.1%) | 20.0µs (10%) |              |              | 20.0µs (10%) |   128 |     1 |
+------------------------------------------------------------+---------------+--------------+--------------+--------------+--------------+-------+-------+"""


def test_default_table_shows_layers_with_ops_folded_into_self_time():
    # Forward, backward and other add up on every row; the optimizer and the loss outside the
    # model are "other", never forward.
    assert render_table(build(training_step()), min_pct=0) == EXPECTED_DEFAULT


def test_min_pct_on_cpu_total_whatever_the_sort_keeps_ancestors_and_shows_ops_when_asked():
    # Sorted by backward time, the optimizer (10% of CPU total, no backward) still passes 9%.
    table = render_table(build(training_step()), min_pct=9, sort_by="bwd_cpu_us", show_ops=True)
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
    text = render_table(tree, min_pct=0, show_ops=True)
    assert text == """\
+-------------------------------------------------+--------------+---------------+-------+
| Node                                            |     Self CPU |     CPU total | Calls |
|-------------------------------------------------+--------------+---------------+-------|
| profile                                         |              | 10.0µs (100%) |     1 |
| └──load\\x1b[2J\\x1b]0;pwned\\x07\\rdata\\x9b31m\\x7f | 6.00µs (60%) | 10.0µs (100%) |     1 |
|   └──aten::add\\n                                | 4.00µs (40%) |  4.00µs (40%) |     1 |
+-------------------------------------------------+--------------+---------------+-------+"""


def test_the_summary_line_escapes_control_characters_too():
    line = summary_line({"cpu_us": 10.0, "interrupted": "KeyboardInterrupt: \x1b[31mstop\x07"})
    assert line == "CPU 10.0µs · stopped by KeyboardInterrupt: \\x1b[31mstop\\x07"


def test_printable_escapes_c0_del_and_c1_and_keeps_other_text():
    assert printable("a\tb\x00c\x1fd\x7fe\x80f\x9fg") == "a\\tb\\x00c\\x1fd\\x7fe\\x80f\\x9fg"
    assert printable("conv1 · ResNet.layer1 é 日本 …") == "conv1 · ResNet.layer1 é 日本 …"
