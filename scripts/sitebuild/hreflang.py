# hreflang alternates: every language version of a page, absolute, plus x-default.
"""Google wants each version to list itself and all others with fully qualified URLs, and an
x-default fallback; ours is the default (Russian) version at the site root."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sitebuild.urls import absolute, localized_url

X_DEFAULT = "x-default"


def alternates(site_url: str, base: str, langs: Sequence[str], default: str) -> dict[str, str]:
    """{lang: absolute URL} of the page at language-neutral path `base`, in `langs` order, then x-default."""
    links = {lang: absolute(site_url, localized_url(base, lang, default)) for lang in langs}
    links[X_DEFAULT] = absolute(site_url, localized_url(base, default, default))
    return links


def switcher(entries: Sequence[Mapping[str, str]], links: Mapping[str, str]) -> list[dict[str, str]]:
    """Material's `extra.alternate` entries with each `link` replaced by the absolute URL of its language.

    Material prints these both as `<link rel="alternate" hreflang>` and as the language switcher.
    """
    return [{**entry, "link": links.get(entry["lang"], entry["link"])} for entry in entries]
