# Shapes of a decoder layer: its projections, a pre-quantized checkpoint, the architecture and role names.
from __future__ import annotations

from dataclasses import dataclass

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
class Tower:
    """A vision encoder loaded with the language model but never run by text-only training (Gemma 3's SigLIP):
    its weights take memory, PEFT's target names reach its nn.Linear modules, bitsandbytes quantizes them, and
    without images no forward runs through it, so none of its parameters (adapters included) gets a gradient or an
    optimizer state (measured: tests/physics/test_arch_families.py)."""

    linears: tuple[Linear, ...]  # one encoder layer's nn.Linear modules
    layers: int
    other_params: int  # patch and position embeddings, LayerNorms, the projector: never quantized

    @property
    def params(self) -> int:
        return self.layers * sum(lin.params for lin in self.linears) + self.other_params


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
    # "rms" (fp32 compute, weight * x.to(dtype)), "rms_gemma" (fp32, x * (1 + w)), "rms_cast" (OLMo 2: fp32,
    # (weight * x).to(dtype)), "layer"
    norm: str
    pre_norms: int  # norms whose output feeds linears (2, 1 for a shared parallel block, 0: OLMo 2 has none)
    post_norms: int  # Gemma 2/3 and OLMo 2 norms on the attention / MLP outputs
    qk_norm: bool  # Qwen3, Gemma 3: RMSNorm over head_dim on q and k
    gated_mlp: bool  # SwiGLU / GeGLU (g, act(g), u) vs act(fc1(x))
    fused_gate_up: bool  # Phi-3 gate_up_proj: one output tensor holds g and u
    linears: tuple[Linear, ...]
    norm_bias: bool  # LayerNorm has a bias
    lm_head_bias: bool
    final_logit_softcap: float | None
    attn_logit_softcap: float | None
    eager_only: bool  # attention implemented by hand (Bloom's alibi): no SDPA/flash path
    qk_norm_whole: bool = False  # OLMo 2: q_norm / k_norm over the whole q and k projections, not per head
    mask_kinds: int = 1  # attention masks one forward builds: Gemma 2/3 a full and a sliding-window one
    sliding_window: int | None = None  # config.json sliding_window (None: off, or use_sliding_window false)
    experts: int = 0
    experts_per_token: int = 0
    default_dtype: str | None = None
    default_lora_targets: tuple[str, ...] = ("q_proj", "v_proj")
    peft_model_type: str = ""  # the model_type PEFT maps defaults by: the top-level one of a wrapped model ("gemma3")
    position_params: int = 0  # learned absolute position embedding (GPT-BigCode wpe, OPT embed_positions)
    outer_norms: int = 1  # norms outside the layers: the final one (+ BLOOM's word_embeddings_layernorm)
    checkpoint_quant: CheckpointQuant | None = None  # a pre-quantized checkpoint (GPTQ, AWQ, bitsandbytes)
    # FFN-width tensors the plain MLP's activation saves for backward: 1 for a fused kernel (nn.GELU, ReLU);
    # transformers' Python formulas keep their intermediates too (families.ACT_SAVED, measured).
    act_saved: int = 1
    act_fp32_cuda_autocast: int = 0  # of those, fp32 under CUDA autocast (families.ACT_FP32_UNDER_CUDA_AUTOCAST)
    act_backward_extra: tuple[int, int] = (0, 0)  # its backward's transients (families.ACT_BACKWARD_EXTRA)
    rope_type: str | None = None  # config.json rope_scaling's rope_type ("llama3": Llama 3.1 / 3.2)
    tower: Tower | None = None  # a multimodal checkpoint's vision encoder (sizing/vision.py)
    # gpt-oss: a learned sink logit per head and layer (GptOssAttention.sinks, concatenated to the eager scores),
    # experts with biases and a clamped SwiGLU, a router whose top-k softmax runs in its logits' dtype
    attn_sinks: bool = False
    # PEFT reaches the fused experts and router by their transformers-4 names (peft
    # utils/transformers_weight_conversion.py _MOE_TARGET_MODULE_MAPPING: Mixtral, Qwen2/3-MoE); False: only the
    # nn.Linear modules can be targeted (gpt-oss, whose experts were never nn.Linear modules)
    experts_targetable: bool = True
    rope_half: bool = False  # gpt-oss: cos/sin span head_dim / 2 (_apply_rotary_emb rotates the halves, no cat)
    rope_kinds: int = 1  # (cos, sin) pairs each forward computes: one per layer type (Gemma 3, OLMo 3)
    rope_cat: bool = False  # GLM: q and k concatenated after RoPE, so o_proj's input is a copy of SDPA's output
    rope_cat_since: tuple[int, ...] = (0,)  # the first transformers release whose code concatenates (Phi-3: 4.49)
    cache_copies_kv: bool = False  # a DynamicCache update copies the fused qkv output's k and v views (regime.py)
    use_cache: bool = True  # config.json's use_cache (the forward builds a DynamicCache unless it is false)

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
        """The layer's small floating vectors: its norms' weights (and biases), and gpt-oss's attention sinks, which
        load, up-cast under prepare_model_for_kbit_training and shard as the norms do."""
        per = self.hidden * (2 if self.norm_bias else 1)
        qk = (self.q_width + self.kv_width if self.qk_norm_whole else 2 * self.head_dim) if self.qk_norm else 0
        return (self.pre_norms + self.post_norms) * per + qk + (self.heads if self.attn_sinks else 0)

    @property
    def linear_params_per_layer(self) -> int:
        return sum(lin.params for lin in self.linears)

    @property
    def total_params(self) -> int:
        final_norm = self.outer_norms * self.hidden * (2 if self.norm_bias else 1)
        per_layer = self.linear_params_per_layer + self.norm_params_per_layer
        return self.embedding_params + self.lm_head_params + final_norm + self.layers * per_layer

    @property
    def all_params(self) -> int:
        """Every parameter the checkpoint loads: the language model's (total_params) and the vision tower's."""
        return self.total_params + (self.tower.params if self.tower else 0)

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
