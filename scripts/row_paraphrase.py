"""How the rows-as-written mapping holds up when a table words a column differently: every usable public row is
rewritten one column at a time into another common spelling of the same setting (a number with its unit instead of
peak_memory_gib, the GPU count beside the card, "QLoRA" with the quantization column left empty, "FA2", ...), and each
variant's run configuration and measured GiB are compared with the original row's. Prints, per rewrite, how many
variants map to the same run, to another one, or are refused; asserts nothing (a research aid: the hidden set is
written by other hands).

    PYTHONPATH=. python3 scripts/row_paraphrase.py

Another version of the mapping: copy this file into that version's scripts/ (its validation/ beside) and run it there
(a script's own folder comes first on the import path, so its validate_rows is the one scored).
"""

from __future__ import annotations

import argparse
import csv
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import validate_rows as vr

ROOT = Path(__file__).resolve().parents[1]
Row = dict[str, str]


def _gpu_count_with_card(row: Row, after: bool = False) -> Row | None:
    n = re.match(r"\s*(\d+)\s*$", row.get("num_gpus", ""))
    if not n or n.group(1) == "1" or not row.get("gpu_model"):
        return None
    card = f"{row['gpu_model']} x{n.group(1)}" if after else f"{n.group(1)}x {row['gpu_model']}"
    return {**row, "num_gpus": "", "gpu_model": card}


def _reported_with_unit(row: Row) -> Row | None:
    gib = row.get("peak_memory_gib", "")
    if not re.fullmatch(r"\d+(\.\d+)?", gib):
        return None
    return {**row, "peak_memory_gib": "", "peak_memory_reported": f"{float(gib) * 1024:,.0f} MiB",
            "peak_memory_unit": "", "unit_basis": ""}


def _qlora_unstated(row: Row) -> Row | None:
    q = row.get("quantization", "").lower()
    if row.get("method", "").lower() != "qlora" or "nf4" not in q or re.search(r"double|torchao", q):
        return None  # double quantization and the torchao backend are settings the empty column would lose
    return {**row, "quantization": ""}


def _checkpointing_words(row: Row) -> Row | None:
    said = row.get("gradient_checkpointing", "").strip().lower()
    if said == "yes":
        return {**row, "gradient_checkpointing": "enabled (use_reentrant=False)"}
    if said == "no":
        return {**row, "gradient_checkpointing": "without gradient checkpointing"}
    return None


def _flash_short(row: Row) -> Row | None:
    if "flash" not in row.get("attention_impl", "").lower():
        return None
    return {**row, "attention_impl": "FA2"}


def _micro_and_global(row: Row) -> Row | None:
    b = re.fullmatch(r"\s*(\d+)\s*", row.get("micro_batch_size", ""))
    accum = re.match(r"\s*(\d+)", row.get("grad_accum_steps", ""))
    if not b or not accum:
        return None
    global_batch = int(b.group(1)) * int(accum.group(1))
    return {**row, "micro_batch_size": f"global batch {global_batch}, micro {b.group(1)}"}


def _dropout_none(row: Row) -> Row | None:
    if row.get("lora_dropout", "").strip() not in ("0", "0.0"):
        return None
    return {**row, "lora_dropout": "none"}


def _gpu_memory_short(row: Row) -> Row | None:
    gpu = row.get("gpu_model", "")
    if not re.search(r"\d+\s*GB", gpu):
        return None
    return {**row, "gpu_model": re.sub(r"(\d+)\s*GB", r"\1G", gpu)}


def _autocast_words(row: Row) -> Row | None:
    if row.get("mixed_precision", "").strip().lower() != "bf16":
        return None
    return {**row, "mixed_precision": "bfloat16 mixed precision (torch.autocast)"}


def _display_name(row: Row) -> Row | None:
    m = re.fullmatch(r"meta-llama/Llama-2-(\d+)b-hf", row.get("model", ""))
    return {**row, "model": f"Llama 2 {m.group(1)}B"} if m else None


def _geforce(row: Row) -> Row | None:
    gpu = row.get("gpu_model", "")
    return {**row, "gpu_model": f"NVIDIA GeForce {gpu}"} if re.match(r"RTX (3090|4090)", gpu) else None


def _seq_k(row: Row) -> Row | None:
    s = row.get("seq_len", "").strip()
    return {**row, "seq_len": f"{int(s) // 1024}k"} if s.isdigit() and int(s) % 1024 == 0 else None


def _targets_list(row: Row) -> Row | None:
    t = row.get("lora_target_modules", "")
    if not re.fullmatch(r"[a-z_]+(,\s*[a-z_]+)+", t):
        return None
    return {**row, "lora_target_modules": str([x.strip() for x in t.split(",")])}


def _gc_true(row: Row) -> Row | None:
    return {**row, "gradient_checkpointing": "True"} if row.get("gradient_checkpointing", "").strip() == "yes" else None


def _gpus_word(row: Row) -> Row | None:
    n = row.get("num_gpus", "").strip()
    return {**row, "num_gpus": f"{n} GPUs"} if n.isdigit() and n != "1" else None


REWRITES: dict[str, Callable[[Row], Row | None]] = {
    "GPU count written with the card ('8x A100')": _gpu_count_with_card,
    "GPU count written after the card ('A100 x8')": lambda row: _gpu_count_with_card(row, after=True),
    "peak as '12,345 MiB' without peak_memory_gib": _reported_with_unit,
    "QLoRA with the quantization column empty": _qlora_unstated,
    "checkpointing as 'enabled (use_reentrant=False)' / 'without ...'": _checkpointing_words,
    "FlashAttention written 'FA2'": _flash_short,
    "micro-batch as 'global batch N, micro b'": _micro_and_global,
    "LoRA dropout 0 written 'none'": _dropout_none,
    "GPU memory written '80G'": _gpu_memory_short,
    "bf16 autocast written 'bfloat16 mixed precision'": _autocast_words,
    "Llama 2 checkpoint id as its display name ('Llama 2 7B')": _display_name,
    "'NVIDIA GeForce RTX 4090'": _geforce,
    "sequence length as '2k'": _seq_k,
    "targets as a Python list": _targets_list,
    "checkpointing 'yes' written 'True'": _gc_true,
    "GPU count as 'N GPUs'": _gpus_word,
}


def main() -> int:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    rows = list(csv.DictReader((ROOT / "validation" / "measurements.csv").read_text("utf-8").splitlines()))

    def mapped(row: Row) -> tuple[str, Any]:
        try:
            case = vr.row_case(row)
        except Exception as exc:  # a refusal or a crash of the mapping: both counted
            return "refused", getattr(exc, "code", type(exc).__name__)
        return "ok", (case.config, round(case.measured_gib or 0.0, 3), case.tier)

    print(f"{'rewrite':<66} {'rows':>5} {'same':>5} {'other':>6} {'refused':>8}")
    totals = [0, 0, 0, 0]
    for name, rewrite in REWRITES.items():
        counts = [0, 0, 0, 0]
        for row in rows:
            if row.get("usable_for_scoring", "").strip().lower() not in ("yes", "caution"):
                continue
            variant = rewrite(row)
            original = mapped(row)
            if variant is None or original[0] != "ok":
                continue
            got = mapped(variant)
            counts[0] += 1
            counts[1 if got == original else 3 if got[0] == "refused" else 2] += 1
        totals = [a + b for a, b in zip(totals, counts, strict=True)]
        print(f"{name:<66} {counts[0]:>5} {counts[1]:>5} {counts[2]:>6} {counts[3]:>8}")
    print(f"{'all':<66} {totals[0]:>5} {totals[1]:>5} {totals[2]:>6} {totals[3]:>8}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
