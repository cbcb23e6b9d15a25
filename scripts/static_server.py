"""The built site over HTTP as a static host serves it: MIME types, compression and caching headers.

    python scripts/static_server.py [--bind 127.0.0.1] [--port 8000] [DIR]      (scripts/serve.sh runs it)

What a visitor's browser gets, and what a host (nginx with gzip_static/brotli_static, Caddy's
`file_server { precompressed br gzip }`, Netlify, Cloudflare Pages, GitHub Pages) would also send:
- `X.br` / `X.gz` written next to `X` by the build (the calculator's runtime: pyodide_runtime.precompress)
  are sent for `X` with `Content-Encoding` when the request's Accept-Encoding allows them;
- any other text (HTML, CSS, JS, JSON, SVG, XML, wasm) is gzip-compressed on the fly, as those hosts do;
- `Vary: Accept-Encoding` on every compressible answer, an `ETag`, and 304 for a matching If-None-Match;
- `Cache-Control`: names with a content hash (Material's `main.<hash>.min.css`) are immutable for a year;
  everything else is `no-cache` (kept, but revalidated on every visit: its name does not change when
  its bytes do, e.g. the memory snapshot after an engine change).
"""

from __future__ import annotations

import argparse
import contextlib
import email.utils
import gzip
import hashlib
import io
import os
import re
import shutil
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

MIME = {".wasm": "application/wasm", ".mjs": "text/javascript", ".js": "text/javascript",
        ".json": "application/json", ".whl": "application/zip", ".zip": "application/zip",
        ".md": "text/markdown; charset=utf-8", ".txt": "text/plain; charset=utf-8",
        ".html": "text/html; charset=utf-8", ".bin": "application/octet-stream"}
COMPRESSIBLE = re.compile(r"^(text/|application/(javascript|json|wasm|xml|ld\+json|manifest\+json)|image/svg)")
HASHED = re.compile(r"\.[0-9a-f]{8,}\.min\.(css|js)$")
PRECOMPRESSED = (("br", ".br"), ("gzip", ".gz"))  # preferred first, as nginx/Caddy do


def accepted(header: str | None) -> set[str]:
    """The codings an Accept-Encoding header allows (q=0 refuses one)."""
    out = set()
    for part in (header or "").split(","):
        name, _, params = part.strip().partition(";")
        q = params.strip()
        try:
            refused = q.startswith("q=") and float(q[2:]) == 0
        except ValueError:
            refused = True  # a malformed weight: not offered
        if name and not refused:
            out.add(name.strip().lower())
    return out


def cache_control(path: str) -> str:
    """The Cache-Control header for a request path."""
    return "public, max-age=31536000, immutable" if HASHED.search(path) else "no-cache"


class Handler(SimpleHTTPRequestHandler):
    """SimpleHTTPRequestHandler with precompressed siblings, on-the-fly gzip, ETag and Cache-Control."""

    extensions_map = {**SimpleHTTPRequestHandler.extensions_map, **MIME}  # noqa: RUF012
    protocol_version = "HTTP/1.1"
    _gzipped: ClassVar[dict[tuple[str, float], bytes]] = {}  # (file, mtime) -> gzip body, filled on demand

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def send_head(self) -> Any:
        path = self.translate_path(self.path)
        if os.path.isdir(path) and self.path.split("?")[0].endswith("/"):
            path = os.path.join(path, "index.html")
        if not os.path.isfile(path):
            return super().send_head()  # the redirect to a folder's "/", listings, 404: the stock behaviour
        ctype = self.guess_type(path)
        codings = accepted(self.headers.get("Accept-Encoding"))
        body_path, coding = path, None
        for name, suffix in PRECOMPRESSED:
            if name in codings and os.path.isfile(path + suffix):
                body_path, coding = path + suffix, name
                break
        stat = os.stat(body_path)
        data: bytes | None = None
        if coding is None and "gzip" in codings and COMPRESSIBLE.match(ctype):
            key = (path, stat.st_mtime)
            if key not in self._gzipped:
                self._gzipped[key] = gzip.compress(Path(path).read_bytes(), compresslevel=6, mtime=0)
            data, coding = self._gzipped[key], "gzip"
        tag = '"' + hashlib.sha1(f"{body_path}:{stat.st_mtime_ns}:{stat.st_size}:{coding}".encode()).hexdigest()[:20]
        tag += '"'
        if tag in (self.headers.get("If-None-Match") or ""):
            self.send_response(304)
            self._common(ctype, coding, tag, stat.st_mtime)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        self.send_response(200)
        self._common(ctype, coding, tag, stat.st_mtime)
        self.send_header("Content-Length", str(len(data) if data is not None else stat.st_size))
        self.end_headers()
        return io.BytesIO(data) if data is not None else open(body_path, "rb")  # do_GET closes it

    def _common(self, ctype: str, coding: str | None, tag: str, mtime: float) -> None:
        self.send_header("Content-Type", ctype)
        if coding:
            self.send_header("Content-Encoding", coding)
        if COMPRESSIBLE.match(ctype) or coding:
            self.send_header("Vary", "Accept-Encoding")
        self.send_header("ETag", tag)
        self.send_header("Last-Modified", email.utils.formatdate(mtime, usegmt=True))
        self.send_header("Cache-Control", cache_control(self.path.split("?")[0]))

    def copyfile(self, source: Any, outputfile: Any) -> None:
        shutil.copyfileobj(source, outputfile, 1 << 20)

    def handle(self) -> None:
        # A visitor who leaves mid-download resets the connection: nothing to report (no traceback on the console).
        with contextlib.suppress(ConnectionResetError, BrokenPipeError):
            super().handle()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("directory", nargs="?", default="site")
    parser.add_argument("--bind", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    server = ThreadingHTTPServer((args.bind, args.port), partial(Handler, directory=args.directory))
    port = server.server_address[1]  # the one bound: --port 0 lets the system pick a free one
    print(f"Serving {args.directory}/ at http://{args.bind}:{port}/ (Ctrl-C stops it)", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
