# One vocabulary: the glossary page's table (docs/guides/glossary.*.md) names, per concept, the Russian and
# Uzbek term and the variants the site does not use because they mean something else; no other page, and no
# text the build writes into pages, may use those variants.
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
GLOSSARY = "guides/glossary"
# Texts the build puts on pages besides the Markdown sources: labels, GPU pages, calculator, site config.
GENERATED = [*sorted((ROOT / "scripts" / "sitebuild").glob("*.py")), ROOT / "mkdocs.yml"]


def _rows(lang: str) -> list[list[str]]:
    text = (DOCS / f"{GLOSSARY}.{lang}.md").read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines[1:]]


def _pattern(phrase: str) -> re.Pattern[str]:
    """The phrase with any ending on each word (Russian and Uzbek inflect): the last letter dropped from
    words longer than five letters, then any word characters."""
    words = [re.escape(w[:-1] if len(w) > 5 else w) + r"\w*" for w in phrase.split()]
    return re.compile(r"(?<!\w)" + r"\s+".join(words), re.IGNORECASE)


def _avoided(lang: str) -> list[tuple[str, re.Pattern[str]]]:
    column = {"ru": 3, "uz": 4}[lang]
    out = []
    for row in _rows("en"):
        for phrase in row[column].split(";"):
            phrase = phrase.strip()
            if phrase and phrase != "—":
                out.append((phrase, _pattern(phrase)))
    return out


def test_the_three_glossaries_list_the_same_terms() -> None:
    en = [r[:5] for r in _rows("en")]
    assert len(en) >= 10
    for lang in ("ru", "uz"):
        assert [r[:5] for r in _rows(lang)] == en, lang


def test_the_review_terms_are_in_the_glossary() -> None:
    names = {r[0] for r in _rows("en")}
    assert {"gradient checkpointing", "gradient accumulation", "double quantization", "weights", "fine-tuning",
            "estimate", "evaluation"} <= names


@pytest.mark.parametrize("lang", ["ru", "uz"])
def test_no_page_uses_a_variant_the_glossary_rules_out(lang: str) -> None:
    found = []
    for path in sorted(DOCS.rglob(f"*.{lang}.md")):
        if path.relative_to(DOCS).as_posix() == f"{GLOSSARY}.{lang}.md":
            continue
        text = path.read_text(encoding="utf-8")
        found += [f"{path.relative_to(ROOT)}: {m.group(0)!r} (glossary: not {phrase!r})"
                  for phrase, pattern in _avoided(lang) for m in pattern.finditer(text)]
    for path in GENERATED:
        text = path.read_text(encoding="utf-8")
        found += [f"{path.relative_to(ROOT)}: {m.group(0)!r} (glossary: not {phrase!r})"
                  for phrase, pattern in _avoided(lang) for m in pattern.finditer(text)]
    assert not found, "\n".join(found)


def test_the_matcher_catches_inflected_forms() -> None:
    assert _pattern("контрольные точки градиента").search("включить контрольные точки градиентов")
    assert _pattern("квантование").search("с двойным квантованием")
    assert not _pattern("квантование").search("квантованной модели")  # the adjective stays
    assert _pattern("qayta o‘qitish").search("LoRA bilan qayta o‘qitishda")
