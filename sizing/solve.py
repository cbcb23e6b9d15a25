# Solvers over the estimate: the largest micro-batch and the longest sequence that still fit, the fewest
# GPUs, and the fit table over every catalog GPU.
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from .catalog import Gpu, find_gpu, gpus, resolve_architecture
from .config import RunConfig
from .errors import SizingError
from .grid import grid_cell
from .memory.adapters import trainable
from .memory.allocator import ALLOC_ROUND, round_up, usable_bytes
from .memory.regime import resolve
from .step import StepMemory, reserved_peak, step_memory, with_fields
from .throughput import time_estimate

MAX_BATCH = 4096
MAX_SEQ = 1 << 20
MAX_GPUS = 512


class Sizer:
    """Reserved memory of one configuration with the micro-batch, the sequence length or the GPU count
    changed. A GPU enters the memory model only through its generation (Hopper's larger cuBLAS
    workspace), so values are cached per generation and shared by every GPU of a fit table.

    Replaying the caching allocator costs tens of milliseconds (shared by the shapes of one replay grid
    step, grid.grid), so searches run on a proxy (the allocated peak plus the cache's overhead in
    proportion to the dynamic bytes, as replayed for the unchanged configuration) and the answer is then
    settled against `fits` (exact=False keeps the proxy's answer)."""

    def __init__(self, cfg: RunConfig) -> None:
        self.cfg = cfg
        self.arch, _ = resolve_architecture(cfg.model, cfg.model_config)
        self._cache: dict[tuple[Any, ...], int] = {}
        self._mem: dict[tuple[Any, ...], StepMemory] = {}
        self._ratio: dict[bool, float] = {}

    def _memory(self, gpu: Gpu, change: dict[str, Any]) -> StepMemory:
        key = (gpu.sm >= (9, 0), *sorted(change.items()))
        mem = self._mem.get(key)
        if mem is None:
            mem = self._mem[key] = step_memory(with_fields(self.cfg, gpu=gpu.id, **change), self.arch, gpu, "cuda")
        return mem

    def reserved(self, gpu: Gpu, **change: Any) -> int:
        """max_memory_reserved on an ample card with the fields in `change` replaced (= estimate().reserved_bytes
        without a GPU): what a larger card would reserve."""
        return self._peak(gpu, change, False)

    def required(self, gpu: Gpu, **change: Any) -> int:
        """What `gpu` must hold with the fields in `change` replaced: the replayed reserved peak less the cached
        whole segments the allocator releases on a failed cudaMalloc (the fit verdict). Exact up to the first
        cudaMalloc that meets the card's wall; after it, the card's own replay (card.on_card) can differ, but
        replaying at every solver probe costs a replay each (its verdict is not monotone at the boundary either)."""
        return self._peak(gpu, change, True)

    def _peak(self, gpu: Gpu, change: dict[str, Any], needed: bool) -> int:
        key = (needed, gpu.sm >= (9, 0), *sorted(change.items()))
        value = self._cache.get(key)
        if value is None:
            value = self._cache[key] = reserved_peak(self._memory(gpu, change), self.cfg.expandable_segments, needed)
        return value

    def approx(self, gpu: Gpu, **change: Any) -> int:
        """The search's proxy for `reserved`: the cache's overhead in proportion to the dynamic bytes."""
        hopper = gpu.sm >= (9, 0)
        if hopper not in self._ratio:
            base = self._memory(gpu, {})
            dynamic = max(base.peak.total - base.static_bytes, 1)
            self._ratio[hopper] = (self.required(gpu) - base.peak.total) / dynamic
        mem = self._memory(gpu, change)
        return round_up(mem.peak.total + int(self._ratio[hopper] * max(mem.peak.total - mem.static_bytes, 0)))

    def fits(self, gpu: Gpu, **change: Any) -> bool:
        """Whether the changed configuration starts on `gpu` and its reserved peak fits it."""
        return runs_on(self.cfg, gpu) and self.required(gpu, **change) <= usable_bytes(gpu)

    def _settle(self, gpu: Gpu, name: str, guess: int, high: int) -> int:
        """The largest value of field `name` in [0, high] that fits by the replayed reserved, from a guess:
        _settle's answer, its probes inside a grid cell answered from that cell's boundary once the gallop
        probes the cell a third time (the guess's cell at once), the boundary found by interpolating the
        reserved peak (a few probes instead of a gallop's ~20). Exact where the reserved peak does not
        decrease within a cell, whose replay (the cache's overhead ratio) is one: tests/unit/test_settle_cell.py
        checks that by brute force and holds this to plain _settle."""
        usable = usable_bytes(gpu)

        def value(v: int) -> int:
            return self.required(gpu, **{name: v})

        guess = min(max(guess, 0), high)
        if guess < 1 or not runs_on(self.cfg, gpu):
            return _settle(lambda v: v == 0 or self.fits(gpu, **{name: v}), guess, high)
        last: dict[tuple[int, int], int] = {}  # cell -> its largest value that fits (lo - 1: none)
        probed: dict[tuple[int, int], list[tuple[int, bool]]] = {}

        def ok(v: int) -> bool:
            if v == 0:
                return True
            lo, hi = grid_cell(self.cfg, name, v)
            cell = lo, hi = max(lo, 1), min(hi, high)
            if cell not in last:
                seen = probed.setdefault(cell, [])
                if len(seen) < 2 and v != guess:
                    seen.append((v, value(v) <= usable))
                    return seen[-1][1]
                a = max([lo - 1, *(x for x, fit in seen if fit)])
                b = min([hi + 1, *(x for x, fit in seen if not fit)])
                last[cell] = _boundary(value, usable, a, b, v)
            return v <= last[cell]

        return _settle(ok, guess, high)

    def max_micro_batch(self, gpu: Gpu, exact: bool = True) -> int:
        """Largest per-device micro-batch that fits `gpu` (0: none)."""
        if not runs_on(self.cfg, gpu):
            return 0
        guess = _largest(lambda b: self.approx(gpu, per_device_train_batch_size=b), usable_bytes(gpu), MAX_BATCH)
        return self._settle(gpu, "per_device_train_batch_size", guess, MAX_BATCH) if exact else guess

    def max_seq_length(self, gpu: Gpu, exact: bool = True) -> int:
        """Longest sequence that fits `gpu` (0: none)."""
        if not runs_on(self.cfg, gpu):
            return 0
        limit = self.arch.max_positions or MAX_SEQ
        try:
            guess = _largest(lambda s: self.approx(gpu, max_seq_length=s), usable_bytes(gpu), limit)
            return self._settle(gpu, "max_seq_length", guess, limit) if exact else guess
        except SizingError:
            return 0

    def fewest_gpus(self, gpu: Gpu, exact: bool = True) -> tuple[int, str]:
        """Fewest GPUs of this kind whose per-GPU memory fits (0: none up to MAX_GPUS), and the sharding.
        Replicated data parallelism never lowers per-GPU memory, so a run that does not fit one GPU is
        sized under FSDP full sharding unless the configuration already shards."""
        if not runs_on(self.cfg, gpu):
            return 0, "none"
        if self.fits(gpu, num_gpus=1, parallelism="none", cpu_offload=False):
            return 1, "none"
        mode = self.cfg.parallelism if self.cfg.parallelism in ("fsdp", "zero2", "zero3") else "fsdp"
        usable = usable_bytes(gpu)
        if self.required(gpu, num_gpus=MAX_GPUS, parallelism=mode) > usable:
            return 0, mode
        # Per-GPU memory falls as shards grow: one more than the largest count that still does not fit
        # (negated, "does not fit" is a bound on a non-decreasing value).
        guess = _largest(lambda k: -self.approx(gpu, num_gpus=k, parallelism=mode), -usable - 1, MAX_GPUS - 1)
        if exact:
            guess = _settle(lambda k: k == 0 or not self.fits(gpu, num_gpus=k, parallelism=mode), guess, MAX_GPUS - 1)
        return guess + 1, mode


def _settle(ok: Callable[[int], bool], guess: int, high: int) -> int:
    """Largest n in [0, high] with ok(n), for an ok that holds up to some n and not after (ok(0) holds),
    found by galloping from `guess` and bisecting: a few evaluations when the guess is close."""
    guess = min(max(guess, 0), high)
    step = 1
    if ok(guess):
        lo, hi = guess, guess + 1
        while hi <= high and ok(hi):
            lo, step = hi, step * 2
            hi = lo + step
        hi = min(hi, high + 1)
    else:
        hi, lo = guess, guess - 1
        while lo > 0 and not ok(lo):
            hi, step = lo, step * 2
            lo = max(lo - step, 0)
    while hi - lo > 1:  # ok(lo), not ok(hi) (hi = high + 1: beyond the range)
        mid = (lo + hi) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo


def _boundary(value: Callable[[int], int], limit: int, a: int, b: int, guess: int) -> int:
    """Largest v in (a, b) with value(v) <= limit, a when none, for a value non-decreasing on [a, b] with
    value(a) <= limit < value(b) (ends outside the cell stand for it): from the guess, extrapolating along
    the last two values until the limit is bracketed, then interpolating (every guess that does not halve
    the bracket followed by a bisection)."""
    va: int | None = None
    vb: int | None = None
    last: tuple[int, int] | None = None
    v, step, bisect = min(max(guess, a + 1), b - 1), 1, False
    while b - a > 1:
        x = value(v)
        width = b - a
        if x <= limit:
            a, va = v, x
        else:
            b, vb = v, x
        if b - a <= 1:
            break
        if va is not None and vb is not None:
            nxt = (a + b) // 2 if bisect else a + (limit - va) * (b - a) // max(vb - va, 1)
            bisect = not bisect and b - a > width // 2
        elif last is not None and last[1] != x:  # one side: along the slope, one past the crossing
            d = (limit - x) * (v - last[0]) // (x - last[1])
            nxt = v + d + (1 if d >= 0 else -1)
        else:
            nxt = v + step if x <= limit else v - step
            step *= 2
        last = v, x
        v = min(max(nxt, a + 1), b - 1)
    return a


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
    return Sizer(cfg).max_micro_batch(_gpu(cfg), exact=True)


def max_seq_length(cfg: RunConfig) -> int:
    """Longest sequence that fits the configuration's GPU."""
    return Sizer(cfg).max_seq_length(_gpu(cfg), exact=True)


def fewest_gpus(cfg: RunConfig) -> tuple[int, str]:
    """Fewest GPUs of the configuration's kind that fit it, and the sharding used."""
    return Sizer(cfg).fewest_gpus(_gpu(cfg), exact=True)


def runs_on(cfg: RunConfig, gpu: Gpu) -> bool:
    """Whether the run can start on `gpu` at all: bf16 mixed precision needs a GPU with bf16
    (torch.autocast raises "Current CUDA Device does not support bfloat16" (torch/amp/autocast_mode.py) and
    TrainingArguments(bf16=True) "Your setup doesn't support bf16/gpu" (transformers training_args.py))."""
    return not (cfg.bf16 is True and gpu.supports.get("bf16") is False)


def fit_row(sizer: Sizer, gpu: Gpu) -> dict[str, Any]:
    """Fits, headroom, largest micro-batch and longest sequence of the configuration on one `gpu`."""
    usable = usable_bytes(gpu)
    reserved = sizer.required(gpu)
    if not runs_on(sizer.cfg, gpu):  # never a bf16 verdict on a card without bf16 (fp16 takes the same bytes)
        return {"gpu": gpu.id, "usable_bytes": usable, "fits": False, "headroom_bytes": usable - reserved,
                "max_micro_batch": 0, "max_seq_length": 0, "refusal": "gpu_no_bf16"}
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
