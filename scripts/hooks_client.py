"""MkDocs hook: the built site's fixes for the visitor's browser (scripts/sitebuild/client_fixes.py).

Runs once, after mkdocs-static-i18n has built every language and merged the search index.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from mkdocs.plugins import event_priority, get_plugin_logger

from sitebuild import client_fixes

if TYPE_CHECKING:
    from mkdocs.config.defaults import MkDocsConfig

log = get_plugin_logger(__name__)


def _prefixes(config: MkDocsConfig) -> dict[str, str]:
    """{lang: its folder under the site root} ("" for the default language)."""
    i18n: Any = config.plugins.get("i18n")
    if not i18n:
        return {str(config.theme["language"]): ""}
    out = {}
    for lang in i18n.config.languages:
        if lang.build:
            out[str(lang.locale)] = "" if lang.default else f"{lang.locale}/"
    return out


@event_priority(-300)  # after static-i18n (-100) rebuilt the merged index, and after hooks.py (-200)
def on_post_build(config: MkDocsConfig) -> None:
    """Per-language search indexes; Material's sitemap.xml requests narrowed away."""
    i18n: Any = config.plugins.get("i18n")
    if i18n and i18n.building:
        return
    site_dir = Path(config.site_dir)
    counts = client_fixes.write_search_indexes(site_dir, _prefixes(config))
    log.info(f"search: one index per language {counts}")
    client_fixes.patch_bundles(site_dir)
