#!/usr/bin/env bash
# Build the site with `mkdocs build --strict` and serve it at http://127.0.0.1:8000/ (Ctrl-C stops it).
# Installs what it needs into .venv: requirements-site.txt and the `sizing` package the pages compute with.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -r requirements-site.txt -e .
# The calculator's self-hosted Pyodide (pinned in package.json); without npm the page keeps its
# build-time numbers and says that the runtime is not installed.
if command -v npm >/dev/null; then
  npm ci --no-audit --no-fund --loglevel=error
else
  echo "npm not found: the calculator page will show its build-time numbers only" >&2
fi

export NO_MKDOCS_2_WARNING=1
export SITE_URL="http://127.0.0.1:8000/"   # absolute links (hreflang, JSON-LD, llms.txt) point where it is served
.venv/bin/mkdocs build --strict
# compressed and with caching headers as a static host sends them (scripts/static_server.py)
exec .venv/bin/python scripts/static_server.py --bind 127.0.0.1 --port 8000 site
