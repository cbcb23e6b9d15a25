"""Dtypes that follow the release a configuration names: transformers before 5.0 loads float32 when from_pretrained
gets no dtype (5.0 loads the checkpoint's, PR #42805 "Default auto"); PEFT before 0.12 leaves new LoRA weights in the
base weight's dtype when that is floating (v0.10.0 tuners/lora/layer.py update_layer) and 0.12 casts 16-bit ones to
fp32 (autocast_adapter_dtype, PR #1706)."""

from __future__ import annotations

import pytest

from sizing import load_config
from sizing.catalog import resolve_architecture
from sizing.memory.regime import resolve

BASE = {"model": "meta-llama/Llama-3.1-8B", "method": "lora", "framework": "transformers", "bf16": True}


def _regime(**fields: object):
    cfg = load_config({**BASE, **fields})
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    return resolve(cfg, arch)


@pytest.mark.parametrize(("fields", "weight"), [
    ({"framework_version": "4.46.0"}, 4), ({"framework": "custom", "framework_version": "4.41.2"}, 4),
    ({"framework_version": "5.0.0"}, 2), ({}, 2),  # Llama-3.1-8B's config.json says bfloat16
    ({"framework_version": "4.46.0", "torch_dtype": "bfloat16"}, 2),  # a dtype given wins
])
def test_load_dtype_by_transformers_release(fields: dict, weight: int) -> None:
    assert _regime(**fields).weight == weight


@pytest.mark.parametrize(("fields", "adapter"), [
    ({"peft_version": "0.11.1", "torch_dtype": "bfloat16"}, 2),  # a bf16 base: the adapters follow it
    ({"peft_version": "0.11.1", "torch_dtype": "float32"}, 4),
    ({"peft_version": "0.12.0", "torch_dtype": "bfloat16"}, 4),  # autocast_adapter_dtype: fp32
    ({"peft_version": "0.11.1", "method": "qlora"}, 4),  # Params4bit's default uint8 storage is not floating
    ({"peft_version": "0.11.1", "method": "qlora", "bnb_4bit_quant_storage": "bfloat16"}, 2),
    ({"peft_version": "0.11.1", "method": "lora8", "torch_dtype": "bfloat16"}, 4),  # Int8Params: int8
])
def test_adapter_dtype_by_peft_release(fields: dict, adapter: int) -> None:
    assert _regime(**fields).adapter == adapter
