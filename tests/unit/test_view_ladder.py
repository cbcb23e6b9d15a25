# The calculator's "what to change so it fits" block: sizing.ladder's own figures, only when the run does not fit.
from __future__ import annotations

import json
from pathlib import Path

from sitebuild.calculator_text import TEXT, words
from sizing import web
from sizing.ladder import ladder
from sizing.view import LADDER_HEADS

EXAMPLE = json.loads((Path(__file__).resolve().parents[2] / "examples" / "qlora-llama31-8b.json").read_text("utf-8"))
# The QLoRA paper's question on the L40S page: a 70B QLoRA run that does not fit one 48 GB card.
TOO_BIG = {"model": "meta-llama/Llama-3.3-70B-Instruct", "method": "qlora", "gpu": "L40S-48GB"}


def gib(n: int) -> str:
    return f"{n / 2**30:,.2f}"  # English: comma thousands, two decimals of 2**30 bytes


def test_the_block_shows_the_ladders_own_figures() -> None:
    answer = web.compute(TOO_BIG, words={"lang": "en", "text": words("en")})
    assert answer["ok"] and not answer["estimate"]["fits"][0]["fits"]
    block = next(b for b in answer["view"]["blocks"] if b["key"] == "ladder")
    want = ladder(TOO_BIG, "L40S-48GB")  # computed here independently of the page's path
    assert not want.fits and want.rungs
    start, *rows = block["rows"]
    assert start["attrs"]["data-reserved"] == want.reserved_bytes
    assert start["cells"][3]["text"] == gib(want.reserved_bytes) and start["cells"][4]["text"] == "✗"
    assert len(rows) == len(want.rungs)
    for row, rung in zip(rows, want.rungs, strict=True):
        cells = [c["text"] for c in row["cells"]]
        assert row["attrs"]["data-testid"] == f"ladder-{rung.lever}"
        assert row["attrs"]["data-saved"] == rung.saved_bytes and row["attrs"]["data-reserved"] == rung.reserved_bytes
        assert cells[0] == TEXT[f"ladder_{rung.lever}"]["en"]
        assert cells[2:5] == [gib(rung.saved_bytes), gib(rung.reserved_bytes), "✓" if rung.fits else "✗"]
        for key, value in rung.change.items():
            if key not in ("load_in_4bit", "bnb_4bit_compute_dtype"):
                assert f"{key}={str(value).lower() if isinstance(value, bool) else value}" in cells[1]
        if rung.time_factor is not None and abs(rung.time_factor - 1) >= 0.0005:
            assert cells[5] == f"×{rung.time_factor:.2f}"
    assert want.first_fit is not None and rows[want.first_fit - 1]["cells"][4]["text"] == "✓"
    assert len(block["head"]) == len(block["align"]) == len(rows[0]["cells"]) == len(LADDER_HEADS)


def test_the_ladder_waits_for_the_fit_table_and_only_when_it_does_not_fit() -> None:
    first = web.compute(TOO_BIG, table=False, words={"lang": "ru", "text": words("ru")})
    assert first["ladder"] is None and first["view"]["pending"] == ["compare", "fit", "ladder"]
    fits = web.compute(EXAMPLE, words={"lang": "ru", "text": words("ru")})
    assert fits["estimate"]["fits"][0]["fits"] and fits["ladder"] is None
    assert "ladder" not in [b["key"] for b in fits["view"]["blocks"]] and fits["view"]["pending"] == []


def test_every_ladder_word_is_in_three_languages() -> None:
    keys = [k for k in TEXT if k.startswith("ladder_")]
    assert set(LADDER_HEADS) - {"th_fits"} <= set(keys) and "ladder_title" in keys and "ladder_fsdp" in keys
    for key in keys:
        assert set(TEXT[key]) == {"ru", "uz", "en"} and all(TEXT[key].values()), key
        assert not any("`" in text for text in TEXT[key].values()), key  # the page shows text, not Markdown
