# llms.txt (llmstxt.org) per language, its checker, and llms-full.txt.
"""The format: an H1, an optional one-line `>` summary, optional prose, then H2 sections holding
only link lists `- [name](url)` or `- [name](url): notes`. The reference parser crashes on any other
line inside an H2 section, so `render` writes none and `problems` rejects them."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_LINK_ITEM = re.compile(r"^- \[(?P<title>[^\]]+)\]\((?P<url>[^)\s]+)\)(?::\s(?P<notes>.*\S))?$")


@dataclass(frozen=True)
class Link:
    """One item of a file list."""

    title: str
    url: str
    notes: str = ""


def _one_line(text: str) -> str:
    return " ".join(text.split())


def render(title: str, summary: str, sections: Sequence[tuple[str, Sequence[Link]]]) -> str:
    """The llms.txt text; empty sections are left out."""
    lines = [f"# {_one_line(title)}", "", f"> {_one_line(summary)}"]
    for name, links in sections:
        if not links:
            continue
        lines += ["", f"## {_one_line(name)}", ""]
        for link in links:
            item = f"- [{_one_line(link.title).replace(']', ')')}]({link.url})"
            lines.append(f"{item}: {_one_line(link.notes)}" if link.notes.strip() else item)
    return "\n".join(lines) + "\n"


def problems(text: str) -> list[str]:
    """Where `text` breaks the llms.txt format (empty when it follows it)."""
    lines = text.lstrip("\ufeff").split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines or not lines[0].startswith("# ") or not lines[0][2:].strip():
        return ["the first line is not an H1 title"]
    found: list[str] = []
    in_section = False
    first_block = True  # the next non-blank line is the first one after the title
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        is_first, first_block = first_block, False
        if line.startswith("# "):
            found.append(f"line {number}: a second H1")
        elif line.startswith("## "):
            in_section = True
            if not line[3:].strip():
                found.append(f"line {number}: an H2 without a name")
        elif line.startswith("#"):
            found.append(f"line {number}: only H1 and H2 headings are allowed")
        elif in_section:
            if not _LINK_ITEM.match(line):
                found.append(f"line {number}: not a link item inside an H2 section: {line!r}")
        elif line.startswith(">") and (not is_first or (number < len(lines) and lines[number].startswith(">"))):
            found.append(f"line {number}: the summary must be one blockquote line right after the title")
    return found


def links(text: str) -> list[str]:
    """Every URL listed in the H2 sections."""
    return [m.group("url") for line in text.split("\n") if (m := _LINK_ITEM.match(line))]


def full(title: str, summary: str, documents: Sequence[str]) -> str:
    """llms-full.txt: a title and summary, then every page's Markdown copy in order."""
    head = f"# {_one_line(title)}\n\n> {_one_line(summary)}\n"
    return "\n\n".join([head.rstrip(), *(doc.strip() for doc in documents)]) + "\n"
