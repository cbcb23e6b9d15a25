# Where the run's inputs come from: the tokenizer, and the base weights (the model, or a random build shared by ranks).
from __future__ import annotations

from pathlib import Path
from typing import Any

from . import data, model
from .config import BadInput
from .env import progress, rank, token


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


def tokenizer(source: str | None, random_weights: bool, model_id: str | None) -> Any:
    """--tokenizer, else the model's own, else (random weights) the byte-level tokenizer; pad falls back to eos."""
    from transformers import AutoTokenizer

    where = source or (None if random_weights else model_id)
    if where is None:
        tok = data.byte_tokenizer()
    else:
        try:
            tok = AutoTokenizer.from_pretrained(where, token=token())
        except (OSError, ValueError) as exc:
            raise BadInput(f"cannot load the tokenizer {where!r} ({_one_line(exc)})", "--tokenizer") from None
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return tok


def base(random_weights: bool, cache: str | None, out: Path, cfg: dict[str, Any], model_config: dict[str, Any],
         seed: int) -> str:
    """Where the base weights come from: the model itself, or a random-weight build (rank 0 builds)."""
    if not random_weights:
        return str(cfg["model"])
    if cfg.get("model_config") is None and cfg.get("torch_dtype", "auto") == "auto" \
            and model.config_dtype(model_config) is None:
        # from_pretrained(dtype="auto") would load the weight files' dtype, which this config.json does not give and
        # sizing takes from its catalog (float32 for gpt2's files): a random base in another dtype is another run
        raise BadInput(f"{cfg['model']}'s config.json gives no torch_dtype: with --random-weights set torch_dtype "
                       "(the dtype of its weight files), so the trial loads what the estimate sizes", "torch_dtype")
    import torch

    target = Path(cache) if cache else out / "random-base"
    r, world, _ = rank()
    if r == 0:
        progress(f"random weights for {cfg['model'] or 'model_config'} ({model.base_dtype(model_config)})")
        model.build_random_base(model_config, target, seed)
    if world > 1:  # the other ranks wait until rank 0 has written the random base
        if not torch.distributed.is_initialized():
            torch.distributed.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")
        torch.distributed.barrier()
    return str(target)
