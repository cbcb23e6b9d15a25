"""scripts/sitebuild/client_fixes.py: one search index per language root; Material's sitemap.xml lookups
narrowed away (checked against the installed Material bundle, so an upgrade that moves it fails here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sitebuild import client_fixes
from tests.needs import cannot_run

PREFIXES = {"ru": "", "uz": "uz/", "en": "en/"}
INDEX = {"config": {"lang": ["ru", "en"], "separator": "[\\s\\-]+"},
         "docs": [{"location": "", "title": "Главная", "text": "а"},
                  {"location": "calculator/#r", "title": "Калькулятор", "text": "б"},
                  {"location": "uz/", "title": "Bosh sahifa", "text": "c"},
                  {"location": "uz/calculator/", "title": "Kalkulyator", "text": "d"},
                  {"location": "en/calculator/#r", "title": "Calculator", "text": "e"},
                  {"location": "enterprise/", "title": "Not English: a Russian page under enterprise/", "text": "f"}]}


def test_each_language_gets_its_own_documents_relative_to_its_root() -> None:
    parts = client_fixes.split_index(INDEX, PREFIXES)
    assert [d["location"] for d in parts["ru"]["docs"]] == ["", "calculator/#r", "enterprise/"]
    assert [d["location"] for d in parts["uz"]["docs"]] == ["", "calculator/"]
    assert [d["location"] for d in parts["en"]["docs"]] == ["calculator/#r"]
    assert parts["en"]["config"] == {"lang": ["en"], "separator": "[\\s\\-]+"}
    assert parts["ru"]["config"]["lang"] == ["ru", "en"] and parts["uz"]["config"]["lang"] == ["en"]
    total = sum(len(p["docs"]) for p in parts.values())
    assert total == len(INDEX["docs"])  # nothing lost, nothing doubled


def test_indexes_are_written_under_each_language_root(tmp_path: Path) -> None:
    (tmp_path / "search").mkdir()
    (tmp_path / "search" / "search_index.json").write_text(json.dumps(INDEX), "utf-8")
    assert client_fixes.write_search_indexes(tmp_path, PREFIXES) == {"ru": 3, "uz": 2, "en": 1}
    en = json.loads((tmp_path / "en" / "search" / "search_index.json").read_text("utf-8"))
    assert en["docs"][0]["title"] == "Calculator"
    ru = json.loads((tmp_path / "search" / "search_index.json").read_text("utf-8"))
    assert len(ru["docs"]) == 3 and {d["title"] for d in ru["docs"]} >= {"Главная", "Калькулятор"}


def test_the_alternate_selector_is_narrowed_once() -> None:
    bundle = 'a();e.pipe(b(()=>M("link[rel=alternate]")),m(r=>new URL(r.href)));x("link[rel=prev]")'
    assert client_fixes.narrow_alternates(bundle) == (
        'a();e.pipe(b(()=>M("link[rel=alternate][data-md-sitemap]")),m(r=>new URL(r.href)));x("link[rel=prev]")')
    with pytest.raises(ValueError, match="0 link"):
        client_fixes.narrow_alternates('x("link[rel=prev]")')
    with pytest.raises(ValueError, match="2 link"):
        client_fixes.narrow_alternates(bundle + bundle)


def test_the_installed_material_bundle_has_exactly_one_such_selector() -> None:
    try:
        import material
    except ImportError:
        cannot_run("mkdocs-material is not installed (requirements-site.txt)")
    bundles = sorted(Path(material.__file__).parent.glob("templates/assets/javascripts/bundle.*.min.js"))
    assert len(bundles) == 1
    patched = client_fixes.narrow_alternates(bundles[0].read_text("utf-8"))
    assert 'link[rel=alternate][data-md-sitemap]' in patched
