"""The Content-Security-Policy of the calculator pages: 'self' only, wasm compilation, the hashes of the inline
scripts (moved here from pyodide_runtime.py, which re-exports csp and with_csp)."""

from __future__ import annotations

import base64
import hashlib
import html
import re

INLINE_SCRIPT = re.compile(r"<script(?P<attrs>[^>]*)>(?P<body>.*?)</script>", re.S)
DATA_TYPES = ("application/json", "application/ld+json")


def csp(html_text: str) -> str:
    """The policy for one page: 'self' only, wasm compilation, and the hashes of its inline scripts."""
    hashes = []
    for match in INLINE_SCRIPT.finditer(html_text):
        attrs, body = match.group("attrs"), match.group("body")
        if "src=" in attrs or any(kind in attrs for kind in DATA_TYPES) or not body.strip():
            continue
        digest = base64.b64encode(hashlib.sha256(body.encode("utf-8")).digest()).decode()
        hashes.append(f"'sha256-{digest}'")
    script = " ".join(["'self'", "'wasm-unsafe-eval'", *sorted(set(hashes))])
    return ("default-src 'self'; " f"script-src {script}; worker-src 'self'; connect-src 'self'; "
            "img-src 'self' data:; style-src 'self'; font-src 'self'; object-src 'none'; "
            "base-uri 'self'; form-action 'self'")


def with_csp(html_text: str) -> str:
    meta = f'<meta http-equiv="Content-Security-Policy" content="{html.escape(csp(html_text))}">'
    return re.sub(r"<head>", lambda _: "<head>\n  " + meta, html_text, count=1)
