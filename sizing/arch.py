# Architecture: a Hugging Face config.json turned into the shapes the memory model needs.
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import SizingError

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

    @property
    def params(self) -> int:
        return self.count * (self.in_features * self.out_features + (self.out_features if self.bias else 0))


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

    @property
    def q_width(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_width(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden

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
        final_norm = self.hidden * (2 if self.norm_bias else 1)
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


# model_type -> (norm, pre_norms, post_norms, gated, parallel, names, tie default, PEFT default targets)
# Names are the attribute names in transformers' modeling files; PEFT defaults are
# peft/utils/constants.py TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING.
_LLAMA_NAMES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
_FAMILIES: dict[str, dict[str, Any]] = {
    "llama": {"norm": "rms", "tie": False},
    "mistral": {"norm": "rms", "tie": False},
    "mixtral": {"norm": "rms", "tie": False, "moe": True},
    "qwen2": {"norm": "rms", "tie": False, "qkv_bias": True},
    "qwen3": {"norm": "rms", "tie": False, "qk_norm": True},
    "qwen3_moe": {"norm": "rms", "tie": False, "qk_norm": True, "moe": True},
    "gemma": {"norm": "rms_gemma", "tie": True},
    "gemma2": {"norm": "rms_gemma", "tie": True, "post_norms": 2},
    "gemma3_text": {"norm": "rms_gemma", "tie": True, "post_norms": 2, "qk_norm": True},
    "phi3": {"norm": "rms", "tie": False, "fused": True, "targets": ("qkv_proj",)},
    "phi": {"norm": "layer", "tie": False, "parallel": True, "plain_mlp": ("fc1", "fc2"), "out": "dense",
            "targets": ("q_proj", "v_proj", "fc1", "fc2"), "bias": True},
    "opt": {"norm": "layer", "tie": True, "plain_mlp": ("fc1", "fc2"), "out": "out_proj", "bias": True},
    "falcon": {"norm": "layer", "tie": True, "fused_qkv": True, "plain_mlp": ("dense_h_to_4h", "dense_4h_to_h"),
               "out": "dense", "targets": ("query_key_value",)},
    "gpt_neox": {"norm": "layer", "tie": False, "fused_qkv": True, "parallel2": True, "bias": True,
                 "plain_mlp": ("dense_h_to_4h", "dense_4h_to_h"), "out": "dense", "targets": ("query_key_value",)},
    "bloom": {"norm": "layer", "tie": True, "fused_qkv": True, "bias": True, "eager": True,
              "plain_mlp": ("dense_h_to_4h", "dense_4h_to_h"), "out": "dense", "targets": ("query_key_value",)},
}
_ALIASES = {"gemma3": "gemma3_text", "RefinedWebModel": "falcon", "RefinedWeb": "falcon", "RWForCausalLM": "falcon",
            "yi": "llama", "stablelm_epoch": "gpt_neox"}


_ARCH_CLASSES = {"LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral", "MixtralForCausalLM": "mixtral",
                 "Qwen2ForCausalLM": "qwen2", "Qwen3ForCausalLM": "qwen3", "Qwen3MoeForCausalLM": "qwen3_moe",
                 "GemmaForCausalLM": "gemma", "Gemma2ForCausalLM": "gemma2", "Gemma3ForCausalLM": "gemma3_text",
                 "Phi3ForCausalLM": "phi3", "PhiForCausalLM": "phi", "OPTForCausalLM": "opt",
                 "FalconForCausalLM": "falcon", "GPTNeoXForCausalLM": "gpt_neox", "BloomForCausalLM": "bloom"}


def _type_from_architectures(archs: Any) -> str:
    """Older config.json copies lack model_type; the class in `architectures` names it."""
    if isinstance(archs, list) and archs and isinstance(archs[0], str):
        return _ARCH_CLASSES.get(archs[0], archs[0])
    return ""


def _int(cfg: Mapping[str, Any], *names: str, default: int | None = None) -> int:
    for name in names:
        value = cfg.get(name)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise SizingError("model_config_invalid", f"model_config.{name} must be a positive integer",
                                  field=f"model_config.{name}", value=value)
            return int(value)
    if default is not None:
        return default
    raise SizingError("model_config_invalid", f"model_config lacks {names[0]}", field=f"model_config.{names[0]}")


def from_hf_config(raw: Mapping[str, Any]) -> Architecture:
    """Read any supported decoder-only Hugging Face config.json (dense, GQA, MoE, tied or not)."""
    if not isinstance(raw, Mapping):
        raise SizingError("model_config_invalid", "model_config must be a JSON object", field="model_config")
    cfg: Mapping[str, Any] = raw
    if "text_config" in cfg and "hidden_size" not in cfg:  # multimodal wrappers (Gemma 3 4B+): the LM part
        cfg = {**cfg["text_config"], "model_type": cfg["text_config"].get("model_type", "gemma3_text")}
    model_type = str(cfg.get("model_type") or _type_from_architectures(cfg.get("architectures")))
    model_type = _ALIASES.get(model_type, model_type)
    fam = _FAMILIES.get(model_type)
    if fam is None:
        raise SizingError("unsupported_architecture",
                          f"model_type '{model_type}' is not supported (supported: {', '.join(sorted(_FAMILIES))})",
                          field="model_config.model_type", model_type=model_type)
    h = _int(cfg, "hidden_size", "n_embd", "d_model")
    layers = _int(cfg, "num_hidden_layers", "n_layer", "num_layers")
    heads = _int(cfg, "num_attention_heads", "n_head")
    # Falcon-40B style (new_decoder_architecture) has GQA and two norms; copies of its config that
    # predate the flag still carry the kv-head count.
    falcon_new = bool(cfg.get("new_decoder_architecture", "num_key_value_heads" in cfg or "n_head_kv" in cfg))
    if model_type == "falcon" and not falcon_new:
        kv = 1 if cfg.get("multi_query", True) else heads
    else:
        kv = _int(cfg, "num_key_value_heads", "num_kv_heads", "n_head_kv", default=heads)
    head_dim = _int(cfg, "head_dim", default=h // heads)
    plain = fam.get("plain_mlp")
    inter = _int(cfg, "moe_intermediate_size", "intermediate_size", "n_inner", "ffn_hidden_size",
                 default=4 * h if plain else None)
    vocab = _int(cfg, "vocab_size")
    if heads % kv:
        raise SizingError("model_config_invalid", "num_attention_heads must be a multiple of num_key_value_heads",
                          field="model_config.num_key_value_heads", heads=heads, kv_heads=kv)
    tied = bool(cfg.get("tie_word_embeddings", fam["tie"]))
    q, kvw = heads * head_dim, kv * head_dim
    bias = bool(fam.get("bias")) or bool(cfg.get("attention_bias") or cfg.get("bias"))
    qkv_bias = bias or bool(fam.get("qkv_bias"))
    mlp_bias = bool(fam.get("bias")) or bool(cfg.get("mlp_bias"))
    out_name = fam.get("out", "o_proj")
    lins: list[Linear] = []
    if fam.get("fused_qkv"):
        lins.append(Linear("query_key_value", h, q + 2 * kvw, ATTN_IN, qkv_bias))
    elif fam.get("fused"):
        lins.append(Linear("qkv_proj", h, q + 2 * kvw, ATTN_IN, qkv_bias))
    else:
        lins += [Linear(n, h, w, ATTN_IN, qkv_bias) for n, w in (("q_proj", q), ("k_proj", kvw), ("v_proj", kvw))]
    lins.append(Linear(out_name, q, h, ATTN_OUT, bias))
    experts = experts_per_token = 0
    if fam.get("moe"):
        experts = _int(cfg, "num_local_experts", "num_experts")
        experts_per_token = _int(cfg, "num_experts_per_tok")
        if cfg.get("decoder_sparse_step", 1) not in (1, None) or cfg.get("mlp_only_layers"):
            raise SizingError("unsupported_architecture", "MoE models with dense layers in between are not supported",
                              field="model_config.decoder_sparse_step")
        act = float(experts_per_token)
        names = ("w1", "w3", "w2") if model_type == "mixtral" else ("gate_proj", "up_proj", "down_proj")
        lins += [Linear("gate", h, experts, MLP_IN),
                 Linear(names[0], h, inter, MLP_IN, count=experts, active=act),
                 Linear(names[1], h, inter, MLP_IN, count=experts, active=act),
                 Linear(names[2], inter, h, MLP_MID, count=experts, active=act)]
    elif plain:
        lins += [Linear(plain[0], h, inter, MLP_IN, mlp_bias), Linear(plain[1], inter, h, MLP_MID, mlp_bias)]
    elif fam.get("fused"):
        lins += [Linear("gate_up_proj", h, 2 * inter, MLP_IN, mlp_bias),
                 Linear("down_proj", inter, h, MLP_MID, mlp_bias)]
    else:
        lins += [Linear("gate_proj", h, inter, MLP_IN, mlp_bias), Linear("up_proj", h, inter, MLP_IN, mlp_bias),
                 Linear("down_proj", inter, h, MLP_MID, mlp_bias)]
    if fam.get("parallel"):
        pre_norms = 1
    elif model_type == "falcon":
        pre_norms = 2 if falcon_new else 1
    else:
        pre_norms = 2
    max_pos = cfg.get("max_position_embeddings", cfg.get("n_positions", cfg.get("seq_length")))
    dtype = cfg.get("dtype", cfg.get("torch_dtype"))
    return Architecture(
        model_type=model_type, hidden=h, layers=layers, heads=heads, kv_heads=kv, head_dim=head_dim,
        intermediate=inter, vocab=vocab, tied_embeddings=tied,
        max_positions=max_pos if isinstance(max_pos, int) and max_pos > 0 else None,
        norm=fam["norm"], pre_norms=pre_norms, post_norms=int(fam.get("post_norms", 0)),
        qk_norm=bool(fam.get("qk_norm")), gated_mlp=not plain, fused_gate_up=bool(fam.get("fused")),
        linears=tuple(lins), norm_bias=fam["norm"] == "layer", lm_head_bias=model_type == "phi",
        final_logit_softcap=cfg.get("final_logit_softcapping"), attn_logit_softcap=cfg.get("attn_logit_softcapping"),
        eager_only=bool(fam.get("eager")), experts=experts, experts_per_token=experts_per_token,
        default_dtype=dtype if isinstance(dtype, str) else None,
        default_lora_targets=tuple(fam.get("targets", ("q_proj", "v_proj"))),
    )
