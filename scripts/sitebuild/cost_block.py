"""`[[sizing:cost_table gpus=A,B,C key=value ...]]`: what one run costs in time on several cards (registered in
sizing_blocks).

For each card: the fewest GPUs that hold the configuration (FSDP beyond one), tokens per second, the run's
wall hours with the engine's range, GPU-hours, GPU-hours per million training tokens, and the hourly price
ratio at which the card costs the same per run as the first card of the list. Prices are the reader's:
cost = GPU-hours × price per GPU-hour.
"""

from __future__ import annotations

import functools
import json
from dataclasses import replace
from typing import Any

from sitebuild.sizing_labels import fmt_num
from sizing import estimate
from sizing.catalog import find_gpu
from sizing.config import parse_config
from sizing.solve import Sizer

WORDS: dict[str, dict[str, str]] = {
    "gpu": {"ru": "GPU", "uz": "GPU", "en": "GPU"},
    "count": {"ru": "Число карт", "uz": "Kartalar soni", "en": "Cards"},
    "tps": {"ru": "Токенов/с", "uz": "Token/s", "en": "Tokens/s"},
    "hours": {"ru": "Часы (диапазон)", "uz": "Soat (oraliq)", "en": "Hours (range)"},
    "gpu_hours": {"ru": "GPU-часы", "uz": "GPU-soat", "en": "GPU-hours"},
    "per_m": {"ru": "GPU-часы на млн токенов", "uz": "Mln token uchun GPU-soat",
              "en": "GPU-hours per million tokens"},
    "break_even": {"ru": "Цена за час, при которой стоимость равна первой карте",
                   "uz": "Birinchi karta bilan teng narx beradigan soatlik narx",
                   "en": "Hourly price at which it costs the same as the first card"},
    "none": {"ru": "не помещается", "uz": "sig‘maydi", "en": "does not fit"},
    "times": {"ru": "× цена первой", "uz": "× birinchisining narxi", "en": "× the first one's price"},
}


@functools.lru_cache(maxsize=64)
def _row(key: str, gpu_id: str) -> tuple[int, float, float, float, float] | None:
    """(GPUs, tokens/s, hours, hours low, hours high) of the configuration on the fewest cards that hold it."""
    cfg = replace(parse_config(json.loads(key)), gpu=gpu_id)
    count, mode = Sizer(cfg).fewest_gpus(find_gpu(gpu_id))
    if count == 0:
        return None
    run = replace(cfg, num_gpus=count, parallelism=mode if count > 1 else "none")
    t = estimate(run).time
    if t is None or t.get("total_hours") is None:
        return None
    low, high = t["range"]["total_hours"]
    return count, float(t["tokens_per_second"]), float(t["total_hours"]), float(low), float(high)


def cost_table(_: list[str], kw: dict[str, Any], lang: str) -> str:
    """The table: one row per card of `gpus`, the first card the reference of the break-even column."""
    ids = str(kw.pop("gpus")).split(",")
    key = json.dumps(kw, sort_keys=True)
    tokens = float(kw["dataset_tokens"]) * float(kw.get("num_train_epochs", 3.0))
    head = [WORDS[k][lang] for k in ("gpu", "count", "tps", "hours", "gpu_hours", "per_m", "break_even")]
    rows, first_gpu_hours = [], None
    for gpu_id in ids:
        row = _row(key, gpu_id)
        if row is None:
            rows.append([find_gpu(gpu_id).name, WORDS["none"][lang], "—", "—", "—", "—", "—"])
            continue
        count, tps, hours, low, high = row
        gpu_hours = hours * count
        if first_gpu_hours is None:
            first_gpu_hours = gpu_hours
        rows.append([find_gpu(gpu_id).name, str(count), fmt_num(tps, lang, 0),
                     f"{fmt_num(hours, lang, 1)} ({fmt_num(low, lang, 1)}–{fmt_num(high, lang, 1)})",
                     fmt_num(gpu_hours, lang, 1), fmt_num(gpu_hours / tokens * 1e6, lang, 3),
                     f"{fmt_num(first_gpu_hours / gpu_hours, lang, 2)} {WORDS['times'][lang]}"])
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


# datasets' arrow_writer.OptimizedTypedSequence stores input_ids as int32 and attention_mask as int8; a
# labels column (not optimized) is int64.
TOKEN_BYTES = {"input_ids": 4, "attention_mask": 1, "labels": 8}


def prepared_dataset(_: list[str], kw: dict[str, Any], lang: str) -> str:
    """`[[sizing:prepared_dataset tokens=N labels=true]]`: GiB of a tokenized dataset of N tokens on disk
    (Arrow columns, before compression), with or without a stored labels column."""
    per_token = TOKEN_BYTES["input_ids"] + TOKEN_BYTES["attention_mask"] + (
        TOKEN_BYTES["labels"] if kw.get("labels", True) else 0)
    return fmt_num(int(kw["tokens"]) * per_token / 2**30, lang, 2)


HANDLERS = {"cost_table": cost_table, "prepared_dataset": prepared_dataset}

__all__ = ["HANDLERS", "cost_table", "prepared_dataset"]
