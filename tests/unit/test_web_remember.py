"""sizing.web.remember: an answer computed ahead is the one compute_json gives, for that configuration only."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from sitebuild import calculator_pages
from sizing import web


@pytest.fixture
def clean() -> Iterator[None]:
    saved = dict(web._REMEMBERED)
    web._REMEMBERED.clear()
    yield
    web._REMEMBERED.clear()
    web._REMEMBERED.update(saved)


def words(lang: str) -> str:
    return json.dumps({"lang": lang, "text": calculator_pages.words(lang)})


def test_a_remembered_answer_is_the_computed_one_whatever_the_text(clean: None) -> None:
    base = calculator_pages.default_config()
    fresh = web.compute_json(json.dumps(base), True, words("en"))
    assert web.remember(json.dumps(base), True, words("en")) == fresh
    # the page's own text: other key order, other spacing, its words re-serialised; the same answer object
    page_text = json.dumps(dict(reversed(list(base.items()))), indent=1)
    page_words = json.dumps(json.loads(words("en")), ensure_ascii=False, separators=(",", ":"))
    assert web.compute_json(page_text, True, page_words) is web._REMEMBERED[next(iter(web._REMEMBERED))]
    assert web.compute_json(page_text, True, page_words) == fresh


def test_another_configuration_table_flag_or_language_is_computed(clean: None) -> None:
    base = calculator_pages.default_config()
    web.remember(json.dumps(base), True, words("en"))
    poisoned = next(iter(web._REMEMBERED))
    web._REMEMBERED[poisoned] = "remembered"  # a marker: any answer that is not it was computed
    assert web.compute_json(json.dumps(base), True, words("en")) == "remembered"
    other = {**base, "r": base["r"] * 2}
    assert web.compute_json(json.dumps(other), True, words("en")) != "remembered"
    assert web.compute_json(json.dumps(base), False, words("en")) != "remembered"
    assert web.compute_json(json.dumps(base), True, words("ru")) != "remembered"
    assert web.compute_json(json.dumps(base), True) != "remembered"
    assert json.loads(web.compute_json('{"r": "x"}'))["ok"] is False  # a refusal is never looked up or kept
    web.remember('{"r": "x"}')
    assert len(web._REMEMBERED) == 1
