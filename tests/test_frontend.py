"""The front end's sources (js/src/): the checked-in bundle is what they build to, they spell no name of
the vocabulary (it arrives in the payload), and they stay small enough to read."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from torchprof import _vocab

REPO = Path(__file__).resolve().parents[1]
JS = REPO / "js"
SOURCES = sorted((JS / "src").rglob("*.js"))
#: Where a literal may spell a registry name, because there it is not the registry's: an element's
#: tag (SVG's ``path``), an HTML input type (``search``), an ARIA value (``aria-sort="ascending"``)
#: and the ``data-testid`` hooks the browser tests find elements by.
NOT_VOCABULARY = ("tag", "attribute:type", "attribute:aria-sort", "attribute:data-testid")
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 150


def node() -> str:
    binary = shutil.which("node")
    if binary is None:
        pytest.fail("node (>= 18) is needed for the front-end tests: apt-get install nodejs (tests/run.sh does it)")
    return binary


def needs_npm_ci(package: str) -> None:
    if not (JS / "node_modules" / package).is_dir():
        pytest.fail(f"js/node_modules/{package} is missing: run `npm ci` in js/ (tests/run.sh does it)")


def source_facts(paths: list[Path]) -> list[dict[str, Any]]:
    needs_npm_ci("typescript")
    result = subprocess.run([node(), str(REPO / "tests" / "js" / "source_facts.mjs"), *map(str, paths)],
                            capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def registry_names() -> dict[str, str]:
    """Every name the vocabulary defines that the front end must read from the payload, with what it is."""
    names: dict[str, str] = {}
    for column in (*_vocab.COLUMNS, *_vocab.COMPARE_COLUMNS, *_vocab.COMPARE_VIEW_EXTRA):
        names[column.name] = "a column key"
    names.update({k.name: "a state key" for k in _vocab.STATE})
    names.update(dict.fromkeys(_vocab.NODE_KIND_LABELS, "a node kind"))
    names.update(dict.fromkeys((*_vocab.VIEWS, *_vocab.COMPARE_VIEWS), "a view name"))
    names.update(dict.fromkeys((*_vocab.FLAME_COLOURS, *_vocab.COMPARE_FLAME_COLOURS), "a Flame colouring"))
    return names


def shown(path: str) -> str:
    p = Path(path)
    return str(p.relative_to(REPO)) if p.is_relative_to(REPO) else p.name


def spelled(facts: list[dict[str, Any]]) -> list[str]:
    names = registry_names()
    return [f"{shown(f['file'])}:{lit['line']}: {lit['text']!r} is {names[lit['text']]}"
            for f in facts for lit in f["literals"] if lit["text"] in names and lit["place"] not in NOT_VOCABULARY]  # fmt: skip


def test_the_checked_in_bundle_is_what_the_sources_build_to(tmp_path):
    needs_npm_ci("esbuild")
    fresh = tmp_path / "widget.js"
    result = subprocess.run([node(), str(JS / "build.mjs"), "--outfile", str(fresh)], capture_output=True, text=True,
                            timeout=120, check=False)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert fresh.read_text(encoding="utf-8") == (JS / "widget.js").read_text(encoding="utf-8"), (
        "js/widget.js is stale: run `npm run build` in js/ and commit it"
    )


def test_no_front_end_source_spells_a_column_a_state_key_a_kind_or_a_view(tmp_path):
    # The check finds what it looks for: a scratch module that spells one of each.
    scratch = tmp_path / "scratch.js"
    scratch.write_text('const a = data.num["cpu_us"]; const b = model.get("min_pct");\n'
                       'if (kind === "module" || view === `table`) h("span", { "data-testid": "flame" });\n')  # fmt: skip
    assert [line.split(": ", 1)[1] for line in spelled(source_facts([scratch])) if "scratch" in line] == [
        "'cpu_us' is a column key", "'min_pct' is a state key", "'module' is a node kind", "'table' is a view name",
    ]  # fmt: skip
    assert SOURCES, "no js/src/*.js"
    found = spelled(source_facts(SOURCES))
    assert found == [], "read these from the payload's vocabulary (data.vocab, data.roles, the state):\n" + "\n".join(found)


def test_no_hand_written_front_end_file_or_function_is_too_long_to_read():
    long_files, long_functions = [], []
    for f in source_facts(SOURCES):
        where = shown(f["file"])
        if f["lines"] > MAX_FILE_LINES:
            long_files.append(f"{where}: {f['lines']} lines")
        long_functions += [f"{where}:{fn['line']} {fn['name']}: {fn['lines']} lines" for fn in f["functions"] if fn["lines"] > MAX_FUNCTION_LINES]
    assert long_files == [], f"split these (at most {MAX_FILE_LINES} lines a file)"
    assert long_functions == [], f"split these (at most {MAX_FUNCTION_LINES} lines a function)"


def test_each_view_the_vocabulary_names_is_one_module_in_the_registry():
    registry = (JS / "src" / "views" / "index.js").read_text(encoding="utf-8")
    for view in _vocab.VIEWS:
        assert (JS / "src" / "views" / f"{view}.js").is_file(), f"view {view!r} has no module js/src/views/{view}.js"
        assert f'import * as {view} from "./{view}.js";' in registry, f"js/src/views/index.js does not list {view!r}"
    assert set(_vocab.COMPARE_VIEWS) <= set(_vocab.VIEWS)
