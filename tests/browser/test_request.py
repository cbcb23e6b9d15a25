"""The rental request page in Chromium: secrets refused in each language with the field's label, and a
config.json said to be attached only when the request carries one."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest

from tests.browser.test_calculator import READY, Watched


@pytest.fixture
def page(browser: Any, base_url: str) -> Iterator[Any]:
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(READY)
    watched = Watched(page, base_url)
    yield page
    assert not watched.foreign, watched.foreign
    assert not watched.errors, watched.errors
    context.close()


def request_text(page: Any) -> str:
    return str(page.text_content("[data-testid=request-text]"))


@pytest.mark.parametrize(("lang", "note", "label"), [
    ("ru", "пароль: Tr0ub4dor", "Примечания"),
    ("uz", "mening parolim bu anor", "Izohlar"),
    ("en", "my password is swordfish", "Notes"),
])
def test_a_password_in_the_notes_is_refused_by_its_label(page: Any, base_url: str, lang: str, note: str,
                                                         label: str) -> None:
    prefix = "" if lang == "ru" else lang + "/"
    page.goto(f"{base_url}{prefix}calculator/request/", wait_until="domcontentloaded")
    page.fill("#req-region", "eu-west-1, 2026-12-05, 500 GB, s3://my-training-data-2026, H100-SXM-80GB")
    assert page.get_attribute("[data-testid=request-text]", "data-refused") is None  # ordinary words pass
    page.fill("#req-notes", note)
    text = request_text(page)
    assert page.get_attribute("[data-testid=request-text]", "data-refused") == "true"
    assert text.rstrip().endswith(label) and "notes" not in text, text
    assert note.split()[-1] not in text and page.is_disabled("#req-copy") and page.is_disabled("#req-download")
    assert page.text_content("[data-testid=error-notes]")
    page.fill("#req-notes", "needs NVLink")
    assert "needs NVLink" in request_text(page) and page.is_enabled("#req-copy")


def test_a_secret_in_the_address_is_refused_by_the_calculator_label(page: Any, base_url: str) -> None:
    page.goto(base_url + "en/calculator/request/?" + urlencode({"model": "hf_" + "aBcDeFgHiJ" * 4}),
              wait_until="domcontentloaded")
    text = request_text(page)
    assert "Catalog model" in text and "hf_aBc" not in text, text


def test_config_json_is_attached_only_when_there_is_one(page: Any, base_url: str) -> None:
    page.goto(base_url + "en/calculator/request/", wait_until="domcontentloaded")
    page.wait_for_selector("html[data-runtime=ready]", timeout=READY)
    text = request_text(page)
    assert "config.json" not in text and "meta-llama/Llama-3.1-8B" in text
    tiny = {"model_type": "llama", "hidden_size": 512, "intermediate_size": 1376, "num_hidden_layers": 4,
            "num_attention_heads": 8, "num_key_value_heads": 4, "vocab_size": 32000}
    page.goto(base_url + "en/calculator/request/?" + urlencode({"model_config": json.dumps(tiny)}),
              wait_until="domcontentloaded")
    page.wait_for_selector("html[data-runtime=ready]", timeout=READY)
    text = request_text(page)
    assert "custom (config.json below)" in text and '"intermediate_size": 1376' in text, text
    page.goto(base_url + "en/calculator/request/?" + urlencode({"model_config": "{not json"}),
              wait_until="domcontentloaded")
    text = request_text(page)
    assert "not valid JSON (not attached)" in text and "custom (config.json below)" not in text, text
