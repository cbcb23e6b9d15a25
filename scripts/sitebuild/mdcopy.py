# The Markdown copy of a page: front matter, a pointer to llms.txt, the rendered body, the JSON-LD.
"""Pure text transforms for `<page URL>.md`.

The body is the page's Markdown after the build filled in computed tables, with relative links made
absolute (a copy lives at another path than its source, and assets are shared by all languages).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping

# [text](target "title"), ![alt](<target>): group 2 is the target.
_INLINE = re.compile(r"(\]\(\s*<?)([^)\s<>]+)(>?(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\))")
# [id]: target "title"
_REFDEF = re.compile(r"^( {0,3}\[[^\]]+\]:\s*<?)([^\s<>]+)()")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_CODE_SPAN = re.compile(r"(`+)(?:.+?)\1")


def rewrite_links(markdown: str, resolve: Callable[[str], str | None]) -> str:
    """Replace every link target for which `resolve` returns a URL; code blocks and spans stay as written."""
    out: list[str] = []
    fence: str | None = None
    for line in markdown.split("\n"):
        opening = _FENCE.match(line)
        if fence is not None:
            if opening and opening.group(1)[0] == fence[0] and len(opening.group(1)) >= len(fence):
                fence = None
            out.append(line)
            continue
        if opening:
            fence = opening.group(1)
            out.append(line)
            continue
        out.append(_rewrite_line(line, resolve))
    return "\n".join(out)


def _rewrite_line(line: str, resolve: Callable[[str], str | None]) -> str:
    def sub(match: re.Match[str]) -> str:
        new = resolve(match.group(2))
        return match.group(0) if new is None else f"{match.group(1)}{new}{match.group(3)}"

    line = _REFDEF.sub(sub, line)
    pieces: list[str] = []
    last = 0
    for code in _CODE_SPAN.finditer(line):
        pieces.append(_INLINE.sub(sub, line[last:code.start()]))
        pieces.append(code.group(0))
        last = code.end()
    pieces.append(_INLINE.sub(sub, line[last:]))
    return "".join(pieces)


def front_matter(fields: Mapping[str, str | Mapping[str, str]]) -> str:
    """A YAML front-matter block; strings are written as JSON strings, which YAML reads unchanged."""
    lines = ["---"]
    for key, value in fields.items():
        if isinstance(value, str):
            lines.append(f"{key}: {json.dumps(value, ensure_ascii=False)}")
        else:
            lines.append(f"{key}:")
            lines.extend(f"  {sub}: {json.dumps(item, ensure_ascii=False)}" for sub, item in value.items())
    lines.append("---")
    return "\n".join(lines) + "\n"


def with_title(body: str, title: str) -> str:
    """The body, starting with an H1 (the page title) if it does not already."""
    stripped = body.lstrip("\n")
    if stripped.startswith("# "):
        return stripped
    return f"# {title}\n\n{stripped}"


def json_fence(text: str) -> str:
    """`text` in a ```json fence, longer than any backtick run inside it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}json\n{text}\n{ticks}\n"


def compose(front: Mapping[str, str | Mapping[str, str]], llms_line: str, body: str, title: str,
            jsonld_text: str) -> str:
    """The whole copy: front matter, the llms.txt pointer, the body, the JSON-LD last."""
    return (
        front_matter(front)
        + f"\n> {llms_line}\n\n"
        + with_title(body, title).rstrip()
        + "\n\n"
        + json_fence(jsonld_text)
    )
