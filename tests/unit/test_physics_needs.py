"""The physics suite under CI=true: a module whose pinned stack is missing fails the run; elsewhere it skips with
its reason (tests/physics/conftest.py, tests/needs.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _physics_without_torch(tmp_path: Path, ci: str | None) -> subprocess.CompletedProcess[str]:
    """Collect one physics module with a `torch` on the path that cannot be imported (the stack missing)."""
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text('raise ModuleNotFoundError("simulated: no torch", name="torch")\n')
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(ROOT)])
    if ci is not None:
        env["CI"] = ci
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
                           "tests/physics/test_comm_buffers.py"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300, check=False)


def test_physics_module_without_its_stack_fails_under_ci(tmp_path: Path) -> None:
    run = _physics_without_torch(tmp_path, "true")
    assert run.returncode == 2, run.stdout[-2000:]  # a collection error: pytest stops the run, which fails
    assert "CI=true, but this physics module cannot run" in run.stdout, run.stdout[-2000:]
    assert "physics tests need torch" in run.stdout  # the module's own reason is kept


@pytest.mark.parametrize("ci", [None, "false"])
def test_physics_module_without_its_stack_skips_elsewhere(tmp_path: Path, ci: str | None) -> None:
    run = _physics_without_torch(tmp_path, ci)
    assert run.returncode == 5, run.stdout[-2000:]  # pytest's "no tests collected": the module skipped, none failed
    assert "1 skipped" in run.stdout and "physics tests need torch" in run.stdout, run.stdout[-2000:]
