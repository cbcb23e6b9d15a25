# Multimodal wrappers: the language model's config nested under text_config, and the vision encoder under
# vision_config, which AutoModelForCausalLM loads too (transformers models/auto/modeling_auto.py maps model_type
# "gemma3" to Gemma3ForConditionalGeneration in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES).
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import SizingError
from .families import BOUNDS, checked_int
from .shapes import ATTN_IN, ATTN_OUT, MLP_IN, MLP_MID, Linear, Tower

# Gemma3TextConfig's defaults, which the Hub's sparse text_config relies on (google/gemma-3-4b-it states only
# hidden_size, intermediate_size, num_hidden_layers, rope_scaling, sliding_window): transformers
# models/gemma3/configuration_gemma3.py, the same at 4.50 (008f5c8c) and 5.24.0.
GEMMA3_TEXT_DEFAULTS: dict[str, Any] = {
    "vocab_size": 262_208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
    "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
    "max_position_embeddings": 131_072, "rms_norm_eps": 1e-6, "tie_word_embeddings": True, "attention_bias": False,
    "query_pre_attn_scalar": 256, "sliding_window": 4096, "final_logit_softcapping": None,
    "attn_logit_softcapping": None,
}
# SiglipVisionConfig's defaults (transformers models/siglip/configuration_siglip.py, 5.24.0).
SIGLIP_DEFAULTS: dict[str, Any] = {
    "hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12, "num_channels": 3, "image_size": 224,
    "patch_size": 16, "vision_use_head": True,
}
WRAPPERS = {"gemma3": ("gemma3_text", GEMMA3_TEXT_DEFAULTS)}  # wrapper model_type -> (text model_type, defaults)


# The text layers' bounds (families.BOUNDS) for the encoder's widths and depth; an image side above any real encoder
# input (Gemma 3: 896) by far, so a pasted config cannot make a 10^9-wide tower.
_BOUNDS = {"hidden_size": BOUNDS["hidden"], "intermediate_size": BOUNDS["intermediate"],
           "num_hidden_layers": BOUNDS["layers"], "num_channels": 16, "image_size": 16_384, "patch_size": 16_384}


def _int(cfg: Mapping[str, Any], key: str) -> int:
    return checked_int(cfg.get(key, SIGLIP_DEFAULTS[key]), f"model_config.vision_config.{key}", _BOUNDS[key])


def text_config(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The language model's config of a multimodal wrapper, its class defaults filled in where the wrapper is
    known (Gemma 3), with the wrapper's quantization_config (it quantizes the whole checkpoint)."""
    inner = raw["text_config"]
    text_type, defaults = WRAPPERS.get(str(raw.get("model_type")), ("gemma3_text", {}))
    cfg = {**defaults, **inner, "model_type": inner.get("model_type", text_type)}
    if "quantization_config" in raw:
        cfg["quantization_config"] = raw["quantization_config"]
    return cfg


def tower(raw: Mapping[str, Any], text_hidden: int) -> Tower | None:
    """The wrapper's vision encoder (None: no vision_config). Gemma 3's SiglipVisionModel: per layer q, k, v,
    out_proj (h x h) and fc1 / fc2 (h <-> I), each with a bias, two LayerNorms; patch embedding (a Conv2d with
    bias), position embedding ((image / patch)^2 x h), post LayerNorm; Gemma3MultiModalProjector: a bare
    [h, text hidden] weight and an RMSNorm over h (models/siglip/modeling_siglip.py,
    models/gemma3/modeling_gemma3.py, 5.24.0). Another vision tower is refused, not sized as if absent."""
    vc = raw.get("vision_config")
    if vc is None:
        return None
    kind = vc.get("model_type", "siglip_vision_model") if isinstance(vc, Mapping) else None
    if raw.get("model_type") != "gemma3" or kind != "siglip_vision_model":
        raise SizingError("unsupported_architecture", f"the vision encoder of a '{raw.get('model_type')}' model "
                          f"({kind}) is not modelled; Gemma 3's SigLIP is", field="model_config.vision_config",
                          model_type=str(raw.get("model_type")))
    if vc.get("vision_use_head", SIGLIP_DEFAULTS["vision_use_head"]):
        raise SizingError("unsupported_architecture", "a SigLIP vision tower with its pooling head "
                          "(vision_use_head) is not modelled", field="model_config.vision_config.vision_use_head")
    h, inter, layers = _int(vc, "hidden_size"), _int(vc, "intermediate_size"), _int(vc, "num_hidden_layers")
    channels, patch = _int(vc, "num_channels"), _int(vc, "patch_size")
    positions = (_int(vc, "image_size") // patch) ** 2
    linears = tuple(Linear(name, h, h, ATTN_IN if name != "out_proj" else ATTN_OUT, bias=True)
                    for name in ("q_proj", "k_proj", "v_proj", "out_proj"))
    linears += (Linear("fc1", h, inter, MLP_IN, bias=True), Linear("fc2", inter, h, MLP_MID, bias=True))
    norms = layers * 2 * 2 * h + 2 * h  # two LayerNorms (weight, bias) per layer, the post LayerNorm
    embeddings = channels * patch * patch * h + h + positions * h
    projector = h * text_hidden + h
    return Tower(linears, layers, norms + embeddings + projector)
