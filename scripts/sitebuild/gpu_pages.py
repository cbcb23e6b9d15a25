"""Write the GPU pages' Markdown sources (words and placeholders only; every number is computed by
`sizing` when the site is built). Run `PYTHONPATH=scripts python -m sitebuild.gpu_pages` after changing them;
`--check` lists the committed pages that differ (tests/site/test_gpu_pages.py fails on any)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from sizing.catalog import find_gpu

ROOT = Path(__file__).resolve().parents[2]

PAGES = ("RTX-A5000-24GB", "RTX-4090-24GB", "L4-24GB", "A10G-24GB", "L40S-48GB", "A100-SXM-40GB", "A100-SXM-80GB",
         "H100-SXM-80GB", "H100-NVL-94GB", "H200-SXM-141GB", "B200-180GB", "B300-288GB", "T4-16GB")
DATE = "2026-11-29"

TEXT = {
    "ru": {
        "title": "{name}: что помещается при LoRA и QLoRA",
        "description": "Характеристики {name} с источниками и рассчитанные калькулятором таблицы: какие модели, "
                       "контексты и микробатчи помещаются при LoRA и QLoRA.",
        "intro": "Таблицы и график на этой странице посчитаны пакетом `sizing` при сборке сайта, тем же кодом, что "
                 "работает в калькуляторе. Это иллюстрация метода для указанных настроек, а не обещание: перед "
                 "арендой проведите короткий пробный запуск (см. [пробный запуск](../guides/trial-run.md)).",
        "specs": "Характеристики", "fits": "Что помещается",
        "fits_text": "Эталонные прогоны: LoRA (веса bf16) и QLoRA (NF4 с двойной квантизацией), ранг 16 на всех "
                     "линейных слоях, пересчёт активаций (gradient checkpointing), упакованные последовательности, "
                     "микробатч 1. Запас считается от памяти, доступной процессу после контекста CUDA "
                     "(строка таблицы выше).",
        "open": "Свой запуск на этой карте: [открыть калькулятор с {name}](../calculator/index.md?gpu={gpu_id}).",
        "chart": "Память в зависимости от длины контекста",
        "chart_text": "Зарезервированная память (как `torch.cuda.max_memory_reserved`) для Llama 3.1 8B; "
                      "пунктир — память, доступная процессу после контекста CUDA.",
        "sources": "Источники раздела", "specs_sources": "Источники характеристик",
        "src_method": "Как считается оценка и насколько она точна",
        "src_memory": "Что занимает память",
    },
    "uz": {
        "title": "{name}: LoRA va QLoRA uchun nimalar sig‘adi",
        "description": "{name} xususiyatlari manbalari bilan va kalkulyator hisoblagan jadvallar: LoRA va QLoRA "
                       "uchun qaysi modellar, kontekstlar va mikrobatchlar sig‘adi.",
        "intro": "Bu sahifadagi jadval va grafik sayt yig‘ilayotganda `sizing` paketi tomonidan hisoblangan — "
                 "kalkulyatorda ishlaydigan xuddi shu kod bilan. Bu ko‘rsatilgan sozlamalar uchun usulning "
                 "namunasi, va’da emas: ijaradan oldin qisqa sinov ishga tushirishni o‘tkazing "
                 "([sinov ishga tushirish](../guides/trial-run.md)).",
        "specs": "Xususiyatlar", "fits": "Nimalar sig‘adi",
        "fits_text": "Namunaviy ishga tushirishlar: LoRA (bf16 vaznlar) va QLoRA (ikki bosqichli kvantlashli NF4), "
                     "barcha chiziqli qatlamlarda 16-rang, aktivatsiyalarni qayta hisoblash (gradient checkpointing), "
                     "zichlangan ketma-ketliklar, mikrobatch 1. Zaxira CUDA kontekstidan keyin jarayonga mavjud "
                     "xotiradan hisoblanadi (yuqoridagi jadval qatori).",
        "open": "Shu kartadagi o‘z ishga tushirishingiz: [kalkulyatorni {name} bilan ochish]"
                "(../calculator/index.md?gpu={gpu_id}).",
        "chart": "Kontekst uzunligiga qarab xotira",
        "chart_text": "Llama 3.1 8B uchun zaxiralangan xotira (`torch.cuda.max_memory_reserved` kabi); "
                      "uzuq chiziq — CUDA kontekstidan keyin jarayonga mavjud xotira.",
        "sources": "Bo‘lim manbalari", "specs_sources": "Xususiyatlar manbalari",
        "src_method": "Baho qanday hisoblanadi va qanchalik aniq",
        "src_memory": "Xotirani nima egallaydi",
    },
    "en": {
        "title": "{name}: what fits for LoRA and QLoRA",
        "description": "{name} specifications with sources, and tables computed by the calculator: which models, "
                       "contexts and micro-batches fit for LoRA and QLoRA.",
        "intro": "The tables and the chart on this page are computed by the `sizing` package when the site is "
                 "built, with the same code the calculator runs. They illustrate the method for the stated "
                 "settings and are not a promise: run a short trial before you rent (see "
                 "[the trial run](../guides/trial-run.md)).",
        "specs": "Specifications", "fits": "What fits",
        "fits_text": "Reference runs: LoRA (bf16 weights) and QLoRA (NF4 with double quantization), rank 16 on "
                     "all linear layers, gradient checkpointing, packed sequences, micro-batch 1. Headroom is "
                     "measured against the memory usable after the CUDA context (the row of the table above).",
        "open": "Your own run on this card: [open the calculator with the {name}]"
                "(../calculator/index.md?gpu={gpu_id}).",
        "chart": "Memory against context length",
        "chart_text": "Reserved memory (as `torch.cuda.max_memory_reserved`) for Llama 3.1 8B; the dashed line is "
                      "the memory usable after the CUDA context.",
        "sources": "Sources for this section", "specs_sources": "Sources of the specifications",
        "src_method": "How the estimate is made and how accurate it is",
        "src_memory": "What takes memory",
    },
}


def _escape(text: str) -> str:
    """Source notes hold file globs (gls/*_smi.py): keep Markdown from reading them as emphasis."""
    return re.sub(r"([*_`\[\]])", r"\\\1", text)


GITHUB_FILE = re.compile(r"\b([\w.-]+/[\w.-]+) ([\w./-]+(?:, [\w./-]+)*) @([0-9a-f]{40})\b")
GITHUB_REF = re.compile(r"\b([\w.-]+/[\w.-]+) (PR |issue )?#(\d+)\b")


def _github_link(text: str) -> str | None:
    """A source written as `owner/repo path @commit` or `owner/repo PR #N` as a Markdown link, else None."""
    m = GITHUB_FILE.search(text)
    if m:
        first = m.group(2).split(", ")[0]
        url = f"https://github.com/{m.group(1)}/blob/{m.group(3)}/{first}"
        return f"- {_escape(text[:m.start()])}[{_escape(m.group(0))}]({url}){_escape(text[m.end():])}"
    m = GITHUB_REF.search(text)
    if m:
        kind = "pull" if m.group(2) == "PR " else "issues"
        url = f"https://github.com/{m.group(1)}/{kind}/{m.group(3)}"
        return f"- {_escape(text[:m.start()])}[{_escape(m.group(0))}]({url}){_escape(text[m.end():])}"
    return None


def source_line(text: str) -> str:
    """A catalog source as a list item; a URL inside it becomes an autolink, a GitHub reference a link."""
    match = re.search(r"https?://[^\s)>]+", text)
    if not match:
        return _github_link(text) or f"- {_escape(text)}"
    url = match.group(0).rstrip(".,;")
    head, _, tail = text.partition(url)
    return f"- {_escape(head)}<{url}>{_escape(tail)}"


def page(gpu_id: str, lang: str) -> str:
    gpu = find_gpu(gpu_id)
    t = TEXT[lang]
    title = t["title"].format(name=gpu.name)
    srcs = "\n".join(source_line(s) for s in gpu.record.get("sources", []))
    # the specifications' sources (file paths, commits) come last: a reader looks for "What fits" first
    return f"""---
title: "{title}"
description: "{t['description'].format(name=gpu.name)}"
date_published: {DATE}
date_updated: {DATE}
sources_checked: {DATE}
---

# {title}

{t['intro']}

[[sizing:gpu_verdict gpu={gpu_id}]]

## {t['specs']}

[[sizing:gpu_specs gpu={gpu_id}]]

## {t['fits']}

{t['fits_text']}

[[sizing:gpu_fit_table gpu={gpu_id}]]

{t['open'].format(name=gpu.name, gpu_id=gpu_id)}

### {t['sources']}

- [{t['src_method']}](../accuracy.md)
- [{t['src_memory']}](../guides/memory.md)

## {t['chart']}

{t['chart_text']}

[[sizing:gpu_context_chart gpu={gpu_id}]]

### {t['sources']}

- [{t['src_method']}](../accuracy.md)

## {t['specs_sources']}

{srcs}
"""


def pages() -> dict[Path, str]:
    """Every generated page: its path under docs/gpus/ and its text."""
    out = ROOT / "docs" / "gpus"
    return {out / f"{gpu_id.lower()}.{lang}.md": page(gpu_id, lang) for gpu_id in PAGES for lang in TEXT}


def stale() -> list[Path]:
    """The committed pages that differ from what the generator writes now (missing ones included)."""
    return [path for path, text in pages().items()
            if not path.is_file() or path.read_text(encoding="utf-8") != text]


def main(argv: list[str] | None = None) -> int:
    """Write the pages; with --check, only list the stale ones (exit 1 if any)."""
    args = sys.argv[1:] if argv is None else argv
    if "--check" in args:
        found = stale()
        for path in found:
            print(f"stale: {path.relative_to(ROOT)} (run PYTHONPATH=scripts python -m sitebuild.gpu_pages)")
        return 1 if found else 0
    for path, text in pages().items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
