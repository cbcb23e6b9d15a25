"""One results view: the build's HTML (first paint) and the page's DOM (calc_render.js over the worker's
sizing.view) are the same markup and text for the same estimate, in every language."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from sitebuild import calculator_pages
from sitebuild.calculator_results import results_html
from sizing import web

READY = 90_000  # ms: a cold Pyodide boot on a loaded 2-core machine
# The page's DOM of a built HTML fragment: what the browser makes of the build's first-paint markup.
PARSED = "html => { const d = document.createElement('div'); d.innerHTML = html; return d.firstElementChild.outerHTML }"
TEXT = "html => { const d = document.createElement('div'); d.innerHTML = html; return d.textContent }"


def _query(config: dict[str, Any]) -> str:
    return urlencode({k: ("true" if v is True else "false" if v is False else ",".join(v) if isinstance(v, list)
                          else "" if v is None else str(v)) for k, v in config.items()})


def _results(page: Any) -> tuple[str, str]:
    return (page.eval_on_selector("#calc-results", "e => e.outerHTML"),
            page.eval_on_selector("#calc-results", "e => e.textContent"))


def test_build_and_page_render_the_same_view(browser: Any, base_url: str) -> None:
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(READY)
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    # A configuration other than the default (so the page's own answer is rendered, not the first paint
    # kept), with a warning, a comparison and hours and cost in the table.
    config = {**calculator_pages.default_config(), "model": "Qwen/Qwen2.5-14B", "method": "lora", "r": 32,
              "max_seq_length": 8192, "price_per_gpu_hour": 2.5}
    # one that does not fit its GPU: the "what to change" ladder block (sizing.ladder) is in both renderings
    too_big = {**calculator_pages.default_config(), "model": "meta-llama/Llama-3.3-70B-Instruct", "method": "qlora",
               "load_in_4bit": True, "gpu": "L40S-48GB"}
    for prefix, lang in (("en/", "en"), ("", "ru"), ("uz/", "uz")):
        # the default configuration: the page's answer (from the worker's view) is the build's first paint
        page.goto(base_url + prefix + "calculator/", wait_until="domcontentloaded")
        page.wait_for_selector("html[data-runtime=ready]", timeout=READY)
        build = page.evaluate(PARSED, results_html(calculator_pages.default_result(), lang))
        assert _results(page)[0] == build, lang
        # other configurations from the URL: the page's DOM against the build's HTML of the same answer
        for other in (config, too_big):
            page.goto(base_url + prefix + "calculator/?" + _query(other), wait_until="domcontentloaded")
            page.wait_for_selector("html[data-runtime=ready]", timeout=READY)
            if other is too_big:  # the ladder comes with the fit table, a moment after the peak
                page.wait_for_selector("[data-block=ladder]", timeout=READY)
            answer = web.compute(other)
            assert answer["ok"], answer
            html, text = _results(page)
            assert html == page.evaluate(PARSED, results_html(answer, lang)), lang
            assert text == page.evaluate(TEXT, results_html(answer, lang)), lang
    assert not errors, errors
    context.close()
