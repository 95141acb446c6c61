#!/usr/bin/env bash
# Installs everything the test suite needs, then runs all of it: lint and type checks (ruff, mypy,
# tsc), the front end's node tests and the Python tests (including the real-browser and notebook
# tests). Safe to run again.
#   TORCH_SPEC  the torch/torchvision to install into a .venv that has no torch yet (default:
#               "torch torchvision", pip's choice; .ci/run sets the versions our CI runs). A torch
#               the .venv already has is kept, whatever this says: torchvision is matched to it.
#   PYTHON      the interpreter to build .venv from (default: python3)
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}

quiet_pip() {  # pip on our machines warns about every missing local index folder: keep errors only
  "$@" 2>&1 | grep -v "is ignored: it is neither a file nor a directory" || true
  return "${PIPESTATUS[0]}"
}

if [ ! -x .venv/bin/python ]; then
  echo "== install: a .venv from $PYTHON"
  "$PYTHON" -m venv .venv
fi
HAVE_TORCH=$(.venv/bin/python -c "import torch; print(torch.__version__)" 2>/dev/null || true)
if [ -n "$HAVE_TORCH" ]; then
  TORCH="torch==$HAVE_TORCH"  # the user's torch stays (CPU or CUDA build): pip matches the rest to it
  echo "== install: torchprof and the test extras into .venv (keeping its torch $HAVE_TORCH); a few minutes the first time"
else
  TORCH=${TORCH_SPEC:-"torch torchvision"}
  echo "== install: $TORCH, torchprof and the test extras into .venv; a few minutes the first time"
fi
# shellcheck disable=SC2086
quiet_pip .venv/bin/pip install --disable-pip-version-check -q $TORCH -e '.[test]'

# Headless Chromium for the browser tests (Playwright drives it; it never downloads a browser).
if ! command -v chromium >/dev/null 2>&1; then
  echo "== install: Debian's chromium (for the browser tests)"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium fonts-liberation >/dev/null
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "== install: Debian's nodejs and npm (for the front end's tests)"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
# esbuild and typescript (pinned in js/package-lock.json): tests/test_frontend.py rebuilds the checked-in
# bundle (js/widget.js) from js/src/ to prove it current; tsc checks the sources' JSDoc types.
echo "== install: the front end's esbuild and typescript (npm ci in js/)"
(cd js && npm ci --no-audit --no-fund --loglevel=error >/dev/null)

# CI (.ci/run) sets CI=true: then the tests on the real traces in ../shared must run. Without it
# (a fresh clone, nothing beside it) they are skipped, each saying why; everything else runs.
echo "== lint and types: ruff, mypy, tsc"
.venv/bin/ruff check src tests
.venv/bin/python -m mypy
(cd js && node node_modules/typescript/bin/tsc -p tsconfig.json)
echo "== front end: node --test"
node --test --test-reporter=dot tests/js/
echo "== pytest"
# Two workers or more (one per core): the suite is mostly torch and browser work that runs in parallel
# safely; -rs prints why each skipped test skipped.
.venv/bin/python -m pytest -q -rs -n "${PYTEST_WORKERS:-auto}" "$@"
