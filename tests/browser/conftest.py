"""Browser tests of the calculator: the run's one strict build (tests/sharedsite.py, also read by tests/site),
served at a sub-path of a local server, and Debian chromium.

Playwright (pip, pinned in scripts/test.sh) drives /usr/bin/chromium; no browser is downloaded. Without
chromium, Playwright or node_modules/pyodide (the page could not compute), the tests skip with the reason;
under CI=true they fail instead (tests/needs.py).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar, NoReturn

import pytest

from tests import sharedsite
from tests.needs import cannot_run
from tests.sharedsite import Handler

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")


def _skip(reason: str) -> NoReturn:
    cannot_run(reason)


class BadWasmHandler(Handler):
    extensions_map: ClassVar[dict[str, str]] = {**Handler.extensions_map, ".wasm": "application/octet-stream"}


def _server(directory: Path, handler: type[Handler]) -> ThreadingHTTPServer:
    return sharedsite.serve(directory, handler)


def _url(server: ThreadingHTTPServer) -> str:
    return sharedsite.origin(server) + sharedsite.SUB_PATH


@pytest.fixture(scope="session")
def site_server() -> tuple[Path, str]:
    """The built site and its address: the run's shared build (its SITE_URL is that address, so the page's
    absolute hreflang links, from which Material fetches sitemap.xml, stay on this origin)."""
    if not Path(CHROMIUM).is_file():
        _skip(f"no chromium at {CHROMIUM} (apt-get install chromium)")
    if not (ROOT / "node_modules" / "pyodide" / "pyodide.mjs").is_file():
        _skip("node_modules/pyodide missing (run `npm ci`)")
    build = sharedsite.build()
    return build.root, build.url


@pytest.fixture(scope="session")
def base_url(site_server: tuple[Path, str]) -> str:
    return site_server[1]


def _serve(site_server: tuple[Path, str], handler: type[Handler]) -> Iterator[str]:
    """The built site on another free port (at the same sub-path), through `handler`."""
    server = _server(site_server[0].parent, handler)
    try:
        yield _url(server)
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="session")
def bad_wasm_url(site_server: tuple[Path, str]) -> Iterator[str]:
    yield from _serve(site_server, BadWasmHandler)


class OneFileHandler(Handler):
    """Serves `replacement()` for the file whose path ends with `target`, the built site for the rest."""

    target: ClassVar[str] = ""
    content_type: ClassVar[str] = "application/octet-stream"

    def replacement(self) -> bytes:
        raise NotImplementedError

    def do_GET(self) -> None:
        if not self.path.split("?")[0].endswith(self.target):
            super().do_GET()
            return
        body = self.replacement()
        self.send_response(200)
        self.send_header("Content-Type", self.content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class NotInstalledHandler(OneFileHandler):
    """What a build without node_modules serves: runtime.json says the runtime is not installed."""

    target = "/assets/calculator/runtime.json"
    content_type = "application/json"

    def replacement(self) -> bytes:
        return b'{"installed": false, "message": "calculator runtime not installed"}'


class StaleSnapshotHandler(OneFileHandler):
    """A memory snapshot that does not belong to this build (here: the right size, the wrong bytes)."""

    target = "/assets/pyodide/calc_heap-gzip.bin"

    def replacement(self) -> bytes:
        site = Path(self.translate_path(self.path)).parents[2]  # <site>/assets/pyodide/<file>
        manifest = site / "assets" / "calculator" / "runtime.json"
        return gzip.compress(b"\x07" * json.loads(manifest.read_text("utf-8"))["snapshot_packed_bytes"])


class TrickleHandler(Handler):
    """The memory snapshot (the largest download, about 5 MB) in 64 KiB pieces: `pause` seconds between
    pieces; on the first request only, `stall_after` bytes and then nothing for `stall` seconds."""

    target: ClassVar[str] = "/assets/pyodide/calc_heap-gzip.bin"
    pause: ClassVar[float] = 0.0
    stall_after: ClassVar[int | None] = None
    stall: ClassVar[float] = 0.0
    served: ClassVar[int] = 0

    def do_GET(self) -> None:
        if not self.path.split("?")[0].endswith(self.target):
            super().do_GET()
            return
        body = Path(self.translate_path(self.path)).read_bytes()
        first = type(self).served == 0
        type(self).served += 1
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        try:
            for at in range(0, len(body), 65536):
                if first and self.stall_after is not None and at >= self.stall_after:
                    time.sleep(self.stall)  # the connection stays open, no byte comes
                    return
                self.wfile.write(body[at:at + 65536])
                self.wfile.flush()
                time.sleep(self.pause)
        except (BrokenPipeError, ConnectionResetError):  # the page gave up on it
            pass


class SlowHandler(TrickleHandler):
    """About 65 s for the snapshot (76 pieces, 0.85 s apart): longer than the old fixed 60 s limit."""

    pause = 0.85


class StallHandler(TrickleHandler):
    """1 MiB of the snapshot, then 45 s of silence; a second request is served at once."""

    stall_after = 1 << 20
    stall = 45.0


@pytest.fixture
def slow_url(site_server: tuple[Path, str]) -> Iterator[str]:
    yield from _serve(site_server, SlowHandler)


@pytest.fixture
def stall_url(site_server: tuple[Path, str]) -> Iterator[str]:
    StallHandler.served = 0
    yield from _serve(site_server, StallHandler)


@pytest.fixture(scope="session")
def not_installed_url(site_server: tuple[Path, str]) -> Iterator[str]:
    yield from _serve(site_server, NotInstalledHandler)


@pytest.fixture(scope="session")
def stale_snapshot_url(site_server: tuple[Path, str]) -> Iterator[str]:
    yield from _serve(site_server, StaleSnapshotHandler)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).is_file():
        _skip(f"no chromium at {CHROMIUM}")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _skip("playwright is not installed (pip install playwright==1.65.2)")
    assert shutil.which(CHROMIUM) or Path(CHROMIUM).is_file()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"])
        yield browser
        browser.close()


# A worker that never answers: what the page shows before the runtime is up, for as long as needed.
SILENT = "self.onmessage = () => {};"


@pytest.fixture
def pages(browser: Any, base_url: str) -> Iterator[Any]:
    """pages(silent=False) opens a fresh context's page (silent: its worker never answers); at the end each
    page must have had no uncaught exception, console error or request to another origin."""
    from tests.browser.test_calculator import READY, Watched

    made: list[tuple[Any, Any]] = []

    def new(silent: bool = False) -> Any:
        context = browser.new_context()
        if silent:
            context.route("**/assets/calculator/worker.js", lambda route: route.fulfill(
                status=200, content_type="text/javascript", body=SILENT))
        page = context.new_page()
        page.set_default_timeout(READY)
        made.append((context, Watched(page, base_url)))
        return made[-1][1]

    yield new
    for context, watched in made:
        assert not watched.errors, watched.errors  # no uncaught exception, no console error
        assert not watched.foreign, watched.foreign
        context.close()
