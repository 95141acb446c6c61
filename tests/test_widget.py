"""The widget's Python side: synced state, ``view_df``, the payload, the rich display, packaging,
and proof that the front end's view rules (js/widget.js) are exactly ``_view.visible_rows``."""

from __future__ import annotations

import base64
import json
import math
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from synthetic import columns, ev, training_step
from torchprof._records import ModuleInfo, Recording
from torchprof._result import Result
from torchprof._tree.aggregate import across_steps, by_type, step_rows
from torchprof._tree.builder import TreeBuilder
from torchprof._views import format as fmt
from torchprof._views.html import WIDGET_VIEW, static_table
from torchprof._views.payload import NUMBER_COLUMNS, payload, payload_bytes, payload_json
from torchprof._views.rows import natural_key, path_test, select_rows, shown_values, text_test, visible_rows
from torchprof._views.state import default_expanded, is_metric, opening_expanded
from torchprof._vocab import COLUMNS

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "js" / "fixtures" / "crosscheck.json"
STATE_KEYS = ("min_pct", "sort_by", "ascending", "show_ops", "search", "expanded", "view", "step", "selected", "metric",
              "flame_colour", "zoom")


def node_binary() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node (>= 18) is needed for the front-end tests: apt-get install nodejs (tests/run.sh does it)")
    return node


def profile_from(events: list[dict], modules: dict[str, ModuleInfo] | None = None, wall_us: float | None = None,
                 **options: Any) -> Result:  # fmt: skip
    """A Result over hand-written events (no torch run)."""
    modules = modules or {}
    builder = TreeBuilder(modules=modules, **options)
    builder.add(columns(events))
    return Result(builder.finish(), Recording(modules=modules, wall_us=wall_us))


def mixed_events() -> list[dict]:
    """Every shape of tree the front end must handle: nested modules, a module of another root
    called from a module's forward (its path does not extend its parent's), a region whose path
    collides with a module's (``Net #2``), ops, kernels, backward, memory, ties, unicode."""
    return [
        ev("module", "Net", 0, 100, type_="Net"),
        ev("module", "Net.enc", 5, 45, type_="Encoder"),
        ev("module", "Net.enc.fc", 6, 20, type_="Linear"),
        ev("op", "aten::linear", 7, 19, seq=0, ext=1, shapes=[[4, 16], [8, 16], [8]]),
        ev("op", "aten::addmm", 8, 18, seq=1, ext=2, shapes=[[8], [4, 16], [16, 8]]),
        ev("runtime", "cudaLaunchKernel", 9, 10, corr=1, link=2),
        ev("kernel", "gemm_kernel", 30, 42, tid="stream 7", corr=1, link=2),
        ev("module", "Net.enc.act", 21, 25, type_="ReLU"),
        ev("op", "aten::relu", 22, 24, seq=2, shapes=[[4, 8]]),
        ev("module", "Aux.act", 26, 30, type_="ReLU"),
        ev("op", "aten::relu", 27, 29, seq=3, shapes=[[4, 8]]),
        ev("memory", "[memory]", 31, 31, nbytes=4096),
        ev("module", "Net.dec", 50, 90, type_="Decoder"),
        ev("module", "Net.dec.fc", 51, 70, type_="Linear"),
        ev("op", "aten::addmm", 52, 69, seq=4, shapes=[[2], [4, 8], [8, 2]]),
        ev("memory", "[memory]", 53, 53, nbytes=-1024),
        ev("op", "aten::add", 71, 80, shapes=[[4, 2], [4, 2], []]),
        ev("op", "aten::mul", 81, 90, shapes=[[4, 2], [4, 2]]),  # ties with aten::add
        ev("region", "my région ünïcode", 100, 110),
        ev("op", "aten::add", 101, 105, shapes=[[2], [2], []]),
        ev("op", "aten::add", 106, 109, shapes=[[2], [2], []]),
        ev("region", "Net", 111, 116),  # collides with the module's path
        ev("op", "autograd::engine::evaluate_function: AddmmBackward0", 120, 140, tid=2, seq=4, fwd=1),
        ev("op", "aten::mm", 122, 138, tid=2),
        ev("op", "autograd::engine::evaluate_function: AddmmBackward0", 140, 150, tid=2, seq=1, fwd=1),
        ev("op", "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 150, 155, tid=2),
        ev("region", "Optimizer.step#SGD.step", 160, 170),
        ev("op", "aten::add_", 161, 169, shapes=[[8, 16], [8, 16], []]),
    ]


MIXED_MODULES = {
    "Net": ModuleInfo("Net", 162, 648), "Net.enc": ModuleInfo("Encoder", 136, 544),
    "Net.enc.fc": ModuleInfo("Linear", 136, 544), "Net.enc.act": ModuleInfo("ReLU", 0, 0),
    "Aux.act": ModuleInfo("ReLU", 0, 0), "Net.dec": ModuleInfo("Decoder", 18, 72),
    "Net.dec.fc": ModuleInfo("Linear", 18, 72),
}  # fmt: skip


def stepped_events() -> list[dict]:
    """Three ``ProfilerStep`` regions (#1, #2, #10: numbers that sort wrongly as text) running a
    ``Sequential`` whose children are named 0, 1, 2, 10, 11 (the same), with different times per
    step, a layer (11) missing from step #2, an optimizer region and backward work."""
    events = []
    t = 0.0
    for step, scale in ((1, 1.0), (2, 1.7), (10, 0.6)):
        events.append(ev("region", f"ProfilerStep#{step}", t, t + 400))
        events.append(ev("module", "Seq", t + 1, t + 300, type_="Sequential"))
        u = t + 2
        for k, d in ((0, 30), (1, 12), (2, 55), (10, 8), (11, 20)):
            if step == 2 and k == 11:
                continue
            dur = d * scale if k != 10 else d
            events.append(ev("module", f"Seq.{k}", u, u + dur, type_="Linear" if k % 2 == 0 else "ReLU"))
            events.append(ev("op", "aten::addmm" if k % 2 == 0 else "aten::relu", u + 1, u + dur - 1, seq=100 * step + k))
            u += dur + 1
        events.append(ev("op", "autograd::engine::evaluate_function: AddmmBackward0", t + 310, t + 330 + 5 * scale, tid=2,
                         seq=100 * step + 2, fwd=1))  # fmt: skip
        events.append(ev("region", "Optimizer.step#SGD.step", t + 340, t + 390))
        events.append(ev("op", "aten::add_", t + 341, t + 360 + 10 * scale))
        t += 400
    return events


def crosscheck_trees() -> list[tuple[str, Any]]:
    """(name, tree) pairs: the hand-written profiles, and the stepped one folded into one tree."""
    stepped = profile_from(stepped_events(), wall_us=1200.0)
    folded = across_steps(stepped.tree)
    assert folded is not None
    return [
        ("mixed", profile_from(mixed_events(), MIXED_MODULES, wall_us=170.0, memory=True, cuda=True).tree),
        ("training_step", profile_from(training_step(), wall_us=220.0).tree),
        ("steps", stepped.tree),
        ("steps folded", folded.tree),
    ]


SORTS = ("cpu_us", "self_cpu_us", "cuda_us", "self_cuda_us", "bwd_cpu_us", "flops", "macs", "calls", "params",
         "cpu_mem", "name", "type", "path", "kind", "depth", "self_cpu_time_total", "exec_order",
         "bwd_self_cpu_us")  # fmt: skip
SEARCHES = ("", "fc", "FC", "aten::*", "*add*", "net.e*", "f?", "[ad]*", "[!a]*", "relu", "ünï", "nomatch", " ", "step",
            "path:enc", "path:net.*", "path:*fc", "path:fc/*", "PATH:Seq.1?", "path:", "1", "1?")  # fmt: skip
MIN_PCTS = (0.0, 1.0, 7.5, 30.0, 100.0)


def _states(tree) -> list[dict[str, Any]]:
    """A covering set of states: every sort key x direction x ops x search, with thresholds,
    expansions and viewed roots (the whole run, each step) rotating through their values."""
    roots = [0, *step_rows(tree)]
    expansions: list[Any] = [None, "default", ["Net"], ["Net", "Net.enc", "Net.dec", "Net.enc.fc"],
                             ["Seq", "ProfilerStep#1/Seq", "ProfilerStep#2/Seq", "ProfilerStep#10/Seq"]]  # fmt: skip
    out = []
    j = 0
    for sort_by in SORTS:
        for ascending in (False, True):
            for show_ops in (False, True):
                for search in SEARCHES:
                    expanded = expansions[j % len(expansions)]
                    root = roots[j % len(roots)]
                    if expanded == "default":
                        expanded = default_expanded(tree, show_ops, root)
                    out.append({"min_pct": MIN_PCTS[j % len(MIN_PCTS)], "sort_by": sort_by, "ascending": ascending,
                                "show_ops": show_ops, "search": search, "expanded": expanded, "root": root})  # fmt: skip
                    j += 1
    return out


def _num(v: Any) -> Any:
    return None if isinstance(v, float) and math.isnan(v) else float(v)


FORMAT_VALUES = (0, 0.125, 0.5, 1.5, 2.5, 9.995, 99.95, 99.96, 999.5, 1000, 1234.5, 0.0049, 1e6, 2.5e6, -0.125,
                 -3.7, 1023, 1024, 1536, 1048575, 1.5e9, 7.3e12, 1e-9, 123456789.123, 0.015, 1.005, 4e-7, 3.1e-5, -2.5e-6, 1.25e-6, float("nan"))  # fmt: skip
GLOBS = ("*", "a*", "*b", "a?c", "[abc]x", "[!abc]x", "[a-c]x", "[c-a]x", "[]]", "[!]]x", "[", "a[", "a[b", "*.*",
         "x.y*", "[a-]", "[-a]", "a\\b", "[\\]", "(", "a+b", "$", "^a", "a|b", "[^a]", "[a-c-e]", "[z-a-c]", "y*",
         "A*", " ", "", "net", "[a-]x", "layer1", "y.z", "layer4.*.conv?", "*/aten::*", "0")  # fmt: skip
TEXTS = ("a", "abc", "ax", "bx", "dx", "]", "]x", "[", "a[b", "x.y.z", "-", "a\\b", "\\", "(", "a+b", "$", "^a",
         "a|b", "^", "b", "d", "e", "a\nb", "resnet.layer1", "-x", "resnet.layer4.0.conv1", "net.fc/aten::addmm",
         "seq.10")  # fmt: skip
NATURAL = ("10", "2", "1", "0", "100", "layer10", "layer2", "Layer1", "layer", "a1b2", "a1b10", "a01", "a1", "1a", "a",
           "", "ProfilerStep#10", "ProfilerStep#9", "x99999999999999999999", "x100000000000000000000", "conv1", "Conv1",
           "ünï2", "ünï10", "fc.0", "fc.00", "b")  # fmt: skip


def crosscheck_fixture() -> dict[str, Any]:
    """Trees, states and Python's answers, for tests/js/crosscheck.test.mjs."""
    trees = []
    for name, tree in crosscheck_trees():
        data = payload(tree, {"name": tree.columns["name"][0]})
        folding = [c.name for c in COLUMNS if c.subtree is not None]
        cases = []
        for state in _states(tree):
            expanded = None if state["expanded"] is None else set(state["expanded"])
            rows = visible_rows(tree, min_pct=state["min_pct"], sort_by=state["sort_by"], ascending=state["ascending"],
                                show_ops=state["show_ops"], search=state["search"], expanded=expanded,
                                root=state["root"])  # fmt: skip
            shown = select_rows(tree, min_pct=state["min_pct"], show_ops=state["show_ops"], search=state["search"],
                                root=state["root"])  # fmt: skip
            values = {c: [_num(shown_values(tree, c, shown)[i]) for i in rows] for c in folding}
            cases.append({"state": state, "rows": rows, "values": values})
        numbers = {c: [_num(v) for v in tree.columns[c]] for c in NUMBER_COLUMNS}
        types = [{"type": g["type"], "modules": g["modules"], **{c: _num(g[c]) for c in ("self_cpu_us", "layer_self_cpu_us", "cpu_us", "calls")}}
                 for g in by_type(tree)[0]]  # fmt: skip
        trees.append({
            "name": name,
            "payload": payload_json(data),
            "packed_base64": base64.b64encode(payload_bytes(data)).decode("ascii"),
            "paths": tree.columns["path"],
            "names": tree.columns["name"],
            "numbers": numbers,
            "default_expanded": [default_expanded(tree, False), default_expanded(tree, True)],
            "step_rows": step_rows(tree),
            "by_type": types,
            "cases": cases,
        })  # fmt: skip
    nan = float("nan")
    formats = []
    for value in FORMAT_VALUES:
        for fn in ("time_us", "nbytes", "count", "fraction"):
            formats.append([fn, None if value != value else value, getattr(fmt, fn)(value)])
    percents = [[p, w, fmt.percent(p, w)] for p, w in ((50, 200), (9, 200), (0, 200), (5, 0), (1, 3), (2, 3), (0.25, 2),
                                                       (-7, 50), (199.9, 200), (1, 800))]  # fmt: skip
    percents.append([None, 10, fmt.percent(nan, 10)])
    search = []
    for pattern in GLOBS:
        for text in TEXTS:
            p, t = pattern.lower(), text.lower()
            search.append([pattern, text, text_test(p)(t), path_test(p)(t)])
    natural = sorted(range(len(NATURAL)), key=lambda i: natural_key(NATURAL[i]))
    return {"trees": trees, "format": formats, "percent": percents, "search": search,
            "natural": {"texts": list(NATURAL), "order": natural},
            "metrics": [c.name for c in COLUMNS if is_metric(c.name)]}  # fmt: skip


# -- the front end agrees with Python -------------------------------------------------------------
def test_js_view_rules_agree_with_python_on_every_state(tmp_path):
    fixture = tmp_path / "crosscheck.json"
    fixture.write_text(json.dumps(crosscheck_fixture(), ensure_ascii=False), encoding="utf-8")
    result = subprocess.run(
        [node_binary(), "--test", "tests/js/crosscheck.test.mjs"],
        cwd=REPO, env={**os.environ, "TORCHPROF_CROSSCHECK": str(fixture)},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert "# fail 0" in result.stdout and "# pass 20" in result.stdout, result.stdout[-2000:]


def test_committed_crosscheck_fixture_is_current():
    """``node --test tests/js/`` alone runs on the committed fixture: it must be what Python says
    today. Regenerate with ``TORCHPROF_REGENERATE=1 pytest tests/test_widget.py -k committed``."""
    fresh = json.loads(json.dumps(crosscheck_fixture(), ensure_ascii=False))
    if os.environ.get("TORCHPROF_REGENERATE"):
        FIXTURE.parent.mkdir(parents=True, exist_ok=True)
        FIXTURE.write_text(json.dumps(fresh, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")
    committed = json.loads(FIXTURE.read_text(encoding="utf-8"))
    # zlib's bytes may differ between zlib builds; what they decode to is checked by node.
    for trees in (fresh["trees"], committed["trees"]):
        for t in trees:
            t.pop("packed_base64")
    assert committed == fresh, "tests/js/fixtures/crosscheck.json is stale: regenerate it (see the docstring)"


def test_committed_vocabulary_fixture_is_the_registry():
    """The node tests build payloads with tests/js/fixtures/vocab.json: it must be the vocabulary
    Python sends today. Regenerate with ``TORCHPROF_REGENERATE=1 pytest tests/test_widget.py -k committed``."""
    from torchprof._views.payload import vocabulary

    path = FIXTURE.parent / "vocab.json"
    fresh = json.loads(json.dumps(vocabulary()))
    if os.environ.get("TORCHPROF_REGENERATE"):
        path.write_text(json.dumps(fresh, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    assert json.loads(path.read_text(encoding="utf-8")) == fresh, f"{path} is stale: regenerate it (see the docstring)"


# -- state ----------------------------------------------------------------------------------------
@pytest.fixture
def prof() -> Result:
    return profile_from(mixed_events(), MIXED_MODULES, wall_us=170.0, memory=True, cuda=True)


def _paths(prof: Result, rows: list[int]) -> list[str]:
    return [prof.tree.columns["path"][i] for i in rows]


def test_front_end_changes_arrive_as_traits_and_python_changes_go_out(prof):
    from ipywidgets.widgets.widget import _remove_buffers

    w = prof.widget()
    # What the front end sends after clicks (ipywidgets applies it with set_state).
    clicked = {"min_pct": 12.5, "sort_by": "flops", "ascending": True, "show_ops": True, "search": "fc",
               "expanded": ["Net", "Net.enc"], "view": "flame", "step": "", "selected": "Net.enc",
               "metric": "bwd_cpu_us", "flame_colour": "type", "zoom": "Net"}  # fmt: skip
    w.set_state(clicked)
    assert w.state == clicked
    # What Python sends back: every view trait is synced, the data goes as one binary buffer.
    w.min_pct = 3
    w.expanded = ["Net"]
    state, buffer_paths, buffers = _remove_buffers(w.get_state())
    assert {k: state[k] for k in STATE_KEYS} == {**clicked, "min_pct": 3.0, "expanded": ["Net"]}
    assert buffer_paths == [["data"]] and bytes(buffers[0]) == w.data


def test_prof_widget_takes_the_view_state(prof):
    w = prof.widget(min_pct=5, sort_by="flops")
    assert (w.min_pct, w.sort_by, w.ascending, w.show_ops, w.search) == (5.0, "flops", False, False, "")
    assert w.expanded == opening_expanded(prof.tree, False) == [*default_expanded(prof.tree, False), "Net.enc"]
    assert w.rows == visible_rows(prof.tree, min_pct=5, sort_by="flops", expanded=set(w.expanded))
    assert prof.widget(sort_by="self_cpu_time_total").sort_by == "self_cpu_us"
    assert prof.widget(expanded=["Net"], show_ops=True).expanded == ["Net"]


def test_bad_view_state_is_refused_with_a_clear_message(prof):
    with pytest.raises(TypeError, match="colour"):
        prof.widget(colour=True)
    with pytest.raises(ValueError, match="min_pct"):
        prof.widget(min_pct=150)
    with pytest.raises(ValueError, match="cannot sort by 'bogus'"):
        prof.widget(sort_by="bogus")
    w = prof.widget()
    with pytest.raises(ValueError, match="cannot sort by"):
        w.sort_by = "bogus"
    assert w.sort_by == "cpu_us"
    with pytest.raises(TypeError, match="list of paths"):
        prof.widget(expanded="Net")


def test_view_df_is_the_rows_the_user_sees_and_follows_every_change(prof):
    w = prof.widget(min_pct=0)
    tree = prof.tree
    changes = [{}, {"show_ops": True}, {"sort_by": "name", "ascending": True}, {"search": "fc"},
               {"expanded": []}, {"expanded": ["Net", "Net.enc", "Net.enc.fc"]}, {"min_pct": 10.0},
               {"sort_by": "bwd_cpu_us"}, {"search": "aten::*"}]  # fmt: skip
    for change in changes:
        for k, v in change.items():
            setattr(w, k, v)
        expected = visible_rows(tree, min_pct=w.min_pct, sort_by=w.sort_by, ascending=w.ascending, show_ops=w.show_ops,
                                search=w.search, expanded=set(w.expanded))  # fmt: skip
        view = w.view_df
        assert list(view.index) == _paths(prof, expected), change
        assert list(view.columns) == list(prof.df.columns)
    assert w.df.equals(prof.df)


def test_by_default_rows_down_to_depth_2_and_the_hot_path_show_and_ops_stay_hidden(prof):
    w = prof.widget(min_pct=0)
    df = w.view_df
    hot = prof.summary["hot_path"]
    assert hot == ["profile", "Net", "Net.enc", "Net.enc.fc"]  # Net holds most; enc is the heavier half, fc its costliest layer
    full = prof.df
    cols, enc = prof.tree.columns, list(full.index).index("Net.enc")
    enc_layers = {cols["path"][i] for i, p in enumerate(prof.tree.parent_index) if p == enc and cols["kind"][i] == "module"}
    assert df["depth"].max() == 3 and set(df.index[df["depth"] == 3]) == enc_layers == {"Net.enc.fc", "Net.enc.act", "Aux.act"}
    assert set(hot) <= set(df.index)
    assert set(df["kind"]) == {"module", "region"}
    depth2_layers = full[(full["depth"] <= 2) & full["kind"].isin(["module", "region"])].index
    assert set(depth2_layers) <= set(df.index)


# -- payload --------------------------------------------------------------------------------------
def test_payload_is_column_wise_and_under_150_bytes_per_node_at_50k_nodes():
    from bench.bench_widget import big_profile

    prof = big_profile(50_000)
    n = len(prof.tree)
    assert n >= 50_000
    data = payload(prof.tree, prof.summary)
    for key in ("parent", "flags", "tail"):
        assert len(data[key]) == n and not any(isinstance(v, dict) for v in data[key]), key
    for column, values in data["text"].items():
        assert values == [] or len(values) == n, column
    assert all((isinstance(v, list) and len(v) == n) or set(v) == {"const"} for v in data["num"].values())
    packed = payload_bytes(data)
    assert len(packed) / n < 150, f"{len(packed) / n:.1f} bytes per node"
    w = prof.widget()
    assert w.data == packed


# -- rich display ---------------------------------------------------------------------------------
def test_outside_a_kernel_the_display_is_the_table_as_text_and_html(prof):
    bundle = prof._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html"}
    assert bundle["text/plain"] == prof.table()
    html = bundle["text/html"]
    assert html.count("<tr>") == len(visible_rows(prof.tree, min_pct=1)) + 1
    assert ">enc<" in html and "Encoder" not in html.split("<table")[0]


def test_static_html_escapes_profile_text():
    evil = "<img src=x onerror=alert(1)>"
    prof = profile_from([ev("module", evil, 0, 10, type_="M"), ev("region", "</table><script>x()</script>", 2, 8)])
    html = static_table(prof.tree, prof.summary, min_pct=0)
    assert "<img" not in html and "<script" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


@pytest.mark.slow
def test_in_a_kernel_the_display_is_the_static_table_then_the_widget(tmp_path):
    # Two outputs, not one bundle: a front end renders one type per output, and a widget output
    # reopened without the widget's state is an error box in JupyterLab, never its HTML.
    import nbformat
    from nbclient import NotebookClient

    setup = (
        "import sys, torch, torchprof\n"
        "model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())\n"
        "with torchprof.Profiler() as prof:\n"
        "    model(torch.randn(2, 4)).sum().backward()\n"
        "print(sys.executable)"
    )
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in (setup, "prof", "prof.widget(min_pct=0)")])
    NotebookClient(nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert nb.cells[0].outputs[0]["text"].strip() == sys.executable
    widgets = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    for cell, min_pct in ((nb.cells[1], 1), (nb.cells[2], 0)):
        assert [o["output_type"] for o in cell.outputs] == ["display_data", "display_data"]
        static, widget = (o["data"] for o in cell.outputs)
        assert set(static) == {"text/plain", "text/html"} and set(widget) == {"text/plain", WIDGET_VIEW}
        assert "| Node" in static["text/plain"] and "<table" in static["text/html"] and "torchprof-fallback" in static["text/html"]
        assert widget["text/plain"] == ""  # where the widget cannot render, nothing but the table shows
        state = widgets[widget[WIDGET_VIEW]["model_id"]]["state"]
        assert state["_anywidget_id"] == "torchprof._views.widget.ProfileWidget"
        assert state["sort_by"] == "cpu_us" and state["min_pct"] == min_pct
        assert set(state["expanded"]) == {"Sequential", "(backward, no module)"}
        assert f"(≥ {min_pct}% of CPU total" in static["text/html"]  # the table shows what the widget opened with


# -- packaging ------------------------------------------------------------------------------------
def test_import_torchprof_does_not_import_anywidget_pandas_or_torch():
    code = "import sys, torchprof; print(sorted(m for m in ('anywidget', 'ipywidgets', 'pandas', 'torch', 'IPython') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_widget_loads_the_front_end_files_of_the_repository_or_the_wheel():
    from torchprof._views.widget import ProfileWidget

    assert str(ProfileWidget._esm) == (REPO / "js" / "widget.js").read_text(encoding="utf-8")
    assert str(ProfileWidget._css) == (REPO / "js" / "widget.css").read_text(encoding="utf-8")


@pytest.mark.slow
def test_the_wheel_ships_widget_js_and_css(tmp_path):
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "-q", "-w", str(tmp_path)],
                            cwd=REPO, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    (wheel,) = tmp_path.glob("*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        assert {"torchprof/static/widget.js", "torchprof/static/widget.css", "torchprof/_views/widget.py",
                "torchprof/_views/html.py"} <= names  # fmt: skip
        assert zf.read("torchprof/static/widget.js") == (REPO / "js" / "widget.js").read_bytes()
        assert zf.read("torchprof/static/widget.css") == (REPO / "js" / "widget.css").read_bytes()
        assert "torchprof/py.typed" in names  # users' type checkers read our annotations
        (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        version = next(line.split(": ", 1)[1] for line in zf.read(metadata).decode().splitlines() if line.startswith("Version: "))
    assert version == _pyproject_version()


def _pyproject_version() -> str:
    import re

    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    return re.search(r'^version = "([^"]+)"', text, re.M).group(1)


def test_the_version_is_the_package_metadata_or_in_a_source_checkout_pyproject(monkeypatch):
    import importlib.metadata

    import torchprof

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    assert torchprof.__version__ == _pyproject_version()
    monkeypatch.setattr(importlib.metadata, "version", lambda name: {"jupyter-torchprof": "9.8.7"}[name])
    assert torchprof.__version__ == "9.8.7"


# -- the report file --------------------------------------------------------------------------------
def test_report_is_one_self_contained_file_with_escaped_data(prof, tmp_path):
    evil = profile_from([ev("module", "Net", 0, 10, type_="Net"), ev("region", "</script><script>alert(1)</script>", 2, 8),
                         ev("region", "line\u2028sep & <!-- x", 8, 9)])  # fmt: skip
    path = tmp_path / "report.html"
    assert evil.to_html(str(path), min_pct=0, sort_by="name") == str(path)
    html = path.read_text(encoding="utf-8")
    assert html.count("<script") == 2 and html.count("</script>") == 2, "profile text must not open or close scripts"
    assert "\\u003c/script\\u003e\\u003cscript\\u003ealert(1)" in html
    assert "\u2028" not in html and "<!--" not in html
    assert "http://" not in html and "https://" not in html and "<link" not in html and " src=" not in html
    assert "Content-Security-Policy" in html
    data = json.loads(html.split('id="torchprof-data">', 1)[1].split("</script>", 1)[0])
    assert data["state"]["sort_by"] == "name" and data["state"]["min_pct"] == 0
    assert data["payload"]["n"] == len(evil.tree)


def test_report_refuses_unknown_view_options(prof):
    with pytest.raises(TypeError, match="unknown view option"):
        prof.to_html(colour=True)


def test_static_table_reads_as_a_left_aligned_tree_without_any_style(prof):
    html = static_table(prof.tree, prof.summary, min_pct=0)
    rows = re.findall(r"<tr>(.*?)</tr>", html, flags=re.S)[1:]
    names = [re.search(r"<td ([^>]*)><samp[^>]*>([^<]*)</samp>([^<]*)(<b [^>]*>[^<]*</b>)?</td>", row) for row in rows]
    assert all(m is not None for m in names)
    assert all('align="left"' in m.group(1) and "text-align:left" in m.group(1) for m in names)  # not Jupyter's right
    guides = [m.group(2) for m in names]
    assert guides[0] == "" and all(g.endswith(("├──", "└──")) and " " not in g for g in guides[1:])  # NBSP: never collapsed
    depth = prof.tree.columns["depth"]
    assert [len(g) for g in guides] == [0] + [2 * depth[i] + 1 for i in visible_rows(prof.tree, min_pct=0)[1:]]
    assert "<th align=\"left\"" in html and ">Type</th>" in html
    assert ".jp-OutputArea-child:has(.torchprof-fallback)" in html.split("</style>")[0]
    # It opens on the bottleneck as the widget does: the headline, and the hot path's rows marked.
    from html import escape

    from torchprof._tree.hotpath import hot_path

    assert prof.summary["headline"] and f"<b>{escape(prof.summary['headline'])}</b>" in html
    shown = visible_rows(prof.tree, min_pct=0)
    hot = [k for k, r in enumerate(shown) if r in set(hot_path(prof.tree).rows[1:])]
    assert hot and [k for k, m in enumerate(names) if m.group(4)] == hot
