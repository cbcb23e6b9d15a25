"""Metamorphic check of the rows-as-written mapping: a public row rewritten into another common spelling of the same
settings (scripts/row_paraphrase.py's rewrites) maps to the same run and the same measured GiB."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

import row_paraphrase as rp
import validate_rows as vr

ROOT = Path(__file__).resolve().parents[2]
ROWS = [r for r in csv.DictReader((ROOT / "validation" / "measurements.csv").read_text("utf-8").splitlines())
        if r["usable_for_scoring"].strip().lower() in ("yes", "caution")]


@pytest.mark.parametrize("name", list(rp.REWRITES))
def test_a_rewritten_row_maps_to_the_same_run(name: str) -> None:
    compared = 0
    for row in ROWS:
        variant = rp.REWRITES[name](row)
        if variant is None:
            continue
        try:
            want = vr.row_case(row)
        except vr.RowRefused:
            continue
        got = vr.row_case(variant)
        assert (got.config, round(got.measured_gib or 0, 3), got.tier) == \
            (want.config, round(want.measured_gib or 0, 3), want.tier), (name, row["row_id"])
        compared += 1
    assert compared >= 1, name  # the rewrite applies to rows of the public set
