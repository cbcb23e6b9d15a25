"""Site tests: one strict build of the real docs/ into a temporary folder, shared by every test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.site.builtsite import BuiltSite

ROOT = Path(__file__).resolve().parents[2]


# A sub-path, not the default http://127.0.0.1:8000/: links that assume the site sits at "/" break here.
SITE_URL = "https://example.org/lora-gpu/"


@pytest.fixture(scope="session")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> BuiltSite:
    """`mkdocs build --strict` of the repository's site, once per session."""
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "SITE_URL": SITE_URL, "NO_MKDOCS_2_WARNING": "1"}
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--clean", "-f", str(ROOT / "mkdocs.yml"),
               "-d", str(out)]
    proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False)
    log = proc.stdout + proc.stderr
    if proc.returncode != 0:
        pytest.fail(f"mkdocs build --strict failed (exit {proc.returncode}):\n{log[-6000:]}")
    return BuiltSite(out, SITE_URL, log)
