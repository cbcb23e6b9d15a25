# sitemap.xml with hreflang alternates and each page's real date of last change.
"""mkdocs-static-i18n's sitemap puts the build date in every `<lastmod>`; this one uses the page's
`date_updated` and adds x-default, and is written once after every language is built."""

from __future__ import annotations

import gzip
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from xml.sax.saxutils import escape as xml_escape
from xml.sax.saxutils import quoteattr


@dataclass(frozen=True)
class Entry:
    """One page: its absolute URL, ISO date of last change and {hreflang: absolute URL}."""

    loc: str
    lastmod: str
    alternates: Mapping[str, str] = field(default_factory=dict)


def render(entries: Sequence[Entry]) -> str:
    """The sitemap XML, entries in the given order."""
    lines = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:xhtml="http://www.w3.org/1999/xhtml">',
    ]
    for entry in entries:
        lines += ["  <url>", f"    <loc>{xml_escape(entry.loc)}</loc>", f"    <lastmod>{entry.lastmod}</lastmod>"]
        lines += [
            f'    <xhtml:link rel="alternate" hreflang={quoteattr(lang)} href={quoteattr(url)}/>'
            for lang, url in entry.alternates.items()
        ]
        lines.append("  </url>")
    lines.append("</urlset>")
    return "\n".join(lines) + "\n"


def gzipped(text: str) -> bytes:
    """sitemap.xml.gz, byte-identical between builds (no timestamp)."""
    return gzip.compress(text.encode("utf-8"), mtime=0)
