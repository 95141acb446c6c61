"""The README keeps its promises: its two set-up commands are the ones the tests and CI run, its
picture is the widget as a test renders it, every Quickstart snippet runs as written in the context
its heading states (the notebook cells in one kernel, the script in a fresh interpreter, then the
command lines in the folder the script wrote its files to), and every link of it and of docs/
resolves."""

from __future__ import annotations

import os
import re
import shlex
import struct
import subprocess
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import REPO

if sys.version_info >= (3, 11):
    import tomllib
else:  # pytest itself depends on tomli before 3.11
    import tomli as tomllib

README = REPO / "README.md"
DOCS = REPO / "docs"


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


# -- set-up: the two commands from a fresh clone, and the user's install ---------------------------------------
def readme_section(title: str) -> str:
    text = README.read_text(encoding="utf-8")
    assert f"\n## {title}\n" in text, f"the README has no '## {title}' section"
    return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def setup_commands() -> dict[str, str]:
    """The Set-up section's numbered commands, each the line under its ``# N.`` comment:
    ``"1"`` installs and runs the demo, ``"2"`` installs and runs every test."""
    commands = {}
    for code in re.findall(r"```bash\n(.*?)```", readme_section("Set-up"), flags=re.S):
        lines = code.splitlines()
        for k, line in enumerate(lines[:-1]):
            if number := re.match(r"# (\d)\. ", line):
                commands[number.group(1)] = lines[k + 1].strip()
    return commands


def readme_demo_args() -> list[str]:
    """What the README's demo command passes to ``python -m torchprof``; tests/test_cli.py runs
    exactly these in a fresh process."""
    words = shlex.split(setup_commands()["1"].split(" && ")[-1])
    assert words[:3] == [".venv/bin/python", "-m", "torchprof"], words
    return words[3:]


def optional_dependencies() -> dict[str, list[str]]:
    with (REPO / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)["project"]["optional-dependencies"]


def requirement_names(extras: list[str]) -> set[str]:
    optional = optional_dependencies()
    return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower() for e in extras for r in optional[e]}


def editable_extras(word: str) -> list[str]:
    """``.[a,b]`` -> ``["a", "b"]``: the extras of an editable install of this project."""
    extras = re.fullmatch(r"\.\[([a-z,]+)\]", word)
    assert extras, f"{word!r} is not this project with its extras"
    unknown = set(extras.group(1).split(",")) - set(optional_dependencies())
    assert not unknown, f"pyproject.toml has no extra {sorted(unknown)}"
    return extras.group(1).split(",")


def test_the_readme_gives_two_set_up_commands_the_demo_and_every_test():
    assert sorted(setup_commands()) == ["1", "2"]


def test_the_demo_command_builds_the_venv_the_test_command_uses_and_keeps_an_installed_torch():
    steps = [shlex.split(step) for step in setup_commands()["1"].split(" && ")]
    assert [s[:3] for s in steps] == [["python3", "-m", "venv"], [".venv/bin/pip", "install", "-e"], [".venv/bin/python", "-m", "torchprof"]]
    assert steps[0] == ["python3", "-m", "venv", ".venv"]
    run_sh = (REPO / "tests" / "run.sh").read_text(encoding="utf-8")
    assert '"$PYTHON" -m venv .venv' in run_sh and ".venv/bin/pip install" in run_sh  # the same venv, reused
    # No torch pin: a torch already there (the CPU build the README installs first) is kept.
    assert len(steps[1]) == 4, steps[1]
    assert "torchvision" in requirement_names(editable_extras(steps[1][3]))  # the demo's models
    assert readme_demo_args()[0] == "demo"


def test_the_test_command_is_the_one_ci_runs():
    assert setup_commands()["2"] == "bash tests/run.sh"
    ci = [line.strip() for line in (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    assert [line for line in ci if line and not line.startswith("#")][-1] == "bash tests/run.sh"


def test_the_users_install_brings_jupyterlab_and_the_test_suite_installs_the_same():
    """The user's set-up (not the numbered commands): CPU or CUDA torch, then torchprof with
    JupyterLab; the suite (``.[test]``, what tests/run.sh installs) covers every extra it names."""
    code = "".join(re.findall(r"```bash\n(.*?)```", readme_section("Set-up"), flags=re.S))
    lines = [line.strip() for line in code.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    cpu = next(line for line in lines if "--index-url" in line)
    assert shlex.split(cpu) == [".venv/bin/pip", "install", "torch", "torchvision", "--index-url", "https://download.pytorch.org/whl/cpu"]
    installs = [shlex.split(line) for line in lines if line.startswith(".venv/bin/pip install -e")]
    user = [words for words in installs if "&&" not in words and len(words) == 4]
    assert user, "the README's set-up installs torchprof for a user"
    extras = editable_extras(user[0][3])
    assert "jupyterlab" in requirement_names(extras)
    assert any(line.split()[0].endswith("jupyter") and "lab" in line.split() for line in lines)  # and starts it
    assert requirement_names(extras) <= requirement_names(["test"])
    assert "-e '.[test]'" in (REPO / "tests" / "run.sh").read_text(encoding="utf-8")


def test_the_readme_fits_250_lines_and_leaves_our_machines_and_ci_to_the_docs():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    for internal in ("../shared", "CI=true", "our machines", "TORCHPROF_SHARED", "on disk"):
        assert internal not in text, f"{internal!r} belongs in docs/development.md"


# -- the picture: the widget as a test renders it -------------------------------------------------------------
PICTURE = "docs/img/widget.png"
#: A PNG text chunk this test writes into the picture it makes, so a picture put there by hand fails.
PICTURE_MARK = b"made by tests/test_readme.py: the torchprof widget on a ResNet-18 training step at 1200 px"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def readme_images() -> list[str]:
    return re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", README.read_text(encoding="utf-8"))


def png_size(png: bytes) -> tuple[int, int]:
    assert png[:8] == PNG_SIGNATURE and png[12:16] == b"IHDR"
    return struct.unpack(">II", png[16:24])


def with_text_chunk(png: bytes, keyword: bytes, text: bytes) -> bytes:
    """``png`` with a ``tEXt`` chunk after its header chunk (signature 8 bytes, IHDR 25)."""
    body = b"tEXt" + keyword + b"\0" + text
    chunk = struct.pack(">I", len(body) - 4) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)
    return png[:33] + chunk + png[33:]


def test_the_readme_picture_is_the_widget_rendered_on_a_resnet18_training_step(browser, resnet18_step, tmp_path):
    """The README shows the picture this test makes; ``TORCHPROF_REGENERATE=1`` writes it again
    (docs/development.md), and the screenshot of every run is in tests/artifacts/widget.png."""
    from browser_util import ARTIFACTS, new_page, rendered_paths, serve, wait_rendered, write_widget_page

    assert PICTURE in readme_images(), "the README must show the picture this test makes"
    prof = resnet18_step[0]
    hot = prof.summary["hot_path"]  # what a user sees first: the widget as it opens, on the hot path
    write_widget_page(prof.widget(), tmp_path)
    with serve(tmp_path) as url:
        # Wide enough for every column (at 970 px the table scrolls sideways: test_answers_browser.py).
        page = new_page(browser, viewport={"width": 1200, "height": 700}, device_scale_factor=2)
        page.goto(url + "index.html")
        page.wait_for_selector("body[data-ready='1']")
        wait_rendered(page)
        shown = rendered_paths(page)
        assert len(hot) >= 3 and set(hot) <= set(shown) and page.locator('[data-testid="headline"]').is_visible()
        png = page.locator('[data-testid="torchprof"]').screenshot()
        assert page.errors == [] and page.blocked == []
    png = with_text_chunk(png, b"Comment", PICTURE_MARK)
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "widget.png").write_bytes(png)
    committed = REPO / PICTURE
    if os.environ.get("TORCHPROF_REGENERATE") or not committed.exists():
        committed.parent.mkdir(parents=True, exist_ok=True)
        committed.write_bytes(png)
    picture = committed.read_bytes()
    assert PICTURE_MARK in picture, f"{PICTURE} was not made by this test: regenerate it (see the docstring)"
    assert png_size(picture)[0] == png_size(png)[0] == 2 * 1176, "the picture is the widget at 1200 px, 2 pixels per px"


# -- links --------------------------------------------------------------------------------------------------------
def markdown_files() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def anchors(path: Path) -> set[str]:
    """GitHub's anchors of a Markdown file's headings: lower case, punctuation dropped, spaces to hyphens."""
    headings = re.findall(r"^#+ (.+)$", re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_every_link_and_path_in_the_readme_and_docs_resolves():
    broken = []
    for path in markdown_files():
        text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            where = (path.parent / file).resolve() if file else path
            if not where.exists() or (anchor and (where.suffix != ".md" or anchor not in anchors(where))):
                broken.append(f"{path.relative_to(REPO)}: {target}")
        # Paths in code spans: from the repository's root, or a package path under src/torchprof.
        for span in re.findall(r"`([^`\s<>*]+)`", text):
            if re.fullmatch(r"(src|tests|js|docs|notebooks|\.ci)/[\w./-]*\w", span):
                if not (REPO / span).exists():
                    broken.append(f"{path.relative_to(REPO)}: `{span}`")
            elif re.fullmatch(r"_\w+/\w+\.py", span) and not (REPO / "src" / "torchprof" / span).exists():
                broken.append(f"{path.relative_to(REPO)}: `{span}`")
    assert broken == []


def test_the_docs_index_lists_every_page_and_the_readme_links_the_index():
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"\]\(([\w-]+\.md)\)", index))
    pages = {p.name for p in DOCS.glob("*.md")} - {"README.md"}
    assert pages - listed == set(), "add a row for each new page to docs/README.md's index"
    assert "(docs/README.md)" in README.read_text(encoding="utf-8")


def test_every_option_of_the_magic_and_the_command_line_is_in_docs_profiling_md():
    from torchprof import _cli
    from torchprof._magic import TorchprofMagics

    parsers = [TorchprofMagics.torchprof.parser, _cli.build_parser(), _cli.build_demo_parser()]
    options = {o for p in parsers for a in p._actions for o in a.option_strings if o not in ("-h", "--help")}
    text = (DOCS / "profiling.md").read_text(encoding="utf-8")
    assert sorted(o for o in options if f"`{o}" not in text and f" {o}`" not in text and f", {o}" not in text) == []


def test_every_keyword_of_profiler_is_in_docs_profiling_md():
    import inspect

    from torchprof import Profiler

    keywords = list(inspect.signature(Profiler).parameters)
    text = (DOCS / "profiling.md").read_text(encoding="utf-8")
    assert keywords and [k for k in keywords if f"`{k}=`" not in text] == []
