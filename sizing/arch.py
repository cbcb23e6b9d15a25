# Architecture: a Hugging Face config.json turned into the shapes the memory model needs.
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import SizingError
from .families import (
    ACT_BACKWARD_EXTRA,
    ACT_FP32_UNDER_CUDA_AUTOCAST,
    ACT_SAVED,
    ALIASES,
    ARCH_CLASSES,
    BOUNDS,
    ENCODER_DECODER,
    FAMILIES,
    QUANT_METHODS,
    checked_int,
    checkpoint_quant,
)
from .shapes import (
    ATTN_IN,
    ATTN_OUT,
    HEAD_ALIASES,
    MLP_IN,
    MLP_MID,
    ROLE_ALIASES,
    Architecture,
    CheckpointQuant,
    Linear,
    target_aliases,
)
from .vision import text_config, tower

# The shapes live in shapes.py; importers of sizing.arch keep these names.
__all__ = ["ATTN_IN", "ATTN_OUT", "HEAD_ALIASES", "MLP_IN", "MLP_MID", "ROLE_ALIASES", "Architecture",
           "CheckpointQuant", "Linear", "from_hf_config", "model_type_of", "target_aliases"]


def _type_from_architectures(archs: Any) -> str:
    """Older config.json copies lack model_type; the class in `architectures` names it."""
    if isinstance(archs, list) and archs and isinstance(archs[0], str):
        return ARCH_CLASSES.get(archs[0], archs[0])
    return ""


def _int(cfg: Mapping[str, Any], *names: str, default: int | None = None, bound: str = "") -> int:
    for name in names:
        value = cfg.get(name)
        if value is not None:
            return checked_int(value, f"model_config.{name}", BOUNDS[bound] if bound else None)
    if default is not None:
        return default
    raise SizingError("model_config_invalid", f"model_config lacks {names[0]}", field=f"model_config.{names[0]}")


def model_type_of(cfg: Mapping[str, Any]) -> str:
    """The family a config.json names (model_type, else its architectures class), aliases resolved."""
    model_type = str(cfg.get("model_type") or _type_from_architectures(cfg.get("architectures")))
    return ALIASES.get(model_type, model_type)


def _family(cfg: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    model_type = model_type_of(cfg)
    if model_type in ENCODER_DECODER or cfg.get("is_encoder_decoder") is True:
        raise SizingError("encoder_decoder_unsupported",
                          f"'{model_type or 'this model'}' is an encoder-decoder model; only decoder-only LMs are "
                          "modelled", field="model_config.model_type", model_type=model_type)
    fam = FAMILIES.get(model_type)
    if fam is None:
        raise SizingError("unsupported_architecture",
                          f"model_type '{model_type}' is not supported (supported: {', '.join(sorted(FAMILIES))})",
                          field="model_config.model_type", model_type=model_type)
    return model_type, fam


def _attention(model_type: str, cfg: Mapping[str, Any], fam: Mapping[str, Any], h: int) -> tuple[int, int, int]:
    """(heads, kv heads, head_dim)."""
    heads = _int(cfg, "num_attention_heads", "n_head", "n_heads", bound="heads")  # n_heads: MPT
    # Falcon-40B style (new_decoder_architecture) has GQA and two norms; copies of its config that
    # predate the flag still carry the kv-head count.
    falcon_new = bool(cfg.get("new_decoder_architecture", "num_key_value_heads" in cfg or "n_head_kv" in cfg))
    if model_type == "falcon" and not falcon_new:
        kv = 1 if cfg.get("multi_query", True) else heads
    elif model_type == "gpt_bigcode":
        kv = 1 if cfg.get("multi_query", True) else heads  # GPTBigCodeConfig.multi_query defaults to True
    elif fam.get("mha"):
        kv = heads  # the modeling code has no grouped-query attention: a kv-head key in the config is not read
    elif model_type == "chatglm" and cfg.get("multi_query_attention"):
        kv = _int(cfg, "multi_query_group_num", bound="heads")
    else:
        kv = _int(cfg, "num_key_value_heads", "num_kv_heads", "n_head_kv", default=heads, bound="heads")
    head_dim = _int(cfg, "head_dim", "kv_channels", default=h // heads, bound="head_dim")
    if heads % kv:
        raise SizingError("model_config_invalid", "num_attention_heads must be a multiple of num_key_value_heads",
                          field="model_config.num_key_value_heads", heads=heads, kv_heads=kv)
    return heads, kv, head_dim


def _mlp(fam: Mapping[str, Any], h: int, inter: int, bias: bool, experts: int, act: float,
         moe_names: tuple[str, str, str]) -> list[Linear]:
    if fam.get("moe"):
        # transformers 5 MixtralExperts / Qwen3MoeExperts hold gate_up_proj [E, 2I, h] and down_proj [E, h, I]
        # as nn.Parameter, the router as a bare weight (models/mixtral/modeling_mixtral.py, 5.24.0); gpt-oss adds a
        # bias to each (GptOssTopKRouter.bias [E], GptOssExperts gate_up_proj_bias [E, 2I], down_proj_bias [E, h]).
        biased = bool(fam.get("sinks"))
        return [Linear("router" if biased else "gate", h, experts, MLP_IN, biased, nn_linear=False),
                Linear(moe_names[0], h, inter, MLP_IN, biased, count=experts, active=act, nn_linear=False),
                Linear(moe_names[1], h, inter, MLP_IN, biased, count=experts, active=act, nn_linear=False),
                Linear(moe_names[2], inter, h, MLP_MID, biased, count=experts, active=act, nn_linear=False)]
    if "plain_mlp" in fam:
        up, down = fam["plain_mlp"]
        return [Linear(up, h, inter, MLP_IN, bias), Linear(down, inter, h, MLP_MID, bias)]
    if "fused_mlp" in fam:
        gate_up, down = fam["fused_mlp"]
        return [Linear(gate_up, h, 2 * inter, MLP_IN, bias), Linear(down, inter, h, MLP_MID, bias)]
    gate, up, down = fam.get("gated", ("gate_proj", "up_proj", "down_proj"))
    return [Linear(gate, h, inter, MLP_IN, bias), Linear(up, h, inter, MLP_IN, bias),
            Linear(down, inter, h, MLP_MID, bias)]


def from_hf_config(raw: Mapping[str, Any]) -> Architecture:
    """Read any supported decoder-only Hugging Face config.json (dense, GQA, MoE, tied or not)."""
    if not isinstance(raw, Mapping):
        raise SizingError("model_config_invalid", "model_config must be a JSON object", field="model_config")
    cfg: Mapping[str, Any] = raw
    wrapped = isinstance(cfg.get("text_config"), Mapping) and "hidden_size" not in cfg  # multimodal (Gemma 3)
    if wrapped:
        cfg = text_config(raw)
    model_type, fam = _family(cfg)
    if model_type == "stablelm" and cfg.get("qk_layernorm"):  # StableLM 2 12B: a LayerNorm per head on q and k
        raise SizingError("unsupported_architecture", "StableLM with qk_layernorm is not supported",
                          field="model_config.qk_layernorm", model_type=model_type)
    h = _int(cfg, "hidden_size", "n_embd", "n_embed", "d_model", bound="hidden")  # n_embed: BloomConfig's old key
    if model_type == "opt" and cfg.get("word_embed_proj_dim", h) != h:
        # OPT-350m: a narrower embedding with project_in / project_out around the layers, not modelled here.
        raise SizingError("unsupported_architecture", f"OPT with word_embed_proj_dim {cfg['word_embed_proj_dim']} != "
                          f"hidden_size {h} (facebook/opt-350m) is not supported",
                          field="model_config.word_embed_proj_dim", model_type=model_type)
    layers = _int(cfg, "num_hidden_layers", "n_layer", "num_layers", "n_layers", bound="layers")
    heads, kv, head_dim = _attention(model_type, cfg, fam, h)
    plain = "plain_mlp" in fam
    ffn_keys = fam.get("ffn_keys", ("moe_intermediate_size", "intermediate_size", "n_inner", "ffn_hidden_size"))
    inter = 4 * h if fam.get("ffn_x4") else _int(cfg, *ffn_keys, default=4 * h if plain else None, bound="intermediate")
    if fam.get("half_intermediate"):
        inter //= 2  # Qwen-1: intermediate_size counts both SwiGLU branches
    vocab = _int(cfg, "padded_vocab_size", "vocab_size", bound="vocab")
    tied = bool(cfg.get("tie_word_embeddings", fam["tie"]))
    q, kvw = heads * head_dim, kv * head_dim
    bias = bool(fam.get("bias")) or bool(cfg.get("attention_bias", fam.get("bias_default", False)) or cfg.get("bias")
                                         or cfg.get("add_bias_linear"))
    if model_type == "starcoder2":
        bias = bool(cfg.get("use_bias", True))  # Starcoder2Config.use_bias: every linear, default true
    qkv_bias = bias or bool(fam.get("qkv_bias")) or bool(cfg.get("add_qkv_bias") or cfg.get("use_qkv_bias"))
    if model_type == "qwen":
        bias = not cfg.get("no_bias", True)  # c_proj, w1, w2 carry a bias only with no_bias false
    mlp_bias = (bool(fam.get("bias") or fam.get("mlp_bias")) or bool(cfg.get("mlp_bias"))
                or (bias and model_type in ("qwen", "chatglm", "starcoder2", "falcon")))  # FalconMLP: bias=config.bias
    lins: list[Linear] = []
    if fam.get("qkv"):
        lins.append(Linear(fam["qkv"], h, q + 2 * kvw, ATTN_IN, qkv_bias))
    else:
        lins += [Linear(n, h, w, ATTN_IN, qkv_bias) for n, w in (("q_proj", q), ("k_proj", kvw), ("v_proj", kvw))]
    lins.append(Linear(fam.get("out", "o_proj"), q, h, ATTN_OUT, bias and fam.get("bias_out", True)))
    experts = experts_per_token = 0
    if fam.get("moe"):
        experts = _int(cfg, "num_local_experts", "num_experts", bound="experts")
        experts_per_token = _int(cfg, "num_experts_per_tok", bound="experts")
        if cfg.get("decoder_sparse_step", 1) not in (1, None) or cfg.get("mlp_only_layers"):
            raise SizingError("unsupported_architecture", "MoE models with dense layers in between are not supported",
                              field="model_config.decoder_sparse_step")
    moe_names = ("w1", "w3", "w2") if model_type == "mixtral" else ("gate_proj", "up_proj", "down_proj")
    lins += _mlp(fam, h, inter, mlp_bias, experts, float(experts_per_token), moe_names)
    if fam.get("parallel") or (model_type == "stablelm" and cfg.get("use_parallel_residual")):
        pre_norms = 1
    elif model_type == "falcon":  # FalconDecoderLayer: ln_attn + ln_mlp, or one input_layernorm (+ post-attention)
        if cfg.get("new_decoder_architecture", "num_key_value_heads" in cfg or "n_head_kv" in cfg):
            pre_norms = 1 if cfg.get("num_ln_in_parallel_attn") == 1 else 2  # Falcon2-11B: one
        else:
            pre_norms = 1 if cfg.get("parallel_attn", True) else 2  # falcon-rw: sequential, two norms
    else:
        pre_norms = int(fam.get("pre_norms", 2))
    max_pos = cfg.get("max_position_embeddings", cfg.get("n_positions", cfg.get("seq_length", cfg.get("max_seq_len"))))
    max_pos = max_pos if isinstance(max_pos, int) and not isinstance(max_pos, bool) and max_pos > 0 else None
    positions = fam.get("positions")
    dtype = cfg.get("dtype", cfg.get("torch_dtype"))
    quant = checkpoint_quant(cfg)
    if quant and quant[0] == "mxfp4" and model_type != "gpt_oss":  # transformers' MXFP4 replaces GptOssExperts only
        supported = [m for m in QUANT_METHODS if m != "mxfp4"]
        raise SizingError("unsupported_quantization", f"quantization_config.quant_method 'mxfp4' is gpt-oss's expert "
                          f"format, not {model_type}'s (supported: {', '.join(supported)})",
                          field="model_config.quantization_config.quant_method", value="mxfp4", supported=supported)
    act = cfg.get("hidden_act", cfg.get("activation_function", fam.get("act")))
    act_saved = ACT_SAVED.get(str(act), 1) if plain and model_type != "bloom" else 1
    act_fp32 = ACT_FP32_UNDER_CUDA_AUTOCAST.get(str(act), 0) if act_saved > 1 else 0
    act_bwd = ACT_BACKWARD_EXTRA.get(str(act), (0, 0)) if act_saved > 1 else (0, 0)
    return Architecture(
        model_type=model_type, hidden=h, layers=layers, heads=heads, kv_heads=kv, head_dim=head_dim,
        intermediate=inter, vocab=vocab, tied_embeddings=tied, max_positions=max_pos,
        norm=fam["norm"], pre_norms=pre_norms, post_norms=int(fam.get("post_norms", 0)),
        qk_norm=bool(fam.get("qk_norm")), qk_norm_whole=fam.get("qk_norm") == "whole", gated_mlp=not plain,
        fused_gate_up="fused_mlp" in fam,
        linears=tuple(lins), norm_bias=bool(fam.get("norm_bias", fam["norm"] == "layer")),
        lm_head_bias=model_type in ("phi", "phi-msft") or bool(fam.get("head_bias")),
        final_logit_softcap=cfg.get("final_logit_softcapping"), attn_logit_softcap=cfg.get("attn_logit_softcapping"),
        # ALiBi Falcon (falcon-rw) runs FalconAttention's own matmul path: SDPA is used only without alibi
        eager_only=bool(fam.get("eager")) or (model_type == "falcon" and bool(cfg.get("alibi")))
        or (model_type == "internlm2" and cfg.get("attn_implementation", "eager") != "flash_attention_2"),
        experts=experts, experts_per_token=experts_per_token, mask_kinds=int(fam.get("masks", 1)),
        sliding_window=_window(cfg, fam.get("window_default")),
        default_dtype=dtype if isinstance(dtype, str) else None,
        # PEFT maps defaults by the top-level model_type: a wrapped model's ("gemma3") is in none of its mappings
        # (0.21.2), so get_peft_model asks for target_modules there
        default_lora_targets=() if wrapped else tuple(fam.get("targets", ("q_proj", "v_proj"))),
        peft_model_type=str(raw.get("model_type") or model_type) if wrapped else model_type,
        position_params=(max_pos + positions) * h if positions is not None and max_pos else 0,
        checkpoint_quant=CheckpointQuant(*quant) if quant else None, outer_norms=2 if fam.get("embed_norm") else 1,
        act_saved=act_saved, act_fp32_cuda_autocast=act_fp32, act_backward_extra=act_bwd,
        rope_type=_rope_type(cfg.get("rope_scaling")),
        tower=tower(raw, h) if wrapped else None, attn_sinks=bool(fam.get("sinks")),
        experts_targetable=not fam.get("sinks"), rope_half=bool(fam.get("sinks")),
        rope_kinds=_rope_kinds(cfg, fam, layers), rope_cat=bool(fam.get("rope_cat")),
        rope_cat_since=fam["rope_cat"] if isinstance(fam.get("rope_cat"), tuple) else (0,),
        cache_copies_kv=bool(fam.get("cache_copies_kv")),
        use_cache=cfg.get("use_cache", raw.get("use_cache")) is not False,
    )


def _rope_kinds(cfg: Mapping[str, Any], fam: Mapping[str, Any], layers: int) -> int:
    """RoPE (cos, sin) pairs a forward computes and keeps through backward: one per distinct entry of layer_types in
    the families with a table per layer type (`rope_pattern`: by default one full layer in that many, Gemma 3's
    sliding_window_pattern where the config states it), else one."""
    pattern = fam.get("rope_pattern")
    if not pattern:
        return 1
    kinds = cfg.get("layer_types")
    if isinstance(kinds, list) and kinds:
        return len({str(k) for k in kinds[:layers]})
    stated = cfg.get("sliding_window_pattern")
    every = stated if isinstance(stated, int) and not isinstance(stated, bool) and stated > 0 else int(pattern)
    return 2 if 1 < every <= layers else 1


def _window(cfg: Mapping[str, Any], default: int | None = None) -> int | None:
    """The sliding window a config turns on (Qwen2/3 carry one with use_sliding_window false: off; layer_types
    without a "sliding_attention" layer: off, as the attention modules read it); `default`: the config class's own
    where the key is missing (OLMo 3's 4096)."""
    layer_types = cfg.get("layer_types")
    if isinstance(layer_types, list) and "sliding_attention" not in layer_types:
        return None
    window = cfg.get("sliding_window", default)
    if cfg.get("use_sliding_window") is False or isinstance(window, bool) or not isinstance(window, int) or window < 1:
        return None
    return int(window)


def _rope_type(scaling: Any) -> str | None:
    """rope_scaling's rope_type (older configs spell it "type"), None without scaling."""
    if not isinstance(scaling, Mapping):
        return None
    kind = scaling.get("rope_type", scaling.get("type"))
    return kind if isinstance(kind, str) else None
