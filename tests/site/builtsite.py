"""Reading a built site: its pages, their URLs, and what their HTML holds."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

LANGS = ("ru", "uz", "en")
DEFAULT_LANG = "ru"


class PageHtml(HTMLParser):
    """The parts of a page the tests look at."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.jsonld: list[str] = []
        self.path_links: list[str] = []  # hrefs of Material's visible breadcrumbs (nav.md-path)
        self.html_lang = ""
        self._script: list[str] | None = None
        self._in_path = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {key: value or "" for key, value in attrs}
        self.tags.append((tag, values))
        if tag == "html":
            self.html_lang = values.get("lang", "")
        if tag == "script" and values.get("type") == "application/ld+json":
            self._script = []
        if tag == "nav" and "md-path" in values.get("class", "").split():
            self._in_path = 1
        elif self._in_path and tag == "nav":
            self._in_path += 1
        if self._in_path and tag == "a":
            self.path_links.append(values.get("href", ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == "script" and self._script is not None:
            self.jsonld.append("".join(self._script))
            self._script = None
        if tag == "nav" and self._in_path:
            self._in_path -= 1

    def handle_data(self, data: str) -> None:
        if self._script is not None:
            self._script.append(data)

    def links(self, tag: str, **match: str) -> list[dict[str, str]]:
        """Attributes of every `tag` whose attributes include `match` (rel compared word by word)."""
        found = []
        for name, attrs in self.tags:
            if name != tag:
                continue
            if all(value in attrs.get(key, "").split() if key == "rel" else attrs.get(key) == value
                   for key, value in match.items()):
                found.append(attrs)
        return found

    def meta(self, prop: str) -> list[str]:
        return [attrs.get("content", "") for tag, attrs in self.tags
                if tag == "meta" and prop in (attrs.get("property"), attrs.get("name"))]


@dataclass(frozen=True)
class Page:
    path: Path  # the HTML file
    url: str  # site-relative URL ("uz/guides/memory/")
    abs_url: str
    lang: str
    html: PageHtml = field(repr=False)

    @cached_property
    def graph(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.html.jsonld[0])
        return data


@dataclass(frozen=True)
class BuiltSite:
    root: Path
    site_url: str
    log: str

    def lang_of(self, url: str) -> str:
        first = url.split("/", 1)[0]
        return first if first in LANGS and first != DEFAULT_LANG else DEFAULT_LANG

    @cached_property
    def pages(self) -> list[Page]:
        """Every HTML page (index.html files; 404.html is not a page)."""
        found = []
        for path in sorted(self.root.rglob("index.html")):
            rel = path.parent.relative_to(self.root).as_posix()
            url = "" if rel == "." else rel + "/"
            parser = PageHtml()
            parser.feed(path.read_text("utf-8"))
            found.append(Page(path, url, self.site_url + url, self.lang_of(url), parser))
        return found

    def exists(self, site_path: str) -> bool:
        """Whether a site-relative URL path is served by a built file."""
        from sitebuild.urls import site_file

        return (self.root / site_file(site_path)).is_file()
