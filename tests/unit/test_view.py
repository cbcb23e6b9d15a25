# sizing.view: the calculator's results view (numbers formatted by hand here, words from a small table).
from __future__ import annotations

import json
from pathlib import Path

import pytest

from sizing import web
from sizing.memory.timeline import COMPONENTS
from sizing.view import fill, fmt_gib, fmt_num, results_view, warning_text

EXAMPLE = json.loads((Path(__file__).resolve().parents[2] / "examples" / "qlora-llama31-8b.json").read_text("utf-8"))
WORDS = {"weights": "Base weights", "gib": "GiB", "w_x": "{gib} GiB more than {name}", "allocated": "Allocated"}


@pytest.mark.parametrize(("value", "lang", "decimals", "text"), [
    (1234567.891, "en", 2, "1,234,567.89"),
    (1234567.891, "ru", 2, "1\u00a0234\u00a0567,89"),
    (1234567.891, "uz", 0, "1\u00a0234\u00a0568"),
    (-1234.5, "en", 1, "−1,234.5"),
    (999.0, "en", 0, "999"),
    (0.004, "en", 2, "0.00"),
])
def test_numbers_in_each_language(value: float, lang: str, decimals: int, text: str) -> None:
    assert fmt_num(value, lang, decimals) == text


def test_gib_is_two_decimals_of_2_to_the_30() -> None:
    assert fmt_gib(3 * 2**29, "en") == "1.50"


def test_warnings_take_the_page_words_and_fall_back_to_the_message() -> None:
    warning = {"code": "x", "message": "english", "params": {"bytes": 2**31, "name": "<b>"}}
    assert warning_text(warning, WORDS, "en") == "2.00 GiB more than <b>"
    assert warning_text({**warning, "code": "unknown"}, WORDS, "en") == "english"
    assert fill("{a} {b}", {"a": 1}) == "1 {b}"


def test_the_view_holds_the_estimate_in_order() -> None:
    answer = web.compute(EXAMPLE)
    view = results_view(answer, WORDS, "en")
    assert [b["key"] for b in view["blocks"]] == ["peaks", "uncertainty", "bar", "components", "time", "warnings",
                                                  "compare", "fit"]
    assert view["pending"] == []
    comps = answer["estimate"]["components"]
    table = next(b for b in view["blocks"] if b["key"] == "components")
    assert [r["attrs"]["data-bytes"] for r in table["rows"]] == [comps[n] for n in COMPONENTS]
    assert table["rows"][0]["cells"][0] == {"text": "Base weights", "mark": "calc-swatch calc-c-weights"}
    peaks = next(b for b in view["blocks"] if b["key"] == "peaks")["items"]
    allocated = answer["estimate"]["peak"]["allocated_bytes"]
    assert peaks[0] == {"label": "Allocated", "text": f"{allocated / 2**30:,.2f} GiB",
                        "attrs": {"data-testid": "peak-allocated", "data-bytes": allocated}}
    bar = next(b for b in view["blocks"] if b["key"] == "bar")["segments"]
    total = sum(comps.values())
    assert sum(s["width"] for s in bar) == pytest.approx(1000, abs=0.05)
    for segment in bar:  # each segment's share of the bar is its component's share of the peak
        name = segment["class"].removeprefix("calc-c-")
        assert segment["width"] == pytest.approx(1000 * comps[name] / total, abs=0.01)
    fit = next(b for b in view["blocks"] if b["key"] == "fit")
    assert len(fit["rows"]) == len(answer["fit_table"]) and len(fit["align"]) == len(fit["head"])


def test_without_the_fit_table_its_blocks_are_pending() -> None:
    view = results_view(web.compute(EXAMPLE, table=False), WORDS, "ru")
    assert view["pending"] == ["compare", "fit"]
    assert "fit" not in [b["key"] for b in view["blocks"]]


def test_the_worker_gets_the_view_in_the_words_it_sends() -> None:
    words = json.dumps({"lang": "ru", "text": WORDS})
    answer = json.loads(web.compute_json(json.dumps(EXAMPLE), False, words))
    assert answer["view"] == json.loads(json.dumps(results_view(web.compute(EXAMPLE, False), WORDS, "ru")))
    assert "view" not in json.loads(web.compute_json(json.dumps(EXAMPLE), False))


def test_a_card_without_bf16_says_why_it_does_not_fit() -> None:
    """T4 and V100 (compute capability 7.x) have no bf16 (NVIDIA's CUDA guide: bf16 arithmetic from 8.0): a bf16
    run is refused there however much memory is left, so the row says so instead of '✗' next to a positive
    headroom (V100 32GB: +12.9 GiB for the 8B QLoRA example)."""
    answer = web.compute(EXAMPLE)
    words = {**WORDS, "fit_no_bf16": "✗ no bf16"}
    fit = next(b for b in results_view(answer, words, "en")["blocks"] if b["key"] == "fit")
    mark = {r["attrs"]["data-testid"]: r["cells"][1]["text"] for r in fit["rows"]}
    assert mark["fit-V100-32GB"] == mark["fit-T4-16GB"] == "✗ no bf16"
    assert mark["fit-A100-SXM-80GB"] == "✓"
