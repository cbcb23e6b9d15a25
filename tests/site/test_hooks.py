"""scripts/hooks.py: the `[[sizing:...]]` renderer it wires in, and its stand-in."""

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


def test_identity_stand_in_when_sizing_blocks_is_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sizing_blocks", None)  # import raises ModuleNotFoundError('sizing_blocks')
    assert load_hooks(monkeypatch).render("[[sizing:breakdown]]", "ru") == "[[sizing:breakdown]]"


def test_other_missing_modules_are_not_hidden(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "sizing_blocks.py").write_text("import a_module_that_does_not_exist_xyz\n")
    monkeypatch.delitem(sys.modules, "sizing_blocks", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="a_module_that_does_not_exist_xyz"):
        load_hooks(monkeypatch)


def test_the_real_renderer_is_used_when_present(monkeypatch: pytest.MonkeyPatch) -> None:
    hooks = load_hooks(monkeypatch)
    if (HOOKS.parent / "site" / "sizing_blocks.py").is_file():
        assert hooks.render.__module__ == "sizing_blocks"
    else:
        assert hooks.render("x", "en") == "x"
