"""What SFTTrainer and SFTConfig did by TRL release, read from huggingface/trl's tags (sizing/frameworks.py): bf16 on
by default from v0.19.0 (SFTConfig.__post_init__), gradient checkpointing on by default from v0.22.0; up to v0.25 a
bitsandbytes base not loaded sharded is given prepare_model_for_kbit_training by SFTTrainer itself, its adapters stay
PEFT's fp32, and with bf16 peft_module_casting_to_bf16 puts a 4-bit model's embeddings and LM head back in bf16; a
sharded 4-bit base gets get_peft_model(autocast_adapter_dtype=False) from v0.9.3; v0.26.0 drops all that and casts a
quantized model's trainable parameters to bf16."""

from __future__ import annotations

import pytest

from sizing import estimate, load_config, normalize
from sizing.catalog import resolve_architecture
from sizing.memory.regime import resolve

QLORA = {"model": "meta-llama/Llama-3.1-8B", "method": "qlora", "framework": "trl", "torch_dtype": "bfloat16",
         "bf16": True, "max_seq_length": 1024, "per_device_train_batch_size": 1, "gpu": "H100-SXM-80GB"}
SHARDED = {"num_gpus": 2, "parallelism": "fsdp", "bnb_4bit_quant_storage": "bfloat16"}
VOCAB, HIDDEN = 128_256, 4096  # Llama-3.1-8B's config.json


@pytest.mark.parametrize(("release", "bf16", "checkpointing"), [
    ("0.18.0", False, False), ("0.19.0", True, False), ("0.22.0", True, True), (None, True, True)])
def test_sftconfig_defaults_by_release(release: str | None, bf16: bool, checkpointing: bool) -> None:
    got = normalize({"model": "meta-llama/Llama-3.1-8B", "framework": "trl", "framework_version": release})
    assert (got["bf16"], got["gradient_checkpointing"]) == (bf16, checkpointing)


@pytest.mark.parametrize(("release", "fields", "prepares"), [
    ("0.25.0", {}, True), ("0.26.0", {}, False), (None, {}, False),
    ("0.25.0", SHARDED, False),  # a sharded 4-bit base: is_sharded_qlora, no preparation
    ("0.25.0", {"method": "lora8"}, True),
])
def test_sfttrainer_prepares_quantized_bases_until_0_26(release: str | None, fields: dict, prepares: bool) -> None:
    got = normalize({**QLORA, **fields, "framework_version": release})
    assert got["prepare_model_for_kbit_training"] is prepares


def _regime(**fields: object):
    cfg = load_config({**QLORA, **fields})
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    return resolve(cfg, arch)


@pytest.mark.parametrize(("fields", "adapter"), [
    ({"framework_version": "0.25.0"}, 4),  # PEFT's fp32 (autocast_adapter_dtype=True)
    ({"framework_version": "0.25.0", **SHARDED}, 2),  # autocast_adapter_dtype=False: the bf16 storage
    ({"framework_version": "0.26.0"}, 2), ({}, 2),  # TRL's own cast of the trainable parameters
])
def test_adapter_dtype_by_release(fields: dict, adapter: int) -> None:
    assert _regime(**fields).adapter == adapter


def test_preparation_then_the_cast_back_to_bf16() -> None:
    """prepare_model_for_kbit_training makes the embeddings, norms and LM head fp32; TRL's cast puts the embeddings
    and the head back in bf16 (norms stay fp32): against the same preparation without the cast (the transformers
    Trainer), two vocabulary-by-hidden matrices at 2 bytes instead of 4."""
    trl = _regime(framework_version="0.25.0")
    plain = _regime(framework="transformers", prepare_model_for_kbit_training=True)
    assert (trl.embed, trl.lm_head_weight, trl.norm_weight) == (2, 2, 4)
    assert (plain.embed, plain.lm_head_weight, plain.norm_weight) == (4, 4, 4)
    weights = [estimate({**QLORA, **fields}).components["weights"]
               for fields in ({"framework_version": "0.25.0"},
                              {"framework": "transformers", "prepare_model_for_kbit_training": True})]
    assert weights[1] - weights[0] == 2 * VOCAB * HIDDEN * 2
    # the preparation's checkpointing is the run's gradient_checkpointing, reentrant; without it, none
    assert (trl.checkpointing, trl.reentrant) == (True, True)
    off = _regime(framework_version="0.25.0", gradient_checkpointing=False)
    assert (off.checkpointing, off.reentrant) == (False, False)
