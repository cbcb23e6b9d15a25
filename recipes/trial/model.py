# The model: a random-weight base built once, the base in the configured format, the adapter.
from __future__ import annotations

import gc
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .config import BadInput
from .env import token

DTYPES = ("bfloat16", "float16", "float32")
_DROP = ("architectures", "transformers_version", "torch_dtype", "dtype", "quantization_config", "auto_map")


def torch_dtype(name: Any) -> Any:
    """A torch dtype from the normalised name; "auto" stays "auto" (the checkpoint's dtype)."""
    import torch

    if name in (None, "auto"):
        return "auto"
    if name not in DTYPES:
        raise BadInput(f"unknown dtype {name!r}")
    return getattr(torch, str(name))


def config_dtype(model_config: Mapping[str, Any]) -> str | None:
    """The dtype a config.json names (dtype, or torch_dtype before transformers 5), None when it names none."""
    value = model_config.get("dtype", model_config.get("torch_dtype"))
    return value if value in DTYPES else None


def base_dtype(model_config: Mapping[str, Any]) -> str:
    """The dtype a random base is saved in: the config.json's, else bfloat16 (what sizing assumes for "auto")."""
    return config_dtype(model_config) or "bfloat16"


def hub_config(source: str) -> dict[str, Any]:
    """The model's config.json from a local folder or the hub, before any weight is read."""
    from transformers import AutoConfig

    try:
        return dict(AutoConfig.from_pretrained(source, token=token()).to_dict())
    except (OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BadInput(f"model: cannot read the config of {source!r} ({first})", "model") from None


def vocab_size(model_config: Mapping[str, Any]) -> int | None:
    """The embedding rows of a config.json (text_config for multimodal configs)."""
    for cfg in (model_config, model_config.get("text_config") or {}):
        value = cfg.get("vocab_size") if isinstance(cfg, Mapping) else None
        if isinstance(value, int):
            return value
    return None


def build_random_base(model_config: Mapping[str, Any], target: Path, seed: int) -> Path:
    """The architecture with random weights in its own dtype, saved once; reused when `target` already holds
    the same build (config, seed and dtype fingerprint), so several runs share one base."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    fields = {k: v for k, v in model_config.items() if k not in _DROP}
    model_type = fields.pop("model_type", None)
    if not model_type:
        raise BadInput("model_config lacks 'model_type'", "model_config")
    dtype = base_dtype(model_config)
    stamp = hashlib.sha256(json.dumps([fields, model_type, dtype, seed], sort_keys=True, default=str)
                           .encode()).hexdigest()
    marker = target / "trial-random-base.sha256"
    if marker.is_file() and marker.read_text(encoding="utf-8").strip() == stamp:
        return target
    try:
        hf_config = AutoConfig.for_model(model_type, **fields)
    except (ValueError, KeyError, TypeError) as exc:
        raise BadInput(f"model_config: {exc}", "model_config") from None
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(hf_config, dtype=getattr(torch, dtype))
    model.save_pretrained(target)
    marker.write_text(stamp + "\n", encoding="utf-8")
    del model
    gc.collect()
    return target


def quant_bits(cfg: Mapping[str, Any]) -> int:
    """4 or 8 for a quantized base, else 0 (the normalised config says which)."""
    return 4 if cfg.get("load_in_4bit") else 8 if cfg.get("load_in_8bit") else 0


def device_map() -> Any:
    """The whole model on this process's GPU (or the CPU)."""
    import torch

    return {"": torch.cuda.current_device()} if torch.cuda.is_available() else "cpu"


def load_base(source: str, cfg: Mapping[str, Any]) -> Any:
    """The base model in the configured format (the same call for training and for the reload check)."""
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    kwargs: dict[str, Any] = {"dtype": torch_dtype(cfg["torch_dtype"]),
                              "attn_implementation": cfg["attn_implementation"], "token": token()}
    bits = quant_bits(cfg)
    if bits == 4:
        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type=cfg["bnb_4bit_quant_type"],
            bnb_4bit_use_double_quant=bool(cfg["bnb_4bit_use_double_quant"]),
            bnb_4bit_compute_dtype=torch_dtype(cfg["bnb_4bit_compute_dtype"]),
            bnb_4bit_quant_storage=_storage(cfg["bnb_4bit_quant_storage"]))
    elif bits == 8:
        kwargs["quantization_config"] = BitsAndBytesConfig(load_in_8bit=True)
    if bits or not _sharded():
        kwargs["device_map"] = device_map()  # FSDP places the shards itself
    model = AutoModelForCausalLM.from_pretrained(source, **kwargs)
    if bits and cfg["prepare_model_for_kbit_training"]:
        from peft import prepare_model_for_kbit_training

        model = prepare_model_for_kbit_training(model)  # its defaults, as the estimate assumes
    return model


def _storage(name: str) -> Any:
    import torch

    return torch.uint8 if name == "uint8" else torch_dtype(name)


def _sharded() -> bool:
    import os

    return os.environ.get("ACCELERATE_USE_FSDP", "").lower() in ("1", "true", "yes")


def lora_config(cfg: Mapping[str, Any]) -> Any:
    """PEFT's LoraConfig from the normalised fields; target_modules None is PEFT's per-model default."""
    from peft import LoraConfig

    targets = cfg["target_modules"]
    return LoraConfig(r=int(cfg["r"]), lora_alpha=float(cfg["lora_alpha"]), lora_dropout=float(cfg["lora_dropout"]),
                      target_modules=list(targets) if isinstance(targets, list | tuple) else targets,
                      use_dora=bool(cfg["use_dora"]), task_type="CAUSAL_LM")


def apply_adapter(model: Any, cfg: Mapping[str, Any]) -> Any:
    """LoRA / DoRA on the base (full fine-tuning: the base itself), adapters in adapter_dtype."""
    if cfg["method"] == "full":
        return model
    from peft import get_peft_model

    wanted = cfg["adapter_dtype"]
    model = get_peft_model(model, lora_config(cfg), autocast_adapter_dtype=wanted in ("auto", "float32"))
    cast_adapter(model, wanted)
    return model


def cast_adapter(model: Any, wanted: str) -> None:
    """Trainable tensors in an explicit adapter_dtype ("auto" keeps what PEFT or TRL chose)."""
    if wanted == "auto":
        return
    dtype = torch_dtype(wanted)
    for param in model.parameters():
        if param.requires_grad and param.dtype != dtype:
            param.data = param.data.to(dtype)
