# A page's ISO date as its language writes it: "1 декабря 2026 г.", "2026-yil 1-dekabr", "1 December 2026".
from __future__ import annotations

import datetime as dt

MONTHS = {
    "ru": ("января", "февраля", "марта", "апреля", "мая", "июня", "июля", "августа", "сентября", "октября",
           "ноября", "декабря"),
    "uz": ("yanvar", "fevral", "mart", "aprel", "may", "iyun", "iyul", "avgust", "sentabr", "oktabr", "noyabr",
           "dekabr"),
    "en": ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December"),
}


def localized(iso: str, lang: str) -> str:
    """The ISO date `iso` (YYYY-MM-DD) in the words of `lang`; ISO itself for a language without a rule."""
    day = dt.date.fromisoformat(iso)
    if lang not in MONTHS:
        return iso
    month = MONTHS[lang][day.month - 1]
    if lang == "ru":
        return f"{day.day} {month} {day.year} г."
    if lang == "uz":
        return f"{day.year}-yil {day.day}-{month}"
    return f"{day.day} {month} {day.year}"
