# The Markdown copy's body without page markup: each inline SVG chart becomes one line naming it and the page.
from __future__ import annotations

import html
import re

SVG = re.compile(r"<svg\b[^>]*?aria-label=\"([^\"]*)\"[^>]*>.*?</svg>", re.S)
WORDS = {"ru": "график — на странице", "uz": "grafik — sahifada", "en": "chart on the page"}


def without_markup(body: str, lang: str, page_url: str) -> str:
    """`body` with every inline `<svg>` chart replaced by "*title (chart on the page: URL)*"."""
    word = WORDS.get(lang, WORDS["en"])
    return SVG.sub(lambda m: f"*{html.unescape(m.group(1))} ({word}: <{page_url}>)*", body)
