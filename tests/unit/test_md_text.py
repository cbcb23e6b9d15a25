# Markdown copies carry no page markup: the inline SVG charts of the GPU and accuracy pages become a line.
from __future__ import annotations

from sitebuild.md_text import without_markup
from sitebuild.sizing_svg import line_chart


def test_a_chart_becomes_its_title_and_the_page_link() -> None:
    svg = line_chart("Llama · L40S & co", {"lora": [(512, 10.0), (1024, 12.0)]}, 44.0, "tokens", "GiB", "cap")
    body = f"Before\n\n{svg}\n\nAfter"
    out = without_markup(body, "en", "https://example.org/en/gpus/l40s-48gb/")
    assert "<" not in out.replace("<https://example.org/en/gpus/l40s-48gb/>", "")
    assert "*Llama · L40S & co (chart on the page: <https://example.org/en/gpus/l40s-48gb/>)*" in out
    assert out.startswith("Before") and out.endswith("After")


def test_text_without_charts_is_unchanged() -> None:
    assert without_markup("| a | b |\n|---|---|", "ru", "x") == "| a | b |\n|---|---|"
