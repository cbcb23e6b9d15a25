"""`[[sizing:gpu_verdict gpu=ID]]`: what a GPU page's card is for, in one line (registered in sizing_blocks).

From the quick answer's models and configuration (sitebuild.quick_answer): the largest of those models
(by bf16 weight bytes) whose LoRA and QLoRA runs fit the card at 2k and 8k tokens, under TRL's stack and
the plain Trainer's; and the caveats that the catalog record implies: no bf16, no confirmed bitsandbytes,
an estimated `total_memory`, no sourced BF16 throughput.
"""

from __future__ import annotations

import functools
from typing import Any

from sitebuild import quick_answer as qa
from sizing import estimate
from sizing.catalog import Gpu, find_gpu
from sizing.config import parse_config
from sizing.errors import SizingError

WORDS: dict[str, dict[str, str]] = {
    "verdict": {"ru": "**Для чего эта карта** (самая крупная из моделей [быстрого ответа](../index.md), у которой "
                      "помещается микробатч 1):",
                "uz": "**Bu karta nima uchun** ([tezkor javob](../index.md) modellaridan mikrobatch 1 sig‘adigan eng "
                      "kattasi):",
                "en": "**What this card is for** (the largest of the [quick answer's](../index.md) models that fits "
                      "micro-batch 1):"},
    "line": {"ru": "{method} на {k} токенах: до `{trl}` с TRL, до `{hf}` с обычным `Trainer`.",
             "uz": "{k} tokenda {method}: TRL bilan `{trl}` gacha, oddiy `Trainer` bilan `{hf}` gacha.",
             "en": "{method} at {k} tokens: up to `{trl}` with TRL, up to `{hf}` with the plain `Trainer`."},
    "nothing": {"ru": "ни одной из моделей быстрого ответа", "uz": "tezkor javob modellaridan hech biri",
                "en": "none of the quick answer's models"},
    "no_bf16": {"ru": "Карта не поддерживает bf16: запуски в bf16 на ней не работают (✗ в таблице), нужен fp16 "
                      "с масштабированием потерь.",
                "uz": "Karta bf16 ni qo‘llab-quvvatlamaydi: bf16 dagi ishga tushirishlar unda ishlamaydi (jadvalda ✗), "
                      "yo‘qotishni masshtablash bilan fp16 kerak.",
                "en": "The card has no bf16: bf16 runs do not work on it (✗ in the table); use fp16 with loss "
                      "scaling."},
    "no_bnb": {"ru": "Поддержка bitsandbytes не подтверждена: QLoRA не оценивается.",
               "uz": "bitsandbytes qo‘llab-quvvatlanishi tasdiqlanmagan: QLoRA baholanmaydi.",
               "en": "bitsandbytes support is not confirmed: QLoRA is not rated."},
    "est_total": {"ru": "`total_memory` этой карты не опубликован: память, доступная CUDA, — это `nvidia-smi` "
                        "минус типичный резерв драйвера, оценка.",
                  "uz": "Bu kartaning `total_memory` qiymati e’lon qilinmagan: CUDA uchun mavjud xotira — bu "
                        "`nvidia-smi` minus odatiy drayver zaxirasi, ya’ni baho.",
                  "en": "This card's `total_memory` is not published: the memory available to CUDA is `nvidia-smi` "
                        "minus a typical driver reservation, an estimate."},
    "no_tflops": {"ru": "«—» в строке BF16 TFLOPS: {why}.", "uz": "BF16 TFLOPS qatoridagi «—»: {why}.",
                  "en": "\"—\" in the BF16 TFLOPS row: {why}."},
    "unsupported": {"ru": "bf16 не поддерживается", "uz": "bf16 qo‘llab-quvvatlanmaydi", "en": "bf16 is not supported"},
    "unsourced": {"ru": "число не найдено в источниках", "uz": "son manbalarda topilmagan",
                  "en": "no source gives the figure"},
}


@functools.cache
def _weight_rank() -> tuple[str, ...]:
    """The quick answer's models, largest bf16 weights first (sizing's own count, not the model's name)."""
    def weights(model: str) -> int:
        config = {**qa.base_config(), "model": model, "method": "lora", "target_modules": qa.ATTENTION_TARGETS}
        return int(estimate(parse_config(config)).components["weights"])

    return tuple(sorted(qa.MODELS, key=weights, reverse=True))


def _largest(gpu: Gpu, method: str, seq: int, stack: str) -> str | None:
    for model in _weight_rank():
        c = qa.cell(model, method, seq, stack)
        query = {k: v for k, v in c.query.items() if k not in ("gpu", "num_gpus", "parallelism")}
        try:
            if qa.sizer(query).fits(gpu):  # a Sizer takes the GPU per call: one per configuration
                return model
        except SizingError:
            continue
    return None


def gpu_verdict(_: list[str], kw: dict[str, Any], lang: str) -> str:
    """The verdict paragraph of one GPU page."""
    gpu = find_gpu(str(kw["gpu"]))
    w = {k: v[lang] for k, v in WORDS.items()}
    lines: list[str] = []
    if gpu.supports.get("bf16") is not True:
        lines.append(w["no_bf16"])
    else:
        for method in qa.METHODS:
            if method == "qlora" and gpu.supports.get("bitsandbytes") is not True:
                lines.append(w["no_bnb"])
                continue
            for seq in (2048, 8192):
                trl, hf = (_largest(gpu, method, seq, s) or w["nothing"] for s in ("trl", "transformers"))
                name = "LoRA" if method == "lora" else "QLoRA"
                lines.append(w["line"].format(method=name, k=f"{seq // 1024}k", trl=trl, hf=hf)
                             .replace(f"`{w['nothing']}`", w["nothing"]))
    if not gpu.torch_total_memory_bytes:
        lines.append(w["est_total"])
    if not gpu.bf16_dense_tflops:
        why = w["unsupported"] if gpu.supports.get("bf16") is not True else w["unsourced"]
        lines.append(w["no_tflops"].format(why=why))
    return w["verdict"] + "\n\n" + "\n".join(f"- {line}" for line in lines)


HANDLERS = {"gpu_verdict": gpu_verdict}

__all__ = ["HANDLERS", "gpu_verdict"]
