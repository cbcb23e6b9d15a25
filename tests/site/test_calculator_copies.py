"""The Markdown copies of the calculator and request pages: Markdown, not the HTML page's slots."""

from __future__ import annotations

from sitebuild import calculator_pages
from sitebuild.sizing_labels import fmt_gib
from tests.site.builtsite import BuiltSite

GiB = 2**30


def test_calculator_copies_carry_the_default_results_as_tables(built_site: BuiltSite) -> None:
    est = calculator_pages.default_result()["estimate"]
    for prefix, lang in (("", "ru"), ("uz/", "uz"), ("en/", "en")):
        copy = (built_site.root / f"{prefix}calculator.md").read_text("utf-8")
        assert "data-calc-slot" not in copy and "<div" not in copy.split("```")[0]
        allocated = f"{fmt_gib(est['peak']['allocated_bytes'], lang)}"
        assert allocated in copy, (lang, allocated)
        # the component table and the fit table, one row per catalog GPU
        table = calculator_pages.default_result()["fit_table"]
        rows = [line for line in copy.splitlines() if line.startswith("| ") and ("✓" in line or "✗" in line)]
        assert [r for r in rows if r.startswith(f"| {table[-1]['name']} |")]
        assert len(rows) >= len(table)


def test_request_copies_say_what_the_request_holds(built_site: BuiltSite) -> None:
    est = calculator_pages.default_result()["estimate"]
    config = calculator_pages.default_config()
    for prefix, lang, peak in (("", "ru", "Пик по nvidia-smi"), ("uz/", "uz", "nvidia-smi bo‘yicha cho‘qqi"),
                               ("en/", "en", "Peak (nvidia-smi)")):
        copy = (built_site.root / f"{prefix}calculator/request.md").read_text("utf-8")
        assert "data-calc-slot" not in copy
        device = est["peak"]["device_bytes"] / GiB
        decimal = f"{device:.1f}" if lang == "en" else f"{device:.1f}".replace(".", ",")
        assert f"- {peak}: {decimal} GiB" in copy, lang
        assert f"- max_seq_length: {config['max_seq_length']}" in copy
        assert f"- GPU: {config['gpu']}" in copy
        assert "```json" in copy and '"@graph"' in copy  # the JSON-LD block stays, as on every copy
