# Solvers over the estimate: the largest micro-batch and the longest sequence that still fit, the fewest
# GPUs, and the fit table over every catalog GPU.
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from .catalog import Gpu, find_gpu, gpus, resolve_architecture
from .config import RunConfig
from .errors import SizingError
from .memory.adapters import trainable
from .memory.allocator import ALLOC_ROUND, reserved_bytes, usable_bytes
from .memory.overhead import fragmentation
from .memory.regime import resolve
from .step import step_memory
from .throughput import time_estimate

MAX_BATCH = 4096
MAX_SEQ = 1 << 20
MAX_GPUS = 512


class Sizer:
    """Reserved memory of one configuration with the micro-batch, the sequence length or the GPU count
    changed. A GPU enters the memory model only through its generation (Hopper's larger cuBLAS
    workspace), so values are cached per generation and shared by every GPU of a fit table: the
    searches of 27 GPUs then cost about as much as those of three."""

    def __init__(self, cfg: RunConfig) -> None:
        self.cfg = cfg
        self.arch, _ = resolve_architecture(cfg.model, cfg.model_config)
        self.frag = fragmentation(cfg.expandable_segments)[1]
        self._cache: dict[tuple[Any, ...], int] = {}

    def reserved(self, gpu: Gpu, **change: Any) -> int:
        """Reserved peak on `gpu` with the fields in `change` replaced."""
        key = (gpu.sm >= (9, 0), *sorted(change.items()))
        value = self._cache.get(key)
        if value is None:
            cfg = replace(self.cfg, gpu=gpu.id, **change)
            mem = step_memory(cfg, self.arch, gpu, "cuda", 1)
            value = reserved_bytes(mem.peak.total, mem.static_bytes, self.frag)
            self._cache[key] = value
        return value

    def fits(self, gpu: Gpu, **change: Any) -> bool:
        """Whether the changed configuration's reserved peak fits `gpu`."""
        return self.reserved(gpu, **change) <= usable_bytes(gpu)

    def max_micro_batch(self, gpu: Gpu) -> int:
        """Largest per-device micro-batch that fits `gpu` (0: none)."""
        return _largest(lambda b: self.reserved(gpu, per_device_train_batch_size=b), usable_bytes(gpu), MAX_BATCH)

    def max_seq_length(self, gpu: Gpu) -> int:
        """Longest sequence that fits `gpu` (0: none)."""
        limit = self.arch.max_positions or MAX_SEQ
        try:
            return _largest(lambda s: self.reserved(gpu, max_seq_length=s), usable_bytes(gpu), limit)
        except SizingError:
            return 0

    def fewest_gpus(self, gpu: Gpu) -> tuple[int, str]:
        """Fewest GPUs of this kind whose per-GPU memory fits (0: none up to MAX_GPUS), and the sharding.
        Replicated data parallelism never lowers per-GPU memory, so a run that does not fit one GPU is
        sized under FSDP full sharding unless the configuration already shards."""
        if self.fits(gpu, num_gpus=1, parallelism="none", cpu_offload=False):
            return 1, "none"
        mode = self.cfg.parallelism if self.cfg.parallelism in ("fsdp", "zero2", "zero3") else "fsdp"
        usable = usable_bytes(gpu)
        if self.reserved(gpu, num_gpus=MAX_GPUS, parallelism=mode) > usable:
            return 0, mode
        # Per-GPU memory falls as shards grow: one more than the largest count that still does not fit
        # (negated, "does not fit" is a bound on a non-decreasing value).
        short = _largest(lambda k: -self.reserved(gpu, num_gpus=k, parallelism=mode), -usable - 1, MAX_GPUS - 1)
        return short + 1, mode


def _largest(value: Callable[[int], int], limit: int, high: int) -> int:
    """Largest n in [1, high] with value(n) <= limit for a non-decreasing value; 0 when value(1) > limit.

    Memory is close to linear in tokens, so after doubling to a bracket the next guess interpolates
    between its ends; the caching allocator's 2 MiB steps make the value a staircase, so a guess that
    fits is followed by a probe one step further. A guess that does not halve the bracket is followed
    by a bisection, which keeps the worst case within twice plain bisection.
    """
    if value(1) > limit:
        return 0
    lo, hi = 1, 2
    while hi <= high and value(hi) <= limit:
        lo, hi = hi, hi * 2
    if hi > high:
        if value(high) <= limit:
            return high
        hi = high
    bisect = False
    while hi - lo > 1:
        width = hi - lo
        v_lo, v_hi = value(lo), value(hi)
        guess = (lo + hi) // 2 if bisect else lo + (limit - v_lo) * width // max(v_hi - v_lo, 1)
        guess = min(max(guess, lo + 1), hi - 1)
        if value(guess) <= limit:
            lo = guess
            step = width * ALLOC_ROUND // max(abs(v_hi - v_lo), 1) + 1  # n per allocator step
            probe = min(lo + step, hi - 1)
            if not bisect and probe > lo:
                if value(probe) <= limit:
                    lo = probe
                else:
                    hi = probe
        else:
            hi = guess
        bisect = not bisect and hi - lo > width // 2
    return lo


def _gpu(cfg: RunConfig) -> Gpu:
    """The configuration's GPU; a solver without one is refused with the field named."""
    if cfg.gpu is None:
        raise SizingError("gpu_required", "this answer needs a GPU: set gpu", field="gpu")
    return find_gpu(cfg.gpu)


def _fits(cfg: RunConfig) -> bool:
    """Whether the configuration fits its GPU."""
    return Sizer(cfg).fits(_gpu(cfg))


def max_micro_batch(cfg: RunConfig) -> int:
    """Largest micro-batch that fits the configuration's GPU."""
    return Sizer(cfg).max_micro_batch(_gpu(cfg))


def max_seq_length(cfg: RunConfig) -> int:
    """Longest sequence that fits the configuration's GPU."""
    return Sizer(cfg).max_seq_length(_gpu(cfg))


def fewest_gpus(cfg: RunConfig) -> tuple[int, str]:
    """Fewest GPUs of the configuration's kind that fit it, and the sharding used."""
    return Sizer(cfg).fewest_gpus(_gpu(cfg))


def fit_row(sizer: Sizer, gpu: Gpu) -> dict[str, Any]:
    """Fits, headroom, largest micro-batch and longest sequence of the configuration on one `gpu`."""
    usable = usable_bytes(gpu)
    reserved = sizer.reserved(gpu)
    return {"gpu": gpu.id, "usable_bytes": usable, "fits": reserved <= usable, "headroom_bytes": usable - reserved,
            "max_micro_batch": sizer.max_micro_batch(gpu), "max_seq_length": sizer.max_seq_length(gpu)}


def fit_table(cfg: RunConfig) -> list[dict[str, Any]]:
    """For every catalog GPU: fits, headroom, largest micro-batch, longest sequence, fewest GPUs, and
    time (and cost when a price is given) on that many GPUs."""
    sizer = Sizer(cfg)
    rows: list[dict[str, Any]] = []
    for gpu in gpus().values():
        count, mode = sizer.fewest_gpus(gpu)
        row: dict[str, Any] = {**fit_row(sizer, gpu), "name": gpu.name, "fewest_gpus": count,
                               "fewest_gpus_parallelism": mode, "time": None}
        if count:
            run = replace(cfg, gpu=gpu.id, num_gpus=count, parallelism=mode if count > 1 else "none")
            row["time"] = time_estimate(run, sizer.arch, resolve(run, sizer.arch, "cuda"),
                                        trainable(run, sizer.arch), gpu)
        rows.append(row)
    return rows
