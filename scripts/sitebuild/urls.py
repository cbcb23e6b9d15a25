# URL arithmetic of the site: language prefixes, absolute URLs, Markdown copies, links between pages.
"""Pure functions on the URLs MkDocs gives pages (`page.url`: "", "guides/memory/", "uz/guides/memory/").

The default language lives at the site root, every other language under `<lang>/`, and a page has the
same path below its language prefix in every language (suffix layout of mkdocs-static-i18n).
"""

from __future__ import annotations

import posixpath
from urllib.parse import urljoin, urlsplit


def lang_prefix(lang: str, default: str) -> str:
    """The path prefix of a language: "" for the default language, "uz/" for Uzbek."""
    return "" if lang == default else f"{lang}/"


def base_path(url: str, lang: str, default: str) -> str:
    """The language-neutral path of a page URL: "uz/guides/memory/" -> "guides/memory/"."""
    prefix = lang_prefix(lang, default)
    if prefix and (url == prefix or url.startswith(prefix)):
        return url[len(prefix):]
    return url


def localized_url(base: str, lang: str, default: str) -> str:
    """The URL of the same page in another language: ("guides/memory/", "en") -> "en/guides/memory/"."""
    return lang_prefix(lang, default) + base


def absolute(site_url: str, url: str) -> str:
    """An absolute URL under `site_url` (which ends with "/") for a site-relative URL."""
    if urlsplit(url).scheme:
        return url
    return site_url + url.lstrip("/")


def md_copy_url(url: str, prefix: str) -> str:
    """Where the Markdown copy of a page lives: the page URL with ".md" appended.

    "guides/memory/" -> "guides/memory.md"; a language home ("" or "uz/") -> "index.md" / "uz/index.md",
    so each language's copies stay under its own prefix.
    """
    if url in ("", "./", prefix):
        return prefix + "index.md"
    return url.rstrip("/") + ".md"


def doc_target(src_dir: str, target: str) -> tuple[str, str] | None:
    """Split a relative link of a Markdown source into (docs path, "#fragment"), or None if not relative.

    `src_dir` is the directory of the source file inside docs/ ("" at the top). External links,
    absolute paths, pure fragments and links that leave docs/ give None.
    """
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or target.startswith(("/", "#")) or not parts.path:
        return None
    path = posixpath.normpath(posixpath.join(src_dir, parts.path))
    if path == ".." or path.startswith("../"):
        return None
    fragment = f"#{parts.fragment}" if parts.fragment else ""
    return path, fragment


def site_file(url_path: str) -> str:
    """The file a server sends for a site-relative URL path: "" -> "index.html", "a/" -> "a/index.html"."""
    path = url_path.split("#", 1)[0].split("?", 1)[0].lstrip("/")
    if path == "" or path.endswith("/"):
        return path + "index.html"
    return path


def local_path(site_url: str, page_url: str, href: str) -> str | None:
    """The site-relative URL path a link points to ("en/guides/memory/"), or None when it leaves the site.

    `page_url` is the absolute URL of the document holding the link; `href` may be relative,
    root-relative or absolute. Query and fragment are dropped.
    """
    target = urlsplit(urljoin(page_url, href))
    root = urlsplit(site_url)
    if (target.scheme, target.netloc) != (root.scheme, root.netloc) or not target.path.startswith(root.path):
        return None
    return target.path[len(root.path):]
