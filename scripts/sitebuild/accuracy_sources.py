"""The accuracy page's source ids resolved to their sources, and its worst rows (registered in sizing_blocks).

* `[[sizing:accuracy_sources]]`: each source id the scores use (S01, S03, ...) with the published file it
  comes from (validation/measurements.csv `source_url`, pinned to a commit), its scored rows and median error.
* `[[sizing:accuracy_worst n=N]]`: the N scored rows the estimate misses most, with what each one is.
"""

from __future__ import annotations

import csv
import functools
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from sitebuild.sizing_labels import fmt_int, fmt_num

ROOT = Path(__file__).resolve().parents[2]
WORDS: dict[str, dict[str, str]] = {
    "source": {"ru": "Источник", "uz": "Manba", "en": "Source"},
    "where": {"ru": "Где опубликовано", "uz": "Qayerda e’lon qilingan", "en": "Where it is published"},
    "more": {"ru": "(+ ещё {n})", "uz": "(+ yana {n})", "en": "(+ {n} more)"},
    "rows": {"ru": "Строк в оценке", "uz": "Baholangan qatorlar", "en": "Rows scored"},
    "median": {"ru": "Медиана модуля ошибки, %", "uz": "Xato modulining medianasi, %",
               "en": "Median absolute error, %"},
    "row": {"ru": "Строка", "uz": "Qator", "en": "Row"},
    "model": {"ru": "Модель", "uz": "Model", "en": "Model"},
    "method": {"ru": "Метод", "uz": "Usul", "en": "Method"},
    "gpus": {"ru": "Число GPU", "uz": "GPU soni", "en": "GPUs"},
    "measured": {"ru": "Измерено, ГиБ", "uz": "O‘lchangan, GiB", "en": "Measured, GiB"},
    "estimated": {"ru": "Оценка, ГиБ", "uz": "Baho, GiB", "en": "Estimated, GiB"},
    "error": {"ru": "Ошибка, %", "uz": "Xato, %", "en": "Error, %"},
}


@functools.cache
def _rows() -> dict[str, dict[str, str]]:
    with (ROOT / "validation" / "measurements.csv").open(encoding="utf-8", newline="") as f:
        return {r["row_id"]: r for r in csv.DictReader(f)}


def _short(url: str) -> str:
    """owner/repo and the file (or pull request) of a GitHub URL, for the link text."""
    parts = urlsplit(url).path.strip("/").split("/")
    if len(parts) >= 5 and parts[2] == "blob":
        return f"{parts[0]}/{parts[1]} `{'/'.join(parts[4:])}` @{parts[3][:7]}"
    return "/".join(parts)


def _table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def _scored() -> tuple[Any, list[Any]]:
    from sitebuild.sizing_blocks import _validation  # imported here: sizing_blocks imports this module

    return _validation()


def accuracy_sources(_: list[str], kw: dict[str, Any], lang: str) -> str:
    """Every source id of the scores, linked to its published file, with its rows and median |error|."""
    validate, scored = _scored()
    urls: dict[str, list[str]] = {}
    for row in _rows().values():
        found = urls.setdefault(row["source_id"].split("_")[0], [])
        if row["source_url"] not in found:
            found.append(row["source_url"])
    out = []
    for source, group in sorted(validate.group(scored, "source").items()):
        errors = sorted(abs(s.error_pct) for s in group)
        median = errors[len(errors) // 2] if len(errors) % 2 else (errors[len(errors) // 2 - 1]
                                                                    + errors[len(errors) // 2]) / 2
        first, *more = urls[source]
        where = f"[{_short(first)}]({first})" + (f" {WORDS['more'][lang].format(n=len(more))}" if more else "")
        out.append([source, where, fmt_int(len(group), lang), fmt_num(median, lang, 1)])
    return _table([WORDS[k][lang] for k in ("source", "where", "rows", "median")], out)


def accuracy_worst(_: list[str], kw: dict[str, Any], lang: str) -> str:
    """The `n` scored rows with the largest |error|: what was run, measured and estimated."""
    _, scored = _scored()
    rows = _rows()
    out = []
    for s in sorted(scored, key=lambda s: -abs(s.error_pct))[: int(kw.get("n", 5))]:
        r = rows[s.row_id]
        out.append([s.row_id, s.source, f"`{r['model']}`", s.method, fmt_int(s.gpus, lang), r["gpu_model"],
                    fmt_num(s.measured_gib, lang, 2) if s.measured_gib is not None else "—",
                    fmt_num(s.estimated_gib, lang, 2), fmt_num(s.error_pct, lang, 1)])
    head = [WORDS[k][lang] for k in ("row", "source", "model", "method", "gpus")] + ["GPU"] + [
        WORDS[k][lang] for k in ("measured", "estimated", "error")]
    return _table(head, out)


HANDLERS = {"accuracy_sources": accuracy_sources, "accuracy_worst": accuracy_worst}

__all__ = ["HANDLERS", "accuracy_sources", "accuracy_worst"]
