# schema.org JSON-LD of a page: one @graph with its BreadcrumbList and its Article.
"""Pure builders for the structured data of a page (Google: Article, BreadcrumbList).

Only facts shown on the page go in: its title, description, dates, the visible breadcrumb trail.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

CONTEXT = "https://schema.org"
IMAGE_WIDTH, IMAGE_HEIGHT = 1200, 630  # the OpenGraph image the build writes (1.91:1)


def organization(name: str, url: str) -> dict[str, Any]:
    """The project as an Organization (author and publisher of every page)."""
    return {"@type": "Organization", "name": name, "url": url}


def trail(home: tuple[str, str], sections: Sequence[tuple[str, str]], page: tuple[str, str]) -> list[tuple[str, str]]:
    """The breadcrumb trail (name, absolute URL): home, the visible sections, then the page itself.

    A crumb whose URL repeats the one before (a section whose first page is this page, the home page
    itself) is merged into it, keeping the later, more specific name.
    """
    crumbs: list[tuple[str, str]] = []
    for name, url in [home, *sections, page]:
        if crumbs and crumbs[-1][1] == url:
            crumbs[-1] = (name, url)
        else:
            crumbs.append((name, url))
    return crumbs


def breadcrumb_list(page_url: str, crumbs: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """A BreadcrumbList with 1-based positions and an absolute `item` on every crumb."""
    return {
        "@type": "BreadcrumbList",
        "@id": f"{page_url}#breadcrumb",
        "itemListElement": [
            {"@type": "ListItem", "position": i, "name": name, "item": url}
            for i, (name, url) in enumerate(crumbs, start=1)
        ],
    }


def article(*, url: str, headline: str, description: str, lang: str, published: str, modified: str,
            org: dict[str, Any], image: str) -> dict[str, Any]:
    """The page as an Article; `url` is the canonical URL, dates are ISO strings."""
    return {
        "@type": "Article",
        "@id": f"{url}#article",
        "headline": headline,
        "description": description,
        "inLanguage": lang,
        "datePublished": published,
        "dateModified": modified,
        "author": org,
        "publisher": org,
        "url": url,
        "mainEntityOfPage": {"@type": "WebPage", "@id": url},
        "image": {"@type": "ImageObject", "url": image, "width": IMAGE_WIDTH, "height": IMAGE_HEIGHT},
    }


def graph(*nodes: dict[str, Any]) -> dict[str, Any]:
    """One JSON-LD document holding every node."""
    return {"@context": CONTEXT, "@graph": list(nodes)}


def script_text(data: dict[str, Any]) -> str:
    """JSON for inside `<script type="application/ld+json">`: no page text can close the element."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")


def pretty(data: dict[str, Any]) -> str:
    """JSON for the ```json fence of a Markdown copy."""
    return json.dumps(data, ensure_ascii=False, indent=2)
