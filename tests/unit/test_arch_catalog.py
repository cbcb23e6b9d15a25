# Architectures and catalog records: target names of other stacks, refusals, catalog loading.
from __future__ import annotations

import pytest

from sizing import SizingError, estimate
from sizing.arch import from_hf_config, target_aliases
from sizing.catalog import models

NEOX = {"model_type": "gpt_neox", "hidden_size": 2048, "num_hidden_layers": 16, "num_attention_heads": 8,
        "intermediate_size": 8192, "vocab_size": 50304}


def test_litgpt_role_names_on_fused_qkv() -> None:
    # LitGPT lora_query / lora_value on GPT-NeoX both live in the fused query_key_value projection.
    arch = from_hf_config(NEOX)
    assert target_aliases(arch, "query") == ("query_key_value",)
    assert target_aliases(arch, "lora_value") == ("query_key_value",)
    assert target_aliases(arch, "projection") == ("dense",)
    assert target_aliases(arch, "mlp") == ("dense_h_to_4h", "dense_4h_to_h")
    assert target_aliases(arch, "head") == ("lm_head",)
    assert target_aliases(arch, "nonsense") is None


def test_torchtune_feed_forward_names_on_llama() -> None:
    # torchtune FeedForward: w1 gate, w2 down, w3 up; output_proj is the attention output.
    arch = models()["meta-llama/llama-2-7b-hf"]["config"]
    a = from_hf_config(arch)
    assert [target_aliases(a, n) for n in ("w1", "w2", "w3", "output_proj")] == [
        ("gate_proj",), ("down_proj",), ("up_proj",), ("o_proj",)]


def test_phi3_fused_mlp_roles() -> None:
    a = from_hf_config(models()["microsoft/phi-3-mini-4k-instruct"]["config"])
    assert target_aliases(a, "mlp") == ("gate_up_proj", "down_proj")
    assert target_aliases(a, "key") == ("qkv_proj",)


def test_role_names_accepted_by_litgpt_not_by_transformers() -> None:
    run = {"model": "meta-llama/Llama-2-7b-hf", "method": "lora", "r": 8, "target_modules": ["query", "value"],
           "max_seq_length": 256, "per_device_train_batch_size": 1}
    est = estimate({**run, "framework": "litgpt"})
    assert est.detail["trainable_params"] == 32 * 8 * (4096 * 4)  # q and v: r * (in + out) each, 32 layers
    with pytest.raises(SizingError) as err:  # PEFT matches module names literally: no 'query' in Llama
        estimate({**run, "framework": "transformers"})
    assert err.value.code == "unknown_target_module"
