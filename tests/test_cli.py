"""``python -m torchprof script.py``, ``-m module``, ``torchprof demo``: as a user runs them."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from torchprof import _cli, _demo

SCRIPT = textwrap.dedent(
    """
    import sys
    import torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(8, 16)
            self.fc2 = torch.nn.Linear(16, 4)

        def forward(self, x):
            return self.fc2(torch.relu(self.fc1(x)))

    if __name__ == "__main__":
        print("argv", sys.argv[1:])
        net = Net()
        net(torch.randn(4, 8)).sum().backward()
        {tail}
    """
)


def write_script(tmp_path: Path, tail: str = "pass", name: str = "train.py") -> Path:
    path = tmp_path / name
    path.write_text(SCRIPT.format(tail=tail))
    return path


def run(*args: str, cwd: Path | None = None, timeout: float = 120, columns: int | None = None) -> subprocess.CompletedProcess:
    """``python -m torchprof ARGS`` in a fresh process: for what only a process shows (fd-level
    output, signals, the entry point itself); ``columns``: the terminal's width ($COLUMNS)."""
    env = {**os.environ, "NO_COLOR": "1", **({"COLUMNS": str(columns)} if columns else {})}
    return subprocess.run([sys.executable, "-m", "torchprof", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=timeout)  # fmt: skip


def run_here(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """The same command through ``_cli.main`` in this process (what ``__main__`` calls): option
    handling, output and exit codes, without a second interpreter start per test."""
    out, err = io.StringIO(), io.StringIO()
    old = os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = _cli.main(list(args))
    finally:
        os.chdir(old)
    return subprocess.CompletedProcess(["torchprof", *args], code, out.getvalue(), err.getvalue())


def test_script_runs_as_main_with_its_arguments_and_the_tree_is_printed(tmp_path):
    script = write_script(tmp_path)
    done = run("--min-pct", "0", str(script), "--epochs", "1", "-v", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("argv ['--epochs', '1', '-v']\ntorchprof: train.py\nwall ")
    for row in ("| train.py ", "├──Net ", "├──fc1 ", "├──fc2 "):
        assert row in out.replace("└──", "├──"), row
    assert "USDT" not in done.stderr and "gpuGetDeviceCount" not in done.stderr


@pytest.mark.parametrize("how", ["returns", "raises"])
def test_the_scripts_modules_are_freed_before_the_interpreter_ends(tmp_path, how):
    # The profile holds the script's root modules. A DDP module freed only as the interpreter ends
    # takes its gloo group with it there, where gloo's threads could abort the process
    # (torchrun -m torchprof saw "terminate called without an active exception" in 1 job of 6).
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(f"""
        import atexit, weakref, torch
        atexit.register(lambda: print("interpreter ends", flush=True))
        watch = []
        def main():
            model = torch.nn.Linear(4, 4)
            watch.append(weakref.ref(model, lambda _: print("model freed", flush=True)))
            model(torch.randn(2, 4)).sum().backward()
            torch.optim.SGD(model.parameters(), lr=0.1).step()
            if {how!r} == "raises":
                raise ValueError("the script failed")
        main()
    """))
    done = run(str(script), cwd=tmp_path)
    assert done.returncode == (0 if how == "returns" else 1), done.stderr
    lines = [line for line in done.stdout.splitlines() if line in ("model freed", "interpreter ends")]
    assert lines == ["model freed", "interpreter ends"], done.stdout


def test_console_script_is_installed_and_prints_help():
    exe = Path(sys.executable).with_name("torchprof")
    done = subprocess.run([str(exe), "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    assert done.stdout.startswith("usage: torchprof [options] (script.py [args ...] | -m module [args ...] | demo")


def test_options_after_the_script_belong_to_the_script(tmp_path):
    script = write_script(tmp_path, tail="print('done')")
    done = run_here(str(script), "--html", "x.html", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "argv ['--html', 'x.html']" in done.stdout
    assert not (tmp_path / "x.html").exists()


def test_module_mode_runs_a_package_module_as_main(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    write_script(pkg, name="train.py")
    done = run_here("--depth", "1", "-m", "pkg.train", "--lr", "0.1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("argv ['--lr', '0.1']\ntorchprof: pkg.train\n")
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    assert any("Net" in row for row in rows) and not any("fc1" in row for row in rows)  # --depth 1 stops at the model


def test_files_are_written_and_the_csv_is_the_dataframe(tmp_path):
    script = write_script(tmp_path)
    csv, trace = tmp_path / "layers.csv", tmp_path / "trace.json.gz"
    done = run_here("--csv", str(csv), "--trace", str(trace), str(script), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith(f"torchprof: wrote {csv}\ntorchprof: wrote {trace}\n")
    df = pd.read_csv(csv, index_col=0)
    assert {"Net", "Net.fc1", "Net.fc2"} <= set(df.index)
    assert df.loc["Net.fc1", "type"] == "Linear" and df.loc["Net.fc1", "bwd_cpu_us"] > 0
    import torchprof

    assert set(torchprof.load_trace(trace).df.index) >= {"Net", "Net.fc1", "Net.fc2"}


def test_names_the_cli_prints_have_their_control_characters_escaped(tmp_path):
    # The script's name becomes the title and the root label: an ESC or BEL in it must not reach
    # the terminal raw (a window title, a cleared screen), nor in the "wrote" lines.
    script = write_script(tmp_path, name="run\x1b]0;pwned\x07.py")
    csv = tmp_path / "out\x1b[2J.csv"
    done = run_here("--csv", str(csv), str(script), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout
    assert "torchprof: run\\x1b]0;pwned\\x07.py\n" in done.stdout
    assert "| run\\x1b]0;pwned\\x07.py " in done.stdout  # the root row
    assert done.stdout.endswith("out\\x1b[2J.csv\n") and csv.exists()


def test_script_that_raises_prints_the_partial_profile_then_only_its_own_traceback(tmp_path):
    script = write_script(tmp_path, tail="raise ValueError('bad data')")
    done = run_here(str(script), cwd=tmp_path)
    assert done.returncode == 1
    assert "torchprof: train.py (incomplete: the script did not finish)" in done.stdout
    assert "Net" in done.stdout
    assert done.stderr.startswith("Traceback (most recent call last):\n" f'  File "{script}", line ')
    assert done.stderr.rstrip().endswith("ValueError: bad data")
    for internal in ("_cli.py", "runpy", "_capture.py"):
        assert internal not in done.stderr


def test_script_exit_code_is_passed_through_and_the_profile_still_printed(tmp_path):
    script = write_script(tmp_path, tail="sys.exit(3)")
    done = run_here(str(script), cwd=tmp_path)
    assert done.returncode == 3
    assert "torchprof: train.py\n" in done.stdout and "Net" in done.stdout
    assert done.stderr == ""


def test_ctrl_c_in_the_script_prints_the_partial_profile_and_exits_130(tmp_path):
    script = write_script(tmp_path, tail="import os, signal; os.kill(os.getpid(), signal.SIGINT); print('not reached')")
    done = run(str(script), cwd=tmp_path)
    assert done.returncode == 130
    assert "not reached" not in done.stdout
    assert "(incomplete: the script did not finish)" in done.stdout and "Net" in done.stdout
    assert re.search(r"(^|· )stopped by KeyboardInterrupt( ·|\n)", done.stdout, re.M)  # not "KeyboardInterrupt: " (no message)
    assert done.stderr == "KeyboardInterrupt\n"
    # What completed before the interrupt is counted: no FLOPs unknown, no op blamed for them.
    assert "FLOPs are unknown" not in done.stdout and "FLOPs" in done.stdout


def test_ctrl_c_while_the_profiler_starts_is_one_line_and_exits_130(tmp_path, monkeypatch):
    # It printed torchprof's own chained traceback, ending "ProfilerError: nothing was profiled
    # yet", and exited 1.
    from torchprof._capture import session

    def interrupted(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(session.CaptureSession, "start", interrupted)
    done = run_here(str(write_script(tmp_path)), cwd=tmp_path)
    assert done.returncode == 130
    assert done.stderr == "torchprof: train.py: interrupted before anything was profiled\n"
    assert "Traceback" not in done.stdout + done.stderr


def test_the_table_its_header_and_its_notes_fit_the_terminal(tmp_path):
    # Every row wrapped in a 100-column pane (tables of 109-116 characters), the header line ran
    # to 119 and to 355 with a note, the hot path's mark wrapped onto a line of its own, and
    # "CPU fwd" went while "CPU bwd" stayed.
    script = write_script(tmp_path, tail="torch.fft.rfft(net(torch.randn(4, 8))).abs().sum().backward()")
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "100"}
    done = subprocess.run([sys.executable, "-m", "torchprof", str(script)], capture_output=True, text=True, cwd=tmp_path,
                          env=env, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert max(map(len, lines)) <= 100, [line for line in lines if len(line) > 100]
    assert "◀ hot path" in done.stdout  # one piece, never broken inside
    header = next(line for line in lines if line.startswith("| Node"))
    assert ("CPU fwd" in header) == ("CPU bwd" in header)  # forward and backward go together
    assert " ".join(done.stdout.split()).count("FLOPs are unknown") == 1  # the note once, under the table


def test_a_torchvision_built_for_another_torch_is_one_line_with_the_fix(tmp_path, monkeypatch):
    # pip paired torch 2.13.0+cpu with torchvision 0.28.0 where the CPU index was unreachable: the
    # demo died with torchvision's 25-line traceback ("operator torchvision::nms does not exist").
    import builtins

    real_import = builtins.__import__

    def broken(name, *args, **kwargs):
        if name == "torchvision" or name.startswith("torchvision."):
            raise RuntimeError("operator torchvision::nms does not exist")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", broken)
    done = run_here("demo", "resnet18", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    (line,) = done.stderr.splitlines()
    assert "was built for another torch than the" in line and "pip install 'torchvision==0." in line


def test_missing_script_is_one_error_line(tmp_path):
    done = run_here("nothere.py", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == "torchprof: error: cannot open 'nothere.py': no such file\n"
    assert done.stdout == ""


def test_a_script_that_starts_its_own_profiler_is_told_why_it_cannot(tmp_path):
    script = write_script(tmp_path, tail="import torchprof\n    with torchprof.Profiler():\n        net(torch.randn(4, 8))")
    done = run_here(str(script), cwd=tmp_path)
    assert done.returncode == 1
    assert "ProfilerError: a torchprof Profiler is already running" in done.stderr
    assert "_profiler.py" not in done.stderr and "session.py" not in done.stderr  # the user's frames only
    assert done.stderr.rstrip().endswith("already profiles the whole script: run it with python, or drop the script's Profiler")


def test_a_script_that_changes_directory_keeps_its_files_and_traceback_where_the_user_ran_it(tmp_path):
    # The files went to the folder the script moved to (a temporary one here: lost), and the
    # traceback, matched by the script's relative path, printed only its last line.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    write_script(tmp_path, tail=f"import os\n    os.chdir({str(elsewhere)!r})\n    raise ValueError('after chdir')")
    done = run_here("--html", "r.html", "--csv", "r.csv", "--md", "r.md", "train.py", cwd=tmp_path)
    assert done.returncode == 1
    assert sorted(p.name for p in tmp_path.glob("r.*")) == ["r.csv", "r.html", "r.md"]
    assert not list(elsewhere.iterdir())
    assert done.stderr.startswith(f'Traceback (most recent call last):\n  File "{tmp_path / "train.py"}", line ')
    assert done.stderr.rstrip().endswith("ValueError: after chdir")


@pytest.mark.parametrize(
    ("module", "message"),
    [("nothere_mod", "No module named nothere_mod"), ("pkg", "No module named pkg.__main__; 'pkg' is a package and cannot be directly executed"),
     ("nothere_pkg.train", "No module named 'nothere_pkg'")],
)  # fmt: skip
def test_a_module_that_cannot_be_found_is_one_error_line_and_no_profile(tmp_path, module, message):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    done = run_here("-m", module, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("torchprof: error: ") and message in done.stderr and done.stderr.count("\n") == 1


@pytest.mark.parametrize("call", ["sys.exit(0)", "sys.exit()", "sys.exit(None)"])
def test_a_script_that_exits_cleanly_is_not_reported_as_stopped(tmp_path, call):
    done = run_here(str(write_script(tmp_path, tail=call)), cwd=tmp_path)
    assert done.returncode == 0 and done.stderr == ""
    assert "Net" in done.stdout and "stopped by" not in done.stdout and "incomplete" not in done.stdout


def test_a_script_that_runs_no_torch_op_says_so_in_one_line(tmp_path):
    # Its --help, say: an empty table followed, and a finding ("waits in collectives ... for
    # 0.00µs (0%)": the empty profile's shares were NaN, which passed the insights' thresholds).
    script = tmp_path / "help.py"
    script.write_text("import argparse\nargparse.ArgumentParser(description='mine').parse_args()\n")
    done = run_here("--html", "r.html", str(script), "--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: help.py [-h]")
    assert done.stdout.endswith("torchprof: help.py: nothing was recorded (no torch operation ran); no file written\n")
    assert not (tmp_path / "r.html").exists()


def test_a_note_on_what_the_profile_missed_is_said_once_under_the_table(tmp_path):
    # A torch.profiler session inside the script: the note came twice, the first time as a
    # Python warning located at "<frozen runpy>:88".
    # And a warning the summary does not say is still shown (after the report). One process.
    write_script(tmp_path, tail="with torch.profiler.profile():\n        net(torch.randn(4, 8))\n"
                                "    import warnings, torchprof\n    warnings.warn('torchprof: other news', torchprof.ProfilerWarning)")  # fmt: skip
    done = run("train.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "runpy" not in done.stderr
    assert " ".join(done.stdout.split()).count("a torch.profiler session was started (and stopped) inside the block") == 1
    assert "a torch.profiler session" not in done.stderr
    assert done.stderr.count("ProfilerWarning: ") == 1 and "ProfilerWarning: torchprof: other news" in done.stderr


def test_a_missing_run_to_compare_is_one_error_line_that_says_so(tmp_path):
    done = run_here("--compare", "before.json", "after.json", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == "torchprof: error: no such trace or saved-profile file: before.json\n"  # no gzip hint


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--bogus", "x.py"], "torchprof: error: unrecognized arguments: --bogus"),
        (["--min-pct", "lots", "x.py"], "torchprof: error: argument --min-pct: invalid float value: 'lots'"),
        (["--sort", "speed", "x.py"], "torchprof: error: --sort: cannot sort by 'speed'; choose one of: calls,"),
        (["--html", "/no/such/dir/r.html", "x.py"], "torchprof: error: --html /no/such/dir/r.html: the folder /no/such/dir does not exist"),
        ([], "torchprof: error: give a script to profile, -m module, or 'demo'"),
    ],
)
def test_bad_options_print_usage_and_exit_2_without_a_traceback(capsys, argv, message):
    assert _cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: torchprof [options]")
    assert message in err
    assert "Traceback" not in err


def test_argv_is_split_into_our_options_the_program_and_its_arguments():
    parser = _cli.build_parser()
    split = _cli.split_argv
    assert split(parser, ["--html", "r.html", "--ops", "train.py", "--ops", "-x"]) == (["--html", "r.html", "--ops"], None, "train.py", ["--ops", "-x"])
    assert split(parser, ["--depth", "2", "-m", "pkg.mod", "a"]) == (["--depth", "2"], "pkg.mod", None, ["a"])
    assert split(parser, ["-mpkg.mod", "a"]) == ([], "pkg.mod", None, ["a"])
    assert split(parser, ["--", "-weird.py", "a"]) == ([], None, "-weird.py", ["a"])
    assert split(parser, ["demo", "vgg11", "--html", "v.html"]) == ([], None, "demo", ["vgg11", "--html", "v.html"])


def test_in_process_run_restores_sys_argv_and_sys_path(tmp_path, capsys):
    script = write_script(tmp_path)
    argv, path = list(sys.argv), list(sys.path)
    assert _cli.main([str(script), "a"]) == 0
    assert sys.argv == argv and sys.path == path
    assert "argv ['a']" in capsys.readouterr().out


# -- the demo ------------------------------------------------------------------------------------------------
def test_demo_profiles_a_training_step_of_a_torchvision_model(capsys):
    pytest.importorskip("torchvision")
    assert _cli.main(["demo", "resnet18", "--batch", "2", "--size", "64", "--min-pct", "0"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("torchprof demo: resnet18, one training step (forward, backward, SGD step) on 2x3x64x64")
    for row in ("ResNet", "layer1", "layer4", "conv1", "downsample", "Optimizer.step#SGD.step"):
        assert row in out, row
    assert "params 11.7M" in out and "backward" in out


def test_demo_options_before_and_after_the_model_name_both_apply(tmp_path, capsys):
    pytest.importorskip("torchvision")
    csv = tmp_path / "demo.csv"
    assert _cli.main(["--depth", "1", "demo", "squeezenet1_0", "--batch", "2", "--size", "64", "--csv", str(csv)]) == 0
    out = capsys.readouterr().out
    assert "├──SqueezeNet" in out or "└──SqueezeNet" in out
    rows = [line for line in out.splitlines() if line.startswith("| ")]
    assert not any("features" in row for row in rows)  # depth 1: the model's children are hidden
    df = pd.read_csv(csv, index_col=0)
    assert "SqueezeNet.features.0" in df.index


@pytest.mark.parametrize(
    ("model", "options", "layer"),
    [
        ("lraspp_mobilenet_v3_large", ["--batch", "2", "--size", "64"], "LRASPP.classifier"),  # dict output
        ("r3d_18", ["--batch", "1", "--size", "32"], "VideoResNet.layer1"),  # 5-d video input
        ("googlenet", ["--batch", "2", "--size", "64"], "GoogLeNet.inception3a"),  # auxiliary logits in train mode
        # images + targets; with shapes, whose ImageList argument must not be recorded as an object
        ("fasterrcnn_mobilenet_v3_large_320_fpn", ["--batch", "1", "--size", "128", "--shapes"], "FasterRCNN.roi_heads"),
    ],
)
def test_demo_drives_every_model_family(model, options, layer, tmp_path, capsys):
    pytest.importorskip("torchvision")
    csv = tmp_path / "demo.csv"
    assert _cli.main(["demo", model, *options, "--csv", str(csv)]) == 0, capsys.readouterr().err
    df = pd.read_csv(csv, index_col=0)
    assert layer in df.index
    assert df.loc[layer, "bwd_cpu_us"] > 0  # a training step: backward reached the layer
    assert "defaults" not in set(df["name"])  # no op of torchprof's own making


def test_unknown_model_lists_close_matches(capsys):
    pytest.importorskip("torchvision")
    assert _cli.main(["demo", "resnt18"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("torchprof demo: error: torchvision has no model 'resnt18'; did you mean resnet18")
    assert err.count("\n") == 1


def test_demo_list_prints_every_model_name(capsys):
    pytest.importorskip("torchvision")
    from torchvision import models

    assert _cli.main(["demo", "--list"]) == 0
    assert capsys.readouterr().out.split() == models.list_models()


def test_demo_as_the_readme_runs_it():
    """The README's demo command, its words read from the README (tests/test_readme.py checks the
    install before them): a real layer tree from a fresh process."""
    from test_readme import readme_demo_args

    pytest.importorskip("torchvision")
    assert readme_demo_args() == ["demo", "resnet18"]  # what the assertions below expect
    done = run(*readme_demo_args(), timeout=300, columns=100)  # (a 100-column pane: every line fits it)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert " ".join(out.split()).startswith("torchprof demo: resnet18, one training step (forward, backward, SGD step) on 8x3x224x224")
    assert re.search(r"^\| [├└]──ResNet ", out, re.M) and "layer4" in out and "CPU bwd" in out
    assert max(map(len, out.splitlines())) <= 100, [line for line in out.splitlines() if len(line) > 100]
    header = next(line for line in out.splitlines() if line.startswith("| Node"))
    assert "Own CPU" in header and "Self CPU" not in header  # (the layers' own time, ops folded in, named as it is)
    assert done.stderr == ""


def test_scalar_loss_reduces_any_model_output():
    import torch

    a = torch.ones(2, requires_grad=True)
    out = {"out": a * 2, "aux": [a * 3, (a * 4, torch.ones(1))], "meta": "text"}
    loss = _demo.scalar_loss(out)
    assert float(loss.detach()) == 2 + 3 + 4
    with pytest.raises(RuntimeError, match="no tensor that needs a gradient"):
        _demo.scalar_loss({"boxes": torch.ones(3)})


def test_trace_file_written_by_the_cli_is_valid_json(tmp_path):
    script = write_script(tmp_path)
    trace = tmp_path / "t.json"
    done = run_here("--trace", str(trace), str(script), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    events = json.loads(trace.read_text())["traceEvents"]
    assert any(e.get("name") == "nn.Module: Net.fc1 [Linear]" and e.get("ph") == "X" for e in events)


# -- FILE: a trace or a saved profile is opened, not run ---------------------------------------------------
TRACE_EVENTS = [
    {"ph": "X", "cat": "user_annotation", "name": "train_step", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 60, "args": {}},
    {"ph": "X", "cat": "user_annotation", "name": "data_loading", "pid": 1, "tid": 1, "ts": 100, "dur": 20},
]


def _table_names(stdout: str) -> list[str]:
    """The Node cells of the table the command line printed, guides stripped."""
    lines = [line for line in stdout.splitlines() if line.startswith("| ")][1:]
    return [line.split("|")[1].strip().lstrip("│├└─ ") for line in lines]


@pytest.mark.parametrize("name", ["trace.json", "trace.json.gz", "run.pt.trace.json.gz"])
def test_a_chrome_trace_file_is_opened_and_its_tree_printed_not_run_as_python(tmp_path, name):
    import gzip

    data = json.dumps({"traceEvents": TRACE_EVENTS}).encode()
    (tmp_path / name).write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    done = run_here("--min-pct", "0", "--ops", name, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"torchprof: {name} (a chrome trace)\n")
    assert _table_names(done.stdout) == [name.split(".json")[0], "train_step", "aten::mm", "data_loading"]
    assert done.stderr == ""


def test_a_saved_profile_is_opened_and_its_files_written(tmp_path, mlp):
    import torch

    import torchprof

    with torchprof.Profiler() as prof:
        mlp(torch.randn(2, 8)).sum().backward()
    saved = prof.save(str(tmp_path / "run.json"))
    csv = tmp_path / "run.csv"
    done = run_here("--csv", str(csv), saved, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"torchprof: {saved} (a saved profile)\n{prof.summary_line(notes=False, width=120)}\n")
    assert prof.table() in done.stdout  # the same table as print(prof)
    assert list(pd.read_csv(csv, index_col=0).index) == list(prof.df.index)


def test_a_real_gpu_trace_from_elsewhere_opens_from_the_command_line(tmp_path):
    from conftest import shared_trace

    path = shared_trace("a100-alexnet-forward.json.gz")
    done = run_here(str(path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "CUDA total" in done.stdout and "[param|cuda]" in done.stdout
    assert max(map(len, done.stdout.splitlines()[2:])) <= 120


def test_a_file_with_arguments_or_that_is_not_a_trace_is_one_error_line(tmp_path):
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": TRACE_EVENTS}))
    done = run_here("t.json", "--epochs", "1", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "torchprof: error: t.json is opened, not run: it takes no arguments (--epochs 1)\n"
    (tmp_path / "bad.json").write_text('{"traceEvents": [')
    done = run_here("bad.json", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.startswith("torchprof: error: bad.json is not valid JSON") and done.stderr.count("\n") == 1


def test_options_after_a_trace_file_apply_to_it(tmp_path):
    # A file is opened, not run, so nothing else can own them: `torchprof t.json --min-pct 0` was an error.
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": TRACE_EVENTS}))
    done = run_here("t.json", "--min-pct", "0", "--csv", "t.csv", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "data_loading" in done.stdout and (tmp_path / "t.csv").exists()
    done = run_here("t.json", "--no-such-option", cwd=tmp_path)
    assert done.returncode == 2 and "unrecognized arguments: --no-such-option" in done.stderr


def test_a_folder_or_a_list_of_rank_traces_opens_as_one_job(tmp_path):
    # What `torchrun -m torchprof --out traces` leaves, and a shell's traces/rank*.json: the folder
    # was "a folder without __main__.py", the list "takes no arguments".
    folder = tmp_path / "traces"
    folder.mkdir()
    for rank in (0, 1):
        (folder / f"rank{rank}.json").write_text(json.dumps({"traceEvents": TRACE_EVENTS}))
    for argv in (["traces"], ["--min-pct", "0", "traces/rank0.json", "traces/rank1.json"], ["traces/rank0.json", "traces/rank1.json", "--ops"]):
        done = run_here(*argv, cwd=tmp_path)
        assert done.returncode == 0, (argv, done.stderr)
        assert "2 ranks" in done.stdout and "data_loading" in done.stdout, argv
    (tmp_path / "empty").mkdir()
    done = run_here("empty", cwd=tmp_path)
    assert done.returncode == 2 and done.stderr == "torchprof: error: 'empty' is a folder without __main__.py or trace files (*.json, *.json.gz)\n"


def test_output_piped_into_a_reader_that_quits_ends_quietly(tmp_path):
    # `torchprof trace.json | head`: head leaves after its lines; the table's next print raised
    # BrokenPipeError, with a traceback of torchprof's frames.
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": TRACE_EVENTS}))
    read, write = os.pipe()
    os.close(read)  # the reader has gone before the first line
    try:
        done = subprocess.run([sys.executable, "-m", "torchprof", "t.json"], stdout=write, stderr=subprocess.PIPE,
                              text=True, cwd=tmp_path, timeout=120)  # fmt: skip
    finally:
        os.close(write)
    assert done.returncode == 1
    assert done.stderr == ""


def test_the_html_report_opens_with_the_rows_the_terminal_showed(tmp_path):
    """The report's own payload and opening state, read by the front end's decoder and row rules,
    give the rows the terminal printed. (Both come from the one profile the command made; a trace
    of the run reloaded would round times to whole microseconds and could move a row across the
    --min-pct line, which is why this reads the report itself.)"""
    from test_widget import REPO, node_binary

    script = write_script(tmp_path, tail="import torchprof")
    html = tmp_path / "r.html"
    reader = ("import { decodePayload, visibleRows } from './js/widget.js';"
              "import { readFileSync } from 'node:fs';"
              "const spec = JSON.parse(readFileSync(process.argv[1], 'utf-8'));"
              "const data = decodePayload(spec.payload);"
              "const state = { ...spec.state, expanded: spec.state.expanded === null ? null : new Set(spec.state.expanded) };"
              "console.log(JSON.stringify(visibleRows(data, state).rows.map((i) => data.name[i])));")  # fmt: skip
    for options in ([], ["--min-pct", "0", "--ops"], ["--depth", "1"], ["--sort", "bwd_cpu_us", "--min-pct", "5"]):
        done = run_here("--html", str(html), *options, str(script), cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        spec_file = tmp_path / "spec.json"
        spec_file.write_text(re.search(r'id="torchprof-data">(.*?)</script>', html.read_text(encoding="utf-8")).group(1),
                             encoding="utf-8")  # fmt: skip
        shown = subprocess.run([node_binary(), "--input-type=module", "-e", reader, str(spec_file)], cwd=REPO,
                               capture_output=True, text=True, timeout=60)  # fmt: skip
        assert shown.returncode == 0, shown.stderr
        names = json.loads(shown.stdout)
        terminal = _table_names(done.stdout)
        assert len(names) == len(terminal), (options, names, terminal)
        for full, printed in zip(names, terminal):  # names over 60 characters are cut in the middle
            head, _, tail = printed.partition("…")
            assert full == printed or (full.startswith(head) and full.endswith(tail)), (options, full, printed)
        if "0" in options:  # no row under a threshold: how many rows show does not follow the timings
            assert len(terminal) > 3
