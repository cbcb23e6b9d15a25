"""Rows from before peft v0.12.0 train their LoRA weights in the base weight's dtype: the row's PEFT release (stated,
else the one of its date: scripts/row_columns.py peft_version) reaches the engine, which follows it (sizing/memory/
regime.py adapter_dtype); each expectation is read off the row's text and PEFT's release history by hand:
v0.12.0 (tag 2024-07-24) is the first release whose get_peft_model casts bf16/fp16 adapters to fp32 (commit
ae1ae20b7, PR #1706); v0.10.0's LoraLayer.update_layer moved new adapters to the base weight's floating dtype."""

from __future__ import annotations

from typing import Any

import pytest

import row_columns as rc  # scripts/ is on pytest's pythonpath (pyproject.toml)
from sizing import estimate, load_config
from sizing.catalog import resolve_architecture
from sizing.memory.regime import resolve


@pytest.mark.parametrize(("text", "date"), [
    ("feb-mar 2024 (torch ~2.2)", (2024, 3, 28)),  # S11: the later month named, its 28th
    ("peft @6008f272a (2024-03-13) examples/sft", (2024, 3, 13)),
    ("torch 2.13.0+cu130; transformers 5.13.1; peft 0.19", None),
])
def test_row_dates(text: str, date: tuple[int, int, int] | None) -> None:
    assert rc.row_date(text) == date


QLORA = {"method": "qlora", "framework": "custom", "load_in_4bit": True, "bnb_4bit_quant_storage": "bfloat16"}
LORA = {"method": "lora", "framework": "custom", "torch_dtype": "bfloat16"}


@pytest.mark.parametrize(("version", "cfg", "adapter"), [
    ("Feb-Mar 2024 (torch ~2.2)", QLORA, 2),  # v0.10.0; Params4bit stored as bf16
    ("Feb-Mar 2024 (torch ~2.2)", LORA, 2),
    ("Feb-Mar 2024", {**QLORA, "bnb_4bit_quant_storage": "uint8"}, 4),  # uint8 storage: nn.Linear's fp32 stays
    ("Feb-Mar 2024", {**LORA, "torch_dtype": "float32"}, 4),
    ("Feb-Mar 2024", {**LORA, "framework": "torchtune"}, 2),  # no PEFT there: the model's dtype
    ("Aug 2024", LORA, 4),  # v0.12.0 (2024-07-24): fp32
    ("transformers 4.40; peft 0.10.0", LORA, 2),  # a stated release wins
    ("2025-01-10; peft 0.11", LORA, 2),
    ("torch 2.13.0+cu130; transformers 5.13.1; peft 0.19", LORA, 4),
    ("", LORA, 4),  # no date: today's PEFT
])
def test_peft_release_of_a_row_sets_the_adapter_dtype(version: str, cfg: dict[str, Any], adapter: int) -> None:
    release = rc.peft_version({"framework_version": version})
    run = load_config({"model": "meta-llama/Llama-2-7b-hf", **cfg, **({"peft_version": release} if release else {})})
    arch, _ = resolve_architecture(run.model, run.model_config)
    assert resolve(run, arch).adapter == adapter


@pytest.mark.parametrize(("version", "release"), [
    ("Feb-Mar 2024 (torch ~2.2)", "0.10.0"), ("peft @6008f272a (2024-03-13) examples/sft", "0.9.0"),
    ("peft 0.19.2.dev0", "0.19.2.dev0"), ("2023-01-01", None), ("", None)])
def test_peft_release_of_a_row(version: str, release: str | None) -> None:
    assert rc.peft_version({"framework_version": version}) == release


def test_bf16_adapters_halve_the_adapter_bytes() -> None:
    # Llama-2-7B LoRA r64 on q,k,v,up,down,gate: 32 layers x (3 x 64 x (4096 + 4096) + 3 x 64 x (4096 + 11008))
    # = 143,130,624 trainable parameters; under FSDP on 2 GPUs each holds half of them, as weights, gradients and
    # two Adam states: 2 bytes each in bf16 instead of 4.
    cfg = {"model": "meta-llama/Llama-2-7b-hf", "method": "lora", "torch_dtype": "bfloat16", "r": 64,
           "target_modules": ["q_proj", "k_proj", "v_proj", "up_proj", "down_proj", "gate_proj"],
           "num_gpus": 2, "parallelism": "fsdp", "framework": "custom"}
    fp32, bf16 = estimate(cfg), estimate({**cfg, "adapter_dtype": "bfloat16"})
    assert fp32.detail["trainable_params"] == bf16.detail["trainable_params"] == 143_130_624
    assert fp32.detail["optimizer_state_bytes"] == 143_130_624 * 2 * 4
    assert bf16.detail["optimizer_state_bytes"] == 143_130_624 * 2 * 2
    assert bf16.detail["gradient_bytes"] == 143_130_624 * 2


@pytest.mark.parametrize(("version", "expected"), [
    # the release current on the date a TRL row states (the commit dates of huggingface/trl's tags)
    ("peft @6008f272a (2024-03-13) examples/sft", "0.7.0"),  # v0.8.0 is of 2024-03-19
    ("2025-11-30", "0.25.0"),  # the last release whose SFTTrainer prepares a quantized base itself
    ("2026-06-24", "1.6.0"),  # the last whose loss is the model's own, on the full logits
    ("2026-06-25", "1.7.0"),  # the release day: chunked_nll the default
    ("trl 0.9.6, peft 0.11", "0.9.6"),  # a release as written wins over a date
    ("", None),  # no date: today's TRL
])
def test_trl_release_by_row(version: str, expected: str | None) -> None:
    assert rc.framework({"framework": "TRL SFTTrainer", "framework_version": version}) == ("trl", expected)
