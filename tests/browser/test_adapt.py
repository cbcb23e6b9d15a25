"""The form adapts to the model picked: a catalog model with a shorter context gets a length it takes, a
pre-quantized checkpoint the method it trains with, each said in the page's language; a value the visitor typed
or a link gave is kept, and the engine's refusal shows where the numbers are (also the build's own refusal of a
link, before the runtime is up)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import pytest

from sitebuild import calculator_pages, prerender
from sitebuild.calculator_text import TEXT
from sizing import web
from tests.browser.test_calculator import expected, shown, wait_ready, want

DEFAULT = calculator_pages.default_config()
# The catalog models the form's defaults do not fit: a context shorter than its length, a method the checkpoint
# does not train with (every one of them was refused at the defaults before the form adapted).
LIMITED = [m for m in web.catalog()["models"] if (m["max_seq_length"] or 1 << 30) < DEFAULT["max_seq_length"]
           or m["method"] not in (None, DEFAULT["method"])]


def _lang(lang: str) -> str:
    return "" if lang == "ru" else f"{lang}/"


def _adapted(model: dict[str, Any]) -> dict[str, Any]:
    """The form's configuration for `model`, adapted by hand from its limits (sizing.web.model_limits)."""
    config = {**DEFAULT, "model": model["id"]}
    if model["max_seq_length"] and config["max_seq_length"] > model["max_seq_length"]:
        config["max_seq_length"] = model["max_seq_length"]
    if model["method"]:
        config["method"] = model["method"]
    return config


def _note(model: dict[str, Any], lang: str) -> str:
    """What the page says it changed for `model`, from the page's words (a length in the page's digits)."""
    parts = []
    if model["max_seq_length"] and DEFAULT["max_seq_length"] > model["max_seq_length"]:
        digits = f"{model['max_seq_length']:,}".replace(",", "," if lang == "en" else "\u00a0")
        parts.append(TEXT["adapt_length"][lang].replace("{value}", digits))
    if model["method"] and model["method"] != DEFAULT["method"]:
        parts.append(TEXT["adapt_method"][lang].replace("{value}", model["method"]).replace("{was}", DEFAULT["method"]))
    return " ".join(parts)


def _kinds(models: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One model of each kind of limit (its context length and its method): the page's rule is the same for all
    of a kind, and every model's adapted form is checked on CPython (tests/unit/test_web_adapt.py)."""
    seen: dict[tuple[Any, Any], dict[str, Any]] = {}
    for m in models:
        seen.setdefault((m["max_seq_length"], m["method"]), m)
    return list(seen.values())


def test_every_kind_of_model_the_defaults_do_not_fit_gets_numbers_when_picked(pages: Any, base_url: str) -> None:
    assert len(LIMITED) >= 24  # 18 models with 2,048 tokens, 6 GPTQ checkpoints (catalog of 126)
    kinds = _kinds(LIMITED)
    assert len(kinds) >= 3 and {m["method"] for m in kinds} > {None}
    page = pages().page
    page.goto(base_url + "en/calculator/")
    wait_ready(page)
    previous = DEFAULT["model"]
    for model in kinds:
        before = page.get_attribute("html", "data-shown")
        page.select_option("[name=model]", model["id"])
        page.wait_for_function("b => document.documentElement.dataset.shown !== b", arg=before, polling=20)
        assert page.text_content("[data-testid=refusal]") == "", model["id"]
        assert shown(page) == want(expected(_adapted(model))), model["id"]  # CPython's numbers for the adapted form
        note = page.text_content("[data-testid=adapted]") or ""
        assert _note(model, "en") in note, (model["id"], note)  # with what went back from the model before
        previous = model["id"]
        wait_ready(page)
    assert previous != DEFAULT["model"]
    # back to the default model: what the form changed goes back (it was not the visitor's)
    page.select_option("[name=model]", DEFAULT["model"])
    assert page.input_value("[name=max_seq_length]") == str(DEFAULT["max_seq_length"])
    assert page.input_value("[name=method]") == DEFAULT["method"]


@pytest.mark.parametrize("lang", ["ru", "uz", "en"])
def test_the_page_says_what_it_changed_in_its_language(pages: Any, base_url: str, lang: str) -> None:
    page = pages(silent=True).page
    page.goto(base_url + _lang(lang) + "calculator/")
    for model_id in ("microsoft/phi-2", "TheBloke/Mistral-7B-v0.1-GPTQ"):
        model = next(m for m in LIMITED if m["id"] == model_id)
        page.select_option("[name=model]", model_id)
        note = page.text_content("[data-testid=adapted]") or ""
        assert _note(model, lang) in note, note
    # a length the visitor types is theirs: another short-context model does not change it
    page.fill("[name=max_seq_length]", "3000")
    page.select_option("[name=model]", "EleutherAI/pythia-1b")
    assert page.input_value("[name=max_seq_length]") == "3000"


def test_a_link_naming_only_the_model_shows_its_prerendered_numbers_adapted(pages: Any, base_url: str) -> None:
    page = pages(silent=True).page
    link = {"model": "microsoft/phi-2"}
    page.goto(base_url + "en/calculator/?" + urlencode(link))
    page.wait_for_selector("html[data-prerendered='1']", timeout=10_000)
    assert page.input_value("[name=max_seq_length]") == "2048"
    assert shown(page) == want(expected(_adapted(next(m for m in LIMITED if m["id"] == link["model"]))))
    assert page.text_content("#calc-status") == TEXT["status_prerendered"]["en"]
    assert "2,048" in (page.text_content("[data-testid=adapted]") or "")


@pytest.mark.parametrize("lang", ["ru", "en"])
def test_a_link_with_its_own_length_keeps_it_and_shows_the_refusal(pages: Any, base_url: str, lang: str) -> None:
    page = pages().page
    page.goto(base_url + _lang(lang) + "calculator/?" + urlencode({"model": "microsoft/phi-2",
                                                                    "max_seq_length": "4096"}))
    wait_ready(page)
    assert page.input_value("[name=max_seq_length]") == "4096"
    assert page.text_content("[data-testid=adapted]") == ""
    want_text = TEXT["e_seq_too_long"][lang].replace("{value}", "4096").replace("{max}", "2048")
    assert page.text_content("[data-testid=refusal]") == want_text
    assert page.text_content("#calc-status") == TEXT["status_refused"][lang]
    # where the numbers are: the refusal sits right above the results
    assert page.evaluate("document.getElementById('calc-refusal').nextElementSibling.id") == "calc-results"


@pytest.mark.parametrize("lang", ["ru", "uz", "en"])
def test_a_prerendered_refusal_is_shown_at_once(pages: Any, base_url: str, lang: str) -> None:
    """A link whose stored answer (prerender.py) is a refusal: the refusal in the page's language shows before
    the runtime is up (here it never is), with no other configuration's numbers in sight."""
    link = {"model": "microsoft/phi-2"}
    key = prerender.form_query(prerender.form_state(link) or {})
    # the build's answer for this key is numbers; a refusal the engine gives is served in its place
    refused = {**prerender.form_config(prerender.form_state(link) or {}), "max_seq_length": 4096}
    words = next(w for w in calculator_pages.page_words() if json.loads(w)["lang"] == lang)
    answer = web.compute_json(json.dumps(refused), False, words)
    assert not json.loads(answer)["ok"]
    watched = pages(silent=True)
    watched.page.context.route(f"**/pre/{lang}/{prerender.key_hash(key)}.json", lambda route: route.fulfill(
        status=200, content_type="application/json", body=json.dumps({key: answer})))
    page = watched.page
    page.goto(base_url + _lang(lang) + "calculator/?" + urlencode(link))
    page.wait_for_function("() => document.getElementById('calc-refusal').textContent !== ''", timeout=10_000)
    assert page.text_content("[data-testid=refusal]") == TEXT["e_seq_too_long"][lang].replace(
        "{value}", "4096").replace("{max}", "2048")
    assert page.text_content("#calc-status") == TEXT["status_prerendered_refused"][lang]
    assert page.get_attribute("html", "data-runtime") == "loading"
    assert page.is_hidden("[data-testid=peak-allocated]")  # not the default configuration's numbers
