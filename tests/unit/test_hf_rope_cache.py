"""transformers' per-layer RoPE cos/sin caches (frameworks.rope_tables on a Hugging Face stack) and the release a
row's text names (scripts/row_columns.py transformers_version). Expected values are derived by hand from the
transformers sources of each release (PyPI wheels): v4.37.2 models/llama/modeling_llama.py l.134-146
(_set_cos_sin_cache: cos_cached and sin_cached, [max_position_embeddings, head_dim], torch.get_default_dtype()),
v4.38.0 l.94-101 (LlamaRotaryEmbedding registers only inv_freq), v4.39.0 and v4.40.0 l.111-113 (_cos_cached and
_sin_cached, same shape and dtype), v4.41.0 (inv_freq only); Mistral's modeling_mistral.py l.114-116 in v4.37.2
through v4.41.0, none in v4.42.0. One LlamaRotaryEmbedding per attention layer (LlamaAttention._init_rope)."""

from __future__ import annotations

from typing import Any

import pytest

import row_columns as rc  # scripts/ is on pytest's pythonpath (pyproject.toml)
from sizing.catalog import resolve_architecture
from sizing.config import parse_config
from sizing.frameworks import rope_tables
from sizing.step import step_memory

MiB = 2**20


def _run(model: str, framework: str = "custom", version: str | None = None, **extra: Any) -> Any:
    cfg = parse_config({"model": model, "method": "qlora", "framework": framework, "framework_version": version,
                        "load_in_4bit": True, "bnb_4bit_quant_type": "nf4", "bnb_4bit_quant_storage": "bfloat16",
                        "torch_dtype": "bfloat16", "max_seq_length": 512, "per_device_train_batch_size": 1,
                        "gradient_checkpointing": True, **extra})
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    return cfg, arch


@pytest.mark.parametrize(("model", "version", "per_layer", "layers"), [
    # Llama-2-7B: 4096 positions x head_dim 128, cos and sin, bf16 (from_pretrained's torch_dtype) -> 2 MiB a layer
    ("meta-llama/Llama-2-7b-hf", "4.37.2", 2 * 4096 * 128 * 2, 32),
    ("meta-llama/Llama-2-7b-hf", "4.38.0", 0, 0),
    ("meta-llama/Llama-2-7b-hf", "4.39.0", 2 * 4096 * 128 * 2, 32),
    ("meta-llama/Llama-2-7b-hf", "4.40.2", 2 * 4096 * 128 * 2, 32),
    ("meta-llama/Llama-2-7b-hf", "4.41.0", 0, 0),
    ("meta-llama/Llama-2-7b-hf", None, 0, 0),  # no version: the current release
    ("meta-llama/Llama-2-70b-hf", "4.37.2", 2 * 4096 * 128 * 2, 80),
    # Mistral-7B-v0.2: 32768 positions -> 16 MiB a layer
    ("mistralai/Mistral-7B-v0.2", "4.41.0", 2 * 32768 * 128 * 2, 32),
    ("mistralai/Mistral-7B-v0.2", "4.42.0", 0, 0),
])
def test_caches_by_release(model: str, version: str | None, per_layer: int, layers: int) -> None:
    cfg, arch = _run(model, version=version)
    assert rope_tables(cfg, arch, 2) == (per_layer, layers)


def test_caches_follow_the_build_dtype() -> None:
    cfg, arch = _run("meta-llama/Llama-2-7b-hf", version="4.39.0")
    assert rope_tables(cfg, arch, 4) == (2 * 4096 * 128 * 4, 32)  # a model built in fp32: fp32 buffers


def test_trl_version_is_not_a_transformers_release() -> None:
    cfg, arch = _run("meta-llama/Llama-2-7b-hf", framework="trl", version="0.8.1")
    assert rope_tables(cfg, arch, 2) == (0, 0)


def test_every_gpu_holds_them_whole() -> None:
    """Under FSDP the caches are buffers, not parameters: each GPU's weights carry all of them, on top of the
    same run on a release without them."""
    fsdp = {"num_gpus": 2, "parallelism": "fsdp"}
    with_caches = step_memory(*_run("meta-llama/Llama-2-7b-hf", version="4.39.0", **fsdp), None)
    without = step_memory(*_run("meta-llama/Llama-2-7b-hf", version="4.41.0", **fsdp), None)
    assert {m.parts["weights"] for m in with_caches.moments} == {
        m.parts["weights"] + 32 * 2 * MiB for m in without.moments}


@pytest.mark.parametrize(("text", "release"), [
    ("feb-mar 2024 (torch ~2.2)", "4.39.0"),  # 2024-03-28: 4.39.0 (wheel built 2024-03-20), before 4.39.3 (04-02)
    ("torch 2.13.0+cu130; transformers 5.13.1; peft 0.19.2.dev0", "5.13.1"),  # a stated release wins
    ("2024-05-20", "4.41.0"),
    ("2024-07-22", "4.42.0"),  # the last release before bitsandbytes 0.43.2 (frameworks.BNB_FREES_4BIT_INPUT)
    ("aug 2024", "4.43.0"),  # 4.43.0's wheel built 2024-07-23 (transformers/__init__.py in the PyPI wheel)
    ("2023-06-01", None),  # before the first dated release the table knows: no claim
    ("", None),
])
def test_transformers_release_of_a_row(text: str, release: str | None) -> None:
    assert rc.transformers_version(text) == release


def test_custom_and_trainer_rows_carry_it() -> None:
    row = {"framework": "Answer.AI fsdp_qlora train.py", "framework_version": "Feb-Mar 2024 (torch ~2.2)"}
    assert rc.framework(row) == ("custom", "4.39.0")
    assert rc.framework({"framework": "transformers Trainer", "framework_version": "transformers 4.37.2"}) == (
        "transformers", "4.37.2")
    # a TRL row's version is TRL's own release (its date's: v0.7.0 before v0.8.0 of 2024-03-19), not transformers'
    assert rc.framework({"framework": "HF TRL SFTTrainer", "framework_version": "2024-03-13"}) == ("trl", "0.7.0")
