# Saved activations per layer and per token against the byte-exact CPU measurements of the design
# (memory-model.md §11 table A, both kernel columns) and the closed forms for Llama-3-8B (§5.2).
from __future__ import annotations

from typing import Any

import pytest

from sizing import estimate

QLORA = {"method": "qlora", "prepare_model_for_kbit_training": False, "bnb_4bit_compute_dtype": "bfloat16"}
REGIMES: list[tuple[str, dict[str, Any], int, int]] = [
    # name, overrides, measured on CPU, formula with CUDA kernels (bool dropout masks)
    ("full_bf16 sdpa", {"method": "full"}, 10920, 10920),
    ("full_bf16 eager", {"method": "full", "attn_implementation": "eager"}, 23944, 23944),
    ("full_fp32_amp", {"method": "full", "torch_dtype": "float32"}, 13480, 13480),
    ("full_fp32_amp eager", {"method": "full", "torch_dtype": "float32", "attn_implementation": "eager"}, 26504, 26504),
    ("lora", {"method": "lora"}, 12168, 12168),
    ("lora dropout", {"method": "lora", "lora_dropout": 0.05}, 21064, 14392),
    ("lora eager", {"method": "lora", "attn_implementation": "eager"}, 24680, 24680),
    ("lora bf16 adapters", {"method": "lora", "adapter_dtype": "bfloat16"}, 10120, 10120),
    ("lora bf16 adapters dropout", {"method": "lora", "adapter_dtype": "bfloat16", "lora_dropout": 0.05}, 16616, 14392),
    ("qlora", {**QLORA, "adapter_dtype": "bfloat16"}, 10120, 10120),
    ("qlora dropout", {**QLORA, "adapter_dtype": "bfloat16", "lora_dropout": 0.05}, 16616, 14392),
    ("qlora fp32 adapters", {**QLORA}, 10120, 10120),
    ("qlora prepared", {**QLORA, "prepare_model_for_kbit_training": True}, 15784, 15784),
    ("qlora prepared dropout", {**QLORA, "prepare_model_for_kbit_training": True, "lora_dropout": 0.05}, 24680, 18520),
    ("qlora prepared eager", {**QLORA, "prepare_model_for_kbit_training": True, "attn_implementation": "eager"},
     28808, 28808),
    ("dora", {"method": "lora", "use_dora": True}, 21256, 21256),
    ("full padded batch", {"method": "full", "packing": False}, 12200, 12200),
]


@pytest.mark.parametrize(("name", "overrides", "cpu", "cuda"), REGIMES, ids=[r[0] for r in REGIMES])
def test_layer_saved_bytes_per_token(tiny_run: dict[str, Any], name: str, overrides: dict[str, Any],
                                     cpu: int, cuda: int) -> None:
    run = {**tiny_run, **overrides}
    assert estimate(run, backend="cpu").detail["layer_saved_bytes_per_token"] == cpu
    assert estimate(run).detail["layer_saved_bytes_per_token"] == cuda


@pytest.mark.parametrize(("overrides", "closed_form"), [
    ({"method": "full"}, 200_840),  # regime A
    ({"method": "lora"}, 217_448),  # regime C: PEFT's fp32 adapters on a bf16 base
    ({"method": "lora", "adapter_dtype": "bfloat16"}, 184_680),  # regime D
    ({**QLORA, "prepare_model_for_kbit_training": True}, 295_272),  # regime E
])
def test_llama3_8b_closed_forms(overrides: dict[str, Any], closed_form: int) -> None:
    run = {"model": "meta-llama/Meta-Llama-3-8B", "bf16": True, "r": 16, "target_modules": "all-linear",
           "max_seq_length": 4096, "per_device_train_batch_size": 1, "packing": True, **overrides}
    assert estimate(run).detail["layer_saved_bytes_per_token"] == closed_form


@pytest.mark.parametrize(("overrides", "retained_mib", "checkpointing"), [
    ({"method": "full"}, 38.365, False),
    ({"method": "full", "torch_dtype": "float32"}, 52.928, False),
    ({"method": "lora"}, 40.326, False),
    ({"method": "lora", "adapter_dtype": "bfloat16", "lora_dropout": 0.05}, 47.738, False),
    ({"method": "full"}, 18.039, True),
    ({"method": "lora"}, 17.539, True),
    ({**QLORA, "prepare_model_for_kbit_training": True}, 22.570, True),
])
def test_retained_activations_match_cpu_measurement(tiny_run: dict[str, Any], overrides: dict[str, Any],
                                                   retained_mib: float, checkpointing: bool) -> None:
    # memory-model.md §11 table B, "retained meas" (live bytes after forward + loss).
    run = {**tiny_run, **overrides, "gradient_checkpointing": checkpointing}
    got = estimate(run, backend="cpu").detail["retained_activation_bytes"] / 2**20
    assert got == pytest.approx(retained_mib, rel=0.003)
