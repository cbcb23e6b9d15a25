"""scripts/sitebuild/calculator_results.py: the view model rendered as HTML and Markdown, text escaped."""

from __future__ import annotations

import pytest

from sitebuild.calculator_results import block_html, view_html, view_markdown

HOSTILE = "<img src=x onerror=alert(1)> | x"


def test_text_and_attributes_are_escaped() -> None:
    view = {"blocks": [
        {"key": "warnings", "kind": "list", "class": "calc-warnings", "attrs": {"data-code": '"><b>'},
         "items": [{"text": HOSTILE, "attrs": {}}]},
        {"key": "t", "kind": "text", "class": "", "attrs": {}, "parts": [{"text": HOSTILE, "attrs": {"data-x": 1}}]},
    ], "pending": []}
    out = view_html(view)
    assert "<img" not in out and "<b>" not in out
    assert "&lt;img src=x onerror=alert(1)&gt;" in out and 'data-code="&quot;&gt;&lt;b&gt;"' in out
    assert out.startswith('<div id="calc-results"') and 'data-block="warnings"' in out


def test_tables_in_html_and_markdown() -> None:
    block = {"key": "fit", "kind": "table", "class": "calc-fit", "attrs": {"data-testid": "fit-table"},
             "wrap": {"class": "calc-fit-wrap", "attrs": {}}, "title": "Cards", "note": "a note",
             "head": ["GPU", "Fits"], "align": ["left", "center"],
             "rows": [{"attrs": {"data-fits": "true"}, "cells": [{"text": "A|B", "header": True}, {"text": "✓"}]}]}
    assert block_html(block) == (
        '<div class="calc-fit-wrap" data-block="fit"><h3>Cards</h3><table class="calc-fit" data-testid="fit-table">'
        '<thead><tr><th>GPU</th><th>Fits</th></tr></thead><tbody><tr data-fits="true"><th scope="row">A|B</th>'
        '<td>✓</td></tr></tbody></table><p class="calc-note">a note</p></div>')
    assert view_markdown({"blocks": [block], "pending": []}) == (
        "**Cards**\n\n| GPU | Fits |\n|---|:-:|\n| A\\|B | ✓ |\n\na note")


def test_stats_in_markdown_and_the_bar_left_out() -> None:
    view = {"blocks": [
        {"key": "peaks", "kind": "stats", "class": "calc-peaks", "attrs": {},
         "items": [{"label": "A", "text": "1.00 GiB", "attrs": {}}, {"label": "B", "text": "x", "attrs": {}}]},
        {"key": "bar", "kind": "bar", "class": "calc-bar", "attrs": {}, "label": "l",
         "segments": [{"x": 0, "width": 1000, "class": "calc-c-weights", "title": "t"}]},
    ], "pending": []}
    assert view_markdown(view) == "**A**: 1.00 GiB · **B**: x"
    assert '<rect x="0.00" y="0" width="1000.00" height="40" class="calc-c-weights"><title>t</title></rect>' \
        in view_html(view)


def test_an_unknown_block_kind_stops_the_build() -> None:
    with pytest.raises(ValueError, match="unknown block kind"):
        block_html({"key": "k", "kind": "chart", "class": "", "attrs": {}})
