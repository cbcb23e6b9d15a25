"""Which transformers releases copy k and v through the forward's DynamicCache, and which concatenate Phi-3's RoPE
output (memory/regime.py kv_copied and rope_cat). Expected values come from the transformers sources of each release
(PyPI wheels): cache_utils.py v4.55.4 DynamicLayer.update l.99 stores the tensors themselves (`self.keys =
key_states`), v4.56.0 l.114-117 concatenates them onto an empty tensor (a copy); modeling_layers.py v4.56.0
GradientCheckpointingLayer passes no cache to a checkpointed layer; models/phi3/modeling_phi3.py v4.48.0 l.106 rotates
q in place, v4.49.0 l.150 concatenates the pass-through part back. The bytes they move were measured on the CPU
(tests/physics/test_activations.py, Phi-3 family cases: to the byte per layer)."""

from __future__ import annotations

from typing import Any

import pytest

from sizing.catalog import resolve_architecture
from sizing.config import parse_config
from sizing.memory.activations import layer_saved
from sizing.memory.adapters import trainable
from sizing.memory.regime import Regime, resolve

PHI3 = {"model_type": "phi3", "hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 4,
        "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 8192,
        "max_position_embeddings": 4096, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
Q, KV = 8 * 32, 2 * 32  # the widths of q and of k (and v)


def _regime(version: str | None, checkpointing: bool = False, framework: str = "transformers",
            **model: Any) -> tuple[Regime, int]:
    cfg = parse_config({"model_config": {**PHI3, **model}, "method": "full", "framework": framework,
                        "framework_version": version, "torch_dtype": "bfloat16", "max_seq_length": 256,
                        "per_device_train_batch_size": 2, "packing": True, "gradient_checkpointing": checkpointing})
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    reg = resolve(cfg, arch, "cuda")
    return reg, layer_saved(arch, reg, trainable(cfg, arch), cfg.r, cfg.max_seq_length).per_token


@pytest.mark.parametrize(("version", "checkpointing", "copied"), [
    ("4.55.4", False, False), ("4.56.0", False, True), ("4.56.0", True, False), (None, False, True),
    (None, True, False)])
def test_the_cache_copies_k_and_v_from_4_56_without_checkpointing(version: str | None, checkpointing: bool,
                                                                   copied: bool) -> None:
    assert _regime(version, checkpointing)[0].kv_copied is copied


def test_a_config_without_use_cache_builds_no_cache() -> None:
    assert _regime(None, use_cache=False)[0].kv_copied is False


def test_own_model_code_keeps_no_transformers_cache() -> None:
    reg, _ = _regime("0.4", framework="torchtune")
    assert (reg.kv_copied, reg.rope_cat) == (False, False)


@pytest.mark.parametrize(("version", "cat"), [("4.48.0", False), ("4.49.0", True), (None, True)])
def test_phi3_concatenates_its_rope_output_from_4_49(version: str | None, cat: bool) -> None:
    assert _regime(version)[0].rope_cat is cat


def test_the_copies_free_the_fused_qkv_output_and_the_concatenation_copies_o_proj_input() -> None:
    """4.48: v is a view of the fused qkv output, whose other (q + kv) values stay alive; 4.56: the cache's copy of v
    is saved instead, and o_proj's input is a copy of SDPA's output (q values) since 4.49: per token, in bf16,
    2 (q + kv) fewer and 2 q more."""
    _, old = _regime("4.48.0")
    _, new = _regime("4.56.0")
    assert new - old == 2 * Q - 2 * (Q + KV)
