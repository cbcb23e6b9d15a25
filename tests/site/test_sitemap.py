"""scripts/sitebuild/sitemap.py: sitemap.xml with hreflang alternates and real lastmod dates."""

from __future__ import annotations

import gzip
import xml.etree.ElementTree as ET

from sitebuild.sitemap import Entry, gzipped, render

NS = {"s": "http://www.sitemaps.org/schemas/sitemap/0.9", "x": "http://www.w3.org/1999/xhtml"}


def test_render_parses_with_alternates_and_lastmod() -> None:
    xml = render([Entry("https://x.org/a/?q=1&r=2", "2026-11-29", {"ru": "https://x.org/a/", "x-default": "https://x.org/a/"}),
                  Entry("https://x.org/uz/a/", "2026-10-01", {})])
    root = ET.fromstring(xml)
    urls = root.findall("s:url", NS)
    assert [u.findtext("s:loc", namespaces=NS) for u in urls] == ["https://x.org/a/?q=1&r=2", "https://x.org/uz/a/"]
    assert [u.findtext("s:lastmod", namespaces=NS) for u in urls] == ["2026-11-29", "2026-10-01"]
    assert [(a.get("rel"), a.get("hreflang")) for a in urls[0].findall("x:link", NS)] == [
        ("alternate", "ru"), ("alternate", "x-default")]


def test_gzip_is_reproducible() -> None:
    assert gzipped("<x/>") == gzipped("<x/>")
    assert gzip.decompress(gzipped("<x/>")) == b"<x/>"
