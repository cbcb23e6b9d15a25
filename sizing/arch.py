# Architecture: a Hugging Face config.json turned into the shapes the memory model needs.
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import SizingError
from .families import ALIASES, ARCH_CLASSES, BOUNDS, ENCODER_DECODER, FAMILIES, checkpoint_quant

# Which tensor feeds a Linear inside a decoder layer. Consumers of the same tensor can share one
# saved copy (memory-model.md §5.1 rule 2).
ATTN_IN, ATTN_OUT, MLP_IN, MLP_MID = "attn_in", "attn_out", "mlp_in", "mlp_mid"


@dataclass(frozen=True)
class Linear:
    """One projection of a decoder layer (per expert for MoE experts)."""

    name: str  # the module name PEFT matches in target_modules
    in_features: int
    out_features: int
    feeds_from: str  # ATTN_IN | ATTN_OUT | MLP_IN | MLP_MID
    bias: bool = False
    count: int = 1  # experts: how many copies exist per layer
    active: float = 1.0  # experts: how many of the copies a token passes through
    # False where transformers 5 holds the weight as a bare nn.Parameter (fused 3-D MoE experts, the
    # router of MixtralTopKRouter / Qwen3MoeTopKRouter): PEFT's all-linear and bitsandbytes'
    # replace_with_bnb_linear only reach nn.Linear modules.
    nn_linear: bool = True

    @property
    def params(self) -> int:
        return self.count * (self.in_features * self.out_features + (self.out_features if self.bias else 0))


@dataclass(frozen=True)
class CheckpointQuant:
    """quantization_config of a pre-quantized checkpoint."""

    method: str  # "gptq" | "awq" | "bitsandbytes"
    bits: int
    group_size: int  # input features per scale/zero group; -1 in the config = the whole input row
    double_quant: bool = False  # bitsandbytes bnb_4bit_use_double_quant


@dataclass(frozen=True)
class Architecture:
    model_type: str
    hidden: int  # h
    layers: int  # L
    heads: int  # nh
    kv_heads: int  # nkv
    head_dim: int  # d
    intermediate: int  # I (dense MLP; the expert width for MoE)
    vocab: int  # V
    tied_embeddings: bool
    max_positions: int | None
    norm: str  # "rms" (fp32 compute, weight * x), "rms_gemma" (fp32, x * (1 + w)), "layer"
    pre_norms: int  # norms whose output feeds linears (2, or 1 for a shared parallel block)
    post_norms: int  # Gemma 2/3 norms on the attention / MLP outputs
    qk_norm: bool  # Qwen3, Gemma 3: RMSNorm over head_dim on q and k
    gated_mlp: bool  # SwiGLU / GeGLU (g, act(g), u) vs act(fc1(x))
    fused_gate_up: bool  # Phi-3 gate_up_proj: one output tensor holds g and u
    linears: tuple[Linear, ...]
    norm_bias: bool  # LayerNorm has a bias
    lm_head_bias: bool
    final_logit_softcap: float | None
    attn_logit_softcap: float | None
    eager_only: bool  # attention implemented by hand (Bloom's alibi): no SDPA/flash path
    experts: int = 0
    experts_per_token: int = 0
    default_dtype: str | None = None
    default_lora_targets: tuple[str, ...] = ("q_proj", "v_proj")
    position_params: int = 0  # learned absolute position embedding (GPT-BigCode wpe, OPT embed_positions)
    outer_norms: int = 1  # norms outside the layers: the final one (+ BLOOM's word_embeddings_layernorm)
    checkpoint_quant: CheckpointQuant | None = None  # a pre-quantized checkpoint (GPTQ, AWQ, bitsandbytes)

    @property
    def fused_qkv(self) -> bool:
        """q, k and v come out of one projection (query_key_value, qkv_proj, c_attn, W_pack, Wqkv)."""
        return sum(1 for lin in self.linears if lin.feeds_from == ATTN_IN) == 1

    @property
    def q_width(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_width(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden + self.position_params

    @property
    def lm_head_params(self) -> int:
        # A tied head shares the embedding matrix: no parameters of its own.
        return 0 if self.tied_embeddings else self.vocab * self.hidden + (self.vocab if self.lm_head_bias else 0)

    @property
    def norm_params_per_layer(self) -> int:
        per = self.hidden * (2 if self.norm_bias else 1)
        qk = 2 * self.head_dim if self.qk_norm else 0
        return (self.pre_norms + self.post_norms) * per + qk

    @property
    def linear_params_per_layer(self) -> int:
        return sum(lin.params for lin in self.linears)

    @property
    def total_params(self) -> int:
        final_norm = self.outer_norms * self.hidden * (2 if self.norm_bias else 1)
        per_layer = self.linear_params_per_layer + self.norm_params_per_layer
        return self.embedding_params + self.lm_head_params + final_norm + self.layers * per_layer

    def linear_names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(lin.name for lin in self.linears))

    def role_targets(self, role: str) -> tuple[str, ...]:
        """The module names that play a role (q, k, v, o, gate, up, down, mlp) in this layer."""
        attn_in = [lin.name for lin in self.linears if lin.feeds_from == ATTN_IN]
        if role in ("q", "k", "v"):
            named = [n for n in attn_in if n == f"{role}_proj"]
            return tuple(named or [n for n in attn_in if not n.endswith("_proj") or n == "qkv_proj"])
        if role == "o":
            return tuple(lin.name for lin in self.linears if lin.feeds_from == ATTN_OUT)
        mlp_in = [lin.name for lin in self.linears if lin.feeds_from == MLP_IN and lin.count == self._mlp_count]
        mid = [lin.name for lin in self.linears if lin.feeds_from == MLP_MID]
        if role == "down":
            return tuple(mid)
        if role in ("gate", "up"):
            if len(mlp_in) == 2 and self.gated_mlp:  # (gate, up) in the order the families declare them
                return (mlp_in[0 if role == "gate" else 1],)
            return tuple(mlp_in)
        return tuple(mlp_in + mid) if role == "mlp" else ()

    @property
    def _mlp_count(self) -> int:
        return max(lin.count for lin in self.linears)


# Names other stacks give the same projections, by role: LitGPT (lora_query, lora_key, lora_value,
# lora_projection, lora_mlp, lora_head: litgpt/lora.py Config), torchtune lora_attn_modules
# (q_proj, k_proj, v_proj, output_proj) and apply_lora_to_mlp (FeedForward w1 gate, w2 down, w3 up:
# torchtune/modules/feed_forward.py), Megatron / GPT-NeoX fused query_key_value.
ROLE_ALIASES = {"query": "q", "key": "k", "value": "v", "projection": "o", "output_proj": "o", "out_proj": "o",
                "mlp": "mlp", "w1": "gate", "w3": "up", "w2": "down", "q_proj": "q", "k_proj": "k", "v_proj": "v",
                "o_proj": "o", "gate_proj": "gate", "up_proj": "up", "down_proj": "down"}
HEAD_ALIASES = ("lm_head", "head", "output")


def target_aliases(arch: Architecture, name: str) -> tuple[str, ...] | None:
    """This model's modules for a target name another stack uses (see ROLE_ALIASES); None if unknown."""
    key = name.lower().removeprefix("lora_")
    if key in arch.linear_names():
        return (key,)
    if key in HEAD_ALIASES:
        return ("lm_head",)
    role = ROLE_ALIASES.get(key)
    found = arch.role_targets(role) if role else ()
    return found or None



def _type_from_architectures(archs: Any) -> str:
    """Older config.json copies lack model_type; the class in `architectures` names it."""
    if isinstance(archs, list) and archs and isinstance(archs[0], str):
        return ARCH_CLASSES.get(archs[0], archs[0])
    return ""


def _int(cfg: Mapping[str, Any], *names: str, default: int | None = None, bound: str = "") -> int:
    for name in names:
        value = cfg.get(name)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise SizingError("model_config_invalid", f"model_config.{name} must be a positive integer",
                                  field=f"model_config.{name}", value=value)
            if bound and value > BOUNDS[bound]:
                raise SizingError("model_config_invalid", f"model_config.{name} = {value} is beyond any real model "
                                  f"(at most {BOUNDS[bound]})", field=f"model_config.{name}", value=value,
                                  max=BOUNDS[bound])
            return int(value)
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
    heads = _int(cfg, "num_attention_heads", "n_head", bound="heads")
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
        # as nn.Parameter, the router as a bare weight (models/mixtral/modeling_mixtral.py, 5.24.0).
        return [Linear("gate", h, experts, MLP_IN, nn_linear=False),
                Linear(moe_names[0], h, inter, MLP_IN, count=experts, active=act, nn_linear=False),
                Linear(moe_names[1], h, inter, MLP_IN, count=experts, active=act, nn_linear=False),
                Linear(moe_names[2], inter, h, MLP_MID, count=experts, active=act, nn_linear=False)]
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
    if isinstance(cfg.get("text_config"), Mapping) and "hidden_size" not in cfg:  # multimodal wrappers (Gemma 3)
        cfg = {**cfg["text_config"], "model_type": cfg["text_config"].get("model_type", "gemma3_text"),
               **({"quantization_config": raw["quantization_config"]} if "quantization_config" in raw else {})}
    model_type, fam = _family(cfg)
    h = _int(cfg, "hidden_size", "n_embd", "d_model", bound="hidden")
    layers = _int(cfg, "num_hidden_layers", "n_layer", "num_layers", bound="layers")
    heads, kv, head_dim = _attention(model_type, cfg, fam, h)
    plain = "plain_mlp" in fam
    ffn_keys = fam.get("ffn_keys", ("moe_intermediate_size", "intermediate_size", "n_inner", "ffn_hidden_size"))
    inter = 4 * h if fam.get("ffn_x4") else _int(cfg, *ffn_keys, default=4 * h if plain else None, bound="intermediate")
    if fam.get("half_intermediate"):
        inter //= 2  # Qwen-1: intermediate_size counts both SwiGLU branches
    vocab = _int(cfg, "padded_vocab_size", "vocab_size", bound="vocab")
    tied = bool(cfg.get("tie_word_embeddings", fam["tie"]))
    q, kvw = heads * head_dim, kv * head_dim
    bias = bool(fam.get("bias")) or bool(cfg.get("attention_bias") or cfg.get("bias") or cfg.get("add_bias_linear"))
    qkv_bias = bias or bool(fam.get("qkv_bias")) or bool(cfg.get("add_qkv_bias"))
    if model_type == "qwen":
        bias = not cfg.get("no_bias", True)  # c_proj, w1, w2 carry a bias only with no_bias false
    mlp_bias = bool(fam.get("bias")) or bool(cfg.get("mlp_bias")) or (bias and model_type in ("qwen", "chatglm"))
    lins: list[Linear] = []
    if fam.get("qkv"):
        lins.append(Linear(fam["qkv"], h, q + 2 * kvw, ATTN_IN, qkv_bias))
    else:
        lins += [Linear(n, h, w, ATTN_IN, qkv_bias) for n, w in (("q_proj", q), ("k_proj", kvw), ("v_proj", kvw))]
    lins.append(Linear(fam.get("out", "o_proj"), q, h, ATTN_OUT, bias))
    experts = experts_per_token = 0
    if fam.get("moe"):
        experts = _int(cfg, "num_local_experts", "num_experts", bound="experts")
        experts_per_token = _int(cfg, "num_experts_per_tok", bound="experts")
        if cfg.get("decoder_sparse_step", 1) not in (1, None) or cfg.get("mlp_only_layers"):
            raise SizingError("unsupported_architecture", "MoE models with dense layers in between are not supported",
                              field="model_config.decoder_sparse_step")
    moe_names = ("w1", "w3", "w2") if model_type == "mixtral" else ("gate_proj", "up_proj", "down_proj")
    lins += _mlp(fam, h, inter, mlp_bias, experts, float(experts_per_token), moe_names)
    if fam.get("parallel"):
        pre_norms = 1
    elif model_type == "falcon":
        pre_norms = 2 if bool(cfg.get("new_decoder_architecture", "num_key_value_heads" in cfg
                                      or "n_head_kv" in cfg)) else 1
    else:
        pre_norms = 2
    max_pos = cfg.get("max_position_embeddings", cfg.get("n_positions", cfg.get("seq_length")))
    max_pos = max_pos if isinstance(max_pos, int) and not isinstance(max_pos, bool) and max_pos > 0 else None
    positions = fam.get("positions")
    dtype = cfg.get("dtype", cfg.get("torch_dtype"))
    quant = checkpoint_quant(cfg)
    return Architecture(
        model_type=model_type, hidden=h, layers=layers, heads=heads, kv_heads=kv, head_dim=head_dim,
        intermediate=inter, vocab=vocab, tied_embeddings=tied, max_positions=max_pos,
        norm=fam["norm"], pre_norms=pre_norms, post_norms=int(fam.get("post_norms", 0)),
        qk_norm=bool(fam.get("qk_norm")), gated_mlp=not plain, fused_gate_up="fused_mlp" in fam,
        linears=tuple(lins), norm_bias=fam["norm"] == "layer", lm_head_bias=model_type in ("phi", "phi-msft"),
        final_logit_softcap=cfg.get("final_logit_softcapping"), attn_logit_softcap=cfg.get("attn_logit_softcapping"),
        eager_only=bool(fam.get("eager")), experts=experts, experts_per_token=experts_per_token,
        default_dtype=dtype if isinstance(dtype, str) else None,
        default_lora_targets=tuple(fam.get("targets", ("q_proj", "v_proj"))),
        position_params=(max_pos + positions) * h if positions is not None and max_pos else 0,
        checkpoint_quant=CheckpointQuant(*quant) if quant else None, outer_norms=2 if fam.get("embed_norm") else 1,
    )
