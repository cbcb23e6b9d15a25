"""The calculator's fit table on a phone (390 x 844, issue 15 item 10): all eight columns, the hours and the cost
included, inside the page's width (no sideways scrolling), and no GPU name broken inside a word, in ru, uz and en.

Measured before the fix: at 12.4 px the Russian headers made the table 392 px wide in a 358 px column (the cost
column cut off) and names broke letter by letter ("RTX A50|00 24G|B"). The layout is CSS only, so the build's first
paint is measured, with a worker that never answers.
"""

from __future__ import annotations

from typing import Any

from tests.browser.conftest import SILENT

PHONE = {"width": 390, "height": 844}
# Per name cell: whether every word of the name lies on one line (one client rect for its characters).
WORDS_WHOLE = """table => [...table.querySelectorAll('tbody tr td:first-child')].map(td => {
  const node = td.firstChild, text = node.textContent, words = [];
  for (const m of text.matchAll(/\\S+/g)) {
    const range = document.createRange();
    range.setStart(node, m.index); range.setEnd(node, m.index + m[0].length);
    words.push([m[0], new Set([...range.getClientRects()].map(r => Math.round(r.top))).size]);
  }
  return [text, words.filter(([, lines]) => lines > 1).map(([w]) => w)];
})"""
WIDTHS = """table => ({table: table.getBoundingClientRect().width,
  wrap: table.closest('.calc-fit-wrap').getBoundingClientRect().width,
  page: document.documentElement.scrollWidth, columns: table.querySelectorAll('thead th').length,
  font: parseFloat(getComputedStyle(table).fontSize)})"""


def test_the_fit_table_fits_a_phone_in_every_language(browser: Any, base_url: str) -> None:
    context = browser.new_context(viewport=PHONE)
    context.route("**/assets/calculator/worker.js", lambda route: route.fulfill(
        status=200, content_type="text/javascript", body=SILENT))
    page = context.new_page()
    for prefix in ("", "uz/", "en/"):
        page.goto(base_url + prefix + "calculator/", wait_until="load")
        table = page.wait_for_selector("[data-testid=fit-table]")
        sizes = table.evaluate(WIDTHS)
        assert sizes["columns"] == 8, (prefix, sizes)
        assert sizes["table"] <= sizes["wrap"] + 0.5, (prefix, sizes)  # the cost column is on screen
        assert sizes["page"] <= PHONE["width"], (prefix, sizes)
        assert sizes["font"] >= 10, (prefix, sizes)  # still readable
        broken = [(name, words) for name, words in table.evaluate(WORDS_WHOLE) if words]
        assert broken == [], (prefix, broken)
    context.close()
