"""The trainer integrations are optional: ``import torchprof`` never imports a trainer, and works
where none is installed; a missing one is a clear ImportError naming the extra to install."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow  # a fresh interpreter

BLOCKED = ("transformers", "lightning", "pytorch_lightning", "accelerate")

SCRIPT = textwrap.dedent(f"""
    import sys

    class NotInstalled:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {BLOCKED!r}:
                raise ModuleNotFoundError(f"No module named {{name!r}}")
            return None

    if sys.argv[1] == "hide":
        sys.meta_path.insert(0, NotInstalled())
    import torchprof
    from torchprof.integrations import gather_ranks

    assert torchprof.Profiler(steps=[1]).options.schedule(1) is not None and callable(gather_ranks)
    print("loaded:", sorted(m for m in sys.modules if m.split(".")[0] in {BLOCKED!r}))
    for name in ("hf", "lightning"):
        try:
            __import__(f"torchprof.integrations.{{name}}")
        except ImportError as exc:
            print(f"{{name}}: {{exc}}")
""")


def run(mode: str) -> str:
    done = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_torchprof_imports_without_the_trainers_installed():
    out = run("hide")
    assert "loaded: []" in out
    assert "hf: torchprof.integrations.hf needs transformers: pip install 'jupyter-torchprof[hf]'" in out
    assert "lightning: torchprof.integrations.lightning needs lightning: pip install 'jupyter-torchprof[lightning]'" in out
