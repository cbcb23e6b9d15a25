"""Architecture reader against transformers 5 itself: parameter counts of every natively supported family
(the model built on the meta device, no memory), and what PEFT's all-linear and bitsandbytes reach in a
transformers-5 MoE model (fused 3-D experts and a bare router weight are not nn.Linear)."""

from __future__ import annotations

import pytest

for _mod in ("torch", "transformers", "peft"):  # so the engine's unit tests run without torch
    pytest.importorskip(
        _mod,
        reason=f"physics tests need {_mod} (and the rest of the pinned CPU stack): "
        "pip install -r requirements-physics.txt",
    )

import torch  # noqa: E402
import transformers  # noqa: E402

from sizing.arch import from_hf_config  # noqa: E402

pytestmark = pytest.mark.physics

_BASE = {"hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "vocab_size": 512, "max_position_embeddings": 128}
# One tiny config per family the reader knows and transformers 5.24 builds without remote code.
FAMILIES = {
    "llama": {}, "mistral": {}, "qwen2": {}, "qwen3": {"head_dim": 16}, "gemma": {"head_dim": 16},
    "gemma2": {"head_dim": 16}, "gemma3_text": {"head_dim": 16}, "phi3": {"pad_token_id": 0},
    "mixtral": {"num_local_experts": 4, "num_experts_per_tok": 2},
    "qwen3_moe": {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 48, "head_dim": 16},
    "phi": {"num_key_value_heads": 4},
    "opt": {"ffn_dim": 160, "word_embed_proj_dim": 64, "intermediate_size": None, "num_key_value_heads": None},
    "falcon": {"new_decoder_architecture": False, "multi_query": True, "num_key_value_heads": None},
    "gpt_neox": {"num_key_value_heads": None},
    "bloom": {"n_head": 4, "num_key_value_heads": None},
    "gpt_bigcode": {"n_embd": 64, "n_layer": 2, "n_head": 4, "n_inner": 160, "n_positions": 128,
                    "num_key_value_heads": None},
}


def _config(family: str) -> dict[str, object]:
    cfg = {**_BASE, **FAMILIES[family], "model_type": family}
    return {k: v for k, v in cfg.items() if v is not None}


def _model(cfg: dict[str, object]) -> torch.nn.Module:
    d = dict(cfg)
    hf = transformers.AutoConfig.for_model(str(d.pop("model_type")), **d)
    with torch.device("meta"):
        return transformers.AutoModelForCausalLM.from_config(hf)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_total_params_match_transformers(family: str) -> None:
    cfg = _config(family)
    model = _model(cfg)
    measured = sum(p.numel() for p in model.parameters())  # a tied head is one parameter
    assert from_hf_config(cfg).total_params == measured


def _linear_names(model: torch.nn.Module) -> set[str]:
    return {name.rsplit(".", 1)[-1] for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)}


@pytest.mark.parametrize("family", ["mixtral", "qwen3_moe"])
def test_moe_experts_and_router_are_not_linear(family: str) -> None:
    cfg = _config(family)
    model = _model(cfg)
    arch = from_hf_config(cfg)
    linear = _linear_names(model) - {"lm_head"}
    assert linear == {lin.name for lin in arch.linears if lin.nn_linear}
    assert {lin.name for lin in arch.linears if not lin.nn_linear} and not linear & {
        lin.name for lin in arch.linears if not lin.nn_linear}
