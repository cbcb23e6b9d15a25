# The run configuration (shared contract: CLI, page, build, recipes): parse, validate, apply defaults.
from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from .contract import (
    ATTENTION,
    BY_NAME,
    CONFLICTS,
    DTYPE_ALIASES,
    DTYPES,
    FIELDS,
    FRAMEWORKS,
    LOSSES,
    METHODS,
    OPTIMIZERS,
    PARALLELISM,
    Field,
)
from .errors import SizingError

# The choice tuples stay importable from here (they are declared once, in the contract table's module).
__all__ = ["ATTENTION", "DTYPES", "FRAMEWORKS", "LOSSES", "METHODS", "OPTIMIZERS", "PARALLELISM", "RULES", "RunConfig",
           "config_to_dict", "normalize", "parse_config"]


@dataclass(frozen=True)
class RunConfig:
    """A validated run. Fields are the Hugging Face names; see shared contract config.md."""

    model: str | None = None
    model_config: Mapping[str, Any] | None = None
    framework: str = "transformers"
    framework_version: str | None = None  # e.g. "0.1" for torchtune's first releases; None: current
    peft_version: str | None = None  # e.g. "0.21.0"; None: the current release (frameworks.peft_release)
    method: str = "lora"
    torch_dtype: str = "auto"
    bf16: bool | None = None  # None: the framework's default
    fp16: bool = False
    load_in_4bit: bool | None = None
    bnb_4bit_quant_type: str = "fp4"  # BitsAndBytesConfig default (not nf4)
    bnb_4bit_use_double_quant: bool = False
    bnb_4bit_compute_dtype: str = "float32"  # BitsAndBytesConfig default: None -> float32
    bnb_4bit_quant_storage: str = "uint8"
    load_in_8bit: bool | None = None
    prepare_model_for_kbit_training: bool | None = None
    quantization_backend: str = "bitsandbytes"
    r: int = 8  # LoraConfig defaults
    lora_alpha: float = 8.0
    lora_dropout: float = 0.0
    target_modules: str | tuple[str, ...] | None = None
    use_dora: bool = False
    peft_type: str = "lora"  # the PEFT tuner (contract.PEFT_TYPES)
    num_virtual_tokens: int = 20  # prompt / prefix tuning
    decompose_factor: int = -1  # LoKr
    gralora_k: int = 2  # GraLoRA (GraloraConfig's default)
    n_frequency: int | None = None  # FourierFT / WaveFT (None: the tuner's default, RULES)
    block_size: int = 256  # C3A (C3AConfig's default)
    miss_init: str = "default"  # MiSS (MissConfig's init_weights: True, "bat", "mini"; and mini_r)
    mini_r: int = 1
    road_variant: str = "road_1"  # RoAd (RoadConfig's default)
    group_size: int = 64  # RoAd (RoadConfig's default)
    num_vectors: int = 256  # VB-LoRA (VBLoRAConfig's defaults)
    vector_length: int = 256
    topk: int = 2
    theta_d_length: int = 256  # UniLoRA (UniLoraConfig's default)
    deft_para: bool = False  # DEFT (DeftConfig.para)
    stride_A: int = 1  # Lily (LilyConfig's defaults)
    num_B: int = 2
    depth: int = 0  # PEANuT (PeanutConfig's default)
    tinylora_u: int = 64  # TinyLoRA (TinyLoraConfig's u and weight_tying)
    weight_tying: float = 0.0
    config_A_B: str = "lora"  # GLoRA (GloraConfig's defaults)
    config_C: str = "lora"
    config_D_E: str = "constant"
    psoft_orth: bool = True  # PSOFT (PsoftConfig's defaults)
    psoft_mag_a: bool = True
    psoft_mag_b: bool = True
    num_subspaces: int = 5  # AdaMSS (AdamssConfig's num_subspaces and subspace_rank)
    subspace_rank: int = 1
    adapter_len: int = 10  # adaption prompt (AdaptionPromptConfig; PEFT has no defaults: the LLaMA-Adapter paper's L)
    adapter_layers: int | None = None  # ... the last adapter_layers attention layers (None: every one)
    sparse_rate: float = 0.01  # FRoD (FrodConfig's sparse_rate and runtime_offload_base_weight)
    runtime_offload_base_weight: bool = False
    effective_rank: float | None = None  # OSF (OSFConfig.effective_rank: kept singular directions; None: half)
    osf_trainable_rank: int | None = None  # ... or the rank each layer trains, as PEFT's benchmark sets rank_pattern
    num_trainable_tokens: int = 2  # TrainableTokens: len(token_indices) (2: a new BOS and EOS, PEFT's benchmark)
    encoder_hidden_size: int | None = None  # P-tuning's MLP (None: the model's hidden size, as PEFT)
    feedforward_modules: str | tuple[str, ...] | None = None  # IA3 (None: PEFT's per-model mapping)
    adapter_dtype: str = "auto"  # auto: PEFT upcasts to fp32; TRL keeps bf16 on quantized bases
    max_seq_length: int = 1024  # TRL SFTConfig max_length default
    per_device_train_batch_size: int = 8  # TrainingArguments default
    gradient_accumulation_steps: int = 1
    eval_strategy: str = "no"  # TrainingArguments: evaluation passes during training ("no": none)
    per_device_eval_batch_size: int = 8  # TrainingArguments default
    compute_metrics: bool = False  # Trainer(compute_metrics=...): the evaluation keeps every batch's predictions
    preprocess_logits_for_metrics: str = "none"  # "argmax": token ids are kept instead of the logits
    eval_accumulation_steps: int | None = None  # TrainingArguments: batches after which predictions go to the CPU
    eval_samples: int | None = None  # sequences in the evaluation set
    # TrainingArguments: compute_metrics called on each batch, nothing kept across batches (transformers PR #28769)
    batch_eval_metrics: bool = False
    eval_do_concat_batches: bool = True  # TrainingArguments (PR #30267): False keeps each batch's predictions in a list
    packing: bool = False
    gradient_checkpointing: bool | None = None
    attn_implementation: str = "sdpa"
    optim: str = "adamw_torch_fused"  # transformers >= 5 with torch >= 2.8
    loss_implementation: str | None = None
    torch_compile: bool = False
    activation_offloading: bool = False
    optimizer_in_backward: bool = False
    gpu: str | None = "H100-SXM-80GB"
    num_gpus: int = 1
    parallelism: str = "none"
    cpu_offload: bool = False
    fsdp_shard_embeddings: bool = False  # torchtune custom_sharded_layers: embedding and head as FSDP units
    dataset_tokens: int | None = None
    num_train_epochs: float = 3.0
    eval_steps: int | None = None  # TrainingArguments: steps between evaluations (None: the trainer's logging_steps)
    price_per_gpu_hour: float | None = None
    utilization: float | None = None  # share of the GPU's dense peak sustained; None: sizing's default
    expandable_segments: bool = False
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def quantized(self) -> str | None:
        if self.load_in_4bit:
            return "4bit"
        if self.load_in_8bit:
            return "8bit"
        return None

    @property
    def is_peft(self) -> bool:
        return self.method != "full"


def _check_bool(spec: Field, value: Any) -> bool:
    if not isinstance(value, bool):
        raise SizingError("wrong_type", f"{spec.name} must be true or false", field=spec.name, expected="boolean",
                          value=value)
    return value


def _check_number(spec: Field, value: Any) -> int | float:
    name, whole = spec.name, spec.type == "int"
    if whole and isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int if whole else (int, float)) or value != value:
        raise SizingError("wrong_type", f"{name} must be {'a whole number' if whole else 'a number'}", field=name,
                          expected="integer" if whole else "number", value=value)
    low, high = spec.low, spec.high
    if low is not None and high is not None and not low <= value <= high:
        shown = (int(low), int(high)) if whole else (low, high)
        raise SizingError("out_of_range", f"{name} must be between {shown[0]} and {shown[1]}", field=name,
                          min=shown[0], max=shown[1], value=value)
    return int(value) if whole else float(value)


def _check_str(spec: Field, value: Any) -> str:
    if spec.aliases and isinstance(value, str):
        value = DTYPE_ALIASES.get(value, value)
    if spec.choices:
        if not isinstance(value, str) or value not in spec.choices:
            raise SizingError("invalid_value", f"{spec.name} must be one of: {', '.join(spec.choices)}",
                              field=spec.name, choices=list(spec.choices), value=value)
        return value
    if not isinstance(value, str) or not value.strip():
        raise SizingError("wrong_type", f"{spec.name} must be a non-empty string", field=spec.name, value=value)
    if spec.pattern and not re.fullmatch(spec.pattern, value.strip()):
        raise SizingError("invalid_value", f"{spec.name} must be a release such as 0.21.0, not '{value.strip()}'",
                          field=spec.name, value=value)
    return value.strip()


def _check_object(spec: Field, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise SizingError("wrong_type", f"{spec.name} must be a JSON object (a config.json)", field=spec.name)
    return value


def _parse_targets(spec: Field, value: Any) -> str | tuple[str, ...]:
    if value == "all-linear":
        return "all-linear"
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise SizingError("wrong_type", f"{spec.name} must be \"all-linear\" or a list of module names",
                          field=spec.name, value=value)
    return tuple(dict.fromkeys(value))


# How each value type of the contract table is checked (contract.TYPES).
_CHECKS: dict[str, Callable[[Field, Any], Any]] = {
    "bool": _check_bool, "int": _check_number, "float": _check_number, "str": _check_str,
    "targets": _parse_targets, "object": _check_object}


def parse_config(data: Mapping[str, Any]) -> RunConfig:
    """Validate a mapping into a RunConfig; every refusal names its field."""
    if not isinstance(data, Mapping):
        raise SizingError("invalid_config", "the configuration must be a JSON object", field=None)
    values: dict[str, Any] = {}
    for name, raw in data.items():
        spec = BY_NAME.get(name) if isinstance(name, str) else None
        if spec is None:
            raise SizingError("unknown_field", f"unknown field '{name}'", field=str(name))
        if raw is not None:  # null means "use the default"
            values[name] = _CHECKS[spec.type](spec, raw)
    if "model" not in values and "model_config" not in values:
        raise SizingError("missing_field", "give a catalog model id in 'model' or a config.json in 'model_config'",
                          field="model")
    return _with_defaults(RunConfig(**values))


def _check_conflicts(cfg: RunConfig) -> None:
    """Refuse the combinations of contract.CONFLICTS (given values only: a derived one never conflicts)."""
    for rule in CONFLICTS:
        if all(getattr(cfg, name) in allowed for name, allowed in rule.when) and getattr(cfg, rule.field) is rule.value:
            raise SizingError("conflict", rule.message.format(**config_to_dict(cfg)), field=rule.field)


def _quantized(cfg: RunConfig) -> bool:
    return cfg.method in ("qlora", "lora8")


def release(text: str | None) -> tuple[int, ...]:
    """A release as a tuple of its numbers ("0.19.2.dev0" -> (0, 19, 2, 0)); None: the current one, above all."""
    if not text:
        return (99,)
    parts = []
    for piece in text.split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


# SFTConfig's own defaults and SFTTrainer's model preparation, by release (git tags of huggingface/trl; the run's
# framework_version for framework "trl"; frameworks.py has TRL's other release facts):
# - bf16: __post_init__ sets `bf16 = not fp16` when unset from v0.19.0 (sft_config.py; v0.18 has no such line, so
#   TrainingArguments' False);
# - gradient_checkpointing: `default=True` from v0.22.0 (sft_config.py v0.22.0 l.111; TrainingArguments' False before);
# - a bitsandbytes model up to v0.25: unless it is loaded sharded (FSDP / ZeRO-3 QLoRA: its Params4bit on the CPU
#   or meta device), prepare_model_for_kbit_training(use_gradient_checkpointing=args.gradient_checkpointing, kwargs
#   args.gradient_checkpointing_kwargs or {}), then args.gradient_checkpointing=False, so the checkpointing is the
#   preparation's, reentrant; and with bf16 a 4-bit model's norms cast to fp32 and its fp32 embeddings and LM head
#   back to bf16 (peft_module_casting_to_bf16; models/utils.py v0.24.0 l.503-563, sft_trainer.py v0.12.0
#   l.240-292). v0.26.0 ("Clean up model preparation", #4577) dropped all of it and casts a quantized model's
#   trainable parameters to bf16.
# SFTTrainer's loss: up to v1.6.x the default loss_type "nll" took super().compute_loss, transformers' loss on the
# model's materialised logits (sft_trainer.py v1.6.0 compute_loss; v0.8.0's SFTTrainer had no loss of its own);
# v1.7.0 (tag 2026-06-25) made "chunked_nll" the default (sft_config.py v1.7.0 l.107: the lm_head projection in
# chunks, never the whole logits), and v1.15 the fused LM head: neither materialises them (sizing/memory/loss.py).
SFT_CHUNKED = (1, 7)
SFT_BF16 = (0, 19)
SFT_CHECKPOINTING = (0, 22)
SFT_BF16_TRAINABLE = (0, 26)


def _bits(cfg: RunConfig) -> int:
    """The bitsandbytes base's bits (0: none), also before the method's defaults fill load_in_4bit / load_in_8bit."""
    if cfg.load_in_4bit or (cfg.load_in_4bit is None and cfg.method == "qlora"):
        return 4
    return 8 if cfg.load_in_8bit or (cfg.load_in_8bit is None and cfg.method == "lora8") else 0


def sharded_4bit(cfg: RunConfig) -> bool:
    """A 4-bit base loaded for FSDP or ZeRO-3 over several GPUs (QLoRA's sharded loading: TRL's is_sharded_qlora)."""
    return _bits(cfg) == 4 and cfg.num_gpus > 1 and cfg.parallelism in ("fsdp", "fsdp_shard_grad_op", "zero3")


def sft_prepares(cfg: RunConfig) -> bool:
    """Whether SFTTrainer calls prepare_model_for_kbit_training itself (TRL before v0.26, a bitsandbytes base not
    loaded sharded)."""
    return cfg.framework == "trl" and release(cfg.framework_version) < SFT_BF16_TRAINABLE and _bits(cfg) > 0 \
        and not sharded_4bit(cfg)


def _trl_since(cfg: RunConfig, first: tuple[int, ...]) -> bool:
    """The configuration runs TRL at or after release `first` (the current one when framework_version is not given)."""
    return cfg.framework == "trl" and release(cfg.framework_version) >= first


# The named rules of the contract table: the value a missing field takes, as the Hugging Face stack would.
RULES: dict[str, Callable[[RunConfig], Any]] = {
    # SFTConfig turns bf16 on by default; TrainingArguments leaves it off.
    "framework_bf16": lambda cfg: _trl_since(cfg, SFT_BF16) and not cfg.fp16,
    # SFTConfig gradient_checkpointing defaults to True, TrainingArguments to False.
    "framework_checkpointing": lambda cfg: _trl_since(cfg, SFT_CHECKPOINTING),
    "method_4bit": lambda cfg: cfg.method == "qlora",
    "method_8bit": lambda cfg: cfg.method == "lora8",
    # transformers + PEFT examples call PEFT's prepare_model_for_kbit_training. TRL's SFTTrainer called it up
    # to v0.25 (PR #3882, v0.22.0, only moved the call into trl/models/utils.prepare_peft_model; v0.25.0
    # called TRL's own variant, #4335); v0.26.0 removed it ("Clean up model preparation", #4577, Dec 2025).
    "kbit_prepare": lambda cfg: _quantized(cfg) and (cfg.framework in ("transformers", "custom") or sft_prepares(cfg)),
    # FourierFTConfig.n_frequency = 1000, WaveFTConfig.n_frequency = 2592 (peft 0.21.2 tuners/*/config.py)
    "peft_n_frequency": lambda cfg: 2592 if cfg.peft_type == "waveft" else 1000,
}


def _with_defaults(cfg: RunConfig) -> RunConfig:
    """Refuse conflicting given values, then fill the missing ones by the table's named rules."""
    _check_conflicts(cfg)
    changes: dict[str, Any] = {}
    for spec in FIELDS:
        if spec.rule is not None and getattr(cfg, spec.name) is None:
            changes[spec.name] = RULES[spec.rule](cfg)
    if cfg.torch_dtype == "auto" and cfg.framework == "trl":
        # SFTTrainer given a model id loads float32 when no dtype is given (trl v0.27.0-v1.9.0
        # create_model_from_path: kwargs.get("dtype", "float32")), as memory/regime.py assumes: made explicit,
        # so a trial or snippet that loads the model itself loads what is estimated, not the checkpoint's dtype.
        changes["torch_dtype"] = "float32"
    if cfg.num_gpus == 1 and cfg.parallelism not in ("none", "ddp") and not cfg.cpu_offload:
        changes["parallelism"] = "none"  # sharding over one GPU is a no-op; ZeRO-Offload on one GPU is not
        # and so is FSDP's choice of units: kept, the normalised config would be refused (CONFLICTS) on re-reading
        changes["fsdp_shard_embeddings"] = False
    return _replace(cfg, changes)

def _replace(cfg: RunConfig, changes: dict[str, Any]) -> RunConfig:
    if not changes:
        return cfg
    current = {f.name: getattr(cfg, f.name) for f in fields(RunConfig)}
    current.update(changes)
    return RunConfig(**current)


def config_to_dict(cfg: RunConfig) -> dict[str, Any]:
    """Every field of a RunConfig as JSON values (tuples as lists), in the contract's order."""
    out: dict[str, Any] = {}
    for f in fields(RunConfig):
        if f.name == "extra":
            continue
        value = getattr(cfg, f.name)
        if isinstance(value, tuple):
            value = list(value)
        elif isinstance(value, Mapping):
            value = dict(value)
        out[f.name] = value
    return out


def normalize(data: Mapping[str, Any]) -> dict[str, Any]:
    """The complete normalised configuration: every field explicit, aliases resolved, defaults applied.

    Fields that keep a meaningful null, resolved per model by the estimate: `target_modules` and IA3's
    `feedforward_modules` (PEFT's per-model defaults) and `torch_dtype: "auto"` (the framework's loading dtype);
    `loss_implementation` null is the framework's own loss. parse_config(normalize(x)) == parse_config(x).
    """
    return config_to_dict(parse_config(data))
