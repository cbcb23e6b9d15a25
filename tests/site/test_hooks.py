"""scripts/hooks.py: the placeholders it renders with, loaded the way MkDocs loads it (by path)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

HOOKS = Path(__file__).resolve().parents[2] / "scripts" / "hooks.py"


def load_hooks(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """A fresh copy of scripts/hooks.py, as MkDocs loads it (by path)."""
    spec = importlib.util.spec_from_file_location("hooks_under_test", HOOKS)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_placeholders_are_computed_by_sizing_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    hooks = load_hooks(monkeypatch)
    text = hooks.sizing_blocks.render("[[sizing:lora_params in=4096 out=4096 r=16]]", "en", hooks.BLOCKS)
    assert text == "131,072"  # r * (d_in + d_out), formatted for English pages
    assert hooks.sizing_blocks.__name__ == "sitebuild.sizing_blocks"


def test_the_calculator_placeholders_are_passed_explicitly(monkeypatch: pytest.MonkeyPatch) -> None:
    hooks = load_hooks(monkeypatch)
    calculator = {"calculator_form", "calculator_results", "calculator_request", "calculator_params"}
    assert calculator <= set(hooks.BLOCKS)
    # importing the calculator's slots registers nothing: sizing_blocks alone does not know them
    assert not calculator & set(hooks.sizing_blocks.HANDLERS)
    with pytest.raises(hooks.sizing_blocks.PlaceholderError, match="unknown placeholder"):
        hooks.sizing_blocks.render("[[sizing:calculator_params]]", "en")



def test_no_import_path_edits_in_scripts_or_sizing() -> None:
    root = HOOKS.parents[1]
    files = [path for folder in ("scripts", "sizing") for path in (root / folder).rglob("*.py")]
    found = [f"{path.relative_to(root)}:{n}" for path in files
             for n, line in enumerate(path.read_text("utf-8").splitlines(), 1) if "sys.path" in line]
    assert found == []
