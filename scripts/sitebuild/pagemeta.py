# Front matter every page must carry, and the page record the build collects from it.
"""Checks on a page's front matter and the frozen record of one built page.

Every page declares `title`, `description`, `date_published`, `date_updated` and `sources_checked`
(ISO dates, YYYY-MM-DD). YAML reads an unquoted date as `datetime.date`; a quoted one stays a string.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

REQUIRED = ("title", "description", "date_published", "date_updated", "sources_checked")
DATE_KEYS = ("date_published", "date_updated", "sources_checked")


def iso_date(value: object) -> str:
    """The ISO form (YYYY-MM-DD) of a front-matter date; ValueError if it is not a calendar date."""
    if isinstance(value, dt.datetime):
        return value.date().isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, str):
        return dt.date.fromisoformat(value.strip()).isoformat()
    raise ValueError(f"not a date: {value!r}")


def problems(meta: Mapping[str, Any]) -> list[str]:
    """What is wrong with a page's front matter (empty when nothing is)."""
    found: list[str] = []
    for key in REQUIRED:
        value = meta.get(key)
        if value is None or (isinstance(value, str) and not value.strip()):
            found.append(f"front matter lacks '{key}'")
    for key in DATE_KEYS:
        if meta.get(key) is None:
            continue
        try:
            iso_date(meta[key])
        except ValueError:
            found.append(f"'{key}' is not an ISO date (YYYY-MM-DD): {meta[key]!r}")
    if not found and iso_date(meta["date_updated"]) < iso_date(meta["date_published"]):
        found.append("'date_updated' is earlier than 'date_published'")
    return found


@dataclass(frozen=True)
class Dates:
    """The three dates a page shows, ISO strings."""

    published: str
    updated: str
    sources_checked: str


def dates(meta: Mapping[str, Any]) -> Dates:
    """The page's dates; call `problems` first (this raises on a missing or bad date)."""
    return Dates(iso_date(meta["date_published"]), iso_date(meta["date_updated"]),
                 iso_date(meta["sources_checked"]))


@dataclass
class PageRecord:
    """One built page of one language, as the Markdown copy, llms.txt and the sitemap need it."""

    lang: str
    url: str  # page.url, site-relative ("uz/guides/memory/")
    base: str  # the same path without the language prefix ("guides/memory/")
    title: str
    description: str
    dates: Dates
    section: str  # title of the top-level nav section, "" for top-level pages
    order: int  # position in the navigation
    body: str  # the rendered Markdown with links made absolute
    fallback: bool  # built from the default language's source (no translation yet)
    jsonld: str = ""  # filled when the page's HTML context is built
