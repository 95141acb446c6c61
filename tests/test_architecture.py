"""The package's shape: imports flow one way, only the capture touches torch's profiler, the tree
stays pure, and the vocabulary is written down once (docs/columns.md's table included)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from conftest import REPO

PACKAGE = REPO / "src" / "torchprof"

#: Stages in data-flow order: a module may import its own stage and earlier ones, never later ones.
STAGES: tuple[tuple[str, ...], ...] = (
    ("torchprof._vocab", "torchprof._errors", "torchprof._files", "torchprof._gc"),
    ("torchprof._records",),
    ("torchprof._capture", "torchprof._traces"),
    ("torchprof._tree",),
    ("torchprof._views",),
    ("torchprof._result", "torchprof._profiler", "torchprof._legacy", "torchprof._load", "torchprof._comparison"),
    ("torchprof._options", "torchprof._demo", "torchprof._cli", "torchprof._magic", "torchprof.__main__", "torchprof"),
    ("torchprof.integrations",),
)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node except those under ``if TYPE_CHECKING:`` (imports for annotations only)."""
    out: list[ast.AST] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            stack.extend(node.orelse)
            continue
        out.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return out


def imports_of(path: Path, name: str, *, typing_only: bool = True) -> set[str]:
    """Every module ``name`` imports, at the top or inside functions, resolved to full names;
    without ``typing_only``, leaving out imports made only for annotations."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree) if typing_only else _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return found


def stage_of(name: str) -> int | None:
    best = None
    for index, stage in enumerate(STAGES):
        for prefix in stage:
            if (name == prefix or name.startswith(prefix + ".")) and (best is None or len(prefix) > len(best[1])):
                best = (index, prefix)
    return best[0] if best else None


def ours(imported: str, known: dict[str, Path]) -> str | None:
    """The torchprof module an import refers to (``from . import x`` may name a module or a symbol)."""
    while imported:
        if imported in known:
            return imported
        imported = imported.rsplit(".", 1)[0] if "." in imported else ""
    return None


def graph(typing_only: bool = True) -> dict[str, set[str]]:
    known = modules()
    out: dict[str, set[str]] = {}
    for name, path in known.items():
        targets = {ours(i, known) for i in imports_of(path, name, typing_only=typing_only) if i.startswith("torchprof")}
        out[name] = {t for t in targets if t is not None and t != name}
    return out


def test_every_module_belongs_to_a_stage():
    assert [m for m in modules() if stage_of(m) is None] == []


def test_imports_never_run_against_the_data_flow():
    backwards = []
    for name, targets in graph().items():
        for target in targets:
            if stage_of(target) > stage_of(name):  # type: ignore[operator]
                backwards.append(f"{name} imports {target}")
    assert backwards == []


@pytest.mark.parametrize("with_typing", [False, True], ids=["run-time", "with-type-checking-imports"])
def test_there_is_no_import_cycle_not_even_through_lazy_imports(with_typing):
    """Neither at run time (lazy imports inside functions included) nor through imports made only
    for annotations (``if TYPE_CHECKING:``): a module that needs another's type reads it from a
    module both can import, so every module can be read, and changed, before the ones using it."""
    edges = graph(typing_only=with_typing)
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    for start in edges:
        if state.get(start):
            continue
        stack = [(start, iter(sorted(edges[start])))]
        state[start] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                stack.pop()
            elif state.get(child) == 1:
                cycle = [n for n, _ in stack[[n for n, _ in stack].index(child) :]] + [child]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            elif not state.get(child):
                state[child] = 1
                stack.append((child, iter(sorted(edges.get(child, ())))))


def test_only_the_capture_touches_torch_profiler_internals():
    internal = re.compile(r"^torch\.(_C\._profiler|profiler|autograd\.profiler|_C\._autograd)")
    touching = sorted(
        name for name, path in modules().items()
        if any(internal.match(i) for i in imports_of(path, name)) and not name.startswith("torchprof._capture")
    )  # fmt: skip
    assert touching == []


def test_the_tree_and_the_records_import_no_torch_pandas_or_ipython():
    heavy = ("torch", "pandas", "IPython", "anywidget", "numpy")
    for name, path in modules().items():
        if name.startswith(("torchprof._tree", "torchprof._records", "torchprof._vocab")):
            bad = [i for i in imports_of(path, name) if i.split(".")[0] in heavy]
            assert bad == [], f"{name} imports {bad}"


COLUMNS_DOC = REPO / "docs" / "columns.md"
COLUMN_TABLE_HEADER = "| column | label | meaning |\n| --- | --- | --- |\n"


def column_table() -> str:
    """docs/columns.md's table, one row per registry column, in the registry's order."""
    from torchprof._vocab import COLUMNS

    return COLUMN_TABLE_HEADER + "".join(f"| `{c.name}` | {c.label} | {c.about} |\n" for c in COLUMNS)


def test_every_registry_column_is_computed_and_documented_in_docs_columns_md():
    """docs/columns.md's table is the registry's, row for row. After changing a column, regenerate
    it with ``TORCHPROF_REGENERATE=1 python -m pytest tests/test_architecture.py``."""
    import os

    from torchprof._tree.finish import COMPUTE
    from torchprof._vocab import COLUMNS

    assert set(COMPUTE) == {c.name for c in COLUMNS}
    doc = COLUMNS_DOC.read_text(encoding="utf-8")
    assert doc.count(COLUMN_TABLE_HEADER) == 1, "docs/columns.md has lost its column table"
    head, rest = doc.split(COLUMN_TABLE_HEADER)
    lines = rest.split("\n")
    rows = next((k for k, line in enumerate(lines) if not line.startswith("|")), len(lines))
    table, tail = COLUMN_TABLE_HEADER + "".join(line + "\n" for line in lines[:rows]), "\n".join(lines[rows:])
    if os.environ.get("TORCHPROF_REGENERATE"):
        table = column_table()
        COLUMNS_DOC.write_text(head + table + tail, encoding="utf-8")
    documented = re.findall(r"^\| `([a-z_]+)` \|", table, re.M)
    assert sorted(documented) == sorted(c.name for c in COLUMNS), "regenerate docs/columns.md (see this test's docstring)"
    assert table == column_table(), "docs/columns.md's table is stale: regenerate it (see this test's docstring)"


#: Exceptions that never leave their module (a parser's retry signal, a check's internal unwind,
#: the compile watcher's early stop): they stay beside the code that raises and catches them.
_PRIVATE_SIGNALS = {"torchprof._traces.reader.NeedsDigits", "torchprof._tree.validate._Damage", "torchprof._capture.compiled.StopAfterCodegen",
                    "torchprof._demo.TorchvisionMismatch"}  # (the demo tells the CLI, which prints one line)


def test_every_exception_users_can_meet_is_defined_in_errors_and_still_imports_from_its_old_home():
    defined = set()
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any(
                isinstance(b, ast.Name) and (b.id.endswith(("Error", "Warning", "Exception")) or b.id in ("Exception", "ValueError", "RuntimeError"))
                for b in node.bases
            ):
                defined.add(f"{name}.{node.name}")
    assert defined - _PRIVATE_SIGNALS == {f"torchprof._errors.{n}" for n in
                                          ("TraceError", "ProfilerError", "ProfilerWarning", "OutputError", "CellSyntaxError")}  # fmt: skip
    import torchprof
    from torchprof import _errors, _files, _magic, _options
    from torchprof._capture import session

    assert _files.TraceError is torchprof.TraceError is _errors.TraceError
    assert session.ProfilerError is torchprof.ProfilerError is _errors.ProfilerError
    assert session.ProfilerWarning is torchprof.ProfilerWarning is _errors.ProfilerWarning
    assert _options.OutputError is _errors.OutputError and _magic.CellSyntaxError is _errors.CellSyntaxError
