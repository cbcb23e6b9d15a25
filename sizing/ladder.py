# "It does not fit": the levers that lower a run's peak, in the order of what each saves, with its cost in time.
from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from .catalog import Gpu, find_gpu, resolve_architecture
from .config import RunConfig, config_to_dict, parse_config
from .errors import SizingError
from .estimate import usable_bytes
from .memory.adapters import trainable
from .memory.regime import resolve
from .solve import Sizer
from .throughput import time_estimate

# The 8-bit optimizers keep their states in bitsandbytes blocks; the paged one in CUDA managed memory.
EIGHT_BIT = ("adamw_bnb_8bit", "adamw_8bit", "paged_adamw_8bit", "lion_8bit", "paged_lion_8bit")
# The losses already fused or chunked (sizing.memory.loss): TRL's fused head, LitGPT/torchtune chunks.
NO_FULL_LOGITS = ("fused_linear_ce", "chunked_ce")
# The levers of one GPU, climbed in the order of what each saves; then those that take more hardware
# (GPUs, or host memory and PCIe traffic), only while the run still does not fit.
ONE_GPU = ("fused_loss", "no_kbit_upcast", "gradient_checkpointing", "micro_batch", "shorter_sequence",
           "eight_bit_optimizer", "qlora")
MORE_HARDWARE = ("fsdp", "cpu_offload")
LEVERS = ONE_GPU + MORE_HARDWARE


@dataclass(frozen=True)
class Rung:
    """One lever applied on top of the rungs before it: what changed, the peak after it and what it cost."""

    lever: str
    change: dict[str, Any]
    reserved_bytes: int  # per GPU, after this rung
    saved_bytes: int  # against the rung before
    fits: bool
    num_gpus: int
    seconds_per_mtoken: float | None  # wall time per million training tokens (None: no throughput figures)
    time_factor: float | None  # seconds_per_mtoken against the rung before (1.3: 30 % slower)
    gpu_hours_factor: float | None  # GPU-hours per token against the rung before (more GPUs cost GPU-hours)


@dataclass(frozen=True)
class Ladder:
    """The configuration's starting point on one GPU and the rungs, biggest saving first."""

    gpu: str
    usable_bytes: int
    reserved_bytes: int
    fits: bool
    seconds_per_mtoken: float | None
    rungs: tuple[Rung, ...]

    @property
    def first_fit(self) -> int | None:
        """How many rungs to climb before the run fits (0: it fits already; None: never on this ladder)."""
        if self.fits:
            return 0
        return next((i + 1 for i, r in enumerate(self.rungs) if r.fits), None)


def _fused_loss(cfg: RunConfig, loss: str) -> dict[str, Any] | None:
    return None if loss in NO_FULL_LOGITS else {"loss_implementation": "fused_linear_ce"}


def _no_kbit_upcast(cfg: RunConfig, loss: str) -> dict[str, Any] | None:
    return {"prepare_model_for_kbit_training": False} if cfg.quantized and cfg.prepare_model_for_kbit_training \
        else None


def _checkpointing(cfg: RunConfig, loss: str) -> dict[str, Any] | None:
    return None if cfg.gradient_checkpointing else {"gradient_checkpointing": True}


def _micro_batch(cfg: RunConfig, loss: str) -> dict[str, Any] | None:
    # The same tokens per optimizer step: micro-batch 1, accumulation times the old micro-batch.
    b = cfg.per_device_train_batch_size
    return None if b == 1 else {"per_device_train_batch_size": 1,
                                "gradient_accumulation_steps": cfg.gradient_accumulation_steps * b}


def _shorter_sequence(cfg: RunConfig, loss: str) -> dict[str, Any] | None:
    # Packed: half the tokens per row and twice the accumulation keep the tokens per step. Unpacked, it
    # truncates the longer samples: the page says so.
    if cfg.per_device_train_batch_size != 1 or cfg.max_seq_length < 1024:
        return None
    return {"max_seq_length": cfg.max_seq_length // 2,
            "gradient_accumulation_steps": cfg.gradient_accumulation_steps * 2}


def _eight_bit(cfg: RunConfig, loss: str) -> dict[str, Any] | None:
    if cfg.optim in EIGHT_BIT or cfg.optim == "sgd":
        return None
    return {"optim": "paged_lion_8bit" if "lion" in cfg.optim else "paged_adamw_8bit"}  # the same update rule


def _qlora(cfg: RunConfig, loss: str) -> dict[str, Any] | None:
    if cfg.method != "lora":
        return None
    return {"method": "qlora", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": True,
            "bnb_4bit_compute_dtype": "bfloat16" if cfg.bf16 else "float16",
            # QLoRA's own recipe (and the Trainer examples) prepare the model; TRL >= 0.26 does not.
            "prepare_model_for_kbit_training": cfg.framework in ("transformers", "custom")}


def _cpu_offload(cfg: RunConfig, loss: str) -> dict[str, Any] | None:
    return None if cfg.cpu_offload else {"cpu_offload": True}


CHANGES: dict[str, Callable[[RunConfig, str], dict[str, Any] | None]] = {
    "fused_loss": _fused_loss, "no_kbit_upcast": _no_kbit_upcast, "gradient_checkpointing": _checkpointing,
    "micro_batch": _micro_batch, "shorter_sequence": _shorter_sequence, "eight_bit_optimizer": _eight_bit,
    "qlora": _qlora, "cpu_offload": _cpu_offload,
}


class _Probe:
    """Reserved memory and time per token of configurations on one GPU, each computed once."""

    def __init__(self, gpu: Gpu) -> None:
        self.gpu = gpu
        self._memo: dict[str, tuple[int, float | None]] = {}

    def measure(self, cfg: RunConfig) -> tuple[int, float | None]:
        key = json.dumps(config_to_dict(cfg), sort_keys=True, default=str)
        got = self._memo.get(key)
        if got is None:
            arch, _ = resolve_architecture(cfg.model, cfg.model_config)
            reserved = Sizer(cfg).reserved(self.gpu)
            t = time_estimate(cfg, arch, resolve(cfg, arch, "cuda"), trainable(cfg, arch), self.gpu)
            tps = t["tokens_per_second"] if t else None
            got = (reserved, 1e6 / tps if tps else None)
            self._memo[key] = got
        return got

    def fsdp(self, cfg: RunConfig) -> dict[str, Any] | None:
        """The fewest GPUs that fit under the configuration's sharding (FSDP unless it shards already); none
        when one GPU fits already or no count up to solve.MAX_GPUS does."""
        if cfg.cpu_offload:
            return None
        count, mode = Sizer(cfg).fewest_gpus(self.gpu)
        if count <= max(1, cfg.num_gpus):
            return None
        return {"num_gpus": count, "parallelism": mode}


def _applied(cfg: RunConfig, change: dict[str, Any]) -> RunConfig | None:
    try:
        return parse_config({**config_to_dict(cfg), **change})
    except SizingError:
        return None  # a lever this configuration cannot take (e.g. a method conflict): left out


def _factor(new: float | None, old: float | None) -> float | None:
    return new / old if new is not None and old else None


def _climb(probe: _Probe, tier: tuple[str, ...], state: tuple[RunConfig, int, float | None], rungs: list[Rung],
           usable: int, only_until_fit: bool) -> tuple[RunConfig, int, float | None]:
    """Greedy: at each rung the lever of `tier` that saves the most on top of the rungs before it."""
    current, reserved, seconds = state
    left = list(tier)
    while left and not (only_until_fit and reserved <= usable):
        best: tuple[int, str, RunConfig, dict[str, Any], int, float | None] | None = None
        arch, _ = resolve_architecture(current.model, current.model_config)
        loss = resolve(current, arch, "cuda").loss
        for name in left:
            change = probe.fsdp(current) if name == "fsdp" else CHANGES[name](current, loss)
            nxt = _applied(current, change) if change else None
            if nxt is None:
                continue
            try:
                r, s = probe.measure(nxt)
            except SizingError:
                continue
            if best is None or reserved - r > best[0]:
                best = (reserved - r, name, nxt, change or {}, r, s)
        if best is None or best[0] <= 0:
            break
        saved, name, nxt, change, r, s = best
        gpu_hours = _factor(s * nxt.num_gpus if s else None, seconds * current.num_gpus if seconds else None)
        rungs.append(Rung(name, change, r, saved, r <= usable, nxt.num_gpus, s, _factor(s, seconds), gpu_hours))
        left.remove(name)
        current, reserved, seconds = nxt, r, s
    return current, reserved, seconds


def ladder(config: RunConfig | Mapping[str, Any], gpu_id: str | None = None) -> Ladder:
    """The levers for `config` on `gpu_id` (default: its own GPU): first those of one GPU, each rung the one
    that saves the most per-GPU memory on top of the rungs before it, then more GPUs or CPU offload while
    the run still does not fit. Levers that save nothing, or that the configuration cannot take, are left out."""
    cfg = config if isinstance(config, RunConfig) else parse_config(config)
    gpu = find_gpu(gpu_id or cfg.gpu or "H100-SXM-80GB")
    cfg = replace(cfg, gpu=gpu.id)
    probe = _Probe(gpu)
    usable = usable_bytes(gpu)
    start_reserved, start_time = probe.measure(cfg)
    state = (cfg, start_reserved, start_time)
    rungs: list[Rung] = []
    for tier in (ONE_GPU, MORE_HARDWARE):
        state = _climb(probe, tier, state, rungs, usable, only_until_fit=tier is MORE_HARDWARE)
    return Ladder(gpu.id, usable, start_reserved, start_reserved <= usable, start_time, tuple(rungs))


__all__ = ["LEVERS", "Ladder", "Rung", "ladder"]
