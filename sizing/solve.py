# Solvers over the estimate: the largest micro-batch and the longest sequence that still fit.
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from .catalog import find_gpu, resolve_architecture
from .config import RunConfig
from .errors import SizingError

MAX_BATCH = 4096
MAX_SEQ = 1 << 20


def _fits(cfg: RunConfig) -> bool:
    from .estimate import _memory, reserved_bytes, static_bytes, usable_bytes
    from .memory.overhead import fragmentation
    from .memory.timeline import peak

    assert cfg.gpu is not None
    gpu = find_gpu(cfg.gpu)
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    _, ms, detail = _memory(cfg, arch, gpu, "cuda", 1)
    pk = peak(ms)
    reserved = reserved_bytes(pk.total, static_bytes(pk, detail), fragmentation(cfg.expandable_segments)[1])
    return reserved <= usable_bytes(gpu)


def _largest(ok: Callable[[int], bool], high: int) -> int:
    """Largest n in [1, high] with ok(n), assuming ok is monotone; 0 when even 1 fails."""
    if not ok(1):
        return 0
    lo, hi = 1, 2
    while hi <= high and ok(hi):
        lo, hi = hi, hi * 2
    hi = min(hi, high + 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo


def max_micro_batch(cfg: RunConfig) -> int:
    return _largest(lambda b: _fits(replace(cfg, per_device_train_batch_size=b)), MAX_BATCH)


def max_seq_length(cfg: RunConfig) -> int:
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    limit = arch.max_positions or MAX_SEQ
    try:
        return _largest(lambda s: _fits(replace(cfg, max_seq_length=s)), limit)
    except SizingError:
        return 0



MAX_GPUS = 512


def fewest_gpus(cfg: RunConfig) -> tuple[int, str]:
    """Fewest GPUs of the configured kind whose per-GPU memory fits (0: none up to MAX_GPUS), and the
    sharding used. Replicated data parallelism never lowers per-GPU memory, so a run that does not
    fit one GPU is sized under FSDP full sharding unless the configuration already shards."""
    if _fits(replace(cfg, num_gpus=1, parallelism="none", cpu_offload=False)):
        return 1, "none"
    mode = cfg.parallelism if cfg.parallelism in ("fsdp", "zero2", "zero3") else "fsdp"

    def ok(k: int) -> bool:
        return _fits(replace(cfg, num_gpus=k, parallelism=mode))

    if not ok(MAX_GPUS):
        return 0, mode
    # per-GPU memory falls as shards grow: one more than the largest count that still does not fit
    return _largest(lambda k: not ok(k), MAX_GPUS - 1) + 1, mode


def fit_table(cfg: RunConfig) -> list[dict[str, Any]]:
    """For every catalog GPU: fits, headroom, largest micro-batch, longest sequence, fewest GPUs, and
    time (and cost when a price is given) on that many GPUs."""
    from .catalog import gpus
    from .estimate import estimate

    rows: list[dict[str, Any]] = []
    for gpu in gpus().values():
        run = replace(cfg, gpu=gpu.id)
        fit = estimate(run).fits[0]
        count, mode = fewest_gpus(run)
        row: dict[str, Any] = {**fit, "name": gpu.name, "fewest_gpus": count, "fewest_gpus_parallelism": mode,
                               "time": None}
        if count:
            row["time"] = estimate(replace(run, num_gpus=count, parallelism=mode if count > 1 else "none")).time
        rows.append(row)
    return rows
