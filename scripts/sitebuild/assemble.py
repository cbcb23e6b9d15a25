# What hooks.py assembles from the page records: head data, Markdown copies, llms.txt sections, sitemap.
"""Pure functions over `pagemeta.PageRecord`s: no MkDocs object, no global state, so each is unit-tested.

hooks.py collects the records (one per page and language) and writes what these functions return.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sitebuild import dates, hreflang, jsonld, llmstxt, md_text, mdcopy, sitemap, urls
from sitebuild.pagemeta import PageRecord
from sitebuild.site_text import LANG_IN, OG_LOCALES, text

OG_IMAGE = "assets/images/og.png"

Records = Mapping[tuple[str, str], PageRecord]  # (lang, page url) -> record


@dataclass(frozen=True)
class Site:
    """The facts of a build every assembler needs: absolute base URL, built languages, the default one."""

    url: str  # absolute, ends with "/"
    langs: Sequence[str]
    default: str

    def prefix(self, lang: str) -> str:
        """The language's folder ("" for the default language, "en/" otherwise)."""
        return urls.lang_prefix(lang, self.default)

    def absolute(self, url: str) -> str:
        """A site-relative URL made absolute."""
        return urls.absolute(self.url, url)

    def md_url(self, page_url: str, lang: str) -> str:
        """Absolute URL of a page's Markdown copy."""
        return self.absolute(urls.md_copy_url(page_url, self.prefix(lang)))


def head(site: Site, record: PageRecord, site_name: str, home: tuple[str, str] | None,
         sections: Sequence[tuple[str, str]]) -> tuple[dict[str, Any], str]:
    """The template's `seo` dict of one page and its JSON-LD (pretty, for the Markdown copy).

    `home` is the nav's home page (title, site-relative URL); `sections` its ancestors' (title, absolute
    URL of their first page), outermost first.
    """
    lang = record.lang
    canonical = site.absolute(record.url)
    links = hreflang.alternates(site.url, record.base, list(site.langs), site.default)
    home_crumb = (home[0], site.absolute(home[1])) if home else (site_name, site.url)
    crumbs = jsonld.trail(home_crumb, sections, (record.title, canonical))
    org = jsonld.organization(site_name, site.absolute(site.prefix(lang)))
    image = site.absolute(OG_IMAGE)
    data = jsonld.graph(
        jsonld.breadcrumb_list(canonical, crumbs),
        jsonld.article(url=canonical, headline=record.title, description=record.description, lang=lang,
                       published=record.dates.published, modified=record.dates.updated, org=org, image=image),
    )
    seo = {
        "canonical": canonical,
        "title": record.title,
        "description": record.description,
        "x_default": links[hreflang.X_DEFAULT],
        "md_url": site.md_url(record.url, lang),
        "llms_url": site.absolute(site.prefix(lang) + "llms.txt"),
        "image": image,
        "image_width": jsonld.IMAGE_WIDTH,
        "image_height": jsonld.IMAGE_HEIGHT,
        "og_locale": OG_LOCALES.get(lang, lang),
        "og_locale_alternates": [OG_LOCALES.get(other, other) for other in site.langs if other != lang],
        "jsonld": jsonld.script_text(data),
        "noindex": record.fallback,
        "dates_label": text(lang, "dates"),
        "dates": [  # (label, ISO for <time datetime>, the date as the language writes it)
            (text(lang, key), iso, dates.localized(iso, lang)) for key, iso in (
                ("published", record.dates.published), ("updated", record.dates.updated),
                ("sources_checked", record.dates.sources_checked))
        ],
    }
    return seo, jsonld.pretty(data)


def markdown_copy(site: Site, record: PageRecord) -> str:
    """The page's Markdown copy: front matter, the llms.txt line, the rendered body, its JSON-LD."""
    alternates = {lang: site.md_url(urls.localized_url(record.base, lang, site.default), lang) for lang in site.langs}
    front: dict[str, str | dict[str, str]] = {
        "title": record.title,
        "description": record.description,
        "url": site.absolute(record.url),
        "lang": record.lang,
        "image": site.absolute(OG_IMAGE),
        "alternates": alternates,
        "date_published": record.dates.published,
        "date_updated": record.dates.updated,
        "sources_checked": record.dates.sources_checked,
    }
    llms_line = text(record.lang, "llms_line", url=site.absolute(site.prefix(record.lang) + "llms.txt"))
    shown = " · ".join(f"{text(record.lang, key)}: {dates.localized(iso, record.lang)}" for key, iso in (
        ("published", record.dates.published), ("updated", record.dates.updated),
        ("sources_checked", record.dates.sources_checked)))
    # The dates as the page shows them, in the same quote block as the llms.txt pointer.
    body = md_text.without_markup(record.body, record.lang, site.absolute(record.url))
    return mdcopy.compose(front, f"{llms_line}\n>\n> {shown}", body, record.title, record.jsonld)


def in_order(records: Records, lang: str) -> list[PageRecord]:
    """One language's records in navigation order."""
    return sorted((r for r in records.values() if r.lang == lang), key=lambda r: r.order)


def llms_sections(site: Site, records: Sequence[PageRecord], main: str) -> list[tuple[str, list[llmstxt.Link]]]:
    """Top-level pages first, then one H2 per nav section, in nav order; untranslated pages left out."""
    sections: dict[str, list[llmstxt.Link]] = {main: []}
    for record in records:
        if record.fallback:
            continue
        link = llmstxt.Link(record.title, site.md_url(record.url, record.lang), record.description)
        sections.setdefault(record.section or main, []).append(link)
    return list(sections.items())


def language_links(site: Site, lang: str, labels: Mapping[str, str]) -> list[llmstxt.Link]:
    """Links from one language's llms.txt to the others' (`labels`: each language's own name)."""
    links = []
    for other in site.langs:
        if other == lang:
            continue
        label = labels.get(other, other)
        links.append(llmstxt.Link(label, site.absolute(site.prefix(other) + "llms.txt"),
                                  text(lang, "lang_note", name=LANG_IN.get(lang, LANG_IN["en"]).get(other, label))))
    return links


def llms_txt(site: Site, lang: str, name: str, summary: str, records: Sequence[PageRecord],
             labels: Mapping[str, str]) -> str:
    """One language's llms.txt: its pages by section, the other languages, the full-text file."""
    full_link = llmstxt.Link(text(lang, "full"), site.absolute(site.prefix(lang) + "llms-full.txt"),
                             text(lang, "full_note"))
    sections = llms_sections(site, records, text(lang, "main"))
    sections += [(text(lang, "languages"), language_links(site, lang, labels)), (text(lang, "optional"), [full_link])]
    return llmstxt.render(name, summary, sections)


def sitemap_entries(site: Site, records: Records) -> list[sitemap.Entry]:
    """Every translated page of every language, with the alternates that really exist."""

    def translated(base: str, lang: str) -> bool:
        other = records.get((lang, urls.localized_url(base, lang, site.default)))
        return other is not None and not other.fallback

    entries: list[sitemap.Entry] = []
    for lang in site.langs:
        for record in in_order(records, lang):
            if record.fallback:
                continue
            links = hreflang.alternates(site.url, record.base, list(site.langs), site.default)
            present = {key: url for key, url in links.items()
                       if translated(record.base, site.default if key == hreflang.X_DEFAULT else key)}
            entries.append(sitemap.Entry(site.absolute(record.url), record.dates.updated, present))
    return entries
