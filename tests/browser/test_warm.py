"""A returning visitor: the worker keeps the decoded heap and the wasm of this build in the Cache API after the first
answer and boots from them the next time (no download, no decoding), never from another build's copies, and a
copy that does not restore is forgotten (the plain boot answers)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from sitebuild import calculator_pages
from tests.browser.test_calculator import READY, expected, shown, want

KEPT = ("() => caches.open('calc-runtime').then((c) => c.keys()).then((keys) => keys.map((k) => k.url))")


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(READY)
    yield page
    context.close()


def _load(page: Any, url: str) -> dict[str, int]:
    page.goto("about:blank")
    page.goto(url + "en/calculator/", wait_until="commit")
    page.wait_for_selector("html[data-runtime=ready]", timeout=READY)
    assert shown(page) == want(expected(calculator_pages.default_config()))
    return json.loads(page.get_attribute("html", "data-boot-stages") or "{}")  # type: ignore[no-any-return]


def _kept(page: Any, count: int, ids: tuple[str, ...] = ()) -> list[str]:
    """The kept copies once there are `count` of them, each named by one of `ids` when given (or after 30 s):
    polled from here, since page.evaluate awaits the Cache API's promise (a predicate returning a promise would
    count as truthy at once). The worker keeps them a moment after its answers (worker.js TAIL_MS), so an earlier
    build's copies can still be there when the page is ready."""
    deadline = time.monotonic() + 30
    while True:
        keys = sorted(page.evaluate(KEPT))
        if (len(keys) == count and all(any(i in key for i in ids) for key in keys if ids)) \
                or time.monotonic() > deadline:
            return keys
        page.wait_for_timeout(100)


def _manifest(page: Any, url: str) -> dict[str, Any]:
    return page.evaluate("(u) => fetch(u).then((r) => r.json())", url + "assets/calculator/runtime.json")  # type: ignore[no-any-return]


def test_a_returning_visitor_boots_from_the_kept_heap_and_wasm(page: Any, base_url: str) -> None:
    first = _load(page, base_url)
    assert "restored" in first and "heap_kept" not in first and "wasm_kept" not in first, first
    manifest = _manifest(page, base_url)
    # named by this build's ids: another build's runtime.json names other copies
    assert _kept(page, 2) == sorted(base_url + f"assets/pyodide/{name}?id={manifest[key]}" for name, key in (
        (manifest["snapshot_plain"], "snapshot_id"), ("pyodide.asm.wasm", "wasm_id")))
    heap = []
    page.on("request", lambda r: heap.append(r.url) if "calc_heap" in r.url else None)
    again = _load(page, base_url)
    assert {"heap_kept", "wasm_kept", "restored"} <= set(again) and "snapshot_failed" not in again, again
    assert heap == []  # the heap is not asked for, not even revalidated


def test_copies_of_another_build_are_not_used_and_a_broken_one_is_forgotten(page: Any, base_url: str) -> None:
    _load(page, base_url)
    _kept(page, 2)
    # another build: runtime.json names other ids, so the kept copies are not this build's
    manifest = _manifest(page, base_url)
    other = {**manifest, "snapshot_id": "0" * 16, "wasm_id": "1" * 16}
    page.route("**/assets/calculator/runtime.json", lambda route: route.fulfill(
        status=200, content_type="application/json", body=json.dumps(other)))
    stages = _load(page, base_url)
    assert "heap_kept" not in stages and "wasm_kept" not in stages and "restored" in stages, stages
    assert all("0" * 16 in url or "1" * 16 in url for url in _kept(page, 2, ("0" * 16, "1" * 16)))  # earlier ones gone
    page.unroute("**/assets/calculator/runtime.json")
    # a kept heap that does not restore (the right size, wrong bytes): the plain boot answers, the copies go
    _load(page, base_url)
    keys = _kept(page, 2, (manifest["snapshot_id"], manifest["wasm_id"]))
    heap_key = next(k for k in keys if "calc_heap" in k)
    page.evaluate("""async ([key, size]) => { const cache = await caches.open('calc-runtime');
        await cache.put(key, new Response(new Uint8Array(size).fill(7))); }""",
                  [heap_key, manifest["snapshot_packed_bytes"]])
    broken = _load(page, base_url)
    assert "heap_kept" in broken and "snapshot_failed" in broken, broken
    assert _kept(page, 0) == []
