"""One recompute as the visitor sees it: the numbers greyed from the edit until the new peak, the peak then in
full colour while the fit table stays greyed ("recomputing") until it arrives, then nothing greyed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from sitebuild import calculator_pages
from tests.browser.test_calculator import READY, Watched, expected, shown, wait_ready, want

# Every change of the results area, as (results greyed, fit table greyed, the peak's bytes), from the edit on.
OBSERVE = """() => {
  window.__states = [];
  const state = () => {
    const results = document.getElementById('calc-results');
    const fit = results && results.querySelector('[data-block=fit]');
    const peak = results && results.querySelector('[data-testid=peak-allocated]');
    return [results.classList.contains('calc-stale'), Boolean(fit && fit.classList.contains('calc-stale')),
            peak ? peak.dataset.bytes : null];
  };
  new MutationObserver(() => window.__states.push(state())).observe(document.body,
    { subtree: true, childList: true, attributes: true, attributeFilter: ['class'] });
}"""


@pytest.fixture
def watched(browser: Any, base_url: str) -> Iterator[Watched]:
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(READY)
    yield Watched(page, base_url)
    context.close()


def test_the_peak_comes_before_the_table_and_the_table_stays_greyed_until_it_comes(watched: Watched,
                                                                                    base_url: str) -> None:
    page = watched.page
    default = calculator_pages.default_config()
    page.goto(base_url + "en/calculator/")
    wait_ready(page)
    before = page.get_attribute("[data-testid=peak-allocated]", "data-bytes")
    page.evaluate(OBSERVE)
    page.fill("#calc-r", "48")
    wait_ready(page)
    states = [tuple(s) for s in page.evaluate("window.__states")]
    after = str(want(expected({**default, "r": 48}))["allocated"])
    assert shown(page) == want(expected({**default, "r": 48}))
    # from the edit until the new peak: the old numbers greyed (the page's first changes may come before)
    first_new = next(i for i, s in enumerate(states) if s[2] == after)
    assert first_new > 0 and states[first_new - 1] == (True, False, before), states
    # the new peak, not greyed, with the table still greyed, before the table came
    assert any(s == (False, True, after) for s in states[first_new:]), states
    assert states[-1] == (False, False, after), states
    assert not watched.errors, watched.errors


# Every change of the fit table from the edit on: (table greyed, the first card's headroom, micro-batch and
# sequence cells as shown).
OBSERVE_TABLE = """() => {
  window.__tables = [];
  const state = () => {
    const fit = document.querySelector('#calc-results [data-block=fit]');
    const cells = fit ? Array.from(fit.querySelectorAll('tbody tr:first-child td')).map((td) => td.textContent) : [];
    return [Boolean(fit && fit.classList.contains('calc-stale')), cells[2] || null, cells[3] || null,
            cells[4] || null];
  };
  new MutationObserver(() => window.__tables.push(state())).observe(document.body,
    { subtree: true, childList: true, attributes: true, attributeFilter: ['class'] });
}"""


def test_the_table_verdicts_come_before_its_searches(watched: Watched, base_url: str) -> None:
    """The fit table's verdicts (fits, headroom, fewest GPUs, time) are shown, not greyed, with "…" where each
    card's largest micro-batch and longest sequence are still being searched; then those values, as CPython's
    whole fit table has them."""
    page = watched.page
    default = calculator_pages.default_config()
    page.goto(base_url + "en/calculator/")
    wait_ready(page)
    page.evaluate(OBSERVE_TABLE)
    page.fill("#calc-r", "40")
    wait_ready(page)
    states = [tuple(s) for s in page.evaluate("window.__tables")]
    row = expected({**default, "r": 40})["fit_table"][0]
    headroom = page.text_content("[data-testid=fit-table] tbody tr:first-child td:nth-child(3)")
    final = (False, headroom, str(row["max_micro_batch"]), f"{row['max_seq_length']:,}")
    assert states[-1] == final, states
    # before it: the new verdicts with the searches to come, not greyed
    assert (False, headroom, "…", "…") in states[:-1], states
    assert int(page.get_attribute("html", "data-table-ms") or -1) >= 0
    assert page.get_attribute("html", "data-table-shown") == page.get_attribute("html", "data-shown")
    assert not watched.errors, watched.errors


# Before the page's scripts: every compute message the page posts to its worker, as the configuration sent.
RECORD_COMPUTES = """(() => {
  const Native = window.Worker;
  window.__computes = [];
  window.Worker = function (...args) {
    const worker = new Native(...args);
    const post = worker.postMessage.bind(worker);
    worker.postMessage = (msg, ...rest) => {
      if (msg && msg.type === "compute") window.__computes.push(JSON.parse(msg.config));
      return post(msg, ...rest);
    };
    return worker;
  };
})();"""

# One edit as a script makes it, returning the ranks of the computes posted before the script ends (synchronously).
EDIT = """([selector, values, change]) => {
  const before = window.__computes.length;
  const field = document.querySelector(selector);
  for (const value of values) {
    field.value = value;
    field.dispatchEvent(new Event("input", { bubbles: true }));
  }
  if (change) field.dispatchEvent(new Event("change", { bubbles: true }));
  return window.__computes.slice(before).map((c) => [c.r, c.gpu]);
}"""


def test_an_edit_after_a_pause_is_computed_at_once_and_once(watched: Watched, base_url: str) -> None:
    """A single edit (a spin button, a select, a paste) is sent to the worker within the event that made it, not a
    typing pause later; the "change" that follows its "input" sends nothing more (the same form)."""
    page = watched.page
    page.add_init_script(RECORD_COMPUTES)
    default = calculator_pages.default_config()
    page.goto(base_url + "en/calculator/")
    wait_ready(page)
    page.wait_for_timeout(200)  # well past the typing pause of the first compute
    other = next(v for v in page.eval_on_selector_all("#calc-gpu option", "os => os.map(o => o.value)")
                 if v != default["gpu"])
    assert page.evaluate(EDIT, ["#calc-gpu", [other], True]) == [[default["r"], other]]
    wait_ready(page)
    page.wait_for_timeout(200)
    assert page.evaluate(EDIT, ["#calc-r", ["40"], True]) == [[40, other]]
    wait_ready(page)
    page.wait_for_timeout(200)
    assert [c["r"] for c in page.evaluate("window.__computes")][-2:] == [default["r"], 40]  # nothing sent again
    assert shown(page) == want(expected({**default, "gpu": other, "r": 40}))
    assert not watched.errors, watched.errors


def _type_4_then_48(watched: Watched, base_url: str, init: str) -> dict:
    """Types "4" then "48" into the rank in one task, on a page loaded with `init` and settled: the first is sent at
    once and the second only once the typing pauses, as one compute of the value the field then holds. Returns the
    default configuration."""
    page = watched.page
    page.add_init_script(init)
    default = calculator_pages.default_config()
    page.goto(base_url + "en/calculator/")
    wait_ready(page)
    page.wait_for_timeout(300)  # well past the typing pause of the first compute
    count = len(page.evaluate("window.__computes"))
    assert page.evaluate(EDIT, ["#calc-r", ["4", "48"], False]) == [[4, default["gpu"]]]
    wait_ready(page)
    assert [c["r"] for c in page.evaluate("window.__computes")[count:]] == [4, 48]
    assert not watched.errors, watched.errors
    return default


def test_typing_is_computed_once_it_pauses(watched: Watched, base_url: str) -> None:
    """Keys typed in a row: the first is sent at once, the rest once the typing pauses, as one compute of the
    value the field then holds; the numbers shown are that value's."""
    default = _type_4_then_48(watched, base_url, RECORD_COMPUTES)
    assert shown(watched.page) == want(expected({**default, "r": 48}))


# RECORD_COMPUTES on a page that is slow to send: each compute message takes 100 ms of the main thread to post (a
# loaded machine), longer than the typing pause.
SLOW_COMPUTES = RECORD_COMPUTES.replace(
    "return post(msg, ...rest);",
    "if (msg && msg.type === 'compute') { const t = performance.now(); while (performance.now() - t < 100) {} }\n"
    "      return post(msg, ...rest);")


def test_a_key_typed_while_the_page_is_busy_is_typing(watched: Watched, base_url: str) -> None:
    """The typing pause counts from the end of the page's own work on the last edit: a key that waited behind a
    slow first compute is typing, sent once the typing pauses, not at once as an edit after a pause."""
    _type_4_then_48(watched, base_url, SLOW_COMPUTES)
