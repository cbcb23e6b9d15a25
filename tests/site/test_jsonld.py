"""scripts/sitebuild/jsonld.py: the page's structured data."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from sitebuild.jsonld import article, breadcrumb_list, graph, organization, pretty, script_text, trail

SCHEMA = json.loads((Path(__file__).parent / "jsonld.schema.json").read_text("utf-8"))
HOME = ("Главная", "https://example.org/")
PAGE = "https://example.org/guides/memory/"


def example() -> dict[str, object]:
    org = organization("Site", "https://example.org/")
    crumbs = trail(HOME, [("Руководства", "https://example.org/guides/")], ("Память", PAGE))
    return graph(
        breadcrumb_list(PAGE, crumbs),
        article(url=PAGE, headline="Память", description="Что занимает память", lang="ru",
                published="2026-11-01", modified="2026-11-29", org=org, image="https://example.org/og.png"),
    )


def test_example_validates_against_the_site_schema() -> None:
    jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker()).validate(example())


def test_schema_rejects_unknown_and_missing_properties() -> None:
    validator = jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker())
    data = example()
    art = data["@graph"][1]  # type: ignore[index]
    art["headlinee"] = "typo"
    assert not validator.is_valid(data)
    del art["headlinee"], art["datePublished"]
    assert not validator.is_valid(data)
    art["datePublished"] = "2026-02-30"
    assert not validator.is_valid(data)


def test_trail_positions_and_items() -> None:
    items = breadcrumb_list(PAGE, trail(HOME, [("Guides", "https://example.org/guides/")], ("Memory", PAGE)))
    assert [(i["position"], i["item"]) for i in items["itemListElement"]] == [
        (1, "https://example.org/"), (2, "https://example.org/guides/"), (3, PAGE)]


def test_trail_merges_repeated_urls_keeping_the_later_name() -> None:
    assert trail(HOME, [], ("Home page title", HOME[1])) == [("Home page title", HOME[1])]
    gpus = "https://example.org/gpus/"
    assert trail(HOME, [("GPUs", gpus)], ("GPU catalog", gpus)) == [HOME, ("GPU catalog", gpus)]


def test_article_fields() -> None:
    art = example()["@graph"][1]  # type: ignore[index]
    assert art["mainEntityOfPage"] == {"@type": "WebPage", "@id": PAGE}
    assert art["author"] == art["publisher"] == {"@type": "Organization", "name": "Site", "url": "https://example.org/"}
    assert (art["datePublished"], art["dateModified"], art["inLanguage"]) == ("2026-11-01", "2026-11-29", "ru")


def test_script_text_cannot_close_the_script_element() -> None:
    data = graph({"@type": "Thing", "name": "</script><script>alert(1)</script>"})
    text = script_text(data)
    assert "</" not in text
    assert json.loads(text) == data
    assert "Главная" in script_text(graph({"name": HOME[0]}))  # not \u-escaped


def test_pretty_round_trips() -> None:
    assert json.loads(pretty(example())) == example()
