"""The calculator's status line never lies: refusals in the visitor's language only, next to the numbers
they replace; a shared link's numbers are not the default's; nothing throws on absurd input."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from sitebuild import calculator_pages
from sitebuild.calculator_text import TEXT
from tests.browser.test_calculator import READY, Watched, expected, shown, wait_ready, want


@pytest.fixture
def watched(browser: Any, base_url: str) -> Iterator[Watched]:
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(READY)
    w = Watched(page, base_url)
    yield w
    assert not w.errors, w.errors  # no uncaught exception, no console error
    assert not w.foreign, w.foreign
    context.close()


def status(page: Any) -> tuple[str, str]:
    """The status line's state and words read at one moment: between two reads the runtime can move it on (a
    clean-clone CI read "loading", then the next state's "Recomputing…")."""
    state, text = page.evaluate("""() => {
        const s = document.getElementById('calc-status');
        return [s.hasAttribute('data-state') ? s.dataset.state : null, s.textContent];
    }""")
    return str(state), str(text)


def refusal(page: Any) -> str:
    return str(page.text_content("[data-testid=refusal]"))


def greyed(page: Any) -> bool:
    return bool(page.evaluate("document.getElementById('calc-results').classList.contains('calc-stale')"))


TINY = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000, "max_position_embeddings": 8192}


@pytest.mark.parametrize("lang", ["uz", "en"])
def test_refusals_in_the_page_language_next_to_the_numbers(watched: Watched, base_url: str, lang: str) -> None:
    page = watched.page
    words = {k: v[lang] for k, v in TEXT.items()}
    page.goto(f"{base_url}{lang}/calculator/", wait_until="domcontentloaded")
    wait_ready(page)
    assert status(page) == ("ready", words["status_ready"]) and not greyed(page)
    # invalid JSON: a translated syntax error with its place, never "Recomputing…" forever
    page.fill("#calc-model_config", '{"hidden_size": ')
    wait_ready(page)
    want_text = words["e_json_syntax"].format(line=1, column=17)
    assert refusal(page) == want_text and page.text_content("[data-testid=error-model_config]") == want_text
    assert status(page) == ("refused", words["status_refused"]) and greyed(page)
    # 5,000 nested brackets: refused, nothing thrown (the fixture checks the console)
    page.fill("#calc-model_config", "[" * 5000 + "]" * 5000)
    wait_ready(page)
    assert refusal(page) == words["e_json_too_deep"].format(max=64)
    assert status(page)[0] == "refused" and greyed(page)
    # sizing's refusal: its parameters in the page's words, no English message appended or doubled
    page.fill("#calc-model_config", json.dumps(TINY))
    page.fill("#calc-r", "100")
    wait_ready(page)
    # the words filled with the parameters of CPython's own refusal of this configuration
    refused = calculator_pages.bridge().compute({**calculator_pages.default_config(), "model": None,
                                                 "model_config": TINY, "r": 100})
    assert not refused["ok"] and refused["error"]["code"] == "rank_too_large", refused
    assert refusal(page) == words["e_rank_too_large"].format(**refused["error"]["params"]), refusal(page)
    assert "exceeds" not in refusal(page) or lang == "en"
    assert status(page)[0] == "refused" and greyed(page)
    # the refusal is where the numbers are: right above them
    assert page.evaluate("document.getElementById('calc-refusal').nextElementSibling.id") == "calc-results"
    page.fill("#calc-r", "8")
    wait_ready(page)
    assert refusal(page) == "" and status(page) == ("ready", words["status_ready"]) and not greyed(page)
    assert shown(page) == want(expected({**calculator_pages.default_config(), "model": None, "model_config": TINY,
                                         "r": 8}))
    page.fill("#calc-r", "0")
    wait_ready(page)
    text = refusal(page)
    assert text == words["e_out_of_range"].format(field="r", min=1, max=65536), text
    assert text.count("65536") == 1 and "—" not in text
    # a refusal that names what it wants: a GPTQ checkpoint with QLoRA chosen by the visitor (a method the
    # visitor did not choose, the form changes to the checkpoint's own: tests/browser/test_adapt.py)
    gptq = "TheBloke/Mixtral-8x7B-Instruct-v0.1-GPTQ"
    page.fill("#calc-r", "16")
    page.fill("#calc-model_config", "")
    page.select_option("#calc-method", "lora")
    page.select_option("#calc-method", "qlora")
    page.select_option("#calc-model", gptq)
    wait_ready(page)
    refused = calculator_pages.bridge().compute({**calculator_pages.default_config(), "model": gptq}, False)
    assert not refused["ok"] and refused["error"]["code"] == "conflict", refused
    assert refusal(page) == words["e_conflict_expected"].format(field=refused["error"]["field"],
                                                                **refused["error"]["params"]), refusal(page)
    assert status(page)[0] == "refused" and greyed(page)


def test_a_shared_link_is_greyed_until_its_own_numbers(watched: Watched, base_url: str) -> None:
    page = watched.page
    words = {k: v["en"] for k, v in TEXT.items()}
    page.goto(base_url + "en/calculator/?" + urlencode({"r": "64"}), wait_until="domcontentloaded")
    # one moment's state (read in separate calls, the runtime could answer in between: its own numbers, not greyed)
    state, text, stale = page.evaluate("""() => {
        const s = document.getElementById('calc-status'), r = document.getElementById('calc-results');
        return [s.dataset.state, s.textContent, r.classList.contains('calc-stale')];
    }""")
    if state == "loading":  # before the runtime is up: the default's numbers, greyed, and says so
        assert (text, stale) == (words["status_link"], True)
    wait_ready(page)
    assert not greyed(page) and shown(page) == want(expected({**calculator_pages.default_config(), "r": 64}))
    page.goto(base_url + "en/calculator/", wait_until="domcontentloaded")
    assert not greyed(page)  # the defaults: the build's numbers are this configuration's
    state, text = status(page)
    if state == "loading":
        assert text == words["status_static"]


def test_a_link_with_a_broken_model_config_says_so_once_loaded(watched: Watched, base_url: str) -> None:
    page = watched.page
    words = {k: v["ru"] for k, v in TEXT.items()}
    page.goto(base_url + "calculator/?" + urlencode({"model_config": "{broken"}), wait_until="domcontentloaded")
    assert refusal(page).startswith("Это не JSON") and greyed(page)  # at once, before the runtime
    wait_ready(page)
    assert status(page) == ("refused", words["status_refused"]) and page.is_hidden("#calc-progress")
    assert refusal(page) == words["e_json_syntax"].format(line=1, column=2)


def test_a_config_json_over_1_mb_stays_refused(watched: Watched, base_url: str, tmp_path: Path) -> None:
    page = watched.page
    page.goto(base_url + "en/calculator/", wait_until="domcontentloaded")
    wait_ready(page)
    big = tmp_path / "config.json"
    big.write_text(json.dumps({"hidden_size": 1, "pad": "x" * 1_100_000}), "utf-8")
    page.set_input_files("#calc-model-config-file", str(big))
    page.wait_for_timeout(1500)  # it used to vanish after about 300 ms
    assert page.text_content("[data-testid=error-model_config]") == TEXT["e_config_too_big"]["en"]
    assert refusal(page) == TEXT["e_config_too_big"]["en"]


# Before the page's scripts: the calculator's worker wrapped so that a test can make an edit the moment an answer
# arrives, before the page reads it (the answer of the previous configuration landing in the next one's typing
# pause), and every change of <html data-runtime> recorded with the form's rank and the peak then on the page.
EDIT_BEFORE_ANSWER = """(() => {
  const Native = window.Worker;
  window.__runtime = [];
  window.Worker = function (...args) {
    const worker = new Native(...args);
    let handler = null;
    Object.defineProperty(worker, "onmessage", { get: () => handler, set: (fn) => { handler = fn; } });
    worker.addEventListener("message", (event) => {
      const msg = event.data || {};
      if (window.__editAt && msg.type === "result" && msg.phase === window.__editAt.phase) {
        const edit = window.__editAt;
        window.__editAt = null;
        const field = document.querySelector(edit.selector);
        field.value = edit.value;
        field.dispatchEvent(new Event("input", { bubbles: true }));
      }
      if (handler) handler(event);
    });
    return worker;
  };
  new MutationObserver((changes) => {
    if (!changes.some((c) => c.target === document.documentElement)) return;
    const peak = document.querySelector("[data-testid=peak-allocated]");
    const rank = document.querySelector("#calc-r");
    window.__runtime.push([document.documentElement.dataset.runtime, rank ? rank.value : null,
                           peak ? peak.dataset.bytes : null]);
  }).observe(document, { subtree: true, attributes: true, attributeFilter: ["data-runtime"] });
})();"""


def test_an_answer_that_lands_in_the_next_edits_pause_is_not_called_ready(watched: Watched, base_url: str) -> None:
    """An edit made while the previous configuration's last answer is on its way: that answer is not the form's, so
    the page does not say "ready" over it (nor un-grey it); it says so only with the edited configuration's numbers."""
    page = watched.page
    page.add_init_script(EDIT_BEFORE_ANSWER)
    page.goto(base_url + "en/calculator/")
    wait_ready(page)
    page.evaluate("window.__editAt = { phase: 'full', selector: '#calc-r', value: '40' }; window.__runtime = []")
    page.fill("#calc-r", "24")
    page.wait_for_function("() => window.__editAt === null")
    wait_ready(page)
    default = calculator_pages.default_config()
    assert page.input_value("#calc-r") == "40"
    assert shown(page) == want(expected({**default, "r": 40}))
    peaks = {r: str(want(expected({**default, "r": int(r)}))["allocated"]) for r in ("24", "40")}
    states = [tuple(s) for s in page.evaluate("window.__runtime")]
    # every "ready" is said over the numbers of the rank the form holds then
    assert all(peak == peaks.get(rank) for state, rank, peak in states if state == "ready"), states
    assert states[-1] == ("ready", "40", peaks["40"]), states
