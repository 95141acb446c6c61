#!/usr/bin/env bash
# Installs everything the test suite needs, then runs all of it: lint and type checks (ruff, mypy,
# tsc), the front end's node tests and the Python tests (including the real-browser and notebook
# tests). Safe to run again.
#   TORCH_SPEC  the torch/torchvision requirement (default: the wheels on our machines' disk)
#   PYTHON      the interpreter to build .venv from (default: python3)
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
TORCH_SPEC=${TORCH_SPEC:-"torch==2.14.1 torchvision==0.29.1"}

quiet_pip() {  # pip on our machines warns about every missing local index folder: keep errors only
  "$@" 2>&1 | grep -v "is ignored: it is neither a file nor a directory" || true
  return "${PIPESTATUS[0]}"
}

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
# shellcheck disable=SC2086
quiet_pip .venv/bin/pip install --disable-pip-version-check -q $TORCH_SPEC -e '.[test]'

# Headless Chromium for the browser tests (Playwright drives it; it never downloads a browser).
if ! command -v chromium >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium fonts-liberation >/dev/null
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
# esbuild and typescript (pinned in js/package-lock.json): tests/test_frontend.py rebuilds the checked-in
# bundle (js/widget.js) from js/src/ to prove it current; tsc checks the sources' JSDoc types.
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
