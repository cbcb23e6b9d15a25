# The printed range of an estimate: measured/estimated ratios of the published rows, by regime
# (sizing/data/residuals.json, built by scripts/residuals.py + residual_bands.py), the label and its reasons.
from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

_DATA = Path(__file__).parent / "data" / "residuals.json"
# The printed label: the regime's typical error (residuals.json "error": the median |error| with every source
# weighing the same, pooled like the band), high up to issue 11's median target of 4 %, medium up to twice it;
# "high" also needs HIGH_SOURCES sources: fewer cannot show that a new harness errs as little.
ERROR_LABELS = ((0.04, "high"), (0.08, "medium"))
HIGH_SOURCES = 3
UNMEASURED = {"low": 0.85, "high": 1.15, "n": 0}  # no row at any level of the key: a ±15 % band
_ORDER = ("high", "medium", "low")

# Why a label is lower than the data of its regime alone would give: code -> ru / uz / en.
REASONS: dict[str, dict[str, str]] = {
    "regime_unmeasured": {
        "ru": "нет опубликованных измерений этого режима: диапазон ±15 %",
        "uz": "bu rejim uchun e’lon qilingan o‘lchovlar yo‘q: oraliq ±15 %",
        "en": "no published measurement of this regime: a ±15 % range"},
    "few_sources": {
        "ru": "диапазон режима опирается на измерения менее чем трёх источников",
        "uz": "rejim oralig‘i uchtadan kam manbaning o‘lchovlariga tayanadi",
        "en": "the regime's range rests on measurements from fewer than three sources"},
    "regime_error": {
        "ru": "опубликованные измерения этого режима: медианная ошибка оценки {error} % "
              "(у каждого источника равный вес)",
        "uz": "bu rejimning e’lon qilingan o‘lchovlari: bahoning median xatosi {error} % (har bir manba teng vaznda)",
        "en": "published measurements of this regime: the estimate's median error is {error} % (each source weighing "
              "the same)"},
    "moe": {
        "ru": "активации смеси экспертов приближённые",
        "uz": "ekspertlar aralashmasi aktivatsiyalari taxminiy",
        "en": "mixture-of-experts activations are approximate"},
    "torch_compile": {
        "ru": "память скомпилированного графа (torch.compile) не моделируется по операциям",
        "uz": "kompilyatsiya qilingan graf (torch.compile) xotirasi amallar bo‘yicha modellanmaydi",
        "en": "the memory of a compiled graph (torch.compile) is not modelled op by op"},
    "peft_approximate": {
        "ru": "сохранённые тензоры этого метода PEFT приближённые",
        "uz": "bu PEFT usulining saqlangan tenzorlari taxminiy",
        "en": "the saved tensors of this PEFT method are approximate"},
    "checkpointing_unstated": {
        "ru": "gradient_checkpointing не указан: считается выключенным, но цикл или рецепт этого фреймворка "
              "может его включить",
        "uz": "gradient_checkpointing ko‘rsatilmagan: o‘chirilgan deb olinadi, lekin bu freymvorkning sikli yoki "
              "retsepti uni yoqishi mumkin",
        "en": "gradient_checkpointing is not stated: assumed off, but this framework's loop or recipe may turn it on"},
    "sliding_window": {
        "ru": "последовательность не короче скользящего окна, а слои с окном у модели чередуются с полными: маска "
              "SDPA и k/v, повторённые на все головы, посчитаны в каждом слое (оценка немного завышена)",
        "uz": "ketma-ketlik sirpanuvchi oynadan qisqa emas, modelda esa oynali qatlamlar to‘liq qatlamlar bilan "
              "almashinadi: SDPA niqobi va barcha boshlarga takrorlangan k/v har bir qatlamda hisoblangan (baho biroz "
              "yuqori)",
        "en": "the sequence reaches the sliding window, and the model mixes windowed and full layers: the SDPA mask "
              "and the k/v repeated to every head are counted in every layer (the estimate is slightly high)"},
    "dtype_assumed": {
        "ru": "тип весов в файлах модели неизвестен (в config.json нет torch_dtype): веса считаются в bfloat16, а "
              "файлы во float32 заняли бы вдвое больше; укажите torch_dtype",
        "uz": "model fayllaridagi vaznlar turi noma’lum (config.json’da torch_dtype yo‘q): vaznlar bfloat16 deb "
              "hisoblangan, float32 fayllar esa ikki baravar ko‘p joy egallaydi; torch_dtype ni ko‘rsating",
        "en": "the checkpoint's weight dtype is unknown (config.json has no torch_dtype): the weights are counted in "
              "bfloat16, and a float32 checkpoint would take twice the bytes; set torch_dtype"},
    "shape_matched": {
        "ru": "в model_config нет model_type: семейство определено по форме модели",
        "uz": "model_config’da model_type yo‘q: oila model shakli bo‘yicha aniqlangan",
        "en": "model_config has no model_type: the family was matched by the model's shape"},
}
# Inputs not covered by byte-exact checks: at least ±15 %.
GAPS = ("moe", "torch_compile", "peft_approximate")


@cache
def _groups() -> dict[str, dict[str, Any]]:
    data: dict[str, Any] = json.loads(_DATA.read_text(encoding="utf-8"))
    groups: dict[str, dict[str, Any]] = data["groups"]
    return groups


def regime_keys(method: str, tier: str, multi: bool) -> tuple[str, ...]:
    """The keys of a run's regime from the most specific to the broadest.

    The framework is no level: on the public rows nearly every per-framework group is one source, and pooling
    them measured worse out of sample (scripts/validate.py)."""
    gm = "multi" if multi else "single"
    return (f"{method}/{tier}/{gm}", f"{tier}/{gm}", tier)


def group(method: str, tier: str, multi: bool,
          groups: Mapping[str, Mapping[str, Any]] | None = None) -> tuple[str, Mapping[str, Any] | None]:
    """The most specific group with rows for the regime (and its key), or ("", None)."""
    table = _groups() if groups is None else groups
    for key in regime_keys(method, tier, multi):
        g = table.get(key)
        if g is not None:
            return key, g
    return "", None


def band(method: str, tier: str, multi: bool,
         groups: Mapping[str, Mapping[str, Any]] | None = None) -> tuple[float, float, str]:
    """(low, high) ratio of measured to estimated for the regime, and the key it comes from."""
    key, g = group(method, tier, multi, groups)
    if g is None:
        return UNMEASURED["low"], UNMEASURED["high"], ""
    return float(g["low"]), float(g["high"]), key


def widen(low: float, high: float, gaps: tuple[str, ...]) -> tuple[float, float]:
    """A band at least as wide as the unmeasured one when an input is not covered by exact checks."""
    if any(g in GAPS for g in gaps):
        return min(low, UNMEASURED["low"]), max(high, UNMEASURED["high"])
    return low, high


def _worst(*names: str) -> str:
    return max(names, key=_ORDER.index)


def confidence(g: Mapping[str, Any] | None, gaps: tuple[str, ...]) -> tuple[str, list[str]]:
    """The label and the reason codes: the regime's typical error, the number of sources behind it and the
    inputs' known gaps (REASONS)."""
    if g is None:
        return "low", ["regime_unmeasured", *gaps]
    reasons: list[str] = []
    err = float(g.get("error", 1.0))
    by_error = next((name for limit, name in ERROR_LABELS if err <= limit), "low")
    if by_error != "high":
        reasons.append("regime_error")
    if int(g.get("sources", 0)) < HIGH_SOURCES and by_error == "high":
        by_error = "medium"
        reasons.append("few_sources")
    name = by_error
    if {"shape_matched", "checkpointing_unstated", "dtype_assumed"} & set(gaps):  # a guess the rows cannot check
        name = _worst(name, "medium")
    if any(x in GAPS for x in gaps):
        name = "low"
    return name, reasons + list(gaps)


def reason_text(code: str, lang: str, group_error: float | None = None) -> str:
    """One reason in ru / uz / en (English for another language)."""
    words = REASONS[code]
    text = words.get(lang, words["en"])
    return text.format(error=f"{100 * (group_error or 0.0):.0f}")
