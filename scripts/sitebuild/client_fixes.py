# Built-site fixes for the visitor's browser: one search index per language, no sitemap.xml requests.
"""Two post-build steps on what Material and mkdocs-static-i18n write.

* Search: static-i18n 1.3.1 merges every language's entries into the one `search/search_index.json`
  (reconfigure_search_index), and Material 9.8.2 loads `search/search_index.json` relative to the page's
  `base`, so a search on /en/ ranks Russian and Uzbek pages too. `split_index` writes one index per
  language under its own root (`en/search/search_index.json`, locations relative to that root), and
  overrides/main.html gives each language's pages their language root as `base`.
* Sitemaps: Material's alternate-language integration fetches `sitemap.xml` next to every
  `<link rel=alternate>` (it expects them to point at language roots), but static-i18n's hreflang links
  point at the page itself, and the Markdown copy is an alternate too: 3-5 requests per page for files
  that do not exist. The selector is narrowed to links that opt in (none do): the language switcher
  already links each page to its own translation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

# lunr has no Uzbek: its Latin-script words go through the default (English) pipeline
SEARCH_LANGS: Mapping[str, list[str]] = {"ru": ["ru", "en"], "uz": ["en"], "en": ["en"]}
_ALTERNATE = re.compile(r'\b(\w+)\("link\[rel=alternate\]"\)')
_NARROWED = '("link[rel=alternate][data-md-sitemap]")'


def split_index(index: Mapping[str, Any], prefixes: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """{lang: index} from the merged index: each language's documents, located relative to its root
    (`prefixes`: {"ru": "", "uz": "uz/", "en": "en/"}); a language at the root keeps what no other claims."""
    others = [p for p in prefixes.values() if p]
    out: dict[str, dict[str, Any]] = {}
    for lang, prefix in prefixes.items():
        docs = []
        for doc in index["docs"]:
            location = str(doc["location"])
            if prefix and location.startswith(prefix):
                docs.append({**doc, "location": location[len(prefix):]})
            elif not prefix and not any(location.startswith(p) for p in others):
                docs.append(dict(doc))
        config = {**index["config"], "lang": SEARCH_LANGS.get(lang, ["en"])}
        out[lang] = {**index, "config": config, "docs": docs}
    return out


def write_search_indexes(site_dir: Path, prefixes: Mapping[str, str]) -> dict[str, int]:
    """Replace the merged search index by one per language root; {lang: documents}."""
    merged = site_dir / "search" / "search_index.json"
    index = json.loads(merged.read_text("utf-8"))
    counts = {}
    for lang, part in split_index(index, prefixes).items():
        path = site_dir / prefixes[lang] / "search" / "search_index.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(part, ensure_ascii=False, separators=(",", ":")), "utf-8")
        counts[lang] = len(part["docs"])
    return counts


def narrow_alternates(bundle: str) -> str:
    """Material's bundle with its alternate-language selector narrowed to opted-in links; a bundle
    without exactly one such selector (another Material version) is an error, not a silent no-op."""
    found = _ALTERNATE.findall(bundle)
    if len(found) != 1:
        raise ValueError(f"Material's bundle has {len(found)} link[rel=alternate] selectors, expected 1: "
                         "check the alternate-language integration of this Material version")
    return _ALTERNATE.sub(lambda m: m.group(1) + _NARROWED, bundle)


def patch_bundles(site_dir: Path, names: Sequence[str] = ()) -> list[Path]:
    """narrow_alternates() on the built bundle.*.min.js; the paths patched."""
    paths = [site_dir / n for n in names] or sorted((site_dir / "assets" / "javascripts").glob("bundle.*.min.js"))
    for path in paths:
        path.write_text(narrow_alternates(path.read_text("utf-8")), "utf-8")
    return paths
