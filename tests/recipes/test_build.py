"""recipes/build.py: the downloadable trial.py is the build of recipes/trial (byte-identical, current)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from recipes import build

ROOT = Path(__file__).resolve().parents[2]


def test_the_build_is_deterministic_and_the_committed_file_is_current(tmp_path: Path) -> None:
    first, second = tmp_path / "a.py", tmp_path / "b.py"
    assert build.main([str(first)]) == 0 and build.main([str(second)]) == 0
    assert first.read_bytes() == second.read_bytes()
    committed = ROOT / "docs" / "recipes" / "trial.py"
    assert committed.read_bytes() == first.read_bytes(), (
        "docs/recipes/trial.py is stale: run `python -m recipes.build docs/recipes/trial.py`")
    assert build.main([str(committed), "--check"]) == 0


def test_every_module_is_embedded_verbatim_with_sizing_config() -> None:
    text = build.build()
    tree = ast.parse(text)
    sources = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Subscript):
            key = ast.literal_eval(node.targets[0].slice)
            sources[key] = ast.literal_eval(node.value)[1]
    assert sources["sizing.config"] == (ROOT / "sizing" / "config.py").read_text(encoding="utf-8")
    assert sources["sizing.errors"] == (ROOT / "sizing" / "errors.py").read_text(encoding="utf-8")
    if (ROOT / "sizing" / "contract.py").exists():
        assert sources["sizing.contract"] == (ROOT / "sizing" / "contract.py").read_text(encoding="utf-8")
    for path in (ROOT / "recipes" / "trial").glob("*.py"):
        if path.stem != "__main__":
            name = "recipes.trial" if path.stem == "__init__" else f"recipes.trial.{path.stem}"
            assert sources[name] == path.read_text(encoding="utf-8"), name


def test_the_single_file_runs_without_the_repository(tmp_path: Path) -> None:
    """Copied alone into an empty folder it imports its embedded sizing, not an installed one."""
    target = tmp_path / "trial.py"
    target.write_text(build.build(), encoding="utf-8")
    probe = ("import runpy, sys; sys.argv = ['trial.py', '--help']\n"
             f"runpy.run_path({str(target)!r}, run_name='__main__')\n")
    proc = subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, text=True, cwd=tmp_path,
                          timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "--max-steps" in proc.stdout
