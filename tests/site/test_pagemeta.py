"""scripts/sitebuild/pagemeta.py: the front matter every page must carry."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from sitebuild.pagemeta import Dates, dates, iso_date, problems

GOOD: dict[str, Any] = {"title": "T", "description": "D", "date_published": dt.date(2026, 11, 1),
                        "date_updated": "2026-11-29", "sources_checked": dt.date(2026, 11, 28)}


@pytest.mark.parametrize(("value", "expected"), [
    (dt.date(2026, 1, 2), "2026-01-02"), ("2026-01-02", "2026-01-02"), (dt.datetime(2026, 1, 2, 3, 4), "2026-01-02"),
])
def test_iso_date(value: object, expected: str) -> None:
    assert iso_date(value) == expected


@pytest.mark.parametrize("value", ["29.11.2026", "2026-13-01", 20261129, None])
def test_iso_date_rejects(value: object) -> None:
    with pytest.raises(ValueError):
        iso_date(value)


def test_complete_front_matter_has_no_problems() -> None:
    assert problems(GOOD) == []
    assert dates(GOOD) == Dates("2026-11-01", "2026-11-29", "2026-11-28")


@pytest.mark.parametrize("key", ["title", "description", "date_published", "date_updated", "sources_checked"])
def test_each_key_is_required(key: str) -> None:
    meta = {k: v for k, v in GOOD.items() if k != key}
    assert problems(meta) == [f"front matter lacks '{key}'"]
    assert problems({**GOOD, key: "  "}) != []


def test_bad_dates_are_reported() -> None:
    assert "not an ISO date" in problems({**GOOD, "sources_checked": "soon"})[0]
    assert problems({**GOOD, "date_updated": "2026-10-01"}) == ["'date_updated' is earlier than 'date_published'"]
