# Model families the architecture reader knows: module names and layout per model_type, and the limits of a config.
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import SizingError

# model_type -> layout. Names are the attribute names in transformers' modeling files (or the remote
# code the checkpoint ships); "targets" are PEFT's defaults, peft/utils/constants.py
# TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING (0.21.2); () where PEFT has none and asks for
# target_modules. Keys: norm, tie (tie_word_embeddings default), qkv (one fused q/k/v projection: its
# name), out (attention output), plain_mlp (up, down: act(fc1(x))), fused_mlp (gate_up, down: one output
# holds g and u), gated (gate, up, down), parallel (one norm feeds attention and MLP), bias (every linear),
# qkv_bias, qk_norm (True: over head_dim per head; "whole": over the q and k projections' widths), pre_norms and
# post_norms (norms feeding the projections, 2 unless said; norms on the sublayer outputs), eager (hand-written
# attention only), positions (rows of a learned position table beyond max_position_embeddings; None: no such
# table), moe, mha (no grouped-query attention in the code),
# ffn_keys (the config keys of the FFN width), ffn_x4 (width fixed at 4 x hidden), embed_norm, mlp_bias (the MLP's
# linears only), head_bias (lm_head has a bias), norm_bias (False: LayerNorm without a bias), act (the config
# class's default activation where it is a Python formula; BLOOM's BloomGelu saves only its input), sinks (gpt-oss:
# a sink logit per head, biased router and experts, a clamped SwiGLU, experts PEFT cannot target), bias_default
# (attention_bias when the config omits it), window_default (sliding_window when the config omits it), rope_pattern
# (a RoPE table per layer type, Gemma3TextModel / Olmo3Model.forward: one full layer in this many by default),
# bias_out (False: o_proj has no bias where attention_bias gives q/k/v one), rope_cat (RoPE output concatenated:
# True, or the first transformers release whose code does), cache_copies_kv (the attention's v is a view of the fused
# qkv output until a DynamicCache update copies k and v: memory/regime.py kv_copied).
FAMILIES: dict[str, dict[str, Any]] = {
    "llama": {"norm": "rms", "tie": False},
    "mistral": {"norm": "rms", "tie": False},
    "mixtral": {"norm": "rms", "tie": False, "moe": True},
    "qwen2": {"norm": "rms", "tie": False, "qkv_bias": True},
    "qwen3": {"norm": "rms", "tie": False, "qk_norm": True},
    "qwen3_moe": {"norm": "rms", "tie": False, "qk_norm": True, "moe": True, "targets": ()},  # not in PEFT's mapping
    "gemma": {"norm": "rms_gemma", "tie": True},
    # Gemma 2 / 3 interleave sliding-window and full layers: each forward builds both masks (modeling_gemma2.py
    # Gemma2Model.forward causal_mask_mapping: create_causal_mask + create_sliding_window_causal_mask)
    "gemma2": {"norm": "rms_gemma", "tie": True, "post_norms": 2, "masks": 2},
    "gemma3_text": {"norm": "rms_gemma", "tie": True, "post_norms": 2, "qk_norm": True, "masks": 2,
                    "rope_pattern": 6},
    # PEFT's mapping has no phi3 entry (0.21.2 and after): get_peft_model asks for target_modules. Phi-3's
    # apply_rotary_pos_emb concatenates the pass-through part of head_dim back from transformers 4.49.0
    # (models/phi3/modeling_phi3.py v4.49.0 l.150 `torch.cat([... , q_pass], dim=-1)`; v4.48.0 l.106 rotates in place)
    "phi3": {"norm": "rms", "tie": False, "qkv": "qkv_proj", "fused_mlp": ("gate_up_proj", "down_proj"),
             "targets": (), "rope_cat": (4, 49), "cache_copies_kv": True},
    "phi": {"norm": "layer", "tie": False, "parallel": True, "plain_mlp": ("fc1", "fc2"), "out": "dense",
            "targets": ("q_proj", "v_proj", "fc1", "fc2"), "bias": True, "act": "gelu_new"},
    # microsoft/phi-1_5 and phi-2 before transformers 4.37: remote code modeling_phi.py (MHA mixer.Wqkv,
    # out_proj, fc1/fc2, one LayerNorm per block, CausalLMHead = LayerNorm + Linear with bias).
    "phi-msft": {"norm": "layer", "tie": False, "parallel": True, "qkv": "Wqkv", "out": "out_proj", "mha": True,
                 "plain_mlp": ("fc1", "fc2"), "bias": True, "targets": (), "act": "gelu_new"},
    "opt": {"norm": "layer", "tie": True, "plain_mlp": ("fc1", "fc2"), "out": "out_proj", "bias": True, "mha": True,
            "positions": 2, "ffn_keys": ("ffn_dim", "intermediate_size")},  # embed_positions: max_pos + 2 rows
    # FalconConfig.ffn_hidden_size (None: 4 * hidden_size); intermediate_size is not a Falcon key.
    "falcon": {"norm": "layer", "tie": True, "qkv": "query_key_value", "plain_mlp": ("dense_h_to_4h", "dense_4h_to_h"),
               "out": "dense", "targets": ("query_key_value",), "ffn_keys": ("ffn_hidden_size",)},
    "gpt_neox": {"norm": "layer", "tie": False, "qkv": "query_key_value", "bias": True, "mha": True,
                 "plain_mlp": ("dense_h_to_4h", "dense_4h_to_h"), "out": "dense", "targets": ("query_key_value",),
                 "cache_copies_kv": True},
    # BloomMLP is hard-coded 4 * hidden_size (models/bloom/modeling_bloom.py): no FFN-width key is read;
    # word_embeddings_layernorm follows the embedding.
    "bloom": {"norm": "layer", "tie": True, "qkv": "query_key_value", "bias": True, "eager": True, "ffn_x4": True,
              "mha": True, "embed_norm": True,
              "plain_mlp": ("dense_h_to_4h", "dense_4h_to_h"), "out": "dense", "targets": ("query_key_value",)},
    # transformers models/gpt_bigcode: c_attn (h -> h + 2 kv), c_proj, c_fc, c_proj; biases; wpe; lm_head tied.
    "gpt_bigcode": {"norm": "layer", "tie": True, "qkv": "c_attn", "out": "c_proj", "plain_mlp": ("c_fc", "c_proj"),
                    "bias": True, "positions": 0, "targets": ("c_attn",)},
    # Qwen-1 remote code modeling_qwen.py: c_attn (bias) + c_proj; MLP a1 = w1(x), a2 = w2(x),
    # a1 * silu(a2), each intermediate_size // 2 wide; RMSNorm; untied lm_head. PEFT has no default.
    "qwen": {"norm": "rms", "tie": False, "qkv": "c_attn", "out": "c_proj", "gated": ("w2", "w1", "c_proj"),
             "mha": True, "qkv_bias": True, "half_intermediate": True, "targets": ()},
    # ChatGLM2/3 remote code modeling_chatglm.py: query_key_value (multi_query_group_num kv groups),
    # dense, dense_h_to_4h (2 * ffn_hidden_size: SwiGLU halves), dense_4h_to_h; output_layer untied.
    "chatglm": {"norm": "rms", "tie": False, "qkv": "query_key_value", "out": "dense",
                "fused_mlp": ("dense_h_to_4h", "dense_4h_to_h"), "targets": ("query_key_value",)},
    # Baichuan / Baichuan2 remote code: W_pack (h -> 3h), o_proj, Llama MLP, RMSNorm, NormHead untied.
    "baichuan": {"norm": "rms", "tie": False, "qkv": "W_pack", "mha": True, "targets": ()},
    # GPT-2 (models/gpt2): Conv1D c_attn (h -> 3h), c_proj, c_fc, c_proj, all with biases; wpe; tied lm_head.
    "gpt2": {"norm": "layer", "tie": True, "qkv": "c_attn", "out": "c_proj", "plain_mlp": ("c_fc", "c_proj"),
             "bias": True, "positions": 0, "mha": True, "targets": ("c_attn",), "act": "gelu_new"},
    # GPT-J (models/gptj): q/k/v/out_proj without bias, fc_in/fc_out with bias, one ln_1 feeding attention and
    # MLP, lm_head with a bias, untied.
    "gptj": {"norm": "layer", "tie": False, "parallel": True, "plain_mlp": ("fc_in", "fc_out"), "out": "out_proj",
             "mlp_bias": True, "head_bias": True, "mha": True, "act": "gelu_new"},
    # CodeGen (models/codegen): GPT-J's block with one fused qkv_proj (no bias), out_proj, fc_in/fc_out with
    # bias, ln_1 feeding attention and MLP, lm_head with a bias.
    "codegen": {"norm": "layer", "tie": False, "parallel": True, "qkv": "qkv_proj", "out": "out_proj", "mha": True,
                "plain_mlp": ("fc_in", "fc_out"), "mlp_bias": True, "head_bias": True, "act": "gelu_new",
                "targets": ("qkv_proj",), "cache_copies_kv": True},
    # MPT (models/mpt): Wqkv, out_proj, up_proj (4 x hidden, hard-coded), down_proj, no biases; LayerNorms whose
    # bias is set to None; ALiBi in its own eager attention; tied lm_head.
    "mpt": {"norm": "layer", "norm_bias": False, "tie": True, "qkv": "Wqkv", "out": "out_proj", "mha": True,
            "plain_mlp": ("up_proj", "down_proj"), "ffn_x4": True, "eager": True, "targets": ("Wqkv",)},
    # StarCoder2 (models/starcoder2): q/k/v/o_proj and c_fc/c_proj with biases (use_bias), LayerNorm, GQA, tied.
    "starcoder2": {"norm": "layer", "tie": True, "plain_mlp": ("c_fc", "c_proj"), "targets": ()},
    # StableLM 3B-4E1T / StableLM 2 (models/stablelm): LayerNorm, Llama MLP, q/k/v bias with use_qkv_bias, untied.
    "stablelm": {"norm": "layer", "tie": False},
    # Granite 3 (models/granite) and SmolLM3 (models/smollm3): Llama layers (Granite adds scalar multipliers,
    # SmolLM3 drops RoPE in some layers: neither adds a tensor that is saved); no PEFT default targets.
    "granite": {"norm": "rms", "tie": False, "targets": ()},
    # InternLM2 remote code modeling_internlm2.py: wqkv (grouped q/k/v, one Linear), wo, feed_forward w1 (gate),
    # w3 (up), w2 (down) without bias, RMSNorm, untied output; attention eager unless config.attn_implementation
    # is flash_attention_2 (the remote code reads that key, not transformers' argument).
    "internlm2": {"norm": "rms", "tie": False, "qkv": "wqkv", "out": "wo", "gated": ("w1", "w3", "w2"),
                  "targets": ()},
    "smollm3": {"norm": "rms", "tie": True, "targets": ()},
    # OLMo 2 (models/olmo2/modeling_olmo2.py, 5.24.0): no norm before attention or MLP (the projections read the
    # residual stream), an RMSNorm on each sublayer's output before its residual add, q_norm / k_norm over the
    # whole q and k projections before the heads are split; Olmo2RMSNorm returns (weight * x_hat).to(input dtype).
    # No biases, untied head; PEFT 0.21 has no default target_modules for it.
    "olmo2": {"norm": "rms_cast", "tie": False, "pre_norms": 0, "post_norms": 2, "qk_norm": "whole",
              "targets": ()},
    # OLMo 3 (models/olmo3/modular_olmo3.py, 5.24.0): OLMo 2's layer (Olmo3DecoderLayer is Olmo2DecoderLayer) with
    # sliding-window attention on three layers in four (Olmo3Config.layer_types) and a RoPE table per layer type;
    # Olmo3Config.sliding_window defaults to 4096 (window_default: a config.json without the key), and
    # Olmo3Model.forward builds a causal and a sliding-window mask. PEFT 0.21 has no default target_modules for it.
    "olmo3": {"norm": "rms_cast", "tie": False, "pre_norms": 0, "post_norms": 2, "qk_norm": "whole",
              "targets": (), "masks": 2, "window_default": 4096, "rope_pattern": 4},
    # EXAONE 4 (models/exaone4/modular_exaone4.py, 5.24.0): OLMo 2's layer (Exaone4DecoderLayer is Olmo2DecoderLayer:
    # no pre-norms, norms on the sublayer outputs) with Llama's RMSNorm, q_norm / k_norm per head, sliding-window
    # attention on three layers in four (Exaone4Config: window 4096, pattern 4) and no RoPE on the full layers.
    "exaone4": {"norm": "rms", "tie": False, "pre_norms": 0, "post_norms": 2, "qk_norm": True, "targets": (),
                "masks": 2, "window_default": 4096},
    # GLM-4 (models/glm4/modular_glm4.py, 5.24.0): GLM's attention (q/k/v biased by attention_bias, default true; o
    # without) and Phi-3's fused gate_up MLP, an RMSNorm before each sublayer and one on each sublayer's output.
    # GLM's apply_rotary_pos_emb rotates the first partial_rotary_factor of head_dim and concatenates the rest back
    # (rope_cat): q and k come out contiguous per head, SDPA's output follows q's layout, and the transpose before
    # o_proj is then a copy of its own (measured: tests/physics/test_activations.py).
    "glm4": {"norm": "rms", "tie": False, "post_norms": 2, "fused_mlp": ("gate_up_proj", "down_proj"),
             "targets": (), "bias_default": True, "bias_out": False, "rope_cat": True},
    # gpt-oss (models/gpt_oss/modeling_gpt_oss.py, 5.24.0): q/k/v/o with biases (GptOssConfig.attention_bias
    # defaults to true), a learned sink logit per head (`sinks`) that eager attention concatenates to the scores;
    # sdpa is refused (_supports_sdpa = False) and the default implementation is eager. GptOssExperts: gate_up_proj
    # [E, h, 2I] + bias, down_proj [E, I, h] + bias, run by grouped_mm with a clamped SwiGLU; GptOssTopKRouter: a
    # bare weight + bias. RMSNorm returns (weight * x).to(input dtype). PEFT 0.21 has no default targets and no v4
    # name mapping for it (peft utils/transformers_weight_conversion.py: mixtral and qwen2_moe only), so all-linear
    # reaches the attention projections only. GptOssModel.forward builds a causal and a sliding-window mask.
    "gpt_oss": {"norm": "rms_cast", "tie": False, "moe": True, "eager": True, "targets": (), "sinks": True,
                "bias_default": True, "masks": 2},
}
ALIASES = {"gemma3": "gemma3_text", "RefinedWebModel": "falcon", "RefinedWeb": "falcon", "RWForCausalLM": "falcon",
           "yi": "llama", "stablelm_epoch": "gpt_neox", "mixformer-sequential": "phi-msft"}
ARCH_CLASSES = {"LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral", "MixtralForCausalLM": "mixtral",
                "Qwen2ForCausalLM": "qwen2", "Qwen3ForCausalLM": "qwen3", "Qwen3MoeForCausalLM": "qwen3_moe",
                "GemmaForCausalLM": "gemma", "Gemma2ForCausalLM": "gemma2", "Gemma3ForCausalLM": "gemma3_text",
                "Phi3ForCausalLM": "phi3", "PhiForCausalLM": "phi", "OPTForCausalLM": "opt",
                "FalconForCausalLM": "falcon", "GPTNeoXForCausalLM": "gpt_neox", "BloomForCausalLM": "bloom",
                "GPTBigCodeForCausalLM": "gpt_bigcode", "QWenLMHeadModel": "qwen", "ChatGLMModel": "chatglm",
                "ChatGLMForConditionalGeneration": "chatglm", "BaichuanForCausalLM": "baichuan",
                "YiForCausalLM": "llama", "GPT2LMHeadModel": "gpt2", "GPTJForCausalLM": "gptj",
                "MptForCausalLM": "mpt", "MPTForCausalLM": "mpt", "Starcoder2ForCausalLM": "starcoder2",
                "StableLmForCausalLM": "stablelm", "GraniteForCausalLM": "granite",
                "SmolLM3ForCausalLM": "smollm3", "InternLM2ForCausalLM": "internlm2",
                "CodeGenForCausalLM": "codegen", "Olmo2ForCausalLM": "olmo2", "Olmo3ForCausalLM": "olmo3",
                "GptOssForCausalLM": "gpt_oss", "Glm4ForCausalLM": "glm4", "Exaone4ForCausalLM": "exaone4",
                "T5ForConditionalGeneration": "t5",
                "MT5ForConditionalGeneration": "mt5",
                "BartForConditionalGeneration": "bart"}
# Sequence-to-sequence models: an encoder, a decoder and cross-attention, which this model does not describe.
ENCODER_DECODER = frozenset({"t5", "mt5", "umt5", "longt5", "switch_transformers", "bart", "mbart", "pegasus",
                             "pegasus_x", "marian", "led", "blenderbot", "blenderbot-small", "plbart", "fsmt",
                             "m2m_100", "nllb-moe", "prophetnet", "bigbird_pegasus", "encoder-decoder", "t5gemma"})
# Tensors of the activation's input size that transformers' ACT2FN[name] saves for backward (saved_tensors_hooks,
# torch 2.13, no autocast; tests/unit/test_arch_transformers.py measures them): the Python formulas keep their
# intermediates (NewGELUActivation: input, tanh output, 0.5 * x, 1 + tanh). Unlisted names: 1 (one fused kernel).
ACT_SAVED = {"gelu_new": 4, "gelu_fast": 7, "gelu_python": 3, "gelu_accurate": 4, "gelu_python_tanh": 4,
             "quick_gelu": 2, "gelu_10": 2}
# How many of them are fp32 under CUDA autocast: torch.pow is on its fp32 list (AT_FORALL_FP32 in
# aten/src/ATen/autocast_mode.h; tanh, mul, add, erf, sigmoid are not), so pow saves an fp32 copy of its input and
# tanh(.) and 1 + tanh(.) downstream are fp32 by type promotion; 0.5 * x stays in the input dtype. CPU autocast's
# fp32 list has no pow (measured: all four bf16). tests/unit/test_activations_gelu.py measures both.
ACT_FP32_UNDER_CUDA_AUTOCAST = {"gelu_new": 3, "gelu_accurate": 3, "gelu_python_tanh": 3}
# The formula's backward runs op by op: its peak holds this many more tensors of the input's size than a fused
# kernel's (output gradient + input gradient), (without autocast or on CPU, under CUDA autocast where pow's
# gradients are fp32: counted in bf16 input-sized units); tests/unit/test_activations_gelu.py measures them.
ACT_BACKWARD_EXTRA = {"gelu_new": (1, 5), "gelu_accurate": (1, 5), "gelu_python_tanh": (1, 5), "gelu_fast": (1, 1),
                      "quick_gelu": (1, 1), "gelu_python": (3, 3), "gelu_10": (1, 1)}
# Sanity limits of a config field, about 8x the largest published decoder (Llama 3.1 405B: hidden 16384,
# 126 layers, 128 heads, FFN 53248; Gemma 3: vocab 262144; DeepSeek-V3: 256 experts). A value beyond
# them is a typo or an attack on the page, not a model.
BOUNDS = {"hidden": 131_072, "layers": 1024, "heads": 1024, "intermediate": 1_048_576, "vocab": 4_194_304,
          "experts": 4096, "head_dim": 4096}
def checked_int(value: Any, field: str, bound: int | None = None) -> int:
    """A config.json size field: a positive integer, at most `bound` (a model beyond any real one is refused)."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise SizingError("model_config_invalid", f"{field} must be a positive integer", field=field, value=value)
    if bound is not None and value > bound:
        raise SizingError("model_config_invalid", f"{field} = {value} is beyond any real model (at most {bound})",
                          field=field, value=value, max=bound)
    return int(value)


# Pre-quantized checkpoints the weights model knows (sizing/memory/weights.py), by quant_method. mxfp4: gpt-oss's
# experts as published; transformers trains them only dequantized (Mxfp4HfQuantizer.is_trainable is False;
# Mxfp4Config(dequantize=True), or the fallback without triton / kernels, dequantizes to the load dtype:
# quantizers/quantizer_mxfp4.py, integrations/mxfp4.py Mxfp4Dequantize, 5.24.0).
QUANT_METHODS = {"gptq": (2, 3, 4, 8), "awq": (4,), "bitsandbytes": (4, 8), "mxfp4": (4,)}


def checkpoint_quant(cfg: Mapping[str, Any]) -> tuple[str, int, int, bool] | None:
    """(method, bits, group size, double quant) of a config's quantization_config; unknown formats refused."""
    qc = cfg.get("quantization_config")
    if qc is None:
        return None
    if not isinstance(qc, Mapping):
        raise SizingError("model_config_invalid", "model_config.quantization_config must be a JSON object",
                          field="model_config.quantization_config")
    method = str(qc.get("quant_method") or ("bitsandbytes" if qc.get("load_in_4bit") or qc.get("load_in_8bit")
                                             else "")).lower()
    if method not in QUANT_METHODS:
        raise SizingError("unsupported_quantization",
                          f"quantization_config.quant_method '{method or '?'}' is not supported "
                          f"(supported: {', '.join(QUANT_METHODS)})",
                          field="model_config.quantization_config.quant_method", value=method,
                          supported=list(QUANT_METHODS))
    if method == "bitsandbytes":
        bits = 4 if qc.get("load_in_4bit") else 8
        return method, bits, 64, bool(qc.get("bnb_4bit_use_double_quant"))
    if method == "mxfp4":
        return method, 4, 32, False  # OCP MX: 32-element blocks of FP4 with one shared 8-bit scale
    # transformers GPTQConfig(bits, group_size=128) and AwqConfig(bits=4, group_size=128) defaults
    # (utils/quantization_config.py, 5.24.0); GPTQ has no default bit width.
    bits = qc.get("bits", qc.get("w_bit", 4 if method == "awq" else None))
    group = qc.get("group_size", qc.get("q_group_size", 128))
    if bits is None:
        raise SizingError("model_config_invalid", "quantization_config of a GPTQ checkpoint must give bits",
                          field="model_config.quantization_config.bits")
    if bits not in QUANT_METHODS[method] or isinstance(bits, bool):
        raise SizingError("unsupported_quantization", f"{method} with {bits} bits is not supported "
                          f"(supported: {', '.join(map(str, QUANT_METHODS[method]))})",
                          field="model_config.quantization_config.bits", value=bits)
    if isinstance(group, bool) or not isinstance(group, int) or not (group == -1 or group > 0):
        raise SizingError("model_config_invalid", "quantization_config.group_size must be -1 or a positive integer",
                          field="model_config.quantization_config.group_size", value=group)
    return method, int(bits), int(group), False
