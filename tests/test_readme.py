"""Every Quickstart snippet of the README runs as written, in the context its heading states: the
notebook cells in one kernel, the script in a fresh interpreter, then the command lines in the
folder the script wrote its files to."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass

import pytest

from conftest import REPO

README = REPO / "README.md"


@dataclass(frozen=True)
class Snippet:
    context: str
    """``notebook``, ``script`` or ``command line``, from the ``###`` heading it sits under."""
    lang: str
    code: str


def quickstart_snippets() -> list[Snippet]:
    """The fenced code blocks of the README's Quickstart section, each with its heading's context."""
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## Quickstart\n", 1)[1].split("\n## ", 1)[0]
    out = []
    for part in re.split(r"\n### ", "\n" + section)[1:]:
        heading = part.split("\n", 1)[0].lower()
        context = "notebook" if "notebook" in heading else "command line" if "command line" in heading else "script"
        for lang, code in re.findall(r"```(\w+)\n(.*?)```", part, flags=re.S):
            out.append(Snippet(context, lang, code))
    return out


def test_the_quickstart_states_a_context_for_every_snippet():
    snippets = quickstart_snippets()
    assert {(s.context, s.lang) for s in snippets} == {("notebook", "python"), ("script", "python"), ("command line", "bash")}
    script = "".join(s.code for s in snippets if s.context == "script")
    assert not re.search(r"(?<![.\w])display\(", script)  # a name only IPython defines: a NameError in a script


@pytest.mark.slow
def test_the_notebook_snippets_run_in_a_kernel_and_show_the_table_then_the_widget(tmp_path):
    from test_notebooks import execute_cells

    sources = [s.code for s in quickstart_snippets() if s.context == "notebook"]
    assert len(sources) >= 2 and "%%torchprof" in sources[1]
    cells = execute_cells(sources, tmp_path)
    errors = [o for c in cells for o in c.outputs if o.output_type == "error"]
    assert not errors, [f"{e['ename']}: {e['evalue']}" for e in errors]
    for c in cells[1:]:  # the magic cell, `prof`, `prof.widget(...)`: each the static table, then the widget
        kinds = [sorted(o["data"]) for o in c.outputs if o.output_type == "display_data"]
        assert kinds == [["text/html", "text/plain"], ["application/vnd.jupyter.widget-view+json", "text/plain"]], c.source


@pytest.mark.slow
def test_the_script_snippet_then_the_command_lines_run_as_written(tmp_path):
    snippets = quickstart_snippets()
    script = tmp_path / "quickstart.py"
    script.write_text("\n".join(s.code for s in snippets if s.context == "script"), encoding="utf-8")
    env = {**os.environ, "NO_COLOR": "1", "PYTHONPATH": str(REPO / "src"),
           "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}  # `python` is this one
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "| Node" in done.stdout and "BasicBlock" in done.stdout
    for name in ("report.html", "trace.json.gz", "profile.json.gz", "stacks.txt"):
        assert (tmp_path / name).stat().st_size > 0, name
    commands = [line.split("#", 1)[0].strip() for s in snippets if s.context == "command line" for line in s.code.splitlines()]
    for command in filter(None, commands):
        assert shlex.split(command)[:3] == ["python", "-m", "torchprof"], command
        done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, (command, done.stderr[-2000:])
        assert "| Node" in done.stdout, command
    assert (tmp_path / "trace.html").stat().st_size > 0
