"""`[[sizing:ladder key=value ...]]`: the "it does not fit" ladder of one configuration (sizing.ladder) as a table.

Registered in sizing_blocks.HANDLERS, with the inline `[[sizing:fits ...]]` (yes / no in the page's
language). Arguments are the configuration's fields (contract names), `gpu=` the card it must fit; each
row is a lever applied on top of the rows above, with the GiB it saves, the peak after it, whether it
then fits, and its cost in time and in GPU-hours from the engine's time estimate.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from sitebuild.sizing_labels import fmt_gib, fmt_num
from sizing.catalog import find_gpu
from sizing.config import parse_config
from sizing.ladder import Ladder, Rung, ladder
from sizing.solve import Sizer

WORDS: dict[str, dict[str, str]] = {
    "lever": {"ru": "Рычаг", "uz": "Dastak", "en": "Lever"},
    "change": {"ru": "Что меняется", "uz": "Nima o‘zgaradi", "en": "Change"},
    "saves": {"ru": "Экономит, ГиБ", "uz": "Tejaydi, GiB", "en": "Saves, GiB"},
    "after": {"ru": "Пик после, ГиБ", "uz": "Keyingi cho‘qqi, GiB", "en": "Peak after, GiB"},
    "fits": {"ru": "Помещается", "uz": "Sig‘adi", "en": "Fits"},
    "time": {"ru": "Время на токен", "uz": "Token uchun vaqt", "en": "Time per token"},
    "gpu_hours": {"ru": "GPU-часы на токен", "uz": "Token uchun GPU-soat", "en": "GPU-hours per token"},
    "start": {"ru": "Исходная конфигурация", "uz": "Boshlang‘ich konfiguratsiya", "en": "Starting configuration"},
    "available": {"ru": "доступно после контекста CUDA, ГиБ", "uz": "CUDA kontekstidan keyin mavjud, GiB",
                  "en": "usable after the CUDA context, GiB"},
    "yes": {"ru": "да", "uz": "ha", "en": "yes"},
    "no": {"ru": "нет", "uz": "yo‘q", "en": "no"},
    "same": {"ru": "без изменений в модели времени", "uz": "vaqt modelida o‘zgarishsiz",
             "en": "unchanged in the time model"},
    "fused_loss": {"ru": "Функция потерь без полных логитов", "uz": "To‘liq logitlarsiz yo‘qotish",
                   "en": "Loss without the full logits"},
    "no_kbit_upcast": {"ru": "Без повышения до fp32 в `prepare_model_for_kbit_training`",
                       "uz": "`prepare_model_for_kbit_training`-ning fp32 ga ko‘tarishisiz",
                       "en": "No fp32 up-cast from `prepare_model_for_kbit_training`"},
    "gradient_checkpointing": {"ru": "Пересчёт активаций (gradient checkpointing)",
                               "uz": "Aktivatsiyalarni qayta hisoblash (gradient checkpointing)",
                               "en": "Gradient checkpointing"},
    "micro_batch": {"ru": "Микробатч 1 с накоплением градиентов", "uz": "Gradiyentlarni to‘plash bilan mikrobatch 1",
                    "en": "Micro-batch 1 with gradient accumulation"},
    "shorter_sequence": {"ru": "Вдвое короче последовательность, вдвое больше накопления",
                         "uz": "Ketma-ketlik ikki baravar qisqa, to‘plash ikki baravar ko‘p",
                         "en": "Half the sequence length, twice the accumulation"},
    "eight_bit_optimizer": {"ru": "8-битный страничный оптимизатор", "uz": "8 bitli sahifali optimizator",
                            "en": "8-bit paged optimizer"},
    "qlora": {"ru": "QLoRA: база в 4 битах (NF4)", "uz": "QLoRA: asos 4 bitda (NF4)",
              "en": "QLoRA: a 4-bit (NF4) base"},
    "fsdp": {"ru": "FSDP на нескольких GPU", "uz": "Bir nechta GPUda FSDP", "en": "FSDP across more GPUs"},
    "cpu_offload": {"ru": "Выгрузка в память CPU", "uz": "CPU xotirasiga chiqarish", "en": "CPU offload"},
}


def _w(key: str, lang: str) -> str:
    return WORDS[key][lang]


def _change(rung: Rung) -> str:
    # The fields as the configuration names them: the reader can set them in the calculator or the recipe.
    return ", ".join(f"`{k}={str(v).lower() if isinstance(v, bool) else v}`" for k, v in rung.change.items()
                     if k not in ("load_in_4bit", "bnb_4bit_compute_dtype"))


def _factor(value: float | None, lang: str) -> str:
    if value is None:
        return "—"
    if abs(value - 1.0) < 0.0005:
        return _w("same", lang)
    return "×" + fmt_num(value, lang, 2)


def render(result: Ladder, lang: str) -> str:
    """The ladder as a Markdown table in language `lang`."""
    head = [_w(k, lang) for k in ("lever", "change", "saves", "after", "fits", "time", "gpu_hours")]
    yes_no = {True: _w("yes", lang), False: _w("no", lang)}
    start = f"*{_w('start', lang)}* ({result.gpu}, {_w('available', lang)}: {fmt_gib(result.usable_bytes, lang)})"
    rows = [[start, "—", "—", fmt_gib(result.reserved_bytes, lang),
             yes_no[result.fits], "—", "—"]]
    for r in result.rungs:
        rows.append([_w(r.lever, lang), _change(r), fmt_gib(r.saved_bytes, lang), fmt_gib(r.reserved_bytes, lang),
                     yes_no[r.fits], _factor(r.time_factor, lang), _factor(r.gpu_hours_factor, lang)])
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def fits_word(_: list[str], kw: dict[str, Any], lang: str) -> str:
    """`[[sizing:fits ...]]`: "yes" or "no" in `lang`, whether the configuration fits its GPU (sizing.ladder's rule)."""
    cfg = parse_config(kw)
    return _w("yes" if Sizer(cfg).fits(find_gpu(cfg.gpu or "H100-SXM-80GB")) else "no", lang)


def ladder_block(_: list[str], kw: dict[str, Any], lang: str) -> str:
    """`[[sizing:ladder ...]]`: the ladder of the configuration given by the arguments."""
    return render(_ladder(json.dumps(kw, sort_keys=True)), lang)


@functools.lru_cache(maxsize=64)
def _ladder(key: str) -> Ladder:
    # The same configuration recurs in the three languages: climbed once per build.
    return ladder(json.loads(key))


__all__ = ["WORDS", "fits_word", "ladder_block", "render"]
