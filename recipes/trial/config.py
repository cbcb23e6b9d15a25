# The run configuration: sizing's own normalisation (embedded in the built file), then what this run can honour.
from __future__ import annotations

import importlib
import importlib.util
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sizing.choices import BNB_OPTIMIZERS
from sizing.config import SFT_CHUNKED, config_to_dict, parse_config, release
from sizing.errors import SizingError

from .env import version


class BadInput(Exception):
    """A refusal the user can act on, found before any model is loaded: one line, exit status 2."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


def _normaliser() -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """sizing.config.normalize where this sizing has it, else parse_config + config_to_dict (the same meaning)."""
    normalize = getattr(importlib.import_module("sizing.config"), "normalize", None)
    if callable(normalize):
        return lambda raw: dict(normalize(raw))
    return lambda raw: config_to_dict(parse_config(raw))


def _json(text: bytes) -> Any:
    """sizing.contract.read_json (strict: no NaN, no infinities) where it exists, else json.loads."""
    try:
        read_json = importlib.import_module("sizing.contract").read_json
    except (ImportError, AttributeError):
        return json.loads(text)
    return read_json(text, unique_keys=True)


def read_raw(path: str) -> dict[str, Any]:
    """The configuration file as written (refused when unreadable or not an object)."""
    try:
        data = _json(Path(path).read_bytes())
    except OSError as exc:
        raise BadInput(f"cannot read the configuration {path}: {exc.strerror}") from None
    except SizingError as err:
        raise BadInput(f"the configuration {path}: {err.message}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BadInput(f"the configuration {path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BadInput(f"the configuration {path} must be a JSON object")
    return data


def normalise(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Every field explicit, exactly as `sizing estimate` reads the same file."""
    try:
        return _normaliser()(raw)
    except SizingError as err:
        where = f" (field {err.field})" if err.field and err.field not in err.message else ""
        raise BadInput(f"configuration: {err.message}{where}", err.field) from None


def _refuse(field: str, message: str) -> BadInput:
    return BadInput(f"{field}: {message}", field)


def launch() -> dict[str, Any]:
    """How this process was launched: world size and the sharding accelerate was told to use."""
    env = os.environ
    world = int(env.get("WORLD_SIZE", "1"))
    fsdp = env.get("ACCELERATE_USE_FSDP", "").lower() in ("1", "true", "yes")
    deepspeed = env.get("ACCELERATE_USE_DEEPSPEED", "").lower() in ("1", "true", "yes")
    return {"world_size": world, "fsdp": fsdp, "deepspeed": deepspeed}


def check_supported(cfg: Mapping[str, Any], launched: Mapping[str, Any]) -> None:
    """Refuse, before anything is loaded, every field this run would not honour (a measurement of another run
    would be compared with the estimate of this one)."""
    framework = cfg["framework"]
    if framework not in ("transformers", "trl"):
        raise _refuse("framework", f"{framework} is estimated by sizing, but the trial runs the Hugging Face "
                      "stack only (transformers or trl)")
    if framework == "trl" and importlib.util.find_spec("trl") is None:
        raise _refuse("framework", "trl is not installed (pip install -r requirements.txt installs the pinned "
                      "version)")
    # a stated release must be the installed one (0.21 matches 0.21.2; a local +cu130 suffix is not compared)
    for name, package in (("framework_version", "trl" if framework == "trl" else "transformers"),
                          ("peft_version", "peft")):
        wanted = cfg.get(name)
        if not wanted:
            continue
        have = version(package) or "none"
        if have.split("+")[0] != wanted and not have.startswith(f"{wanted}."):
            shown = framework if name == "framework_version" else package
            raise _refuse(name, f"the configuration says {shown} {wanted}, this environment has {have}")
    loss = cfg.get("loss_implementation")
    # TRL from 1.7: no whole logits (chunked, then a fused LM head); earlier TRL and the Trainer: the model's own loss
    chunked = framework == "trl" and release(version("trl")) >= SFT_CHUNKED
    runs = "fused_linear_ce" if chunked else "hf"
    if loss not in (None, runs):
        raise _refuse("loss_implementation", f"{loss} is not what {framework} computes ({runs}); set it to "
                      f"{runs} or null")
    if cfg.get("quantization_backend", "bitsandbytes") != "bitsandbytes":
        raise _refuse("quantization_backend", "the trial quantizes with bitsandbytes only")
    for name in ("optimizer_in_backward", "cpu_offload"):
        if cfg.get(name):
            raise _refuse(name, "the trial's Trainer run does not do this; set it to false")
    if cfg.get("activation_offloading") and framework != "trl":
        raise _refuse("activation_offloading", "only TRL's SFTConfig offers it; use framework trl or set false")
    if cfg.get("method") != "full" and cfg.get("peft_type", "lora") != "lora":
        # model.py builds a LoraConfig only; the other tuners are estimated by sizing but not run here.
        raise _refuse("peft_type", f"{cfg.get('peft_type')} is estimated by sizing, but the trial trains LoRA only; "
                      "set peft_type to lora")
    if cfg.get("method") in ("qlora", "lora8") and importlib.util.find_spec("bitsandbytes") is None:
        raise _refuse("method", f"{cfg.get('method')} needs bitsandbytes, which is not installed")
    if cfg.get("optim") in BNB_OPTIMIZERS and importlib.util.find_spec("bitsandbytes") is None:
        raise _refuse("optim", f"{cfg.get('optim')} is a bitsandbytes optimizer, which is not installed")
    _check_launch(cfg, launched)
    _check_allocator(bool(cfg.get("expandable_segments")))


def _check_launch(cfg: Mapping[str, Any], launched: Mapping[str, Any]) -> None:
    world, gpus, parallelism = int(launched["world_size"]), int(cfg["num_gpus"]), cfg["parallelism"]
    # what the trial cannot run at all comes before how it was launched: no relaunch would help
    if parallelism in ("zero2", "zero3") or launched["deepspeed"]:
        raise _refuse("parallelism", "DeepSpeed ZeRO is estimated by sizing, but the trial does not run it")
    if parallelism in ("fsdp_no_shard", "fsdp_shard_grad_op"):
        raise _refuse("parallelism", f"{parallelism} is estimated by sizing, but the trial runs FSDP FULL_SHARD only")
    if cfg.get("fsdp_shard_embeddings"):
        raise _refuse("fsdp_shard_embeddings", "the embedding and head as FSDP units of their own are estimated by "
                      "sizing, but the trial wraps decoder layers only")
    if world != gpus:
        raise _refuse("num_gpus", f"the configuration says {gpus} GPU(s) but {world} process(es) were launched "
                      f"(accelerate launch --num_processes {gpus})")
    if parallelism == "fsdp" and not launched["fsdp"]:
        raise _refuse("parallelism", "fsdp needs `accelerate launch --config_file fsdp.yaml`")
    if parallelism != "fsdp" and launched["fsdp"]:
        raise _refuse("parallelism", f"the launch uses FSDP but the configuration says {parallelism}")
    if parallelism == "none" and world > 1:
        raise _refuse("parallelism", "none with several processes: set ddp")


ALLOC_VARS = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")  # the second is torch >= 2.9's name


def _check_allocator(expandable: bool) -> None:
    for var in ALLOC_VARS:
        current = os.environ.get(var, "")
        has = "expandable_segments:true" in current.replace(" ", "").lower()
        if current and has != expandable:
            raise _refuse("expandable_segments", f"{var}={current} in the environment contradicts "
                          f"expandable_segments {str(expandable).lower()}")


def configure_allocator(expandable: bool) -> None:
    """Set the caching allocator's mode before torch initialises CUDA (it reads the variable once)."""
    if expandable and not any(os.environ.get(v) for v in ALLOC_VARS):
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
