"""Load times of the calculator page on localhost, cold and warm, in Debian chromium via Playwright.

    python scripts/bench_calculator.py [--runs 3] [--lang en] [--chromium /usr/bin/chromium]

Builds the site (strict) into a temporary folder, serves it on a free port with the right MIME types, and
prints, per run: time to first numbers (the build-time results are in the HTML), time to runtime ready
(<html data-runtime="ready">: Pyodide booted, the wheel installed, the current configuration computed)
and time to a recomputed result after changing the rank, and the megabytes received over the network for
the load (headers + bodies of every response the page and its worker got; cache hits count 0). "cold" is a
fresh browser context (empty HTTP cache), "warm" a second navigation in the same context.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MIME = {".wasm": "application/wasm", ".mjs": "text/javascript", ".js": "text/javascript",
        ".json": "application/json", ".whl": "application/zip", ".zip": "application/zip"}


class Handler(SimpleHTTPRequestHandler):
    extensions_map = {**SimpleHTTPRequestHandler.extensions_map, **MIME}  # noqa: RUF012

    def log_message(self, format: str, *args: Any) -> None:
        pass


CHANGED = "b => document.querySelector('[data-testid=peak-allocated]').dataset.bytes !== b"
COLUMNS = ("first numbers", "runtime ready", "new peak", "new table", "MB received")


def transferred(requests: list[Any]) -> int:
    """Bytes the browser received for these requests (headers + encoded body; 0 for a cache hit), as
    Playwright reports them for the page and its worker."""
    total = 0
    for request in requests:
        try:
            sizes = request.sizes()
        except Exception:  # a request whose sizes are gone counts 0
            continue
        if request.response() is not None and not request.response().from_service_worker:
            total += max(0, sizes["responseBodySize"]) + max(0, sizes["responseHeadersSize"])
    return total


def measure(page: Any, url: str, rank: str) -> tuple[float, ...]:
    """Seconds from navigation to the build-time numbers and to the runtime's first answer; after a rank
    change, to the recomputed peak and to the recomputed fit table (<html data-runtime="ready">)."""
    start = time.perf_counter()
    page.goto(url, wait_until="commit")
    page.wait_for_selector("[data-testid=peak-allocated][data-bytes]", state="attached")
    first = time.perf_counter() - start
    page.wait_for_selector("html[data-runtime=ready]", timeout=120_000)
    ready = time.perf_counter() - start
    before = page.get_attribute("[data-testid=peak-allocated]", "data-bytes")
    t0 = time.perf_counter()
    page.fill("#calc-r", rank)
    page.wait_for_function(CHANGED, arg=before, timeout=120_000)
    peak = time.perf_counter() - t0
    page.wait_for_selector("html[data-runtime=ready]", timeout=120_000)
    return first, ready, peak, time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--lang", default="en", choices=("ru", "uz", "en"))
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=tmp))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{server.server_address[1]}/"
        env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "SITE_URL": base}
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", tmp], cwd=ROOT, env=env,
                       check=True)
        print(f"build: {time.perf_counter() - t0:.1f} s")
        url = base + ("" if args.lang == "ru" else f"{args.lang}/") + "calculator/"
        rows: dict[str, list[tuple[float, ...]]] = {"cold": [], "warm": []}
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=args.chromium, args=[
                "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync"])
            seen: list[Any] = []

            def record(request: Any) -> None:
                seen.append(request)

            for i in range(args.runs):
                context = browser.new_context()
                context.on("requestfinished", record)
                page = context.new_page()
                for kind, rank in (("cold", 32 + i), ("warm", 64 + i)):
                    seen.clear()
                    times = measure(page, url, str(rank))
                    rows[kind].append((*times, transferred(seen) / 1e6))
                context.close()
            browser.close()
        server.shutdown()
        server.server_close()
    print(f"{'':6}" + "".join(f"{c:>15}" for c in COLUMNS) + f"   (seconds and MB, median of {args.runs})")
    for kind, values in rows.items():
        print(f"{kind:6}" + "".join(f"{statistics.median(v[i] for v in values):15.2f}" for i in range(len(COLUMNS))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
