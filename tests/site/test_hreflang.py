"""scripts/sitebuild/hreflang.py: absolute alternates and the language switcher."""

from __future__ import annotations

from sitebuild.hreflang import X_DEFAULT, alternates, switcher

SITE = "https://example.org/sub/"


def test_alternates_are_absolute_and_include_x_default() -> None:
    assert alternates(SITE, "guides/memory/", ["ru", "uz", "en"], "ru") == {
        "ru": SITE + "guides/memory/",
        "uz": SITE + "uz/guides/memory/",
        "en": SITE + "en/guides/memory/",
        X_DEFAULT: SITE + "guides/memory/",
    }


def test_alternates_of_the_home_page() -> None:
    links = alternates(SITE, "", ["ru", "uz", "en"], "ru")
    assert links["ru"] == links[X_DEFAULT] == SITE
    assert links["uz"] == SITE + "uz/"


def test_every_version_lists_the_same_set() -> None:
    # Reciprocity: the set computed from any language's page is the same set.
    sets = [alternates(SITE, "gpus/", ["ru", "uz", "en"], "ru") for _ in ("ru", "uz", "en")]
    assert sets[0] == sets[1] == sets[2]


def test_switcher_keeps_names_and_replaces_links() -> None:
    entries = [{"name": "Русский", "link": "./", "lang": "ru"}, {"name": "English", "link": "../en/x/", "lang": "en"},
               {"name": "Other", "link": "/other/", "lang": "xx"}]
    links = alternates(SITE, "x/", ["ru", "en"], "ru")
    assert switcher(entries, links) == [
        {"name": "Русский", "link": SITE + "x/", "lang": "ru"},
        {"name": "English", "link": SITE + "en/x/", "lang": "en"},
        {"name": "Other", "link": "/other/", "lang": "xx"},
    ]
    assert entries[0]["link"] == "./"  # not modified in place
