"""Every notebook in notebooks/ runs top to bottom in a real kernel, cleanly, and is stored clean."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
EXPECTED = {"quickstart.ipynb", "training.ipynb", "flops_memory.ipynb", "traces.ipynb", "compare.ipynb",
            "hf_trainer.ipynb", "lightning.ipynb", "accelerate.ipynb"}
#: What kineto writes on fd 2 when a profiler starts or stops; must never reach a cell.
NOISE = ("USDT", "gpuGetDeviceCount")
KERNEL = "torchprof-test-python"
CELL_TIMEOUT_S = 300


_spec_root: Any = None


def _kernel_manager() -> Any:
    """A kernel of this very interpreter (the venv with the editable torchprof), whatever
    kernelspecs the machine has installed: a kernelspec in a temporary folder points at it."""
    import tempfile

    from jupyter_client import KernelManager
    from jupyter_client.kernelspec import KernelSpecManager

    global _spec_root
    if _spec_root is None:
        _spec_root = tempfile.TemporaryDirectory(prefix="torchprof-kernels-")
        spec_dir = Path(_spec_root.name) / KERNEL
        spec_dir.mkdir()
        spec = {"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "torchprof tests", "language": "python"}  # fmt: skip
        (spec_dir / "kernel.json").write_text(json.dumps(spec))
    specs = KernelSpecManager(kernel_dirs=[_spec_root.name])
    return KernelManager(kernel_name=KERNEL, kernel_spec_manager=specs)


def execute(nb: Any, cwd: Path, *, allow_errors: bool = False) -> Any:
    """Run a notebook in place with nbclient; ``cwd`` is the kernel's working directory."""
    from nbclient import NotebookClient

    client = NotebookClient(nb, km=_kernel_manager(), timeout=CELL_TIMEOUT_S, allow_errors=allow_errors,
                            resources={"metadata": {"path": str(cwd)}})  # fmt: skip
    client.execute()
    return nb


def execute_cells(sources: list[str], cwd: Path) -> list[Any]:
    """Run code cells in one fresh kernel (errors allowed: the caller inspects them)."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    execute(nb, cwd, allow_errors=True)
    return nb.cells


def test_the_expected_notebooks_exist():
    assert {p.name for p in NOTEBOOKS} == EXPECTED


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_is_stored_without_outputs(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        assert cell.get("outputs") == [], f"{path.name} cell {i} has stored outputs"
        assert cell.get("execution_count") is None, f"{path.name} cell {i} has an execution count"
    assert "widgets" not in nb.get("metadata", {}), f"{path.name} stores widget state"


@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs_top_to_bottom_without_errors_or_profiler_noise(path):
    import nbformat

    nb = nbformat.read(path, as_version=4)
    execute(nb, path.parent)  # raises CellExecutionError, with the cell and traceback, on any error
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    assert code_cells and all(c.execution_count for c in code_cells)
    for cell in code_cells:
        for output in cell.outputs:
            assert output.output_type != "error"
            blob = json.dumps(output)
            for word in NOISE:
                assert word not in blob, f"{path.name}: profiler noise in the output of\n{cell.source}\n{blob[:500]}"
