"""A shared calculator link: one the site itself contains shows its own numbers at once, computed when the site
was built (sitebuild/prerender.py) and marked so, then confirmed by the runtime; any other link says its
configuration is being computed and shows no other configuration's numbers meanwhile."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from sitebuild import prerender
from sitebuild.calculator_text import TEXT
from tests.browser.test_calculator import expected, shown, wait_ready, want


@pytest.fixture(scope="module")
def site_link(site_server: tuple[Path, str]) -> dict[str, str]:
    """A link a GPU page or a guide contains (a model, a method, a GPU...), not the form's defaults."""
    return next(p for p in prerender.site_links(site_server[0], catalog=False) if "model" in p and len(p) > 2)


def pending(page: Any) -> bool:
    return bool(page.evaluate("document.getElementById('calc-results').classList.contains('calc-pending')"))


def greyed(page: Any) -> bool:
    return bool(page.evaluate("document.getElementById('calc-results').classList.contains('calc-stale')"))


@pytest.mark.parametrize("lang", ["ru", "uz", "en"])
def test_a_site_link_shows_its_prerendered_numbers_before_the_runtime(pages: Any, base_url: str, lang: str,
                                                                      site_link: dict[str, str]) -> None:
    page = pages(silent=True).page
    page.goto(base_url + ("" if lang == "ru" else f"{lang}/") + "calculator/?" + urlencode(site_link))
    page.wait_for_selector("html[data-prerendered='1']", timeout=10_000)
    state = prerender.form_state(site_link)
    assert state is not None
    # CPython's answer for the configuration the page's form holds: the link's own numbers, marked as the build's
    assert shown(page) == want(expected(prerender.form_config(state)))
    assert page.get_attribute("html", "data-runtime") == "loading"
    assert page.text_content("#calc-status") == TEXT["status_prerendered"][lang]
    assert not greyed(page) and not pending(page) and page.is_visible("[data-testid=peak-allocated]")


def test_the_runtime_confirms_a_prerendered_link(pages: Any, base_url: str, site_link: dict[str, str]) -> None:
    page = pages().page
    # The link's prerendered answer is a fetch of its own, racing the cold runtime: on a loaded machine the runtime
    # once won (CI of ccedf13), and the page then rightly showed the runtime's numbers only. Holding the runtime's
    # manifest back for a second gives the build's numbers their head start whatever the load; what is checked is
    # the hand-over from them to the runtime.
    page.context.route("**/assets/calculator/runtime.json", lambda route: (time.sleep(1.0), route.continue_()))
    page.goto(base_url + "en/calculator/?" + urlencode(site_link), wait_until="commit")
    page.wait_for_function("() => document.documentElement.dataset.prerendered === '1'"
                           " || document.documentElement.dataset.shown !== undefined", polling=10)
    first = shown(page)
    assert page.get_attribute("html", "data-prerendered") == "1"  # the build's numbers came first
    wait_ready(page)
    assert shown(page) == first and page.get_attribute("html", "data-prerendered") is None
    assert page.text_content("#calc-status") == TEXT["status_ready"]["en"] and not greyed(page)


@pytest.mark.parametrize("lang", ["ru", "en"])
def test_any_other_link_says_it_is_computing_and_shows_no_default_numbers(pages: Any, base_url: str,
                                                                          lang: str) -> None:
    page = pages(silent=True).page
    page.goto(base_url + ("" if lang == "ru" else f"{lang}/") + "calculator/?" + urlencode({"r": "48"}))
    page.wait_for_selector("html[data-computing='1']", timeout=10_000)
    assert page.get_attribute("#calc-status", "data-state") == "loading"
    assert page.text_content("#calc-status") == TEXT["status_link"][lang]
    assert pending(page) and page.is_hidden("[data-testid=peak-allocated]")
    assert page.get_attribute("html", "data-prerendered") is None
    page.wait_for_timeout(500)  # nothing comes to show the default configuration's numbers as the link's
    assert pending(page) and page.is_hidden("[data-testid=peak-allocated]")


def test_any_other_link_shows_its_own_peak_then_its_table(pages: Any, base_url: str) -> None:
    page = pages().page
    page.goto(base_url + "en/calculator/?" + urlencode({"r": "48"}), wait_until="commit")
    page.wait_for_function("() => document.documentElement.dataset.shown !== undefined", polling=10)
    # the peak is the link's; the table is not there yet or already the link's (its verdicts, then all of it),
    # never the default's in sight: read at one moment, in the page
    state = page.evaluate("""() => {
      const d = document.documentElement.dataset;
      const fit = document.querySelector('[data-block=fit]:not(.calc-pending)');
      return [d.runtime, fit !== null && fit.checkVisibility(), d.tableShown === d.shown];
    }""")
    runtime, table_in_sight, links_table = state
    if runtime != "ready":
        assert not table_in_sight or links_table, state
    wait_ready(page)
    assert shown(page) == want(expected({**prerender.form_config(prerender.form_state({}) or {}), "r": 48}))
    assert not pending(page) and not greyed(page) and page.is_visible("[data-block=fit]")


def test_a_link_hides_the_first_paint_numbers_before_the_page_script_runs(pages: Any, base_url: str) -> None:
    """The top of <head> marks a page opened on a link; until calculator.js has looked at the link (here it
    never runs: an empty module), the default configuration's first-paint numbers are not in sight."""
    watched = pages(silent=True)
    watched.page.context.route("**/assets/calculator/calculator.js", lambda route: route.fulfill(
        status=200, content_type="text/javascript", body=""))
    page = watched.page
    page.goto(base_url + "en/calculator/?" + urlencode({"r": "48"}))
    assert page.is_hidden("[data-testid=peak-allocated]")
    page.goto(base_url + "en/calculator/")
    assert page.is_visible("[data-testid=peak-allocated]")  # no link: the build's numbers are the form's


def _without_page_script(pages: Any) -> Any:
    watched = pages(silent=True)
    watched.page.context.route("**/assets/calculator/calculator.js", lambda route: route.fulfill(
        status=200, content_type="text/javascript", body=""))
    return watched.page


@pytest.mark.parametrize("lang", ["ru", "uz", "en"])
def test_a_site_link_shows_its_numbers_before_the_page_script_runs(pages: Any, base_url: str, lang: str,
                                                                   site_link: dict[str, str]) -> None:
    """The inline script after the first-paint results (calculator_slots.link_script) puts the link's prerendered
    numbers in place on its own: here calculator.js never runs (an empty module) and the worker never answers."""
    page = _without_page_script(pages)
    page.goto(base_url + ("" if lang == "ru" else f"{lang}/") + "calculator/?" + urlencode(site_link))
    page.wait_for_selector("html[data-prerendered='1']", timeout=10_000)
    state = prerender.form_state(site_link)
    assert state is not None
    assert shown(page) == want(expected(prerender.form_config(state)))
    assert page.text_content("#calc-status") == TEXT["status_prerendered"][lang]
    assert page.get_attribute("html", "data-runtime") == "loading"
    assert not greyed(page) and not pending(page) and page.is_visible("[data-testid=peak-allocated]")
    assert page.get_attribute("html", "data-computing") is None
    # the first paint's fit table is the default configuration's: out of sight until the runtime's comes
    default_table = page.locator("#calc-results > [data-block=fit]")
    assert default_table.count() == 0 or not default_table.first.is_visible()


@pytest.mark.parametrize("lang", ["ru", "uz", "en"])
def test_any_other_link_says_computing_before_the_page_script_runs(pages: Any, base_url: str, lang: str) -> None:
    """Without calculator.js (an empty module): the page already says, in its language, that the link's
    configuration is being computed, with no numbers in sight, and no prerendered answer is shown."""
    page = _without_page_script(pages)
    page.goto(base_url + ("" if lang == "ru" else f"{lang}/") + "calculator/?" + urlencode({"r": "48"}))
    page.wait_for_selector("html[data-computing='1']", timeout=10_000)
    assert page.text_content("#calc-status") == TEXT["status_link"][lang]
    assert page.get_attribute("#calc-status", "data-state") == "loading"
    assert pending(page) and greyed(page) and page.is_hidden("[data-testid=peak-allocated]")
    page.wait_for_timeout(500)
    assert pending(page) and page.is_hidden("[data-testid=peak-allocated]")
    assert page.get_attribute("html", "data-prerendered") is None
