"""sizing.ladder: each rung's peak is what sizing.estimate gives for the configuration with the rungs so far,
savings follow from it; checked by hand: the Adam states a paged optimizer moves out, and the QLoRA paper's
65B on one 48 GB GPU."""

from __future__ import annotations

from typing import Any

import pytest

from sizing import estimate
from sizing.catalog import find_gpu
from sizing.estimate import usable_bytes
from sizing.ladder import LEVERS, ladder

GiB = 2**30
MiB = 2**20
QLORA: dict[str, Any] = {"method": "qlora", "torch_dtype": "bfloat16", "bf16": True, "bnb_4bit_quant_type": "nf4",
                         "bnb_4bit_use_double_quant": True, "bnb_4bit_compute_dtype": "bfloat16", "r": 16,
                         "lora_alpha": 32, "target_modules": "all-linear", "per_device_train_batch_size": 1,
                         "gradient_checkpointing": True, "packing": True, "optim": "adamw_torch_fused"}
LLAMA70_L40S = {**QLORA, "model": "meta-llama/Llama-3.3-70B-Instruct", "max_seq_length": 2048, "gpu": "L40S-48GB"}


def _climbed(config: dict[str, Any]) -> list[tuple[Any, dict[str, Any]]]:
    """Each rung with the full configuration after it (the changes of the rungs so far applied in order)."""
    out, cfg = [], dict(config)
    for rung in ladder(config).rungs:
        cfg = {**cfg, **rung.change}
        out.append((rung, dict(cfg)))
    return out


def test_each_rung_is_the_estimate_of_its_configuration() -> None:
    before = estimate(LLAMA70_L40S).reserved_bytes
    assert ladder(LLAMA70_L40S).reserved_bytes == before
    for rung, cfg in _climbed(LLAMA70_L40S):
        after = estimate(cfg).reserved_bytes
        assert rung.reserved_bytes == after
        assert rung.saved_bytes == before - after > 0
        assert rung.fits == (after <= usable_bytes(find_gpu("L40S-48GB")))
        before = after


def test_the_70b_qlora_run_that_misses_an_l40s_fits_after_a_few_rungs() -> None:
    # The L40S page shows 70B QLoRA at 2048 tokens as not fitting; the ladder must say what makes it fit.
    result = ladder(LLAMA70_L40S)
    assert not result.fits
    assert result.first_fit is not None and result.first_fit <= 3
    assert {r.lever for r in result.rungs} <= set(LEVERS)
    assert result.rungs[0].lever == "no_kbit_upcast"  # fp32 embeddings and head of a 128k vocabulary: the most


def test_levers_a_configuration_already_has_are_left_out() -> None:
    trl = {**LLAMA70_L40S, "framework": "trl", "optim": "paged_adamw_8bit", "gpu": "H100-SXM-80GB"}
    levers = [r.lever for r in ladder(trl).rungs]
    # TRL has no full logits and no prepare_model_for_kbit_training; the optimizer is 8-bit; micro-batch is 1.
    assert not {"fused_loss", "no_kbit_upcast", "eight_bit_optimizer", "micro_batch", "qlora"} & set(levers)
    # It fits one H100: no more GPUs, no offload.
    assert not {"fsdp", "cpu_offload"} & set(levers)


def test_paged_8bit_optimizer_moves_the_adam_states_out_of_the_pytorch_pool() -> None:
    # By hand: Llama-3.1-8B, r = 16 on every linear layer of 32 blocks: per block q 4096→4096, k and v
    # 4096→1024, o 4096→4096, gate and up 4096→14336, down 14336→4096; r·(in + out) each.
    per_block = 16 * ((4096 + 4096) * 2 + (4096 + 1024) * 2 + (4096 + 14336) * 3)
    adapters = 32 * per_block
    assert adapters == 41_943_040
    # PEFT keeps the adapters in fp32: AdamW holds two fp32 moments per parameter.
    states = 2 * 4 * adapters
    cfg = {**QLORA, "model": "meta-llama/Llama-3.1-8B", "max_seq_length": 2048, "gpu": "H100-SXM-80GB",
           "loss_implementation": "fused_linear_ce", "prepare_model_for_kbit_training": False}
    assert estimate(cfg).components["optimizer_states"] == states
    rung = next(r for r in ladder(cfg).rungs if r.lever == "eight_bit_optimizer")
    assert rung.change == {"optim": "paged_adamw_8bit"}
    # The 8-bit states are paged (CUDA managed memory, outside the caching allocator): what the PyTorch
    # pool loses is most of the fp32 states, never more.
    assert states // 2 < rung.saved_bytes <= states


def test_the_qlora_paper_65b_run_fits_one_48gb_card() -> None:
    # Dettmers et al. 2023 (arXiv:2305.14314): Guanaco-65B on one 48 GB GPU. Their script
    # (artidoro/qlora scripts/finetune_guanaco_65b.sh): LLaMA-65B, NF4 + double quantization, bf16, r = 64,
    # alpha 16, every linear layer, dropout 0.05, 16 + 512 tokens, micro-batch 1, checkpointing, and
    # qlora.py's default paged_adamw_32bit; qlora.py casts the embeddings, head and LoRA layers to bf16
    # after prepare_model_for_kbit_training. LLaMA-65B: 8192 wide, 80 layers, 64 heads, 32000-token vocabulary
    # (LLaMA paper, arXiv:2302.13971, table 2), FFN 22016 (2/3 · 4d rounded up to a multiple of 256).
    llama65 = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8192,
               "intermediate_size": 22016, "num_attention_heads": 64, "num_key_value_heads": 64,
               "num_hidden_layers": 80, "vocab_size": 32000, "max_position_embeddings": 2048,
               "rms_norm_eps": 1e-5, "tie_word_embeddings": False}
    cfg = {**QLORA, "model": None, "model_config": llama65, "r": 64, "lora_alpha": 16, "lora_dropout": 0.05,
           "adapter_dtype": "bfloat16",  # qlora.py casts the LoRA layers to bf16 as well
           "max_seq_length": 528, "packing": False, "optim": "paged_adamw_32bit",
           "prepare_model_for_kbit_training": False, "gpu": "RTX-A6000-48GB"}
    result = ladder(cfg)
    assert result.fits
    # The same stack on Llama-3.3-70B at 2048 tokens (a 128256-token vocabulary) does not.
    assert not ladder({**LLAMA70_L40S, "prepare_model_for_kbit_training": True, "gpu": "RTX-A6000-48GB"}).fits


@pytest.mark.parametrize("gpu", ["RTX-4090-24GB", "H100-SXM-80GB"])
def test_first_fit_agrees_with_the_rungs(gpu: str) -> None:
    cfg = {"model": "meta-llama/Llama-3.1-8B", "method": "lora", "torch_dtype": "bfloat16", "bf16": True, "r": 16,
           "target_modules": "all-linear", "max_seq_length": 32768, "per_device_train_batch_size": 2,
           "gradient_checkpointing": False, "packing": True, "gpu": gpu}
    result = ladder(cfg)
    fits = [result.fits] + [r.fits for r in result.rungs]
    expected = next((i for i, f in enumerate(fits) if f), None)
    assert result.first_fit == expected
