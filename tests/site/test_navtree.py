"""scripts/sitebuild/navtree.py: GPU pages discovered from docs/gpus/, section index pages, breadcrumb links."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from sitebuild.navtree import discover, ensure_first, extend_section, first_url, gpu_sort_key

NAV = [{"Home": "index.md"}, {"GPUs": ["gpus/index.md"]}, {"Accuracy": "accuracy.md"}]


def test_gpu_pages_sort_by_memory_then_name() -> None:
    names = ["gpus/h100-sxm-80gb.md", "gpus/t4-16gb.md", "gpus/a100-sxm-80gb.md", "gpus/h100-vs-h200.md"]
    assert sorted(names, key=gpu_sort_key) == [
        "gpus/t4-16gb.md", "gpus/a100-sxm-80gb.md", "gpus/h100-sxm-80gb.md", "gpus/h100-vs-h200.md"]


def test_discover_lists_default_language_pages_without_index(tmp_path: Path) -> None:
    (tmp_path / "gpus").mkdir()
    for name in ("index.ru.md", "index.en.md", "l4-24gb.ru.md", "l4-24gb.en.md", "t4-16gb.ru.md", "only.en.md"):
        (tmp_path / "gpus" / name).write_text("x")
    assert discover(tmp_path, "gpus", "ru") == ["gpus/t4-16gb.md", "gpus/l4-24gb.md"]


def test_extend_section_appends_once() -> None:
    once = extend_section(NAV, "GPUs", ["gpus/t4-16gb.md", "gpus/index.md"])
    assert once[1] == {"GPUs": ["gpus/index.md", "gpus/t4-16gb.md"]}
    assert extend_section(once, "GPUs", ["gpus/t4-16gb.md"]) == once
    assert NAV[1] == {"GPUs": ["gpus/index.md"]}  # input untouched


def test_ensure_first_moves_or_adds_the_index() -> None:
    nav = [{"Guides": ["guides/a.md", {"Index": "guides/index.md"}]}]
    assert ensure_first(nav, "Guides", "guides/index.md") == [{"Guides": ["guides/index.md", "guides/a.md"]}]
    assert ensure_first([{"Guides": ["guides/a.md"]}], "Guides", "guides/index.md") == [
        {"Guides": ["guides/index.md", "guides/a.md"]}]


def test_first_url_follows_first_children() -> None:
    page = SimpleNamespace(url="gpus/", children=None)
    section = SimpleNamespace(url=None, children=[SimpleNamespace(url=None, children=[page])])
    assert first_url(section) == "gpus/"
