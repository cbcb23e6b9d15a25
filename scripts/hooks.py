# MkDocs hooks: wire build events to the small pure functions of the sitebuild package (scripts/sitebuild/).
"""Thin glue between MkDocs events and scripts/sitebuild/*.py.

MkDocs puts this file's folder (scripts/) on the import path while it loads it, so `sitebuild` imports as a package.

mkdocs-static-i18n builds every language in turn with the same config object, so each event here runs
once per language (on_config, on_pre_build, page events and on_post_build three times). Page events
collect one record per page and language; the outputs that span languages (Markdown copies, llms.txt,
llms-full.txt, sitemap.xml, the OpenGraph image) are written once, after the last language is built.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit

from mkdocs.plugins import event_priority, get_plugin_logger

from sitebuild import (
    assemble,
    calculator_copy,
    calculator_pages,
    calculator_slots,
    hreflang,
    llmstxt,
    mdcopy,
    navtree,
    ogimage,
    pagemeta,
    prerender,
    sitemap,
    sizing_blocks,
    urls,
)
from sitebuild.assemble import OG_IMAGE

# `[[sizing:...]]` placeholders -> Markdown computed by `sizing`, the calculator's among them. No stand-in:
# a page whose numbers cannot be computed must stop the build, not be published with its placeholders.
BLOCKS = {**sizing_blocks.HANDLERS, **calculator_slots.HANDLERS}

if TYPE_CHECKING:
    from mkdocs.config.defaults import MkDocsConfig
    from mkdocs.structure.files import Files
    from mkdocs.structure.nav import Navigation
    from mkdocs.structure.pages import Page
    from mkdocs.utils.templates import TemplateContext

log = get_plugin_logger("site")

GPU_SECTION, GPU_FOLDER = "GPUs", "gpus"
SECTION_FOLDERS = {"Guides": "guides", GPU_SECTION: GPU_FOLDER}  # nav section -> folder with an index page


@dataclass(frozen=True)
class _Language:
    site_name: str
    description: str
    label: str  # the language's own name, for the links between llms.txt files


@dataclass
class _State:
    """What the page events of every language build leave for the final on_post_build."""

    records: dict[tuple[str, str], pagemeta.PageRecord] = field(default_factory=dict)  # (lang, url) -> record
    languages: dict[str, _Language] = field(default_factory=dict)
    order: dict[str, int] = field(default_factory=dict)  # src_uri -> position in the current nav
    not_found_page: str | None = None  # the default language's 404.html (each language build rewrites it)


_state = _State()


# --- which language is being built --------------------------------------------------------------------


def _i18n(config: MkDocsConfig) -> Any:
    return config.plugins.get("i18n")


def _default(config: MkDocsConfig) -> str:
    i18n = _i18n(config)
    return str(i18n.default_language) if i18n else str(config.theme["language"])


def _lang(config: MkDocsConfig) -> str:
    i18n = _i18n(config)
    return str(i18n.current_language or i18n.default_language) if i18n else _default(config)


def _langs(config: MkDocsConfig) -> list[str]:
    i18n = _i18n(config)
    return [str(lang) for lang in i18n.build_languages] if i18n else [_default(config)]


def _site_url(config: MkDocsConfig) -> str:
    return config.site_url or "http://127.0.0.1:8000/"


def _site(config: MkDocsConfig) -> assemble.Site:
    return assemble.Site(_site_url(config), _langs(config), _default(config))


# --- events --------------------------------------------------------------------------------------------


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Start a fresh collection on the outer build; add the GPU pages and section index pages to the nav."""
    i18n = _i18n(config)
    if not (i18n and i18n.building):
        _state.records.clear()
        _state.languages.clear()
        _state.not_found_page = None
    if config.nav:
        docs, default = Path(config.docs_dir), _default(config)
        config.nav = navtree.extend_section(config.nav, GPU_SECTION, navtree.discover(docs, GPU_FOLDER, default))
        for title, folder in SECTION_FOLDERS.items():
            if (docs / folder / f"index.{default}.md").is_file():
                config.nav = navtree.ensure_first(config.nav, title, f"{folder}/index.md")
    return config


def on_pre_build(config: MkDocsConfig) -> None:
    """Remember this language's site name and description (static-i18n swaps them per language)."""
    lang = _lang(config)
    i18n = _i18n(config)
    label = i18n.get_language_config(lang).name if i18n else lang
    _state.languages[lang] = _Language(config.site_name, config.site_description or "", str(label))


@event_priority(-150)  # after static-i18n (-100) has built this language's navigation
def on_nav(nav: Navigation, config: MkDocsConfig, files: Files) -> Navigation:
    """Remember the nav order of the pages, for llms.txt."""
    _state.order = {page.file.src_uri: i for i, page in enumerate(nav.pages)}
    return nav


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Fill in the computed tables, then keep what the Markdown copy and llms.txt need."""
    lang, default = _lang(config), _default(config)
    markdown = sizing_blocks.render(markdown, lang, BLOCKS)
    problems = pagemeta.problems(page.meta)
    for problem in problems:
        log.warning(f"{page.file.src_uri}: {problem}")
    if problems:
        return markdown
    site_url = _site_url(config)
    prefix = urls.lang_prefix(lang, default)
    src_dir = posixpath.dirname(getattr(page.file, "norm_src_uri", page.file.src_uri))

    def resolve(target: str) -> str | None:
        found = urls.doc_target(src_dir, target)
        file = files.get_file_from_path(found[0]) if found else None
        if found is None or file is None:
            return None
        # A query only means something to the live page (the calculator's configuration): keep it, on the
        # page's HTML address rather than its Markdown copy.
        query = urlsplit(target).query
        copy = file.is_documentation_page() and not query
        url = urls.md_copy_url(file.url, prefix) if copy else file.url
        return urls.absolute(site_url, url) + (f"?{query}" if query else "") + found[1]

    ancestors = list(page.ancestors)
    top = ancestors[-1] if ancestors else None
    _state.records[(lang, page.url)] = pagemeta.PageRecord(
        lang=lang,
        url=page.url,
        base=urls.base_path(page.url, lang, default),
        title=str(page.meta["title"]),
        description=str(page.meta["description"]),
        dates=pagemeta.dates(page.meta),
        section=str(top.title) if top is not None and top.title else "",
        order=_state.order.get(page.file.src_uri, len(_state.order)),
        body=mdcopy.rewrite_links(calculator_copy.copy_markdown(markdown), resolve),
        fallback=getattr(page.file, "locale", lang) != lang,
    )
    return markdown


def on_page_context(context: TemplateContext, page: Page, config: MkDocsConfig,
                    nav: Navigation) -> TemplateContext:
    """Head data of the page: absolute hreflang links, OpenGraph, the Markdown copy, one JSON-LD graph."""
    lang, default, langs = _lang(config), _default(config), _langs(config)
    record = _state.records.get((lang, page.url))
    if record is None:  # front matter problems, already reported
        return context
    site = _site(config)
    links = hreflang.alternates(site.url, record.base, langs, default)
    # static-i18n sets extra.alternate per page (priority 50, before this hook) with relative links.
    entries = getattr(config.extra, "alternate", None) or config.extra.get("alternate") or []
    if entries:
        setattr(config.extra, "alternate", hreflang.switcher(entries, links))  # noqa: B010
    home = (str(nav.homepage.title), nav.homepage.url) if nav.homepage else None
    sections = [(str(s.title), site.absolute(navtree.first_url(s))) for s in reversed(list(page.ancestors))]
    seo, record.jsonld = assemble.head(site, record, config.site_name, home, sections)
    cast("dict[str, Any]", context)["seo"] = seo
    return context


def on_post_template(output_content: str, template_name: str, config: MkDocsConfig) -> str:
    """Keep the default language's 404 page: the root 404.html must not be the last language built."""
    if template_name == "404.html" and _lang(config) == _default(config):
        _state.not_found_page = output_content
    return output_content


@event_priority(-200)  # after static-i18n (-100) has built the other languages
def on_post_build(config: MkDocsConfig) -> None:
    """Once every language is built: Markdown copies, llms.txt, llms-full.txt, sitemap, image."""
    i18n = _i18n(config)
    if i18n and i18n.building:
        return
    site_dir = Path(config.site_dir)
    _write(site_dir / OG_IMAGE, ogimage.image())
    calculator_pages.install_runtime(site_dir, warn=log.info)  # no node_modules: a clear note, not a failure
    # the site's own calculator links, computed now: a visitor who follows one sees its numbers at once
    calculator_slots.add_csp(site_dir, prerender.write(site_dir))
    if _state.not_found_page is not None:
        _write(site_dir / "404.html", _state.not_found_page.encode("utf-8"))

    site = _site(config)
    labels = {lang: info.label for lang, info in _state.languages.items()}
    for lang in site.langs:
        info = _state.languages.get(lang, _Language(config.site_name, config.site_description or "", lang))
        copies: list[str] = []
        records = assemble.in_order(_state.records, lang)
        for record in records:
            copy = assemble.markdown_copy(site, record)
            _write(site_dir / urls.md_copy_url(record.url, site.prefix(lang)), copy.encode("utf-8"))
            if not record.fallback:
                copies.append(copy)
        llms = assemble.llms_txt(site, lang, info.site_name, info.description, records, labels)
        _write(site_dir / site.prefix(lang) / "llms.txt", llms.encode())
        full = llmstxt.full(info.site_name, info.description, copies)
        _write(site_dir / site.prefix(lang) / "llms-full.txt", full.encode())

    xml = sitemap.render(assemble.sitemap_entries(site, _state.records))
    _write(site_dir / "sitemap.xml", xml.encode("utf-8"))
    _write(site_dir / "sitemap.xml.gz", sitemap.gzipped(xml))


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
