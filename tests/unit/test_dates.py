# Page dates as each language writes them (Russian genitive month and "г."; Uzbek "YYYY-yil D-oy" in Latin).
from __future__ import annotations

import pytest

from sitebuild.dates import localized


@pytest.mark.parametrize(("lang", "expected"), [("ru", "1 декабря 2026 г."), ("uz", "2026-yil 1-dekabr"),
                                                ("en", "1 December 2026")])
def test_first_of_december(lang: str, expected: str) -> None:
    assert localized("2026-12-01", lang) == expected


def test_every_month_has_a_word_and_other_languages_keep_iso() -> None:
    assert localized("2026-05-29", "ru") == "29 мая 2026 г."
    assert localized("2026-02-09", "uz") == "2026-yil 9-fevral"
    assert localized("2026-11-29", "de") == "2026-11-29"
    with pytest.raises(ValueError):
        localized("2026-13-01", "en")
