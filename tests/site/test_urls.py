"""scripts/sitebuild/urls.py: URL arithmetic of the three-language site."""

from __future__ import annotations

import pytest

from sitebuild.urls import (
    absolute,
    base_path,
    doc_target,
    lang_prefix,
    local_path,
    localized_url,
    md_copy_url,
    site_file,
)

SITE = "https://example.org/sub/"


@pytest.mark.parametrize(("lang", "expected"), [("ru", ""), ("uz", "uz/"), ("en", "en/")])
def test_lang_prefix(lang: str, expected: str) -> None:
    assert lang_prefix(lang, "ru") == expected


@pytest.mark.parametrize(("url", "lang", "expected"), [
    ("uz/guides/memory/", "uz", "guides/memory/"),
    ("uz/", "uz", ""),
    ("guides/memory/", "ru", "guides/memory/"),
    ("", "ru", ""),
    ("uzbek/", "uz", "uzbek/"),  # a prefix is a whole path segment
])
def test_base_path(url: str, lang: str, expected: str) -> None:
    assert base_path(url, lang, "ru") == expected


def test_localized_url_round_trips_base_path() -> None:
    for lang in ("ru", "uz", "en"):
        url = localized_url("gpus/t4-16gb/", lang, "ru")
        assert base_path(url, lang, "ru") == "gpus/t4-16gb/"


@pytest.mark.parametrize(("url", "prefix", "expected"), [
    ("en/guides/memory/", "en/", "en/guides/memory.md"),
    ("guides/memory/", "", "guides/memory.md"),
    ("", "", "index.md"),
    ("uz/", "uz/", "uz/index.md"),
    ("gpus/", "", "gpus.md"),
    ("page.html", "", "page.html.md"),
])
def test_md_copy_url(url: str, prefix: str, expected: str) -> None:
    assert md_copy_url(url, prefix) == expected


def test_absolute() -> None:
    assert absolute(SITE, "uz/") == "https://example.org/sub/uz/"
    assert absolute(SITE, "") == SITE
    assert absolute(SITE, "https://other.org/x") == "https://other.org/x"


@pytest.mark.parametrize(("src_dir", "target", "expected"), [
    ("guides", "memory.md", ("guides/memory.md", "")),
    ("guides", "../gpus/index.md#table", ("gpus/index.md", "#table")),
    ("", "guides/trial-run.md", ("guides/trial-run.md", "")),
    ("guides", "https://pytorch.org/docs", None),
    ("guides", "#anchor", None),
    ("guides", "/absolute.md", None),
    ("", "../outside.md", None),
    ("guides", "mailto:x@example.org", None),
])
def test_doc_target(src_dir: str, target: str, expected: tuple[str, str] | None) -> None:
    assert doc_target(src_dir, target) == expected


@pytest.mark.parametrize(("path", "expected"), [
    ("", "index.html"), ("uz/", "uz/index.html"), ("gpus.md", "gpus.md"), ("a/b/#x", "a/b/index.html"),
    ("/llms.txt?x=1", "llms.txt"),
])
def test_site_file(path: str, expected: str) -> None:
    assert site_file(path) == expected


@pytest.mark.parametrize(("page", "href", "expected"), [
    (SITE + "uz/guides/memory/", "../../../assets/x.css", "assets/x.css"),
    (SITE + "uz/guides/memory/", "../trial-run/#top", "uz/guides/trial-run/"),
    (SITE, "/sub/en/", "en/"),
    (SITE, "https://example.org/sub/llms.txt", "llms.txt"),
    (SITE, "https://example.org/elsewhere/", None),
    (SITE, "https://pytorch.org/", None),
    (SITE, "mailto:x@example.org", None),
])
def test_local_path(page: str, href: str, expected: str | None) -> None:
    assert local_path(SITE, page, href) == expected
