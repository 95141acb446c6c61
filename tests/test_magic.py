"""``%%torchprof`` / ``%torchprof`` through a real IPython shell, and through a real kernel."""

from __future__ import annotations

import json
import os

import pandas as pd
import pytest
import torch

import torchprof
from torchprof import _magic

MODEL_SETUP = """
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
x = torch.randn(4, 8)
"""


@pytest.fixture
def ip():
    """The test IPython shell with the extension loaded and a small ``model`` and ``x``; names a
    test adds to the namespace are removed afterwards."""
    from IPython.testing.globalipapp import get_ipython

    shell = get_ipython()
    shell.run_line_magic("load_ext", "torchprof")
    before = set(shell.user_ns)
    assert shell.run_cell(MODEL_SETUP).success
    yield shell
    for name in set(shell.user_ns) - before:
        del shell.user_ns[name]
    for name in ("model", "x", "_torchprof"):
        shell.user_ns.pop(name, None)
    shell.run_line_magic("unload_ext", "torchprof")


def module_rows(prof) -> list[str]:
    df = prof.df
    return list(df[df.kind == "module"].index)


# -- running the cell ------------------------------------------------------------------------------
def test_cell_runs_in_the_user_namespace_prints_and_returns_its_last_value(ip, capsys):
    cell = "y = model(x)\nprint('hello from the cell')\ny.sum().backward()\ny.shape"
    value = ip.run_cell_magic("torchprof", "--text", cell)
    out = capsys.readouterr().out
    assert value == torch.Size([4, 4])
    assert ip.user_ns["y"].shape == (4, 4)  # names the cell defines persist
    assert out.startswith("hello from the cell\n")  # the cell's output first, then the table
    assert "──0 " in out  # the layer's row (first or last of its siblings: rows sort by time)
    prof = ip.user_ns["_torchprof"]
    assert isinstance(prof, torchprof.Profiler)
    assert prof.df.loc["model.0", "bwd_cpu_us"] > 0


def test_root_module_is_labelled_by_its_variable_name_else_its_class(ip, capsys):
    ip.run_cell("other = [torch.nn.Linear(4, 2)]")  # in a list: no variable names it
    ip.run_cell_magic("torchprof", "--text", "other[0](model(x))")
    capsys.readouterr()
    assert set(module_rows(ip.user_ns["_torchprof"])) == {"model", "model.0", "model.1", "model.2", "Linear"}


def test_module_created_in_the_profiled_cell_is_labelled_by_its_variable(ip, capsys):
    ip.run_cell_magic("torchprof", "--text", "head = torch.nn.Linear(4, 3)\nhead(model(x))")
    capsys.readouterr()
    assert "head" in module_rows(ip.user_ns["_torchprof"])


def test_private_names_do_not_label_modules(ip, capsys):
    ip.run_cell("_hidden = torch.nn.Linear(8, 8)")
    ip.run_cell_magic("torchprof", "--text", "_hidden(x)")
    capsys.readouterr()
    assert module_rows(ip.user_ns["_torchprof"]) == ["Linear"]


def test_trailing_semicolon_hides_the_value_as_in_a_plain_cell(ip, capsys):
    assert ip.run_cell_magic("torchprof", "--text", "model(x);") is None
    assert ip.run_cell_magic("torchprof", "--text", "model(x)") is not None
    capsys.readouterr()


def test_out_binds_the_profile_and_underscore_torchprof_is_always_bound(ip, capsys):
    ip.run_cell_magic("torchprof", "--text -o prof", "model(x)")
    capsys.readouterr()
    assert ip.user_ns["prof"] is ip.user_ns["_torchprof"]
    assert "model.0" in ip.user_ns["prof"].df.index


def test_peak_flops_gives_the_cell_an_mfu_and_a_bad_one_is_a_usage_line(ip, capsys):
    ip.run_cell_magic("torchprof", "--text -o prof --peak-flops 1e12", "model(x)")
    prof = ip.user_ns["prof"]
    assert prof.summary["peak_flops"]["flops_per_s"] == 1e12
    assert 0 < prof.summary["mfu"] < 1 and prof.df.loc["model", "mfu"] > 0
    ok, out, err = run_shown(ip, capsys, "%%torchprof --peak-flops fast\nmodel(x)")
    assert not ok and err.strip().startswith("UsageError: %%torchprof: --peak-flops: ") and "Traceback" not in out + err


def test_line_magic_profiles_one_statement_and_returns_its_value(ip, capsys):
    result = ip.run_cell("%torchprof --text -o p out = model(x); out.sum()")
    capsys.readouterr()
    assert result.success
    assert torch.equal(result.result, ip.user_ns["out"].sum())
    assert ip.user_ns["p"].df.loc["model", "calls"] == 1


def test_line_statement_is_kept_verbatim_after_the_options():
    parser = _magic.TorchprofMagics.torchprof.parser
    split = _magic.split_statement
    assert split(parser, "--text -o p print('a  b', -1)") == ("--text -o p", "print('a  b', -1)")
    assert split(parser, "--min-pct=2 --html 'my report.html' f(x)") == ("--min-pct=2 --html 'my report.html'", "f(x)")
    assert split(parser, "--text -- -x + 1") == ("--text", "-x + 1")
    assert split(parser, "-1 + x") == ("", "-1 + x")
    assert split(parser, "model(x)") == ("", "model(x)")


def test_ipython_syntax_inside_the_cell_works(ip, capsys):
    ip.run_cell_magic("torchprof", "--text", "names = %who_ls\nmodel(x)")
    capsys.readouterr()
    assert "model" in ip.user_ns["names"]


def test_warmup_runs_unprofiled_and_repeat_profiles_every_run(ip, capsys):
    ip.run_cell("runs = 0")
    ip.run_cell_magic("torchprof", "--text --warmup 2 --repeat 3", "runs += 1\nmodel(x)")
    capsys.readouterr()
    assert ip.user_ns["runs"] == 5
    df = ip.user_ns["_torchprof"].df
    assert df.loc["model", "calls"] == 3 and df.loc["model.0", "calls"] == 3


def test_model_option_attributes_only_that_module_rooted_at_its_name(ip, capsys):
    ip.run_cell("other = torch.nn.Linear(4, 4)")
    ip.run_cell_magic("torchprof", "--text --model model", "other(model(x))")
    assert module_rows(ip.user_ns["_torchprof"])[0] == "model"
    assert set(module_rows(ip.user_ns["_torchprof"])) == {"model", "model.0", "model.1", "model.2"}
    ip.run_cell_magic("torchprof", "--text --model model.0", "model(x)")
    capsys.readouterr()
    assert module_rows(ip.user_ns["_torchprof"]) == ["model.0"]


def test_text_table_follows_min_pct_sort_ops_and_depth(ip, capsys):
    ip.run_cell_magic("torchprof", "--text --depth 1 --min-pct 0", "model(x).sum().backward()")
    out = capsys.readouterr().out
    prof = ip.user_ns["_torchprof"]
    assert out == prof.table(min_pct=0, max_depth=1) + "\n"
    assert "├──0" not in out  # depth 1 stops at the model
    ip.run_cell_magic("torchprof", "--text --ops --sort self_cpu_us --min-pct 0", "model(x)")
    out = capsys.readouterr().out
    prof = ip.user_ns["_torchprof"]
    assert out == prof.table(min_pct=0, sort_by="self_cpu_us", show_ops=True) + "\n"
    assert "aten::addmm" in out


def test_view_options_become_widget_state(ip, monkeypatch, capsys):
    shown = []
    monkeypatch.setattr(_magic, "_has_widget_frontend", lambda shell: True)
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    monkeypatch.setattr(torchprof.Result, "widget", lambda self, **state: ("widget", state))
    ip.run_cell_magic("torchprof", "--min-pct 2.5 --sort bwd_cpu_us --ops --depth 2", "model(x)")
    # --depth 2: rows at depth 0 and 1 that have children are expanded, so depth 2 shows
    assert shown == [("widget", {"min_pct": 2.5, "sort_by": "bwd_cpu_us", "show_ops": True, "expanded": ["cell", "model"]})]
    ip.run_cell_magic("torchprof", "", "model(x)")
    assert shown[-1] is ip.user_ns["_torchprof"]  # no options: display(prof) itself
    assert capsys.readouterr().out == ""  # nothing printed besides the widget


def test_files_are_written_on_request(ip, tmp_path, capsys):
    csv, trace = tmp_path / "layers.csv", tmp_path / "run.json"
    ip.run_cell_magic("torchprof", f"--text --csv {csv} --trace {trace}", "model(x).sum().backward()")
    out = capsys.readouterr().out
    assert f"torchprof: wrote {csv}\ntorchprof: wrote {trace}\n" in out
    prof = ip.user_ns["_torchprof"]
    back = pd.read_csv(csv, index_col=0)
    assert list(back.index) == list(prof.df.index)
    assert back["cpu_us"].tolist() == pytest.approx(prof.df["cpu_us"].tolist())
    names = {e["name"] for e in json.loads(trace.read_text())["traceEvents"] if e.get("ph") == "X"}
    assert "nn.Module: model.0 [Linear]" in names


def test_files_are_written_where_the_cell_started_though_it_changes_directory(ip, tmp_path, capsys, monkeypatch):
    # A relative --html/--csv/--trace went to the folder the cell moved to; the cell's own
    # change of directory stays (it is the user's).
    monkeypatch.chdir(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    ip.run_cell_magic("torchprof", "--text --html r.html --csv r.csv --trace r.json", f"import os\nos.chdir({str(elsewhere)!r})\nmodel(x)")
    assert os.getcwd() == str(elsewhere)
    assert sorted(p.name for p in tmp_path.glob("r.*")) == ["r.csv", "r.html", "r.json"]
    assert not list(elsewhere.iterdir())
    assert "torchprof: wrote r.html\ntorchprof: wrote r.csv\ntorchprof: wrote r.json\n" in capsys.readouterr().out


def test_html_report_is_written_with_the_view_state(ip, tmp_path, capsys):
    html = tmp_path / "report.html"
    ip.run_cell_magic("torchprof", f"--text --html {html} --min-pct 0 --sort self_cpu_us --depth 1", "model(x)")
    capsys.readouterr()
    prof = ip.user_ns["_torchprof"]
    expected = prof.to_html(min_pct=0.0, sort_by="self_cpu_us", expanded=["cell"])
    assert html.read_text(encoding="utf-8") == expected
    assert expected != prof.to_html()  # the state made a difference


# -- bad input -----------------------------------------------------------------------------------------
def run_shown(ip, capsys, source: str) -> tuple[bool, str, str]:
    """Run a cell as the user would; (success, stdout, stderr) of what IPython showed."""
    result = ip.run_cell(source)
    captured = capsys.readouterr()
    return result.success, captured.out, captured.err


@pytest.mark.parametrize(
    ("cell", "message"),
    [
        ("%%torchprof --bogus\nmodel(x)", "UsageError: %%torchprof: unrecognized arguments: --bogus; see %%torchprof? for the options"),
        ("%%torchprof --depth\nmodel(x)", "UsageError: %%torchprof: argument --depth: expected one argument; see %%torchprof? for the options"),
        ("%%torchprof --repeat 0\nmodel(x)", "UsageError: %%torchprof: --repeat must be 1 or more"),
        ("%%torchprof --model nothere\nmodel(x)", "UsageError: %%torchprof --model nothere: there is no variable 'nothere' in the notebook"),
        ("%%torchprof --model x\nmodel(x)", "UsageError: %%torchprof --model x: x is a Tensor, not a torch.nn.Module"),
        ("%%torchprof --model model.9\nmodel(x)", "UsageError: %%torchprof --model model.9: model has no attribute '9'"),
        ("%%torchprof --html /no/such/folder/r.html\nmodel(x)", "UsageError: %%torchprof: --html /no/such/folder/r.html: the folder /no/such/folder does not exist"),
        ("%torchprof --text", "UsageError: %torchprof needs a statement to profile, e.g. %torchprof model(x); for a whole cell use %%torchprof"),
    ],
)
def test_bad_options_are_one_usage_line_and_nothing_runs(ip, capsys, cell, message):
    ip.run_cell("runs = 0")
    ok, out, err = run_shown(ip, capsys, cell.replace("\nmodel(x)", "\nruns += 1"))
    assert not ok
    assert err.strip() == message
    assert "Traceback" not in out + err
    assert ip.user_ns["runs"] == 0


def test_sort_by_an_unknown_column_names_the_choices(ip, capsys):
    ok, out, err = run_shown(ip, capsys, "%%torchprof --sort nope\nmodel(x)")
    assert not ok and "Traceback" not in out + err
    assert err.startswith("UsageError: %%torchprof: --sort: cannot sort by 'nope'; choose one of: calls, self_cpu_us, cpu_us")


def test_cuda_without_a_gpu_is_a_clear_message(ip, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    ok, out, err = run_shown(ip, capsys, "%%torchprof --cuda\nmodel(x)")
    assert not ok and "Traceback" not in out + err
    assert err.strip() == ("UsageError: %%torchprof --cuda: cuda=True, but no CUDA device is available "
                           "(torch.cuda.is_available() is False)")  # fmt: skip


def test_magic_while_another_profiler_runs_is_a_usage_error_and_runs_nothing(ip, capsys):
    ip.run_cell("runs = 0")
    with torch.profiler.profile():
        ok, out, err = run_shown(ip, capsys, "%%torchprof\nruns += 1")
    assert not ok and "Traceback" not in out + err
    assert err.strip() == "UsageError: %%torchprof: another torch.profiler session is already running in this process"
    assert ip.user_ns["runs"] == 0 and "_torchprof" not in ip.user_ns


def test_cell_that_raises_shows_its_own_traceback_and_keeps_the_partial_profile(ip, capsys):
    ok, out, _err = run_shown(ip, capsys, "%%torchprof --text\nmodel(x)\nboom = 1\nraise ValueError('boom')")
    assert not ok
    assert "torchprof: the cell raised ValueError; the profile until then is in _torchprof" in out
    traceback = out[out.index("-" * 20):]
    assert "Cell In[" in traceback and "----> 4 raise ValueError('boom')" in traceback  # the cell's own line numbers
    assert traceback.rstrip().endswith("ValueError: boom")
    assert "_magic.py" not in traceback and "_capture.py" not in traceback
    assert ip.user_ns["boom"] == 1
    prof = ip.user_ns["_torchprof"]
    assert prof.df.loc["model", "calls"] == 1
    assert prof.summary["interrupted"] == "ValueError: boom"


def test_a_profiler_inside_the_cell_is_told_in_the_cells_own_lines(ip, capsys):
    # The magic profiles the cell already: the error showed four frames of torchprof's start.
    ok, out, _err = run_shown(ip, capsys, "%%torchprof --text\nimport torchprof\nwith torchprof.Profiler() as inner:\n    model(x)")
    assert not ok
    traceback = out[out.index("-" * 20):]
    assert "----> 3 with torchprof.Profiler() as inner:" in traceback
    assert "_profiler.py" not in traceback and "session.py" not in traceback
    assert traceback.rstrip().endswith("ProfilerError: a torchprof Profiler is already running; finish it before starting another")
    assert "%%torchprof already profiles the cell: drop the cell's own Profiler, or the magic" in out


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_flag_prints_the_options_and_runs_nothing(ip, capsys, flag):
    # as `python -m torchprof --help` does; it was "unrecognized arguments: --help"
    ok, out, err = run_shown(ip, capsys, f"%%torchprof --text {flag}\nran = 1")
    assert ok, err
    assert "--min-pct" in out and "--repeat" in out and "unrecognized" not in out + err
    assert "ran" not in ip.user_ns
    assert ip.run_line_magic("torchprof", f"{flag} model(x)") is None and "--min-pct" in capsys.readouterr().out


def test_syntax_error_in_the_cell_shows_as_in_a_plain_cell(ip, capsys):
    ok, out, err = run_shown(ip, capsys, "%%torchprof --text\nx = 1\ny = (2\n")
    assert not ok
    shown = (out + err).strip()
    assert shown.startswith("Cell In[") and ", line 3\n    y = (2\n" in shown
    assert shown.endswith("SyntaxError: incomplete input")
    assert "_magic.py" not in shown and "interactiveshell.py" not in shown


def test_keyboard_interrupt_propagates_and_leaves_a_usable_state(ip, capsys):
    with pytest.raises(KeyboardInterrupt):
        ip.run_cell_magic("torchprof", "--text", "model(x)\nraise KeyboardInterrupt")
    prof = ip.user_ns["_torchprof"]
    assert prof.df.loc["model", "calls"] == 1
    assert prof.summary["interrupted"].startswith("KeyboardInterrupt")
    ip.run_cell_magic("torchprof", "--text", "model(x)")  # the next profile starts cleanly
    capsys.readouterr()
    assert ip.user_ns["_torchprof"] is not prof


def test_unload_removes_both_magics(ip):
    ip.run_line_magic("unload_ext", "torchprof")
    assert ip.find_cell_magic("torchprof") is None and ip.find_line_magic("torchprof") is None
    ip.run_line_magic("load_ext", "torchprof")
    assert ip.find_cell_magic("torchprof") is not None and ip.find_line_magic("torchprof") is not None


def test_help_lists_every_option(ip):
    doc = ip.find_cell_magic("torchprof").__doc__
    for option in ("--cuda", "--memory", "--shapes", "--stack", "--no-flops", "--model NAME", "--min-pct P", "--sort COL",
                   "--ops", "--depth N", "-o VAR, --out VAR", "--text", "--trace FILE", "--html FILE", "--csv FILE",
                   "--warmup N", "--repeat N"):  # fmt: skip
        assert option in doc, option


# -- a real kernel ---------------------------------------------------------------------------------------
@pytest.mark.slow
def test_magic_in_a_real_kernel_shows_the_widget_and_no_profiler_noise(tmp_path):
    from test_notebooks import NOISE, execute_cells

    cells = execute_cells(
        [
            "%load_ext torchprof",
            MODEL_SETUP,
            "%%torchprof\nloss = model(x).sum()\nloss.backward()\nprint('cell output')",
            "%%torchprof --text -o p\nmodel(x)",
            "print(sorted(_torchprof.df.index)[:3], p is _torchprof, loss.shape == ())",
            "%%torchprof\nmodel(x)\nraise ValueError('bad batch')",
            "print(_torchprof.summary['interrupted'])",
        ],
        cwd=tmp_path,
    )
    widget_cell, text_cell, check_cell, raising_cell, after_cell = cells[2:]
    assert [o for o in widget_cell.outputs if o.output_type == "stream"] == [
        {"output_type": "stream", "name": "stdout", "text": "cell output\n"}
    ]
    bundles = [o["data"] for o in widget_cell.outputs if o.output_type == "display_data"]
    # the static table (for front ends that cannot run the widget), then the widget
    assert len(bundles) == 2 and "text/html" in bundles[0] and "application/vnd.jupyter.widget-view+json" in bundles[1]
    assert not [o for o in widget_cell.outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in text_cell.outputs)
    assert "├──0" in text or "└──0" in text
    assert "".join(o["text"] for o in check_cell.outputs) == "['cell', 'model', 'model.0'] True True\n"
    errors = [o for o in raising_cell.outputs if o.output_type == "error"]
    assert len(errors) == 1 and errors[0]["ename"] == "ValueError" and errors[0]["evalue"] == "bad batch"
    assert not any("_magic.py" in line for line in errors[0]["traceback"])
    assert "".join(o["text"] for o in after_cell.outputs) == "ValueError: bad batch\n"
    for cell in cells:
        for o in cell.outputs:
            blob = json.dumps(o)
            assert not any(word in blob for word in NOISE), blob[:500]
