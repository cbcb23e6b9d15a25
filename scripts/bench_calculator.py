"""Load times of the calculator page on localhost, cold and warm, in Debian chromium via Playwright.

    python scripts/bench_calculator.py [--runs 3] [--lang en] [--server static|plain] [--site DIR] [--list]

Builds the site (strict) into a temporary folder, serves it on a free port with the right MIME types, and
prints the medians of: time to first numbers (the build-time results are in the HTML); time until the
runtime answers (<html data-runtime="ready">: Pyodide restored, the current configuration computed with
its fit table), as the page itself records it from navigation start (design/pyodide-load.md's
nav->answer) and as Playwright sees it (a few ms more: its polling and messages); the time of
one recompute after changing the rank, to the new peak, to the new fit table's verdicts ("fits": every card's
fit, headroom, fewest GPUs and time, its largest micro-batch and longest sequence still to come) and to the whole
new fit table ("new": the edit made the moment
the page is ready, which can meet the end of the boot: the wheel's unpack, the heap's write to the cache, the
warm-up estimate; "later": a second edit a second after the first recompute is complete, the steady cost of one
recompute); and the bytes
transferred for the load (headers + bodies of every response the page and its worker got; cache hits
count 0) with the number of requests. "cold" is a fresh browser context (empty HTTP cache), "warm" a
later visit in the same context (after about:blank: the first visit's page and worker are gone). Then
the worker's boot stages of the last run (ms after the worker started; the worker itself starts
`worker_created` ms after navigation). "link" is a shared link the site does not contain (another rank in
the query) opened in a fresh context: the time until its own numbers with the fit table, not greyed, are on the
page; "link peak" until its own peak is (the fit table still to come); "computing" until the page says it is
computing that configuration with no other configuration's numbers in sight. "site link" is a link one of the
site's pages contains (the first with a model in it): until its own peak is on the page, prerendered at build
time (scripts/sitebuild/prerender.py), and "site confirmed" until the runtime has confirmed it with the fit
table.

Each figure is printed next to the same run's pure-JS floor: the same page with worker.js replaced by a
trivial worker that answers at once with the build's default estimate (no Pyodide), and as a ratio.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
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

import static_server

ROOT = Path(__file__).resolve().parents[1]
MIME = static_server.MIME


class Handler(SimpleHTTPRequestHandler):
    """A server that sends every file as it is (no Content-Encoding, no caching headers): `--server plain`."""

    extensions_map = {**SimpleHTTPRequestHandler.extensions_map, **MIME}  # noqa: RUF012

    def log_message(self, format: str, *args: Any) -> None:
        pass


SERVERS: dict[str, type[SimpleHTTPRequestHandler]] = {"static": static_server.Handler, "plain": Handler}


CHANGED = "b => document.querySelector('[data-testid=peak-allocated]').dataset.bytes !== b"
# the fit table's verdicts of the configuration whose peak is shown (its searches may still be coming)
VERDICTS = ("b => { const d = document.documentElement.dataset;"
            " return d.tableShown !== undefined && d.tableShown !== b && d.tableShown === d.shown; }")
OWN = ("() => document.documentElement.dataset.shown !== undefined && document.documentElement.dataset.runtime"
       " === 'ready' && !document.getElementById('calc-results').classList.contains('calc-stale')")
# the link's own peak on the page, not greyed (the fit table may still be coming)
RESULTS = "document.getElementById('calc-results')"
OWN_PEAK = ("() => (document.documentElement.dataset.shown !== undefined"
            " || document.documentElement.dataset.prerendered === '1')"
            f" && !{RESULTS}.classList.contains('calc-stale') && !{RESULTS}.classList.contains('calc-pending')")
# "computing your configuration": the status says so over numbers marked as not the link's (hidden since
# prerender.py's branch, greyed before: the same mark on both)
COMPUTING = (f"() => {RESULTS} !== null && {RESULTS}.classList.contains('calc-stale')"
             " && ['loading', 'busy'].includes(document.getElementById('calc-status').dataset.state)")
# The floor: a worker that answers every compute with a fixed estimate (its peak moved by the request id, so
# that a recompute is visible), in the messages worker.js sends.
FLOOR_JS = """const ANSWERS = %s;
const DEFAULT_R = %d;
self.postMessage({ type: "ready", ms: 0, stages: {} });
self.onmessage = (event) => {
  const msg = event.data || {};
  if (msg.type !== "compute") return;
  const r = JSON.parse(msg.config).r;
  const json = ANSWERS[r === DEFAULT_R ? 1 : r < 100 ? 0 : 2];
  self.postMessage({ type: "result", phase: "estimate", id: msg.id, json, ms: 0 });
  self.postMessage({ type: "result", phase: "table", id: msg.id, json, ms: 0 });
  self.postMessage({ type: "result", phase: "full", id: msg.id, json, ms: 0 });
};
"""


def floor_worker(site: Path, lang: str) -> str:
    """The floor worker's source: three fixed answers, the default configuration's, r=64's (for any other rank
    under 100) and r=128's (100 and above), so that each of the two recomputes shows; computed here with the words
    of the built page."""
    from sitebuild import calculator_pages

    page = (site / ("" if lang == "ru" else lang) / "calculator" / "index.html").read_text("utf-8")
    data = json.loads(page.split('id="calc-data">', 1)[1].split("</script>", 1)[0])
    words = {"lang": data["lang"], "text": data["text"]}
    config = calculator_pages.default_config()
    answers = [json.dumps(calculator_pages.bridge().compute(c, True, words))
               for c in ({**config, "r": 64}, config, {**config, "r": 128})]
    return FLOOR_JS % (json.dumps(answers), config["r"])
READY = "() => document.documentElement.dataset.runtime === 'ready'"
FIRST = "() => document.querySelector('[data-testid=peak-allocated][data-bytes]') !== null"
# Poll every 10 ms: wait_for_selector polls on animation frames, which headless Chromium delivers late
# (measured here: 150-500 ms after the page had answered).
POLL = 10
COLUMNS = ("first numbers", "ready in page", "ready (wall)", "new peak", "new fits", "new table", "later peak",
           "later fits", "later table",
           "site link", "site confirmed", "computing", "link peak", "link", "bytes", "requests")
SETTLE = 1.0  # s between the first recompute and the "later" edit: about the least a visitor takes


def transferred(requests: list[Any]) -> tuple[int, int]:
    """Bytes the browser received for these requests (headers + encoded body; 0 for a cache hit), as
    Playwright reports them for the page and its worker."""
    total = count = 0
    for request in requests:
        try:
            sizes = request.sizes()
        except Exception:  # a request whose sizes are gone counts 0
            continue
        if request.response() is not None and not request.response().from_service_worker:
            total += max(0, sizes["responseBodySize"]) + max(0, sizes["responseHeadersSize"])
            count += 1
    return total, count


def listing(requests: list[Any]) -> list[str]:
    """One line per response: wire bytes (headers + encoded body), status, method, Content-Encoding, path."""
    lines = []
    for request in requests:
        response = request.response()
        try:
            sizes = request.sizes()
        except Exception:  # gone: counts 0, as in transferred()
            sizes = {"responseBodySize": 0, "responseHeadersSize": 0}
        wire = max(0, sizes["responseBodySize"]) + max(0, sizes["responseHeadersSize"])
        coding = (response.headers.get("content-encoding") if response else None) or "-"
        path = request.url.split("/", 3)[3] if request.url.count("/") >= 3 else request.url
        lines.append(f"{wire:>12,} {response.status if response else '-':>4} {request.method:5} {coding:5} /{path}")
    return lines


def measure(page: Any, url: str, rank: str) -> tuple[float, ...]:
    """Seconds from navigation to the build-time numbers and to the runtime's first answer (in the page and
    as seen from here); after a rank change, to the recomputed peak, to the recomputed fit table's verdicts and to
    the whole recomputed fit table; the same for a second rank change SETTLE seconds later."""
    start = time.perf_counter()
    page.goto(url, wait_until="commit")
    page.wait_for_function(FIRST, polling=POLL)
    first = time.perf_counter() - start
    page.wait_for_function(READY, polling=POLL, timeout=120_000)
    ready = time.perf_counter() - start
    in_page = int(page.get_attribute("html", "data-ready-at") or 0) / 1000
    edits: list[float] = []
    for value in (rank, str(int(rank) + 100)):
        if edits:
            time.sleep(SETTLE)
        before = page.get_attribute("[data-testid=peak-allocated]", "data-bytes")
        table = page.get_attribute("html", "data-table-shown")
        t0 = time.perf_counter()
        page.fill("#calc-r", value)
        page.wait_for_function(CHANGED, arg=before, polling=POLL, timeout=120_000)
        edits.append(time.perf_counter() - t0)
        page.wait_for_function(VERDICTS, arg=table, polling=POLL, timeout=120_000)
        edits.append(time.perf_counter() - t0)
        page.wait_for_function(READY, polling=POLL, timeout=120_000)
        edits.append(time.perf_counter() - t0)
    return (first, in_page, ready, *edits)


def link_time(browser: Any, url: str, floor: str | None, query: str = "r=48",
              marks: tuple[str, ...] = (COMPUTING, OWN_PEAK, OWN)) -> tuple[float, ...]:
    """Seconds from navigation (the page's own clock) to the first moment each of `marks` held, for a shared link
    in a fresh context: by default the "computing" state, the link's own peak, and all its own numbers with the
    fit table (not greyed). Each is checked at every change of the DOM and every 10 ms; a state that came and went
    unseen counts as NaN."""
    context = browser.new_context()
    if floor is not None:
        context.route("**/assets/calculator/worker.js", lambda route: route.fulfill(
            status=200, content_type="text/javascript", body=floor))
    every = ("() => { const seen = window.__marks || (window.__marks = []); const marks = [" + ", ".join(marks) + "];"
             " marks.forEach((mark, i) => { let held = false; try { held = mark(); } catch (e) {}"
             " if (seen[i] === undefined && held) seen[i] = performance.now(); });"
             " return seen[marks.length - 1] !== undefined; }")
    # Checked on every change of the page's DOM as well (a MutationObserver from before the first byte), so that a
    # state is timed when it appears, not when a poll gets a turn on a main thread busy parsing the page.
    context.add_init_script("(() => { const check = " + every + "; const seen = new MutationObserver(() => {"
                            " if (check()) seen.disconnect(); }); seen.observe(document,"
                            " { subtree: true, childList: true, attributes: true, characterData: true }); })();")
    page = context.new_page()
    page.goto(url + "?" + query, wait_until="commit")
    page.wait_for_function(every, polling=POLL, timeout=120_000)
    seen = page.evaluate("() => window.__marks")
    context.close()
    return tuple(math.nan if t is None else t / 1000 for t in [*seen, *[None] * (len(marks) - len(seen))])


def site_link(site: Path) -> str:
    """The query, as the page writes it, of the first calculator link with a model that the built site contains."""
    from sitebuild import prerender

    return next(written[0] for params, written in prerender.site_queries(site) if "model" in params and len(params) > 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--lang", default="en", choices=("ru", "uz", "en"))
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--server", default="static", choices=tuple(SERVERS),
                        help="static: scripts/static_server.py, what scripts/serve.sh runs (Content-Encoding, "
                             "caching headers); plain: every file as it is, no caching headers")
    parser.add_argument("--site", type=Path, help="an already built site (built with any SITE_URL) instead of a build")
    parser.add_argument("--list", action="store_true", help="print every response of the first cold load")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = str(args.site) if args.site else tmp_dir
        server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(SERVERS[args.server], directory=tmp))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{server.server_address[1]}/"
        env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "SITE_URL": base}
        t0 = time.perf_counter()
        if not args.site:
            subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", tmp], cwd=ROOT, env=env,
                           check=True)
        print(f"build: {time.perf_counter() - t0:.1f} s; server: {args.server}; load average before the runs: "
              + " ".join(f"{x:.2f}" for x in os.getloadavg()))
        url = base + ("" if args.lang == "ru" else f"{args.lang}/") + "calculator/"
        floor_js = floor_worker(Path(tmp), args.lang)
        query = site_link(Path(tmp))
        print(f"site link: ?{query}")
        rows: dict[str, list[tuple[float, ...]]] = {"cold": [], "warm": [], "floor cold": [], "floor warm": []}
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=args.chromium, args=[
                "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync"])
            seen: list[Any] = []
            stages: dict[str, str] = {}

            def record(request: Any) -> None:
                seen.append(request)

            for i in range(args.runs):
                for floor in (None, floor_js):  # interleaved: the same machine load for both
                    prefix = "" if floor is None else "floor "
                    context = browser.new_context()
                    context.on("requestfinished", record)
                    if floor is not None:
                        context.route("**/assets/calculator/worker.js", lambda route: route.fulfill(
                            status=200, content_type="text/javascript", body=floor_js))
                    page = context.new_page()
                    site = link_time(browser, url, floor, query, (OWN_PEAK, OWN))
                    link = (*site, *link_time(browser, url, floor))
                    for kind, rank in (("cold", 32 + i), ("warm", 64 + i)):
                        if kind == "warm":  # a returning visitor: the first visit's page (and worker) is gone
                            page.goto("about:blank")
                        seen.clear()
                        times = measure(page, url, str(rank))
                        rows[prefix + kind].append((*times, *link, *transferred(seen)))
                        if args.list and i == 0 and floor is None and kind == "cold":
                            print(f"responses of the first cold load ({args.server} server):")
                            print("\n".join(listing(seen)))
                        if floor is None:
                            stages[kind] = page.get_attribute("html", "data-boot-stages") or "{}"
                    context.close()
            browser.close()
        server.shutdown()
        server.server_close()
    print(f"{'':11}" + "".join(f"{c:>15}" for c in COLUMNS) + f"   (seconds, bytes; median of {args.runs})")
    def median(cells: list[float]) -> float:
        seen = [c for c in cells if not math.isnan(c)]  # a state no poll caught does not count
        return statistics.median(seen) if seen else math.nan

    medians = {kind: [median([v[i] for v in values]) for i in range(len(COLUMNS))] for kind, values in rows.items()}
    for kind, cells in medians.items():
        print(f"{kind:11}" + "".join(f"{c:15.3f}" for c in cells[:-2]) + f"{cells[-2]:15,.0f}{cells[-1]:15.0f}")
    for kind in ("cold", "warm"):
        ratio = [a / b if b else float("nan") for a, b in zip(medians[kind], medians["floor " + kind], strict=True)]
        print(f"{'x ' + kind:11}" + "".join(f"{r:15.1f}" for r in ratio) + "   (ratio to the pure-JS floor)")
    print("('site link' .. 'link': cold shared links, the same on both rows of a kind)")
    for kind, text in stages.items():
        print(f"boot stages, {kind}, last run: {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
