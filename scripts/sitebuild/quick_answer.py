"""The quick answer: popular models × LoRA / QLoRA × 2k / 8k / 32k tokens, the smallest catalog card that fits.

`[[sizing:quick_answer]]` (registered in sizing_blocks.HANDLERS): for each cell, under two stacks (the plain
Trainer loss with `prepare_model_for_kbit_training`, and TRL's SFTTrainer with its chunked loss), the card
with the least memory available to CUDA that fits micro-batch 1, the largest micro-batch it holds, and a
link that opens the calculator with exactly that configuration. Argument `calc=` is the calculator page's
path relative to the page (default `calculator/index.md`, the home page's).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from sizing import SizingError
from sizing.catalog import Gpu, find_gpu, gpus
from sizing.config import parse_config
from sizing.estimate import usable_bytes
from sizing.solve import Sizer

# Widely fine-tuned open models of 8B to 70B parameters, dense and MoE (catalog ids in sizing/data/models.json).
MODELS = ("meta-llama/Llama-3.1-8B", "Qwen/Qwen3-8B", "Qwen/Qwen3-14B", "Qwen/Qwen3-32B", "google/gemma-3-27b-it",
          "meta-llama/Llama-3.3-70B-Instruct", "mistralai/Mixtral-8x7B-v0.1", "Qwen/Qwen3-30B-A3B")
METHODS = ("lora", "qlora")
CONTEXTS = (2048, 8192, 32768)
# framework=transformers: the model's own loss (fp32 logits) and prepare_model_for_kbit_training for QLoRA;
# framework=trl: SFTTrainer's chunked loss, no fp32 up-cast (sizing.memory.regime resolves both).
STACKS = ("transformers", "trl")
# When all-linear takes in a layer narrower than r (an MoE router, where a model's code has it as a Linear), the row
# adapts the attention projections instead, and says so.
ATTENTION_TARGETS = "q_proj,k_proj,v_proj,o_proj"

TEXT: dict[str, dict[str, str]] = {
    "model": {"ru": "Модель", "uz": "Model", "en": "Model"},
    "method": {"ru": "Метод", "uz": "Usul", "en": "Method"},
    "tokens": {"ru": "токенов", "uz": "token", "en": "tokens"},
    "none": {"ru": "не помещается", "uz": "sig‘maydi", "en": "does not fit"},
    "legend": {
        "ru": "В ячейке — карта каталога с наименьшей памятью, доступной CUDA, на которой помещается микробатч 1, "
              "и после «×» — наибольший микробатч на ней; ссылка открывает калькулятор с этой конфигурацией. "
              "**Trainer** — обычный `Trainer` (функция потерь модели с логитами в fp32, для QLoRA — "
              "`prepare_model_for_kbit_training`), **TRL** — `SFTTrainer` с функцией потерь по частям. "
              "Если ни одна карта не вмещает запуск, указано наименьшее число самых больших карт при FSDP. "
              "Общие настройки: {base}.",
        "uz": "Katakda — CUDA uchun mavjud xotirasi eng kichik bo‘lgan, mikrobatch 1 sig‘adigan katalog kartasi, "
              "«×» dan keyin esa undagi eng katta mikrobatch; havola kalkulyatorni shu konfiguratsiya bilan "
              "ochadi. **Trainer** — oddiy `Trainer` (logitlari fp32 bo‘lgan model yo‘qotishi, QLoRA uchun "
              "`prepare_model_for_kbit_training`), **TRL** — yo‘qotishni bo‘laklab hisoblaydigan `SFTTrainer`. "
              "Hech bir karta sig‘dirmasa, FSDP bilan eng katta kartalarning eng kam soni ko‘rsatilgan. "
              "Umumiy sozlamalar: {base}.",
        "en": "Each cell is the catalog card with the least memory available to CUDA that fits micro-batch 1, "
              "and after “×” the largest micro-batch it holds; the link opens the calculator with that "
              "configuration. **Trainer** is the plain `Trainer` (the model's own loss with fp32 logits, and "
              "`prepare_model_for_kbit_training` for QLoRA), **TRL** is `SFTTrainer` with its chunked loss. "
              "Where no single card holds the run, the cell gives the fewest of the largest cards under FSDP. "
              "Common settings: {base}."},
    "attention_only": {
        "ru": "† `all-linear` захватывает слой уже r (маршрутизатор экспертов), поэтому адаптеры стоят на `{t}`.",
        "uz": "† `all-linear` r dan tor qatlamni (ekspertlar marshrutizatori) ham oladi, shuning uchun "
              "adapterlar `{t}` ga qo‘yilgan.",
        "en": "† `all-linear` takes in a layer narrower than r (the expert router), so the adapters go on `{t}`."},
}


@dataclass(frozen=True)
class Cell:
    """One answer: the card (None: no single card), its largest micro-batch, or the GPU count under FSDP
    (0: none up to solve.MAX_GPUS; -1: the sequence is longer than the model allows)."""
    gpu: str | None
    micro_batch: int
    num_gpus: int
    query: dict[str, Any]


def base_config() -> dict[str, Any]:
    """The calculator form's defaults, so that a link with a few parameters reproduces the cell exactly."""
    from sitebuild.calculator_pages import default_config  # imported here: it imports sizing_blocks

    return default_config()


def eligible(cfg_method: str) -> list[Gpu]:
    """Catalog cards that run a bf16 step (and bitsandbytes for QLoRA), least memory available to CUDA first."""
    cards = [g for g in gpus().values() if g.supports.get("bf16") is True
             and (cfg_method != "qlora" or g.supports.get("bitsandbytes") is True)]
    return sorted(cards, key=lambda g: (usable_bytes(g), g.id))


@functools.lru_cache(maxsize=512)
def _sizer(key: str) -> Sizer:
    # One Sizer per configuration: it caches the replayed allocator per GPU generation, so the quick answer
    # and the GPU pages' verdicts (which try the same configurations on each card) pay each replay once.
    return Sizer(parse_config({**base_config(), **json.loads(key)}))


def sizer(query: dict[str, Any]) -> Sizer:
    """The shared Sizer of the form's defaults with `query` applied."""
    return _sizer(json.dumps(query, sort_keys=True))


@functools.cache
def cell(model: str, method: str, seq: int, stack: str) -> Cell:
    """The smallest card that fits this configuration, its largest micro-batch, and the calculator query."""
    query = {"model": model, "method": method, "max_seq_length": seq, "framework": stack}
    try:
        run = sizer(query)
        run.reserved(find_gpu("H100-SXM-80GB"))  # the rank check runs here, before any card is tried
    except SizingError as exc:
        if exc.code == "seq_too_long":
            return Cell(None, 0, -1, query)
        if exc.code != "rank_too_large":
            raise
        query["target_modules"] = ATTENTION_TARGETS
        run = sizer(query)
    cards = eligible(method)
    for gpu in cards:
        if run.fits(gpu):
            return Cell(gpu.id, run.max_micro_batch(gpu), 1, {**query, "gpu": gpu.id})
    largest = cards[-1]
    count, mode = run.fewest_gpus(largest)
    return Cell(None, 1, count, {**query, "gpu": largest.id, "num_gpus": max(count, 1), "parallelism": mode})


def link(c: Cell, calc: str) -> str:
    """The calculator page with the cell's configuration in its query (the form reads it on load)."""
    return f"{calc}?{urlencode(c.query, safe='/,')}"


def _cell_text(c: Cell, calc: str, lang: str) -> str:
    if c.num_gpus < 0:
        return "—"  # longer than the model's max_position_embeddings
    if c.gpu is not None:
        return f"[{c.gpu} ×{c.micro_batch}]({link(c, calc)})"
    if c.num_gpus == 0:
        return TEXT["none"][lang]
    return f"[{c.num_gpus}× {c.query['gpu']}]({link(c, calc)})"


def _base_text(lang: str) -> str:
    b = base_config()
    return (f"r = {b['r']}, `target_modules={b['target_modules']}`, LoRA `torch_dtype={b['torch_dtype']}`, "
            f"QLoRA `{b['bnb_4bit_quant_type']}` + double quant, `packing={b['packing']}`, "
            f"`gradient_checkpointing={b['gradient_checkpointing']}`, `attn_implementation={b['attn_implementation']}`,"
            f" `optim={b['optim']}`")


def quick_answer(_: list[str], kw: dict[str, Any], lang: str) -> str:
    """The quick-answer table in language `lang`, with links to the calculator at `calc`."""
    calc = str(kw.get("calc", "calculator/index.md"))
    # models= and contexts= (comma-separated) replace the defaults, e.g. for the long-context table.
    models = tuple(str(kw["models"]).split(",")) if "models" in kw else MODELS
    contexts = tuple(int(s) for s in str(kw["contexts"]).split(",")) if "contexts" in kw else CONTEXTS
    header = [TEXT["model"][lang], TEXT["method"][lang]]
    for seq in contexts:
        header += [f"{seq // 1024}k · Trainer", f"{seq // 1024}k · TRL"]
    rows, dagger = [], False
    for model in models:
        for method in METHODS:
            cells = [cell(model, method, seq, stack) for seq in contexts for stack in STACKS]
            mark = " †" if any("target_modules" in c.query for c in cells) else ""
            dagger = dagger or bool(mark)
            name = "LoRA" if method == "lora" else "QLoRA"
            rows.append([f"`{model}`{mark}", name, *(_cell_text(c, calc, lang) for c in cells)])
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    notes = [TEXT["legend"][lang].replace("{base}", _base_text(lang))]
    if dagger:
        notes.append(TEXT["attention_only"][lang].replace("{t}", ATTENTION_TARGETS))
    return "\n".join(lines) + "\n\n" + "\n\n".join(notes)


__all__ = ["CONTEXTS", "MODELS", "STACKS", "Cell", "base_config", "cell", "eligible", "link", "quick_answer"]
