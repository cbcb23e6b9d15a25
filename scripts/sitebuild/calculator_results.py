# The calculator's results view (sizing.view) rendered by the build: first-paint HTML and Markdown.
"""Generic renderers of a sizing.view view model: the page's calc_render.js builds the same DOM from the same
model, so the first paint, every later answer and the page's Markdown copy show one set of words and
numbers. Nothing here knows a component, a colour or a number format."""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from sitebuild.calculator_text import words
from sizing import view

RESULTS_ATTRS = 'id="calc-results" class="calc-results" data-testid="results" aria-live="polite"'


def warning_text(warning: Mapping[str, Any], lang: str) -> str:
    """A sizing warning in the page's language (sizing.view.warning_text with the page's words)."""
    return view.warning_text(warning, words(lang), lang)


def _attrs(cls: str, attrs: Mapping[str, Any]) -> str:
    pairs = ([("class", cls)] if cls else []) + [(k, v) for k, v in attrs.items()]
    return "".join(f' {k}="{html.escape(str(v))}"' for k, v in pairs)


def _spans(parts: list[Mapping[str, Any]]) -> str:
    return "".join(f"<span{_attrs('', p['attrs'])}>{html.escape(p['text'])}</span>" if p["attrs"]
                   else html.escape(p["text"]) for p in parts)


def _table_html(block: Mapping[str, Any]) -> str:
    e = html.escape
    head = "".join(f"<th>{e(h)}</th>" for h in block["head"])
    rows = []
    for row in block["rows"]:
        cells = []
        for cell in row["cells"]:
            tag = 'th scope="row"' if cell.get("header") else "td"
            mark = f'<span class="{e(cell["mark"])}"></span>' if cell.get("mark") else ""
            cells.append(f"<{tag}>{mark}{e(cell['text'])}</{tag.split()[0]}>")
        rows.append(f"<tr{_attrs('', row['attrs'])}>{''.join(cells)}</tr>")
    table = (f"<table{_attrs(block['class'], block['attrs'])}><thead><tr>{head}</tr></thead>"
             f"<tbody>{''.join(rows)}</tbody></table>")
    wrap = block.get("wrap")
    if not wrap:
        return table
    title = f"<h3>{e(block['title'])}</h3>" if block.get("title") else ""
    note = f'<p class="calc-note">{e(block["note"])}</p>' if block.get("note") else ""
    return f"<div{_attrs(wrap['class'], wrap['attrs'])}>{title}{table}{note}</div>"


def block_html(block: Mapping[str, Any]) -> str:
    """One block of a view as HTML (text escaped; data-block names it for the page's stale marking)."""
    e, kind = html.escape, block["kind"]
    key = {"data-block": block["key"]}
    if kind == "table":
        inner = _table_html(block)
        return inner.replace(">", f' data-block="{e(block["key"])}">', 1)
    attrs = _attrs(block["class"], {**block["attrs"], **key})
    if kind == "stats":
        items = "".join(f'<div class="calc-peak"><span>{e(i["label"])}</span> '
                        f"<strong{_attrs('', i['attrs'])}>{e(i['text'])}</strong></div>" for i in block["items"])
        return f"<div{attrs}>{items}</div>"
    if kind == "text":
        return f"<p{attrs}>{_spans(block['parts'])}</p>"
    if kind == "list":
        items = "".join(f"<li{_attrs('', i['attrs'])}>{e(i['text'])}</li>" for i in block["items"])
        return f"<ul{attrs}>{items}</ul>"
    if kind == "bar":
        rects = "".join(f'<rect x="{s["x"]:.2f}" y="0" width="{s["width"]:.2f}" height="40" class="{e(s["class"])}">'
                        f"<title>{e(s['title'])}</title></rect>" for s in block["segments"])
        return (f'<svg{_attrs(block["class"], block["attrs"])} viewBox="0 0 1000 40" preserveAspectRatio="none" '
                f'role="img" aria-label="{e(block["label"])}" data-block="{e(block["key"])}">{rects}</svg>')
    raise ValueError(f"unknown block kind {kind!r}")


def view_html(model: Mapping[str, Any]) -> str:
    """The results box of a whole view."""
    return f"<div {RESULTS_ATTRS}>{''.join(block_html(b) for b in model['blocks'])}</div>"


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ") or " "


def view_markdown(model: Mapping[str, Any]) -> str:
    """The same view as Markdown: the stats on one line, tables as tables, the bar left out (the
    components table holds its numbers)."""
    out: list[str] = []
    for block in model["blocks"]:
        kind = block["kind"]
        if kind == "stats":
            out.append(" · ".join(f"**{i['label']}**: {i['text']}" for i in block["items"]))
        elif kind == "text":
            out.append("".join(p["text"] for p in block["parts"]).strip())
        elif kind == "list" and block["items"]:
            out.append("\n".join(f"- {i['text']}" for i in block["items"]))
        elif kind == "table":
            if block.get("title"):
                out.append(f"**{block['title']}**")
            sep = {"left": "---", "center": ":-:", "right": "---:"}
            lines = ["| " + " | ".join(_md_cell(h) for h in block["head"]) + " |",
                     "|" + "|".join(sep[a] for a in block["align"]) + "|"]
            lines += ["| " + " | ".join(_md_cell(c["text"]) for c in row["cells"]) + " |" for row in block["rows"]]
            out.append("\n".join(lines))
            if block.get("note"):
                out.append(block["note"])
    return "\n\n".join(part for part in out if part)


def results_view(result: Mapping[str, Any], lang: str) -> dict[str, Any]:
    """The view of a compute() answer with the page's words."""
    return view.results_view(result, words(lang), lang)


def results_html(result: Mapping[str, Any], lang: str) -> str:
    """The results block for one compute() answer (ok): the first paint."""
    return view_html(results_view(result, lang))


def results_markdown(result: Mapping[str, Any], lang: str) -> str:
    """The default configuration's results in the page's Markdown copy (and so llms-full.txt, search)."""
    return view_markdown(results_view(result, lang))
