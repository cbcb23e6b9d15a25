"""scripts/sitebuild/llmstxt.py: the llms.txt format (llmstxt.org) and llms-full.txt."""

from __future__ import annotations

import pytest

from sitebuild.llmstxt import Link, full, links, problems, render


def example() -> str:
    return render("Site", "One line\nsummary", [
        ("Guides", [Link("Memory [draft]", "https://x.org/memory.md", "What takes memory: a list"),
                    Link("Bare", "https://x.org/bare.md")]),
        ("Empty", []),
        ("Optional", [Link("All", "https://x.org/llms-full.txt", "everything")]),
    ])


def test_render() -> None:
    assert example() == (
        "# Site\n\n> One line summary\n\n## Guides\n\n"
        "- [Memory [draft)](https://x.org/memory.md): What takes memory: a list\n"
        "- [Bare](https://x.org/bare.md)\n\n## Optional\n\n- [All](https://x.org/llms-full.txt): everything\n"
    )
    assert problems(example()) == []
    assert links(example()) == ["https://x.org/memory.md", "https://x.org/bare.md", "https://x.org/llms-full.txt"]


@pytest.mark.parametrize(("text", "fragment"), [
    ("## Not a title\n", "H1"),
    ("# T\n\n> a\n> b\n", "summary"),
    ("# T\n\nprose\n\n> late quote\n", "summary"),
    ("# T\n\n## S\n\nprose in a section\n", "not a link item"),
    ("# T\n\n## S\n\n- [a](u) extra\n", "not a link item"),
    ("# T\n\n### Deep\n", "H1 and H2"),
    ("# T\n\n# Again\n", "second H1"),
    ("# T\n\n## \n", "without a name"),
])
def test_problems(text: str, fragment: str) -> None:
    assert any(fragment in problem for problem in problems(text)), problems(text)


def test_format_allows_prose_before_sections_and_no_summary() -> None:
    assert problems("\ufeff# T\n\nSome details.\n\n## S\n\n- [a](https://x.org/a.md)\n") == []
    assert problems("# T\n") == []


def test_full_concatenates_documents() -> None:
    assert full("Site", "Sum", ["---\na\n---\n\nA\n", "B\n"]) == "# Site\n\n> Sum\n\n---\na\n---\n\nA\n\nB\n"
