# LitGPT and torchtune model code saves different tensors than transformers + PEFT. Expected values
# come from running LitGPT 0.3.0 and torchtune 0.1.0 / 0.4.0 model code on the CPU with tiny configs
# (byte-exact per layer), written as closed forms for the full-size models.
from __future__ import annotations

from typing import Any

import pytest

from sizing import estimate

QV = ["q_proj", "v_proj"]
LLAMA2 = {"model": "meta-llama/Llama-2-7b-hf", "torch_dtype": "bfloat16", "max_seq_length": 512,
          "per_device_train_batch_size": 2, "packing": True}


@pytest.mark.parametrize(("overrides", "per_token"), [
    # LitGPT: fused qkv output kept (MHA), out-proj input copied, one dropout for the fused q/k/v LoRA
    # plus zero_pad's index_copy source: 11h + 8q + 8kv + 4nh + 6I + 4r + 8
    ({"framework": "litgpt", "method": "lora", "r": 32, "lora_dropout": 0.05, "target_modules": QV}, 176_904),
    # bitsandbytes 0.42 MatMul4Bit also keeps each 4-bit layer's input: + 4h + 2q + 2I
    ({"framework": "litgpt", "method": "qlora", "r": 32, "lora_dropout": 0.05, "target_modules": QV,
      "bnb_4bit_quant_type": "nf4", "bnb_4bit_compute_dtype": "bfloat16"}, 223_496),
    ({"framework": "litgpt", "method": "full"}, 211_080),
    # torchtune: per-module LoRA dropout copies, no input casts: 14h + 4q + 4kv + 4nh + 6I + 4r + 8
    ({"framework": "torchtune", "method": "lora", "r": 8, "lora_dropout": 0.05, "target_modules": QV}, 156_328),
])
def test_llama2_7b_per_layer(overrides: dict[str, Any], per_token: int) -> None:
    assert estimate({**LLAMA2, **overrides}).detail["layer_saved_bytes_per_token"] == per_token


def test_torchtune_expands_gqa_before_sdpa() -> None:
    # Llama-3.2-3B full fine-tuning: 16h + 8q + 4nh + 8I + 8 (k and v saved at nh heads).
    est = estimate({"model": "meta-llama/Llama-3.2-3B", "framework": "torchtune", "method": "full",
                    "max_seq_length": 4096, "per_device_train_batch_size": 2, "packing": True})
    assert est.detail["layer_saved_bytes_per_token"] == 139_368


def test_torchtune_nf4_is_double_quantized_with_bf16_factors() -> None:
    qlora = estimate({**LLAMA2, "framework": "torchtune", "method": "qlora", "target_modules": "all-linear"})
    lora = estimate({**LLAMA2, "framework": "torchtune", "method": "lora", "target_modules": "all-linear"})
    linear_params = 32 * (4 * 4096 * 4096 + 3 * 4096 * 11008)
    saved = (lora.detail["param_bytes"] - qlora.detail["param_bytes"] - qlora.detail["quant_state_bytes"])
    # 2 bytes (bf16) replaced by 0.5 + 1/64 + 2/(64*256) bytes per linear parameter
    assert saved / linear_params == pytest.approx(2 - 0.515747, abs=1e-5)


def test_compile_recomputes_norm_casts_and_activation() -> None:
    run = {"model": "meta-llama/Llama-3.2-3B", "framework": "torchtune", "method": "full", "max_seq_length": 4096,
           "per_device_train_batch_size": 2, "packing": True}
    eager = estimate(run).detail["layer_saved_bytes_per_token"]
    compiled = estimate({**run, "torch_compile": True}).detail["layer_saved_bytes_per_token"]
    h, inter = 3072, 8192
    # two norms keep their bf16 input instead of an fp32 copy and x_hat (-4h each); silu(g) recomputed
    assert eager - compiled == 8 * h + 2 * inter


@pytest.mark.parametrize("framework", ["transformers", "custom"])
def test_bnb_before_0_43_2_keeps_4bit_matmul_inputs(framework: str) -> None:
    # bitsandbytes <= 0.43.1 MatMul4Bit: ctx.tensors = (A, B) (autograd/_functions.py 0.43.1 l.516); 0.43.2
    # (2024-07-23, commit 9e753741) keeps (None, B). transformers releases before 4.43.0 (2024-07-23) ran the old
    # one. With LoRA dropout no adapter saves a base layer's input, so each distinct 4-bit input is kept once more:
    # the two norm outputs (h each, shared by q/k/v and by gate/up) and down_proj's input (I), bf16. o_proj's input
    # adds nothing: SDPA's flash kernel saves its output in the [b, s, nh, hd] layout, whose transpose(1, 2) is
    # already contiguous, so o_proj reads the very tensor SDPA saved.
    cfg = {**LLAMA2, "framework": framework, "method": "qlora", "bnb_4bit_quant_type": "nf4",
           "bnb_4bit_compute_dtype": "bfloat16", "target_modules": "all-linear", "lora_dropout": 0.1,
           "prepare_model_for_kbit_training": False, "attn_implementation": "sdpa"}
    old = estimate({**cfg, "framework_version": "4.42.0"}).detail["layer_saved_bytes_per_token"]
    new = estimate({**cfg, "framework_version": "4.43.0"}).detail["layer_saved_bytes_per_token"]
    h, inter = 4096, 11008
    assert old - new == 2 * (2 * h + inter)
    assert estimate(cfg).detail["layer_saved_bytes_per_token"] == new  # no version: the current bitsandbytes
