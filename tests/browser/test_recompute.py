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
