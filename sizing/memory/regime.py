# The precision regime of a run: which dtype each kind of tensor ends up in on the real stack.
from __future__ import annotations

from dataclasses import dataclass

from ..arch import Architecture
from ..config import SFT_BF16_TRAINABLE, SFT_CHUNKED, RunConfig, sft_prepares, sharded_4bit
from ..frameworks import (
    HF_CACHE_COPIES,
    HF_DTYPE_AUTO,
    HF_STACKS,
    PEFT_AUTOCAST,
    SFT_CAST_EMBED_KEPT,
    SFT_CAST_HEAD_KEPT,
    SFT_SHARDED_NO_AUTOCAST,
    Profile,
    compiles_plain_loss,
    hf_logits,
    peft_release,
    profile,
    version,
)

BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
HF_STACK = ("transformers", "trl", "custom")


@dataclass(frozen=True)
class Regime:
    """Bytes per element of each tensor family, and the stack behaviours that change saved tensors."""

    backend: str  # "cuda" or "cpu": only the dropout mask differs (bool on CUDA, input dtype on CPU)
    autocast: bool  # bf16/fp16 mixed precision (torch.autocast via accelerate)
    compute: int  # bytes of matmul outputs (activations)
    weight: int  # bytes of non-quantized Linear weights of the body
    embed: int  # embedding weight bytes = the residual stream's dtype
    norm_weight: int
    lm_head_weight: int
    adapter: int  # LoRA A/B (and DoRA magnitude) bytes
    quant: str | None  # "4bit" | "8bit" | None
    full: bool  # every parameter trains
    peft_casts_input: bool  # lora.Linear casts x to the adapter dtype before lora_A (memory-model §5.1 r.4)
    padded: bool  # a padding mask exists (no packing, SDPA/eager)
    attention: str
    loss: str
    checkpointing: bool
    dropout: float
    dora: bool
    load_dtype: str
    profile: Profile
    compiled: bool  # torch.compile: AOT autograd recomputes cheap casts and activations
    quant_compute: int = 2  # bytes of a dequantized 4-bit weight (bnb_4bit_compute_dtype)
    # prepare_model_for_kbit_training's own checkpointing is reentrant (memory-model §2); a Trainer's
    # gradient_checkpointing=True re-enables it non-reentrant and wins
    reentrant: bool = False
    # the transformers release's causal-LM loss path when the model computes the loss (frameworks.hf_logits)
    hf_logits: str = "current"
    # torch.compile reaches a loss that is not chunked (frameworks.compiles_plain_loss: torchtune's full and
    # distributed recipes drop the compiled nn.CrossEntropyLoss)
    plain_loss_compiled: bool = False
    # the sequence reaches a sliding window under SDPA on the Hugging Face stack: the window becomes an explicit mask
    # (regime.windowed), which every layer is sized with (a model that mixes full layers in: slightly high)
    windowed: bool = False
    # 16-bit weights in the other 16-bit dtype than autocast's (a float16 checkpoint under bf16=True): autocast casts
    # every weight it multiplies, as it does fp32 ones, and the residual stream, float16 plus the bfloat16 sublayer
    # outputs, promotes to float32 from the first layer on (measured: tests/physics/test_activations.py)
    half_mismatch: bool = False
    # the adapters in the other 16-bit dtype than autocast's (float16 LoRA weights under bf16=True): PEFT casts the
    # input to them and autocast casts it back, so each adapted module saves its own copy, as with fp32 adapters
    adapter_mismatch: bool = False
    # the attention's RoPE output is concatenated (Architecture.rope_cat in the transformers release the run uses), so
    # o_proj's input is a copy of SDPA's output, not the output itself
    rope_cat: bool = False
    # the forward's DynamicCache copies k and v (frameworks.HF_CACHE_COPIES): SDPA saves the copies, and a fused qkv
    # output, whose views k and v were, is not kept (Architecture.cache_copies_kv)
    kv_copied: bool = False
    # TRL's cast back to bf16 embeddings under fp32 norms (config.sft_prepares): the fp32 norm's output reaches the
    # 4-bit MLP, which returns its input's dtype, so the residual stream is fp32 from layer 0's MLP on (measured:
    # tests/physics/test_activations.py, qlora_trl: the checkpointed inputs of layers 1.. are fp32)
    promoted_residual: bool = False

    @property
    def resid(self) -> int:
        return 4 if self.half_mismatch or self.promoted_residual else self.embed

    def casts(self, weight_bytes: int) -> bool:
        """Whether autocast casts a weight of this many bytes (not quantized) to the compute dtype: by dtype,
        not by size, since float16 and bfloat16 are both 2 bytes."""
        return self.autocast and (weight_bytes != self.compute or self.half_mismatch)

    def peft_copies(self, x_bytes: int) -> bool:
        """Whether lora.Linear's cast of its input (x_bytes per element) to the adapters' dtype makes a copy: by dtype,
        as casts(), so float16 adapters under bf16 autocast copy a 2-byte input too."""
        return self.peft_casts_input and (x_bytes != self.adapter or self.adapter_mismatch)

    @property
    def casts_adapters(self) -> bool:
        """Whether autocast casts the adapters' weights (and PEFT their input): by dtype, as casts()."""
        return self.autocast and (self.adapter != self.compute or self.adapter_mismatch)

    @property
    def masked(self) -> bool:
        """SDPA gets an explicit mask: it saves it per layer and k/v are repeated to every head (no GQA kernel)."""
        return self.padded or self.windowed

    def mask_bytes(self, input_bytes: int) -> int:
        # CUDA native_dropout saves a bool mask; the CPU kernel saves the noise in the input dtype.
        return 1 if self.backend == "cuda" else input_bytes


def load_dtype(cfg: RunConfig, arch: Architecture) -> str:
    """The dtype from_pretrained gives the weights."""
    if cfg.torch_dtype != "auto":
        return cfg.torch_dtype
    if cfg.framework == "trl":
        # trl >= 0.27 create_model_from_path defaults dtype to float32 (memory-model.md §1.2).
        return "float32"
    if cfg.framework in ("litgpt", "torchtune"):
        return "bfloat16"
    if version(cfg) < HF_DTYPE_AUTO:  # transformers 4: from_pretrained without a dtype loads float32
        return "float32"
    # transformers 5 from_pretrained defaults to dtype="auto": the checkpoint's dtype.
    dtype = arch.default_dtype or "bfloat16"
    return dtype if dtype in BYTES else "bfloat16"


def adapter_dtype(cfg: RunConfig, load: str, integer_base: bool = False) -> str:
    """The dtype of LoRA A/B and DoRA magnitudes after PEFT and the framework are done with them (`integer_base`: a
    GPTQ / AWQ checkpoint, whose quantized layers hold no floating weight)."""
    if cfg.adapter_dtype != "auto":
        return cfg.adapter_dtype
    if cfg.peft_type == "adaption_prompt":  # made in q_proj's dtype (fp32 over an integer one), never upcast: no
        return "float32" if cfg.quantized else load  # _cast_adapter_dtype (peft 0.21 adaption_prompt/layer.py)
    if cfg.framework in ("litgpt", "torchtune"):
        return load  # both build LoRA weights in the model's dtype
    if cfg.peft_type == "osf" and peft_release(cfg) < (0, 19):  # OSFModel._cast_adapter_dtype matched the base
        return load  # layer's dtype until peft 0.19 (commit 89a75aa1, #2893, removed it: the generic fp32 cast)
    if cfg.framework == "trl" and cfg.quantized and version(cfg) >= SFT_BF16_TRAINABLE:
        return "bfloat16"  # trl >= 0.26 casts trainable params of quantized models to bf16
    if peft_release(cfg) < PEFT_AUTOCAST and cfg.peft_type == "lora":
        # before get_peft_model's fp32 autocast, LoraLayer.update_layer moved new adapters to the base weight's dtype
        # when it is floating (peft v0.10.0 tuners/lora/layer.py l.114-120): a 16-bit base's or a 4-bit weight's
        # float storage; Int8Params (int8) and GPTQ/AWQ's qweight (int32) leave them in nn.Linear's fp32
        if cfg.load_in_8bit or integer_base:
            return "float32"
        base = cfg.bnb_4bit_quant_storage if cfg.load_in_4bit else load
        return base if base in ("bfloat16", "float16") else "float32"
    if cfg.framework == "trl" and sharded_4bit(cfg) and version(cfg) >= SFT_SHARDED_NO_AUTOCAST:
        # get_peft_model(autocast_adapter_dtype=False): the adapters take the 4-bit weight's float storage dtype
        storage = cfg.bnb_4bit_quant_storage
        return storage if storage in BYTES else "float32"
    if cfg.framework == "trl" and cfg.parallelism == "zero3":
        return load  # TRL passes autocast_adapter_dtype=False under ZeRO-3
    return "float32"  # get_peft_model(autocast_adapter_dtype=True) since peft 0.12


def default_loss(cfg: RunConfig) -> str:
    """The loss implementation the framework runs unless the configuration names one."""
    if cfg.loss_implementation == "hf" and cfg.framework == "torchtune" and version(cfg) < (0, 3):
        return "fp32_logits"  # nn.CrossEntropyLoss on the 0.1-0.2 recipes is that path (frameworks.py)
    if cfg.loss_implementation:
        return cfg.loss_implementation
    if cfg.framework == "trl":  # trl >= 1.15 fused LM head + chunked log-probs (1.7-1.14: chunked, no logits either)
        return "fused_linear_ce" if version(cfg) >= SFT_CHUNKED else "hf"
    if cfg.framework == "torchtune" and version(cfg) < (0, 3):  # CEWithChunkedOutputLoss is new in 0.3.0
        return "fp32_logits"
    if cfg.framework in ("litgpt", "torchtune"):
        return "chunked_ce"
    return "hf"


def resolve(cfg: RunConfig, arch: Architecture, backend: str = "cuda") -> Regime:
    """Resolve the dtypes and stack behaviours of a run once, for every memory module."""
    load = load_dtype(cfg, arch)
    w = BYTES[load]
    autocast = bool(cfg.bf16 or cfg.fp16)
    compute = 2 if autocast else w
    # prepare_model_for_kbit_training up-casts every non-quantized floating param to fp32 (§2).
    kbit_prep = bool(cfg.quantized and cfg.prepare_model_for_kbit_training)
    other = 4 if kbit_prep else w
    # TRL before v0.26 prepared the model itself (config.sft_prepares): the checkpointing is the preparation's, as
    # gradient_checkpointing asks, reentrant (the Trainer's is turned off); with bf16 a 4-bit model's embeddings and
    # LM head go back to bf16, its norms stay fp32 (peft_module_casting_to_bf16)
    trl_prep = kbit_prep and sft_prepares(cfg)
    cast_back = trl_prep and cfg.quantized == "4bit" and bool(cfg.bf16)
    embed = 2 if cast_back and arch.model_type not in SFT_CAST_EMBED_KEPT else other
    lm_head = 2 if cast_back and arch.model_type not in SFT_CAST_HEAD_KEPT else other
    attention = attention_of(cfg, arch)
    integer_base = arch.checkpoint_quant is not None and arch.checkpoint_quant.method in ("gptq", "awq")
    adapter_name = adapter_dtype(cfg, load, integer_base) if cfg.is_peft else None
    adapter = BYTES[adapter_name] if adapter_name else 0
    cast_to = "bfloat16" if cfg.bf16 else "float16"

    def other_half(dtype: str | None) -> bool:  # a 16-bit dtype autocast casts from: the same size, not the same type
        return autocast and dtype in ("float16", "bfloat16") and dtype != cast_to

    # non-quantized weights keep the load dtype unless prepare_model_for_kbit_training up-cast them (then fp32)
    half_mismatch = not kbit_prep and other_half(load)
    prof = profile(cfg)
    padded = _padded(cfg, attention)
    checkpointing = bool(cfg.gradient_checkpointing) if trl_prep else bool(cfg.gradient_checkpointing or kbit_prep)
    reentrant = bool(cfg.gradient_checkpointing) if trl_prep else kbit_prep and not cfg.gradient_checkpointing
    hf = cfg.framework in HF_STACK
    release = version(cfg) if cfg.framework in HF_STACKS else (99,)  # TRL: the current transformers
    return Regime(
        backend=backend, autocast=autocast, compute=compute, weight=w, embed=embed, norm_weight=other,
        lm_head_weight=lm_head, adapter=adapter, quant=cfg.quantized, full=cfg.method == "full",
        peft_casts_input=cfg.quantized is None or not autocast,
        # LitGPT and torchtune train padded batches without a mask tensor (is_causal + ignore_index).
        padded=padded, windowed=_windowed(cfg, arch, attention, padded),
        attention=attention, loss=default_loss(cfg),
        checkpointing=checkpointing,
        # OSFConfig has no dropout (tuners/osf/layer.py: x meets its factors as it is)
        dropout=cfg.lora_dropout if cfg.is_peft and not prof.ignores_lora_dropout and cfg.peft_type != "osf" else 0.0,
        dora=cfg.use_dora, load_dtype=load, profile=prof, compiled=cfg.torch_compile,
        quant_compute=BYTES[cfg.bnb_4bit_compute_dtype], reentrant=reentrant,
        hf_logits=hf_logits(cfg, arch.model_type), plain_loss_compiled=compiles_plain_loss(cfg),
        half_mismatch=half_mismatch, adapter_mismatch=other_half(adapter_name),
        rope_cat=arch.rope_cat and hf and release >= arch.rope_cat_since,
        # under checkpointing transformers passes no cache to the layers (modeling_layers.py GradientCheckpointingLayer)
        kv_copied=hf and arch.cache_copies_kv and arch.use_cache and not checkpointing and release >= HF_CACHE_COPIES,
        promoted_residual=cast_back and embed < other,
    )


def attention_of(cfg: RunConfig, arch: Architecture) -> str:
    """The attention a run really executes. SDPA has no soft-cap: with capped scores (Gemma 2) transformers has no
    SDPA path (Gemma2PreTrainedModel _supports_sdpa = False: its default is eager; an "sdpa" request raises in
    integrations/sdpa_attention.py), LitGPT computes the capped scores by hand (model.py
    scaled_dot_product_attention, "with softcapping we cannot use SDPA", from v0.4.6) and so does torchtune
    (models/gemma2/_attention.py, from v0.5.0): all three run the eager math, b x h x s x s scores included.
    flash_attention_2 caps inside its kernel."""
    if arch.eager_only or (arch.attn_logit_softcap and cfg.attn_implementation == "sdpa"):
        return "eager"
    return cfg.attn_implementation


def beyond_window(cfg: RunConfig, arch: Architecture) -> bool:
    """Whether the sequence reaches the model's sliding window: transformers then materialises the window as a
    [B, 1, S, S] mask (masking_utils _ignore_causal_mask_sdpa: kv_length >= local_size cannot fall back to is_causal;
    create_sliding_window_causal_mask passes local_size=sliding_window). Measured on the CPU on a tiny Gemma 3 with a
    128-token window at S = 256: with the mask, SDPA saves it in every layer (S values a token, compute dtype) and
    gets k and v repeated to every head (integrations/sdpa_attention.py use_gqa_in_sdpa), as with a padding mask."""
    return arch.sliding_window is not None and cfg.max_seq_length >= arch.sliding_window


def mixed_window(cfg: RunConfig, arch: Architecture) -> bool:
    """A windowed run of a model that interleaves full-attention layers (Gemma 3: one in six), whose full layers
    keep is_causal: every layer is sized as a windowed one, so the estimate is slightly high."""
    return resolve_windowed(cfg, arch) and arch.mask_kinds > 1


def resolve_windowed(cfg: RunConfig, arch: Architecture) -> bool:
    """Regime.windowed without resolving the whole regime."""
    attention = attention_of(cfg, arch)
    return _windowed(cfg, arch, attention, _padded(cfg, attention))


def _padded(cfg: RunConfig, attention: str) -> bool:
    """A padding mask exists: no packing, SDPA or eager, on the Hugging Face stack (LitGPT and torchtune train
    padded batches without a mask tensor: is_causal + ignore_index)."""
    return not cfg.packing and attention != "flash_attention_2" and cfg.framework in HF_STACK


def _windowed(cfg: RunConfig, arch: Architecture, attention: str, padded: bool) -> bool:
    """Regime.windowed: the sliding window becomes SDPA's explicit mask (a padded batch has its mask already)."""
    return not padded and attention == "sdpa" and cfg.framework in HF_STACK and beyond_window(cfg, arch)
