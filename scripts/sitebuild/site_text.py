# The few words the site machinery itself writes, per language.
"""Labels of the dates block, the Markdown copies and llms.txt, in Russian, Uzbek (Latin) and English."""

from __future__ import annotations

TEXT: dict[str, dict[str, str]] = {
    "ru": {
        "published": "Опубликовано",
        "updated": "Обновлено",
        "sources_checked": "Источники проверены",
        "dates": "Даты страницы",
        "llms_line": "Оглавление сайта для языковых моделей: {url}",
        "main": "Основные страницы",
        "languages": "Другие языки",
        "optional": "Optional",
        "full": "Все страницы одним файлом",
        "full_note": "полный текст всех страниц на русском",
        "lang_note": "оглавление сайта {name}",
    },
    "uz": {
        "published": "E’lon qilingan",
        "updated": "Yangilangan",
        "sources_checked": "Manbalar tekshirilgan",
        "dates": "Sahifa sanalari",
        "llms_line": "Til modellari uchun sayt mundarijasi: {url}",
        "main": "Asosiy sahifalar",
        "languages": "Boshqa tillar",
        "optional": "Optional",
        "full": "Barcha sahifalar bitta faylda",
        "full_note": "barcha sahifalarning o‘zbekcha to‘liq matni",
        "lang_note": "sayt mundarijasi {name}",
    },
    "en": {
        "published": "Published",
        "updated": "Updated",
        "sources_checked": "Sources checked",
        "dates": "Page dates",
        "llms_line": "Site index for language models: {url}",
        "main": "Main pages",
        "languages": "Other languages",
        "optional": "Optional",
        "full": "All pages in one file",
        "full_note": "the full text of every page in English",
        "lang_note": "the site's index {name}",
    },
}

# Each language's name as a phrase of the reading language ("lang_note": the index in that language).
LANG_IN = {
    "ru": {"ru": "на русском", "uz": "на узбекском", "en": "на английском"},
    "uz": {"ru": "rus tilida", "uz": "o‘zbek tilida", "en": "ingliz tilida"},
    "en": {"ru": "in Russian", "uz": "in Uzbek", "en": "in English"},
}

# OpenGraph locales (language_TERRITORY, ogp.me).
OG_LOCALES = {"ru": "ru_RU", "uz": "uz_UZ", "en": "en_US"}


def text(lang: str, key: str, **values: str) -> str:
    """A label in `lang` (English when the language is unknown), with `{name}` fields filled."""
    return TEXT.get(lang, TEXT["en"])[key].format(**values)
