# step._step's caches of what does not depend on the shape (regime, trainable tensors, weights, optimizer,
# static tensor lists, layer_saved per sequence length) against a cold _step: the same StepMemory at every
# shape, whatever was computed before it in the process (other shapes, GPUs, configurations).
from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import pytest

from sizing import step
from sizing.catalog import find_gpu, resolve_architecture
from sizing.config import RunConfig, parse_config
from sizing.errors import SizingError

from .conftest import TINY_LLAMA

SHAPES = [(128, 1), (1000, 3), (2048, 8), (4096, 1), (700, 2)]


def _configs(n: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        method = rng.choice(["lora", "qlora", "full", "lora8"])
        cfg: dict[str, Any] = {
            "method": method, "framework": rng.choice(["transformers", "trl", "custom", "torchtune", "litgpt"]),
            "packing": rng.random() < 0.5, "gradient_checkpointing": rng.random() < 0.6,
            "attn_implementation": rng.choice(["sdpa", "eager", "flash_attention_2"]),
            "optim": rng.choice(["adamw_torch", "paged_adamw_8bit", "sgd"]),
            "gpu": rng.choice(["H100-SXM-80GB", "A100-SXM-40GB", "L4-24GB"]),
        }
        if rng.random() < 0.5:
            cfg["model_config"] = dict(TINY_LLAMA)
        else:
            cfg["model"] = rng.choice(["meta-llama/Llama-3.2-1B", "Qwen/Qwen2.5-0.5B", "google/gemma-2-9b"])
        if method != "full":
            cfg.update(r=rng.choice([8, 64]), target_modules=rng.choice(["all-linear", ["q_proj", "v_proj"]]))
        if rng.random() < 0.4:
            cfg.update(num_gpus=rng.choice([2, 4]), parallelism=rng.choice(["ddp", "fsdp", "zero3"]))
        out.append(cfg)
    return out


def _one(cfg: RunConfig, seq: int, batch: int, cold: bool = False) -> Any:
    """The step through the caches (_stepped: a Hopper card's derived from the older cards' step), or cold: _step
    itself, computed for the card's own workspace."""
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    gpu = find_gpu(cfg.gpu) if cfg.gpu else None
    shaped = replace(cfg, max_seq_length=seq, per_device_train_batch_size=batch)
    try:
        if cold:
            return step._step(shaped, arch, gpu, "cuda")
        return step._stepped(shaped, arch, gpu, "cuda")
    except SizingError as err:
        return err.code


@pytest.mark.parametrize("seed", range(3))
def test_cached_step_equals_a_cold_one_at_every_shape(seed: int) -> None:
    cfgs = [parse_config(raw) for raw in _configs(12, seed)]
    step.clear_caches()
    warm = [[_one(cfg, seq, batch) for seq, batch in SHAPES] for cfg in cfgs]  # caches shared by everything
    assert step._BASE  # the caches were used
    for cfg, got in zip(cfgs, warm, strict=True):
        for (seq, batch), value in zip(SHAPES, got, strict=True):
            step.clear_caches()
            assert _one(cfg, seq, batch, cold=True) == value, (cfg, seq, batch)


def test_a_model_config_is_keyed_by_content() -> None:
    """Two configurations whose model_config differ in one field never share a cached part."""
    small = parse_config({"model_config": dict(TINY_LLAMA), "gpu": "L4-24GB"})
    wide = parse_config({"model_config": {**TINY_LLAMA, "intermediate_size": 2 * TINY_LLAMA["intermediate_size"]},
                         "gpu": "L4-24GB"})
    step.clear_caches()
    a = _one(small, 512, 2)
    b = _one(wide, 512, 2)
    assert a.peak.total != b.peak.total
    step.clear_caches()
    assert _one(wide, 512, 2, cold=True) == b


# One field changed at a time from a base run: a cached part keyed without that field would be shared by two
# of these and differ from the cold _step of one of them.
BASE = {"model_config": TINY_LLAMA, "gpu": "A100-SXM-40GB", "method": "qlora", "r": 16,
        "target_modules": "all-linear", "num_gpus": 2, "parallelism": "fsdp", "bf16": True}
VARIANTS: list[dict[str, Any]] = [
    {}, {"num_gpus": 4}, {"parallelism": "zero3"}, {"parallelism": "ddp"}, {"parallelism": "zero2"},
    {"num_gpus": 1, "parallelism": "none"}, {"r": 8}, {"target_modules": ["q_proj", "v_proj"]},
    {"lora_dropout": 0.1}, {"optim": "sgd"}, {"optim": "paged_adamw_8bit"}, {"gradient_checkpointing": False},
    {"packing": True}, {"attn_implementation": "eager"}, {"framework": "trl"}, {"framework": "litgpt"},
    {"bf16": False}, {"method": "lora"}, {"method": "full"}, {"method": "lora8"}, {"bnb_4bit_quant_type": "nf4"},
    {"bnb_4bit_use_double_quant": True}, {"use_dora": True}, {"peft_type": "ia3"}, {"gpu": "H100-SXM-80GB"},
    {"cpu_offload": True}, {"expandable_segments": True}, {"gradient_accumulation_steps": 4},
    {"torch_dtype": "float32"}, {"adapter_dtype": "bfloat16"}, {"optimizer_in_backward": True},
    {"model_config": {**TINY_LLAMA, "intermediate_size": 1024}}, {"model_config": {**TINY_LLAMA, "vocab_size": 9000}},
]


def test_every_field_is_in_the_cache_key() -> None:
    cfgs = []
    for change in VARIANTS:
        try:
            cfgs.append(parse_config({**BASE, **change}))
        except SizingError:
            continue
    assert len(cfgs) > 25
    step.clear_caches()
    warm = [[_one(cfg, seq, batch) for seq, batch in SHAPES[:3]] for cfg in cfgs]
    for cfg, got in zip(cfgs, warm, strict=True):
        for (seq, batch), value in zip(SHAPES, got, strict=False):
            step.clear_caches()
            assert _one(cfg, seq, batch, cold=True) == value, (cfg, seq, batch)


def test_with_fields_is_dataclasses_replace() -> None:
    cfg = parse_config({**BASE, "max_seq_length": 300})
    for change in [*VARIANTS[1:12], {"max_seq_length": 4096, "per_device_train_batch_size": 3}]:
        got = step.with_fields(cfg, **change)
        want = replace(cfg, **change)
        assert got == want and got.extra is want.extra and cfg == parse_config({**BASE, "max_seq_length": 300})
    mem = _one(cfg, 512, 2)
    assert step.with_fields(mem, replay_dynamic=7) == replace(mem, replay_dynamic=7)
    with pytest.raises(TypeError):
        step.with_fields(cfg, no_such_field=1)
