# The run configuration (shared contract: CLI, page, build, recipes): parse, validate, apply defaults.
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from .errors import SizingError

METHODS = ("full", "lora", "qlora", "lora8")
DTYPES = ("bfloat16", "float16", "float32")
# transformers/trl are the Hugging Face stack; custom = a plain PyTorch loop over a transformers model
# (no accelerate output conversion); litgpt/torchtune follow their own model code (sizing/frameworks.py).
FRAMEWORKS = ("transformers", "trl", "custom", "litgpt", "torchtune")
ATTENTION = ("sdpa", "flash_attention_2", "eager")
OPTIMIZERS = ("adamw_torch", "adamw_torch_fused", "adamw_bnb_8bit", "adamw_8bit", "paged_adamw_8bit",
              "paged_adamw_32bit", "adamw_bnb", "adafactor", "sgd")
PARALLELISM = ("none", "ddp", "fsdp", "zero2", "zero3")
# hf: full logits upcast to fp32 (transformers); chunked_ce: LitGPT / torchtune chunked cross-entropy;
# fused_linear_ce: TRL >= 1.15 / Liger (no logits); fp32_logits: torchtune 0.1 (model returns fp32 logits).
LOSSES = ("hf", "chunked_ce", "fused_linear_ce", "fp32_logits")


@dataclass(frozen=True)
class RunConfig:
    """A validated run. Fields are the Hugging Face names; see shared contract config.md."""

    model: str | None = None
    model_config: Mapping[str, Any] | None = None
    framework: str = "transformers"
    framework_version: str | None = None  # e.g. "0.1" for torchtune's first releases; None: current
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
    lora_alpha: float = 8
    lora_dropout: float = 0.0
    target_modules: str | tuple[str, ...] | None = None
    use_dora: bool = False
    adapter_dtype: str = "auto"  # auto: PEFT upcasts to fp32; TRL keeps bf16 on quantized bases
    max_seq_length: int = 1024  # TRL SFTConfig max_length default
    per_device_train_batch_size: int = 8  # TrainingArguments default
    gradient_accumulation_steps: int = 1
    packing: bool = False
    gradient_checkpointing: bool | None = None
    attn_implementation: str = "sdpa"
    optim: str = "adamw_torch_fused"  # transformers >= 5 with torch >= 2.8
    loss_implementation: str | None = None
    torch_compile: bool = False
    activation_offloading: bool = False
    optimizer_in_backward: bool = False
    num_gpus: int = 1
    parallelism: str = "none"
    cpu_offload: bool = False
    gpu: str | None = "H100-SXM-80GB"
    dataset_tokens: int | None = None
    num_train_epochs: float = 3.0
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


def _field_types() -> dict[str, Any]:
    return {f.name: f for f in fields(RunConfig) if f.name != "extra"}


def _check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise SizingError("wrong_type", f"{name} must be true or false", field=name, expected="boolean", value=value)
    return value


def _check_int(name: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise SizingError("wrong_type", f"{name} must be a whole number", field=name, expected="integer", value=value)
    if not low <= value <= high:
        raise SizingError("out_of_range", f"{name} must be between {low} and {high}", field=name,
                          min=low, max=high, value=value)
    return int(value)


def _check_float(name: str, value: Any, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise SizingError("wrong_type", f"{name} must be a number", field=name, expected="number", value=value)
    if not low <= value <= high:
        raise SizingError("out_of_range", f"{name} must be between {low} and {high}", field=name,
                          min=low, max=high, value=value)
    return float(value)


def _check_choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise SizingError("invalid_value", f"{name} must be one of: {', '.join(choices)}", field=name,
                          choices=list(choices), value=value)
    return value


_INTS = {"r": (1, 65536), "max_seq_length": (1, 10_000_000), "per_device_train_batch_size": (1, 65536),
         "gradient_accumulation_steps": (1, 1_000_000), "num_gpus": (1, 4096), "dataset_tokens": (1, 10**15)}
_FLOATS = {"lora_alpha": (0.0, 1e6), "lora_dropout": (0.0, 0.99), "num_train_epochs": (0.0, 1e4),
           "price_per_gpu_hour": (0.0, 1e6), "utilization": (0.01, 1.0)}
_CHOICES = {"framework": FRAMEWORKS, "method": METHODS, "torch_dtype": (*DTYPES, "auto"),
            "bnb_4bit_quant_type": ("nf4", "fp4"), "bnb_4bit_compute_dtype": DTYPES,
            "bnb_4bit_quant_storage": ("uint8", *DTYPES), "quantization_backend": ("bitsandbytes", "torchao"),
            "adapter_dtype": ("auto", *DTYPES), "attn_implementation": ATTENTION, "optim": OPTIMIZERS,
            "loss_implementation": LOSSES, "parallelism": PARALLELISM}
_DTYPE_ALIASES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "torch.bfloat16": "bfloat16",
                  "torch.float16": "float16", "torch.float32": "float32", "half": "float16", "float": "float32"}


def _normalise(name: str, value: Any) -> Any:
    if name in ("torch_dtype", "bnb_4bit_compute_dtype", "bnb_4bit_quant_storage", "adapter_dtype") and isinstance(
            value, str):
        return _DTYPE_ALIASES.get(value, value)
    return value


def parse_config(data: Mapping[str, Any]) -> RunConfig:
    """Validate a mapping into a RunConfig; every refusal names its field."""
    if not isinstance(data, Mapping):
        raise SizingError("invalid_config", "the configuration must be a JSON object", field=None)
    known = _field_types()
    values: dict[str, Any] = {}
    for name, raw in data.items():
        if name not in known:
            raise SizingError("unknown_field", f"unknown field '{name}'", field=str(name))
        if raw is None:
            continue  # null means "use the default"
        value = _normalise(name, raw)
        if name in _INTS:
            value = _check_int(name, value, *_INTS[name])
        elif name in _FLOATS:
            value = _check_float(name, value, *_FLOATS[name])
        elif name in _CHOICES:
            value = _check_choice(name, value, _CHOICES[name])
        elif name == "target_modules":
            value = _parse_targets(value)
        elif name == "model_config":
            if not isinstance(value, Mapping):
                raise SizingError("wrong_type", "model_config must be a JSON object (a config.json)", field=name)
        elif name in ("model", "gpu", "framework_version"):
            if not isinstance(value, str) or not value.strip():
                raise SizingError("wrong_type", f"{name} must be a non-empty string", field=name, value=value)
            value = value.strip()
        else:
            value = _check_bool(name, value)
        values[name] = value
    if "model" not in values and "model_config" not in values:
        raise SizingError("missing_field", "give a catalog model id in 'model' or a config.json in 'model_config'",
                          field="model")
    return _with_defaults(RunConfig(**values))


def _parse_targets(value: Any) -> str | tuple[str, ...]:
    if value == "all-linear":
        return "all-linear"
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise SizingError("wrong_type", "target_modules must be \"all-linear\" or a list of module names",
                          field="target_modules", value=value)
    return tuple(dict.fromkeys(value))


def _with_defaults(cfg: RunConfig) -> RunConfig:
    """Fill the defaults that depend on other fields, as the Hugging Face stack would."""
    changes: dict[str, Any] = {}
    trl = cfg.framework == "trl"
    if cfg.bf16 is None:
        # SFTConfig turns bf16 on by default; TrainingArguments leaves it off.
        changes["bf16"] = trl and not cfg.fp16
    if cfg.bf16 and cfg.fp16:
        raise SizingError("conflict", "bf16 and fp16 cannot both be true", field="fp16")
    if cfg.gradient_checkpointing is None:
        changes["gradient_checkpointing"] = trl  # SFTConfig default True, TrainingArguments False
    if cfg.method == "qlora":
        if cfg.load_in_8bit:
            raise SizingError("conflict", "method qlora loads the base in 4 bits; load_in_8bit must be false",
                              field="load_in_8bit")
        if cfg.load_in_4bit is False:
            raise SizingError("conflict", "method qlora needs load_in_4bit", field="load_in_4bit")
        changes["load_in_4bit"], changes["load_in_8bit"] = True, False
    elif cfg.method == "lora8":
        if cfg.load_in_4bit:
            raise SizingError("conflict", "method lora8 loads the base in 8 bits; load_in_4bit must be false",
                              field="load_in_4bit")
        changes["load_in_8bit"], changes["load_in_4bit"] = True, False
    else:
        for name in ("load_in_4bit", "load_in_8bit"):
            if getattr(cfg, name):
                raise SizingError("conflict", f"{name} needs method qlora or lora8, not {cfg.method}", field=name)
            changes[name] = False
    if cfg.prepare_model_for_kbit_training is None:
        # transformers + PEFT examples call it; TRL's SFTTrainer stopped in 0.26.0 (trl#4577; #3882 only moved it).
        changes["prepare_model_for_kbit_training"] = cfg.method in ("qlora", "lora8") and cfg.framework in (
            "transformers", "custom")
    if cfg.num_gpus == 1 and cfg.parallelism not in ("none", "ddp") and not cfg.cpu_offload:
        changes["parallelism"] = "none"  # sharding over one GPU is a no-op; ZeRO-Offload on one GPU is not
    if cfg.use_dora and cfg.method == "full":
        raise SizingError("conflict", "use_dora applies to LoRA methods, not full fine-tuning", field="use_dora")
    return _replace(cfg, changes)


def _replace(cfg: RunConfig, changes: dict[str, Any]) -> RunConfig:
    if not changes:
        return cfg
    current = {f.name: getattr(cfg, f.name) for f in fields(RunConfig)}
    current.update(changes)
    return RunConfig(**current)


def config_to_dict(cfg: RunConfig) -> dict[str, Any]:
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
