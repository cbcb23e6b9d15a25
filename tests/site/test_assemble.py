"""scripts/sitebuild/assemble.py: what hooks.py writes, from page records alone (URLs derived by hand)."""

from __future__ import annotations

import json

import yaml

from sitebuild import assemble, llmstxt
from sitebuild.pagemeta import Dates, PageRecord

SITE = assemble.Site("https://example.org/sub/", ["ru", "uz", "en"], "ru")
DATES = Dates("2026-01-02", "2026-02-03", "2026-02-01")


def record(lang: str, url: str, base: str, *, section: str = "", order: int = 0, fallback: bool = False,
           title: str = "T") -> PageRecord:
    return PageRecord(lang=lang, url=url, base=base, title=title, description=f"about {title}", dates=DATES,
                      section=section, order=order, body="Body [x](https://example.org/sub/x.md)",
                      fallback=fallback)


def test_head_of_an_english_guide() -> None:
    page = record("en", "en/guides/memory/", "guides/memory/", title="Memory")
    seo, pretty = assemble.head(SITE, page, "Site", ("Home", "en/"),
                                [("Guides", "https://example.org/sub/en/guides/")])
    assert seo["canonical"] == "https://example.org/sub/en/guides/memory/"
    assert seo["md_url"] == "https://example.org/sub/en/guides/memory.md"
    assert seo["llms_url"] == "https://example.org/sub/en/llms.txt"
    assert seo["x_default"] == "https://example.org/sub/guides/memory/"  # the Russian page at the root
    assert seo["image"] == "https://example.org/sub/assets/images/og.png"
    assert seo["og_locale"] == "en_US" and seo["og_locale_alternates"] == ["ru_RU", "uz_UZ"]
    assert seo["noindex"] is False
    assert seo["dates"] == [("Published", "2026-01-02", "2 January 2026"), ("Updated", "2026-02-03", "3 February 2026"),
                            ("Sources checked", "2026-02-01", "1 February 2026")]
    graph = json.loads(pretty)["@graph"]
    crumbs = next(node for node in graph if node["@type"] == "BreadcrumbList")["itemListElement"]
    assert [(c["name"], c["item"]) for c in crumbs] == [
        ("Home", "https://example.org/sub/en/"), ("Guides", "https://example.org/sub/en/guides/"),
        ("Memory", "https://example.org/sub/en/guides/memory/")]
    assert json.loads(seo["jsonld"]) == json.loads(pretty)  # the page's <script> holds the copy's graph


def test_markdown_copy_front_matter_points_at_every_language() -> None:
    page = record("uz", "uz/guides/memory/", "guides/memory/", title="Xotira")
    page.jsonld = '{"@graph": []}'
    copy = assemble.markdown_copy(SITE, page)
    front = yaml.safe_load(copy.split("---\n")[1])
    assert front["url"] == "https://example.org/sub/uz/guides/memory/"
    assert front["lang"] == "uz"
    assert front["alternates"] == {"ru": "https://example.org/sub/guides/memory.md",
                                   "uz": "https://example.org/sub/uz/guides/memory.md",
                                   "en": "https://example.org/sub/en/guides/memory.md"}
    assert "https://example.org/sub/uz/llms.txt" in copy
    assert "Body [x](https://example.org/sub/x.md)" in copy and '{"@graph": []}' in copy


def test_llms_txt_sections_in_nav_order_without_untranslated_pages() -> None:
    records = {
        ("en", "en/"): record("en", "en/", "", order=0, title="Home"),
        ("en", "en/guides/b/"): record("en", "en/guides/b/", "guides/b/", section="Guides", order=2, title="B"),
        ("en", "en/guides/a/"): record("en", "en/guides/a/", "guides/a/", section="Guides", order=1, title="A"),
        ("en", "en/faq/"): record("en", "en/faq/", "faq/", order=3, fallback=True, title="FAQ"),
        ("ru", ""): record("ru", "", "", title="Главная"),
    }
    ordered = assemble.in_order(records, "en")
    assert [r.title for r in ordered] == ["Home", "A", "B", "FAQ"]
    text = assemble.llms_txt(SITE, "en", "Site", "Sizes.", ordered, {"ru": "Русский", "uz": "O‘zbekcha"})
    assert llmstxt.problems(text) == []
    assert llmstxt.links(text) == [
        "https://example.org/sub/en/index.md",
        "https://example.org/sub/en/guides/a.md", "https://example.org/sub/en/guides/b.md",
        "https://example.org/sub/llms.txt", "https://example.org/sub/uz/llms.txt",
        "https://example.org/sub/en/llms-full.txt",
    ]
    assert "[Русский](https://example.org/sub/llms.txt)" in text


def test_sitemap_lists_only_alternates_that_exist() -> None:
    records = {
        ("ru", "a/"): record("ru", "a/", "a/"),
        ("en", "en/a/"): record("en", "en/a/", "a/"),
        ("uz", "uz/a/"): record("uz", "uz/a/", "a/", fallback=True),  # built from the Russian source
    }
    entries = assemble.sitemap_entries(SITE, records)
    assert [e.loc for e in entries] == ["https://example.org/sub/a/", "https://example.org/sub/en/a/"]
    assert entries[0].lastmod == "2026-02-03"
    assert entries[0].alternates == {"ru": "https://example.org/sub/a/", "en": "https://example.org/sub/en/a/",
                                     "x-default": "https://example.org/sub/a/"}


def test_language_links_name_the_other_language_in_the_readers_language() -> None:
    labels = {"ru": "Русский", "uz": "O‘zbekcha", "en": "English"}
    en = {link.title: link.notes for link in assemble.language_links(SITE, "en", labels)}
    assert en == {"Русский": "the site's index in Russian", "O‘zbekcha": "the site's index in Uzbek"}
    uz = [link.notes for link in assemble.language_links(SITE, "uz", labels)]
    assert uz == ["sayt mundarijasi rus tilida", "sayt mundarijasi ingliz tilida"]
    ru = [link.notes for link in assemble.language_links(SITE, "ru", labels)]
    assert ru == ["оглавление сайта на узбекском", "оглавление сайта на английском"]
