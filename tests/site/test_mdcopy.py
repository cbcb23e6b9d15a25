"""scripts/sitebuild/mdcopy.py: the Markdown copy of a page."""

from __future__ import annotations

import json

import yaml

from sitebuild.mdcopy import compose, front_matter, json_fence, rewrite_links, with_title


def absolutize(target: str) -> str | None:
    return None if target.startswith(("http", "#")) else f"https://x.org/{target.removesuffix('.md')}.md"


def test_rewrites_inline_image_and_reference_links() -> None:
    text = 'See [memory](memory.md "title") and ![chart](../a.png), [ext](https://e.org) [top](#top).\n[ref]: p.md'
    assert rewrite_links(text, absolutize) == (
        'See [memory](https://x.org/memory.md "title") and ![chart](https://x.org/../a.png.md), '
        '[ext](https://e.org) [top](#top).\n[ref]: https://x.org/p.md'
    )


def test_code_is_left_alone() -> None:
    text = "```md\n[a](a.md)\n```\n`[b](b.md)` [c](c.md)\n~~~~\n[d](d.md)\n~~~~"
    assert rewrite_links(text, absolutize) == (
        "```md\n[a](a.md)\n```\n`[b](b.md)` [c](https://x.org/c.md)\n~~~~\n[d](d.md)\n~~~~")


def test_unresolved_links_are_kept() -> None:
    assert rewrite_links("[x](missing.md)", lambda _: None) == "[x](missing.md)"


def test_front_matter_is_yaml_that_reads_back() -> None:
    fields = {"title": 'Память: "кавычки" и двоеточие', "lang": "ru", "alternates": {"ru": "https://x.org/a.md"}}
    block = front_matter(fields)
    assert block.startswith("---\n") and block.endswith("---\n")
    assert yaml.safe_load(block.strip("-\n")) == fields


def test_with_title_adds_an_h1_only_when_missing() -> None:
    assert with_title("# Own\n\ntext", "T") == "# Own\n\ntext"
    assert with_title("\n\ntext", "T") == "# T\n\ntext"
    assert with_title("## Sub\n", "T") == "# T\n\n## Sub\n"


def test_json_fence_outgrows_backticks_inside() -> None:
    assert json_fence("{}") == "```json\n{}\n```\n"
    assert json_fence('{"a": "````"}').startswith("`````json\n")


def test_compose_order() -> None:
    jsonld = json.dumps({"@context": "https://schema.org"})
    text = compose({"title": "T"}, "Index: https://x.org/llms.txt", "body", "T", jsonld)
    assert text == ('---\ntitle: "T"\n---\n\n> Index: https://x.org/llms.txt\n\n# T\n\nbody\n\n```json\n'
                    + jsonld + "\n```\n")
