# The navigation: fixed pages come from mkdocs.yml, one page per GPU is discovered in docs/gpus/.
"""The GPU pages are generated from the catalog (scripts/sitebuild/gpu_pages.py), so the nav lists them
from the files rather than by hand: a new GPU page shows up without touching mkdocs.yml."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

_MEMORY = re.compile(r"-(\d+)gb$")


def gpu_sort_key(path: str) -> tuple[int, str]:
    """Order GPU pages by memory, then name: "gpus/t4-16gb.md" -> (16, "t4-16gb")."""
    stem = Path(path).stem
    match = _MEMORY.search(stem)
    return (int(match.group(1)) if match else 1 << 30, stem)


def discover(docs_dir: Path, folder: str, default_lang: str) -> list[str]:
    """Unsuffixed paths ("gpus/t4-16gb.md") of the default-language pages in `folder`, index excluded."""
    found = [
        f"{folder}/{path.name.removesuffix(f'.{default_lang}.md')}.md"
        for path in (docs_dir / folder).glob(f"*.{default_lang}.md")
        if path.name != f"index.{default_lang}.md"
    ]
    return sorted(found, key=gpu_sort_key)


def _entry_path(entry: Any) -> str | None:
    if isinstance(entry, str):
        return entry
    if isinstance(entry, dict) and len(entry) == 1:
        value = next(iter(entry.values()))
        return value if isinstance(value, str) else None
    return None


def extend_section(nav: list[Any], title: str, pages: Iterable[str]) -> list[Any]:
    """A copy of `nav` whose top-level section `title` also lists `pages` not yet in it (idempotent)."""
    result: list[Any] = []
    for item in nav:
        if isinstance(item, dict) and list(item) == [title] and isinstance(item[title], list):
            children = list(item[title])
            listed = {_entry_path(child) for child in children}
            children += [page for page in pages if page not in listed]
            result.append({title: children})
        else:
            result.append(item)
    return result


def ensure_first(nav: list[Any], title: str, page: str) -> list[Any]:
    """A copy of `nav` whose top-level section `title` starts with `page` (its index page)."""
    result: list[Any] = []
    for item in nav:
        if isinstance(item, dict) and list(item) == [title] and isinstance(item[title], list):
            rest = [child for child in item[title] if _entry_path(child) != page]
            result.append({title: [page, *rest]})
        else:
            result.append(item)
    return result


def first_url(item: Any) -> str:
    """The URL a nav item links to in Material's breadcrumbs: a page's own, a section's first page's."""
    while getattr(item, "children", None):
        item = item.children[0]
    return str(item.url)
