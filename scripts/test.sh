#!/usr/bin/env bash
# Every test, on a fresh machine or this one: install what is missing into .venv, then lint, type-check,
# unit + physics tests, and the accuracy benchmark's summary.
set -euo pipefail
cd "$(dirname "$0")/.."

# The calculator's suites need Debian chromium (tests/browser) and Node + npm (tests/pyodide, the Pyodide
# runtime). Without them those tests skip and say why; under CI=true they cannot be skipped: fail now.
missing=""
[ -x "${CHROMIUM:-/usr/bin/chromium}" ] || missing="$missing chromium"
command -v npm >/dev/null || missing="$missing npm"
command -v node >/dev/null || missing="$missing node"
if [ -n "$missing" ]; then
  case "${CI:-}" in
    1|[Tt]rue|TRUE|[Yy]es|YES|[Oo]n|ON)
      echo "CI=true, but missing:$missing; tests/browser and tests/pyodide cannot run" >&2
      exit 1 ;;
  esac
  echo "missing:$missing; tests/browser and tests/pyodide will skip (under CI=true they fail)" >&2
fi

PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# One pip run installs everything (one resolve); it is skipped when the pins are those of the last successful
# install into this .venv (a stamp of the files that hold them).
#   .[test]: pytest, pytest-xdist, hypothesis, ruff, mypy, jsonschema
#   requirements-physics.txt: the CPU physics and recipe stack, torch pinned to its CPU build (a bare `torch`
#     would pull a multi-GB CUDA build)
#   requirements-site.txt: mkdocs + Material + static-i18n (pinned); the suite builds the site once with --strict
#   playwright (pinned) drives Debian's /usr/bin/chromium (no browser download)
PLAYWRIGHT=playwright==1.65.2
pins=$(cat pyproject.toml requirements-physics.txt requirements-site.txt <(echo "$PLAYWRIGHT") | sha256sum | cut -c1-16)
if [ "$(cat .venv/.test-sh-pins 2>/dev/null)" != "$pins" ]; then
  .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]' -r requirements-physics.txt \
    -r requirements-site.txt "$PLAYWRIGHT"
  echo "$pins" > .venv/.test-sh-pins
fi
# Calculator: self-hosted Pyodide from npm (exact version in package.json / package-lock.json; the build copies
# it into the site); `npm ci` starts from scratch, so it is skipped when it ran for this very lock file.
if command -v npm >/dev/null; then
  lock=$(sha256sum package-lock.json | cut -c1-16)
  if [ "$(cat .venv/.test-sh-npm 2>/dev/null)" != "$lock" ] || [ ! -f node_modules/pyodide/pyodide.mjs ]; then
    npm ci --no-audit --no-fund --loglevel=error
    echo "$lock" > .venv/.test-sh-npm
  fi
fi

.venv/bin/ruff check sizing scripts tests recipes
.venv/bin/mypy sizing scripts recipes
# 2 workers (PYTEST_WORKERS): each test file stays on one worker (tests/conftest.py), so its module fixtures
# are built once; the site is built once for both workers (tests/sharedsite.py)
.venv/bin/python -m pytest -q -n "${PYTEST_WORKERS:-2}" --dist loadgroup
.venv/bin/python scripts/validate.py --summary
