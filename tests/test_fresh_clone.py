"""The README's test command on a fresh clone with nothing beside it: the tests on the real traces
in ``../shared`` are skipped, each saying why, and in CI (``.ci/run``) they must run, so a missing
trace fails there."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

pytestmark = pytest.mark.slow

#: Tests that read real traces, through ``conftest.shared_trace`` in the body and in a fixture's.
TRACE_TESTS = [
    "tests/test_traces.py::test_every_shared_trace_loads_and_keeps_the_invariants",
    "tests/test_table.py::test_a_real_gpu_trace_fits_120_characters_and_its_legend_names_both_bases",
    "tests/test_cli.py::test_a_real_gpu_trace_from_elsewhere_opens_from_the_command_line",
]


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repository's sources and tests copied to a folder that has no ``shared`` beside it."""
    root = tmp_path_factory.mktemp("fresh") / "torchprof"
    ignore = shutil.ignore_patterns("__pycache__", "artifacts", "node_modules")
    for part in ("src", "tests", "js"):
        shutil.copytree(REPO / part, root / part, ignore=ignore)
    shutil.copy(REPO / "pyproject.toml", root)
    assert not (root.parent / "shared").exists()
    return root


def _run_like_the_readme(clone: Path, *, ci: bool) -> subprocess.CompletedProcess[str]:
    """pytest on the trace tests in the clone, in the environment ``tests/run.sh`` (the README's
    test command) gives it: its ``export`` lines, then pytest."""
    exports = [line.strip() for line in (REPO / "tests" / "run.sh").read_text().splitlines() if line.strip().startswith("export ")]
    command = [*exports, f'exec "{sys.executable}" -m pytest -q -rs -p no:cacheprovider {" ".join(TRACE_TESTS)}']
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "TORCHPROF_SHARED", "PYTEST_ADDOPTS")}
    env["PYTHONPATH"] = str(clone / "src")
    if ci:
        env["CI"] = "true"  # as .ci/run sets it
    return subprocess.run(["bash", "-c", "\n".join(command)], cwd=clone, env=env, capture_output=True, text=True,
                          timeout=600)  # fmt: skip


def test_outside_ci_the_real_trace_tests_skip_and_say_why(clone):
    done = _run_like_the_readme(clone, ci=False)
    assert done.returncode == 0, done.stdout[-3000:]
    assert f"{len(TRACE_TESTS)} skipped" in done.stdout.splitlines()[-1], done.stdout[-3000:]
    reasons = [line for line in done.stdout.splitlines() if line.startswith("SKIPPED")]
    assert reasons and all("real-trace test:" in line and "a clone has no ../shared; CI runs these tests" in line
                           for line in reasons)  # fmt: skip


def test_in_ci_a_missing_real_trace_fails(clone):
    done = _run_like_the_readme(clone, ci=True)
    assert done.returncode == 1, done.stdout[-3000:]
    assert done.stdout.count("CI must run with ../shared beside the repository") >= len(TRACE_TESTS)


def test_ci_sets_ci_and_the_readme_command_leaves_it_to_ci():
    assert "export CI=true" in (REPO / ".ci" / "run").read_text()
    run_sh = [line for line in (REPO / "tests" / "run.sh").read_text().splitlines() if not line.lstrip().startswith("#")]
    assert not [line for line in run_sh if "CI=" in line]


def test_a_clone_in_a_folder_named_torchprof_run_with_sigint_ignored_passes(clone):
    """A clone of any name (this one is ``torchprof``), launched as a background job is (``cmd &``
    in a non-interactive shell hands it SIGINT ignored): the tests that look for torchprof's own
    frames and the tests of Ctrl-C pass there too."""
    import signal

    tests = ["tests/test_profiler.py::test_nested_profilers_are_a_clear_error",
             "tests/test_interrupts.py::test_ctrl_c_that_interrupts_the_body_and_then_the_stop_keeps_the_partial_profile"]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS")}
    env["PYTHONPATH"] = str(clone / "src")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests], cwd=clone, env=env,
                          capture_output=True, text=True, timeout=600,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:]
    assert f"{len(tests)} passed" in done.stdout.splitlines()[-1]

