"""The site as a visitor's browser loads it: no requests for sitemap.xml files, no failed requests, and a
search on each language's pages finds that language's pages only."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.test_calculator import Watched

PAGES = ["", "en/", "uz/guides/memory/", "en/calculator/", "gpus/"]


def test_no_sitemap_requests_and_no_failed_requests(browser: Any, base_url: str) -> None:
    context = browser.new_context()
    try:
        page = context.new_page()
        watched = Watched(page, base_url)
        asked: list[str] = []
        failed: list[str] = []
        page.on("request", lambda r: asked.append(r.url))
        page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
        for path in PAGES:
            page.goto(base_url + path, wait_until="load")
            page.wait_for_timeout(500)  # Material's alternate-language lookups run after load
        assert [u for u in asked if "sitemap" in u] == []
        assert failed == []
        assert not watched.errors, watched.errors
    finally:
        context.close()


@pytest.mark.parametrize(("path", "prefix"), [("en/", "en/"), ("uz/", "uz/"), ("", "")])
def test_search_finds_pages_of_the_page_language_only(browser: Any, base_url: str, path: str, prefix: str) -> None:
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(base_url + path, wait_until="load")
        page.keyboard.press("s")  # Material's shortcut opens the search
        # Typed key by key, as a visitor types: Material answers key events; a value set at once (fill) went
        # unanswered on a loaded machine (2 clean-clone runs, each on one of the three pages).
        page.locator("input[data-md-component=search-query]").press_sequentially("qlora", delay=50)
        page.wait_for_selector(".md-search-result__item a", timeout=30_000)
        hrefs = page.eval_on_selector_all(".md-search-result__item a", "els => els.map((a) => a.href)")
        assert len(hrefs) >= 3, hrefs
        for href in hrefs:
            rest = href[len(base_url):]
            assert href.startswith(base_url + prefix), href
            if not prefix:
                assert not rest.startswith(("en/", "uz/")), href
    finally:
        context.close()
