"""Under CI=true a suite that cannot run fails the run; elsewhere it skips with its reason (tests/needs.py,
scripts/test.sh)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.needs import cannot_run, in_ci

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("value", "ci"), [("true", True), ("1", True), ("TRUE", True), ("yes", True),
                                           ("", False), ("false", False), ("0", False)])
def test_in_ci_reads_the_ci_variable(value: str, ci: bool) -> None:
    assert in_ci({"CI": value}) is ci
    assert in_ci({}) is False


def test_cannot_run_fails_under_ci_and_skips_elsewhere() -> None:
    with pytest.raises(pytest.fail.Exception, match="no chromium"):
        cannot_run("no chromium", {"CI": "true"})
    with pytest.raises(pytest.skip.Exception, match="no chromium"):
        cannot_run("no chromium", {})


def _pytest(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "CI"}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
                          cwd=ROOT, env={**base, "PYTHONPATH": str(ROOT), **env}, capture_output=True, text=True,
                          timeout=300, check=False)


def test_browser_suite_without_chromium_fails_under_ci() -> None:
    args = ["tests/browser", "-k", "shared_url"]
    ci = _pytest(args, {"CHROMIUM": "/nonexistent/chromium", "CI": "true"})
    assert ci.returncode == 1, ci.stdout[-2000:]
    assert "CI=true, but this suite cannot run: no chromium" in ci.stdout
    local = _pytest(args, {"CHROMIUM": "/nonexistent/chromium"})
    assert local.returncode == 0 and "1 skipped" in local.stdout, local.stdout[-2000:]


def test_pyodide_suite_without_node_fails_under_ci(tmp_path: Path) -> None:
    args = ["tests/pyodide/test_pyodide_node.py", "-k", "python_314"]
    ci = _pytest(args, {"PATH": str(tmp_path), "CI": "true"})  # no node on PATH
    assert ci.returncode == 1, ci.stdout[-2000:]
    assert "CI=true, but this suite cannot run: node" in ci.stdout


def test_test_sh_stops_at_once_under_ci_without_chromium_npm_node(tmp_path: Path) -> None:
    for tool in ("bash", "dirname"):  # all the script needs before its check
        (tmp_path / tool).symlink_to(shutil.which(tool) or f"/usr/bin/{tool}")
    env = {"PATH": str(tmp_path), "CHROMIUM": "/nonexistent/chromium", "CI": "true", "HOME": str(tmp_path)}
    proc = subprocess.run([str(tmp_path / "bash"), str(ROOT / "scripts" / "test.sh")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 1
    assert "CI=true, but missing: chromium npm node" in proc.stderr, proc.stderr


def test_missing_training_stack_fails_the_session_under_ci() -> None:
    from tests.conftest import STACK, missing_stack

    assert missing_stack(lambda name: None) == list(STACK)
    assert missing_stack(lambda name: object()) == []
    # A CI run in an interpreter without torch & co stops before collecting anything.
    probe = ("import sys, importlib.util as u; real = u.find_spec; "
             "u.find_spec = lambda n, *a: None if n == 'torch' else real(n, *a); "
             "import pytest; sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', 'tests/unit/test_needs.py', "
             "'-k', 'in_ci_reads']))")
    base = {k: v for k, v in os.environ.items() if k != "CI"}
    ci = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env={**base, "PYTHONPATH": str(ROOT), "CI": "true"},
                        capture_output=True, text=True, timeout=300, check=False)
    assert ci.returncode != 0 and "missing torch" in ci.stdout + ci.stderr, (ci.stdout + ci.stderr)[-2000:]
    local = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env={**base, "PYTHONPATH": str(ROOT)},
                           capture_output=True, text=True, timeout=300, check=False)
    assert local.returncode == 0, (local.stdout + local.stderr)[-2000:]
