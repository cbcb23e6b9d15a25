"""Invariants of the built site (one `mkdocs build --strict` per session, see conftest.py)."""

from __future__ import annotations

import json
import re
import struct
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from urllib.parse import urljoin

import jsonschema
import pytest

from sitebuild import llmstxt
from sitebuild.urls import local_path, md_copy_url
from tests.site.builtsite import DEFAULT_LANG, LANGS, BuiltSite, Page

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SCHEMA = json.loads((Path(__file__).parent / "jsonld.schema.json").read_text("utf-8"))
FRONT_KEYS = ("title", "description", "url", "lang", "image", "alternates", "date_published", "date_updated",
              "sources_checked")
MD_LINK = re.compile(r"\]\(\s*<?([^)\s<>]+)")
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def prefix(lang: str) -> str:
    return "" if lang == DEFAULT_LANG else f"{lang}/"


def md_copy(site: BuiltSite, page: Page) -> str:
    return (site.root / md_copy_url(page.url, prefix(page.lang))).read_text("utf-8")


def markdown_links(text: str) -> list[str]:
    """Link targets outside code fences, plus the bare URLs of front matter and the llms.txt line."""
    found: list[str] = []
    fence = None
    for line in text.split("\n"):
        opening = FENCE.match(line)
        if fence:
            if opening and opening.group(1)[0] == fence[0]:
                fence = None
            continue
        if opening:
            fence = opening.group(1)
            continue
        found += MD_LINK.findall(re.sub(r"`[^`]*`", "", line))
        found += re.findall(r"^\s*(?:url|image|ru|uz|en):\s*\"(https?://[^\"]+)\"", line)
        found += re.findall(r"^> .*?(https?://\S+)$", line)
    return found


# --- the build -----------------------------------------------------------------------------------------


def test_strict_build_logs_no_warning(built_site: BuiltSite) -> None:
    assert not [line for line in built_site.log.splitlines() if line.startswith(("WARNING", "ERROR"))]


def test_every_source_page_exists_in_three_languages() -> None:
    stems: dict[str, set[str]] = {}
    for path in DOCS.rglob("*.md"):
        match = re.fullmatch(r"(.+)\.(\w+)\.md", path.relative_to(DOCS).as_posix())
        assert match and match.group(2) in LANGS, f"{path}: not named page.<ru|uz|en>.md"
        stems.setdefault(match.group(1), set()).add(match.group(2))
    assert stems
    missing = {stem: sorted(set(LANGS) - langs) for stem, langs in stems.items() if set(LANGS) - langs}
    assert not missing, f"untranslated pages: {missing}"


def test_uzbek_uses_one_apostrophe_convention() -> None:
    # o‘, g‘ with U+2018 and the tutuq belgisi with U+2019 everywhere (not the modifier letters U+02BB/U+02BC,
    # nor the ASCII quote): one spelling, so search and copy-paste find every form of a word.
    sources = [*DOCS.rglob("*.uz.md"), *(ROOT / "scripts" / "sitebuild").glob("*.py"), ROOT / "mkdocs.yml"]
    for path in sources:
        text = path.read_text("utf-8")
        assert "\u02bb" not in text and "\u02bc" not in text, path
        if path.name.endswith(".uz.md"):
            assert not re.search(r"\b[oOgG]'[a-z]", text), path


def test_every_built_page_exists_in_three_languages(built_site: BuiltSite) -> None:
    bases = Counter(page.url.removeprefix(prefix(page.lang)) for page in built_site.pages)
    assert len(bases) >= 10
    assert {base for base, count in bases.items() if count != len(LANGS)} == set()
    for page in built_site.pages:
        assert page.html.html_lang == page.lang, page.url


# --- links ---------------------------------------------------------------------------------------------


def test_internal_links_in_html_resolve(built_site: BuiltSite) -> None:
    broken = []
    for page in built_site.pages:
        for tag, attrs in page.html.tags:
            for key in ("href", "src"):
                href = attrs.get(key)
                if not href or href.startswith("#"):
                    continue
                target = local_path(built_site.site_url, page.abs_url, href)
                if target is not None and not built_site.exists(target):
                    broken.append(f"{page.url}: <{tag} {key}={href!r}>")
    assert not broken, "\n".join(broken[:40])


def test_llms_txt_and_markdown_copy_links_resolve(built_site: BuiltSite) -> None:
    broken = []
    documents = [built_site.root / prefix(lang) / name for lang in LANGS for name in ("llms.txt", "llms-full.txt")]
    documents += [built_site.root / md_copy_url(page.url, prefix(page.lang)) for page in built_site.pages]
    for document in documents:
        doc_url = built_site.site_url + document.relative_to(built_site.root).as_posix()
        for href in markdown_links(document.read_text("utf-8")):
            if href.startswith("#"):
                continue
            target = local_path(built_site.site_url, doc_url, href)
            if target is not None and not built_site.exists(target):
                broken.append(f"{doc_url}: {href}")
    assert not broken, "\n".join(broken[:40])


def test_gpu_pages_open_the_calculator_with_their_gpu(built_site: BuiltSite) -> None:
    # The live page takes the query; the Markdown copy links there too, not to the calculator's copy.
    html = (built_site.root / "en" / "gpus" / "h100-sxm-80gb" / "index.html").read_text("utf-8")
    assert 'href="../../calculator/?gpu=H100-SXM-80GB"' in html
    copy = (built_site.root / "en" / "gpus" / "h100-sxm-80gb.md").read_text("utf-8")
    assert f"({built_site.site_url}en/calculator/?gpu=H100-SXM-80GB)" in copy


def test_no_asset_from_another_origin(built_site: BuiltSite) -> None:
    """Nothing the browser loads comes from elsewhere: HTML src/href (links to read, <a>, excepted), CSS url()."""
    site = built_site.site_url
    foreign = []
    for path in built_site.root.rglob("*"):
        if path.suffix not in (".html", ".css", ".js") or not path.is_file():
            continue
        text = path.read_text("utf-8", errors="replace")
        found = re.findall(r"url\(\s*['\"]?(https?://[^)'\"\s]+)", text)
        found += re.findall(r"@import\s+['\"](https?://[^'\"]+)", text)
        if path.suffix == ".html":
            found += [url for tag, attr, url in re.findall(
                r"<(\w+)\b[^>]*?\s(src|href|srcset|poster|data)=[\"']?(https?://[^\"'\s>]+)", text) if tag != "a"]
        else:
            found += re.findall(r"\b(?:src|href)\s*=\s*['\"`](https?://[^'\"`]+)", text)
        foreign += [f"{path.relative_to(built_site.root)}: {url}" for url in found if not url.startswith(site)]
    assert not foreign, "\n".join(foreign[:40])
    for page in built_site.pages:  # Material loads mermaid from unpkg.com only for .mermaid elements
        assert not any("mermaid" in attrs.get("class", "").split() for _, attrs in page.html.tags), page.url


# --- head: canonical, hreflang, OpenGraph ----------------------------------------------------------------


def hreflang_set(page: Page) -> dict[str, str]:
    return {a["hreflang"]: a["href"] for a in page.html.links("link", rel="alternate") if a.get("hreflang")}


def test_hreflang_absolute_complete_and_reciprocal(built_site: BuiltSite) -> None:
    by_url = {page.abs_url: page for page in built_site.pages}
    for page in built_site.pages:
        links = hreflang_set(page)
        assert set(links) == {*LANGS, "x-default"}, page.url
        assert all(href.startswith(built_site.site_url) for href in links.values()), links
        assert links[page.lang] == page.abs_url
        assert links["x-default"] == links[DEFAULT_LANG]
        for lang in LANGS:
            assert hreflang_set(by_url[links[lang]]) == links, f"{page.url} <-> {links[lang]}"


def test_canonical_opengraph_and_markdown_link(built_site: BuiltSite) -> None:
    for page in built_site.pages:
        canonical = [a["href"] for a in page.html.links("link", rel="canonical")]
        assert canonical == [page.abs_url]
        assert page.html.meta("og:url") == [page.abs_url]
        for prop in ("og:title", "og:description", "og:image", "og:type", "og:locale", "og:site_name"):
            assert len(page.html.meta(prop)) == 1 and page.html.meta(prop)[0].strip(), (page.url, prop)
        assert len(page.html.meta("og:locale:alternate")) == len(LANGS) - 1
        markdown = page.html.links("link", rel="alternate", type="text/markdown")
        assert [a["href"] for a in markdown] == [built_site.site_url + md_copy_url(page.url, prefix(page.lang))]


def test_opengraph_image_is_a_1200x630_png(built_site: BuiltSite) -> None:
    images = {page.html.meta("og:image")[0] for page in built_site.pages}
    assert len(images) == 1
    data = (built_site.root / images.pop().removeprefix(built_site.site_url)).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", data[16:24]) == (1200, 630)


# --- JSON-LD -------------------------------------------------------------------------------------------


def test_exactly_one_jsonld_block_valid_against_the_schema(built_site: BuiltSite) -> None:
    validator = jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker())
    for page in built_site.pages:
        assert len(page.html.jsonld) == 1, page.url
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(page.graph)]
        assert not errors, f"{page.url}: {errors}"


def test_jsonld_matches_the_page(built_site: BuiltSite) -> None:
    for page in built_site.pages:
        crumbs, article = page.graph["@graph"]
        assert article["url"] == article["mainEntityOfPage"]["@id"] == page.abs_url
        assert article["inLanguage"] == page.lang
        assert article["headline"] == page.html.meta("og:title")[0]
        assert article["description"] == page.html.meta("description")[0]
        assert article["image"]["url"] == page.html.meta("og:image")[0]
        items = crumbs["itemListElement"]
        assert [item["position"] for item in items] == list(range(1, len(items) + 1))
        assert items[-1]["item"] == page.abs_url
        # The trail is the visible breadcrumb path (Material's nav.md-path) followed by the page itself.
        visible = [urljoin(page.abs_url, href) for href in page.html.path_links] + [page.abs_url]
        if not page.html.path_links:
            visible = [built_site.site_url + prefix(page.lang), page.abs_url]
        merged = [url for i, url in enumerate(visible) if i == 0 or url != visible[i - 1]]
        assert [item["item"] for item in items] == merged, page.url


def test_visible_dates_match_the_jsonld(built_site: BuiltSite) -> None:
    for page in built_site.pages:
        article = page.graph["@graph"][1]
        times = [a["datetime"] for a in page.html.links("time") if "datetime" in a]
        assert len(times) == 3, page.url
        assert times[:2] == [article["datePublished"], article["dateModified"]]
        assert times[0] <= times[1]


# --- Markdown copies, llms.txt, sitemap -------------------------------------------------------------------


def test_markdown_copies_start_with_front_matter_and_end_with_the_jsonld(built_site: BuiltSite) -> None:
    for page in built_site.pages:
        text = md_copy(built_site, page)
        assert text.startswith("---\n"), page.url
        head = text.split("\n---\n", 1)[0].splitlines()[1:]
        assert [line.split(":", 1)[0] for line in head if not line.startswith(" ")] == list(FRONT_KEYS)
        assert f'url: "{page.abs_url}"' in head
        llms = built_site.site_url + prefix(page.lang) + "llms.txt"
        assert any(line.startswith("> ") and line.endswith(llms) for line in text.splitlines()[:len(head) + 4])
        match = re.search(r"\n(`{3,})json\n(.*)\n\1\n\Z", text, re.S)
        assert match, f"{page.url}: the copy does not end with a ```json fence"
        assert json.loads(match.group(2)) == page.graph
        assert "[[sizing:" not in text, f"{page.url}: a placeholder was not computed"


def test_llms_txt_per_language_follows_the_format(built_site: BuiltSite) -> None:
    for lang in LANGS:
        text = (built_site.root / prefix(lang) / "llms.txt").read_text("utf-8")
        assert llmstxt.problems(text) == [], lang
        listed = llmstxt.links(text)
        for page in (p for p in built_site.pages if p.lang == lang):
            assert built_site.site_url + md_copy_url(page.url, prefix(lang)) in listed, page.url
        assert all(url.startswith(built_site.site_url) for url in listed)


def test_llms_full_holds_every_page_of_its_language(built_site: BuiltSite) -> None:
    for lang in LANGS:
        full = (built_site.root / prefix(lang) / "llms-full.txt").read_text("utf-8")
        assert full.startswith("# ")
        for page in (p for p in built_site.pages if p.lang == lang):
            assert md_copy(built_site, page).strip() in full, page.url


def test_sitemap_lists_every_page_with_alternates_and_its_update_date(built_site: BuiltSite) -> None:
    ns = {"s": "http://www.sitemaps.org/schemas/sitemap/0.9", "x": "http://www.w3.org/1999/xhtml"}
    root = ET.parse(built_site.root / "sitemap.xml").getroot()
    entries = {url.findtext("s:loc", namespaces=ns): url for url in root.findall("s:url", ns)}
    assert set(entries) == {page.abs_url for page in built_site.pages}
    for page in built_site.pages:
        entry = entries[page.abs_url]
        assert entry.findtext("s:lastmod", namespaces=ns) == page.graph["@graph"][1]["dateModified"]
        links = {a.get("hreflang"): a.get("href") for a in entry.findall("x:link", ns)}
        assert links == hreflang_set(page)


@pytest.mark.parametrize("name", ["404.html", "search/search_index.json", "sitemap.xml.gz"])
def test_site_files_present(built_site: BuiltSite, name: str) -> None:
    assert (built_site.root / name).is_file()


def test_root_404_page_is_in_the_default_language(built_site: BuiltSite) -> None:
    assert f'<html lang="{DEFAULT_LANG}"' in (built_site.root / "404.html").read_text("utf-8")
