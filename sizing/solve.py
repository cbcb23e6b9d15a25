# Solvers over the estimate: the largest micro-batch and the longest sequence that still fit, the fewest
# GPUs, and the fit table over every catalog GPU.
from __future__ import annotations

from dataclasses import replace
from typing import Any

from .catalog import Gpu, find_gpu, gpus, resolve_architecture
from .config import RunConfig
from .errors import SizingError
from .grid import grid_cell, grid_floor, grid_next, virtual_tokens
from .memory.adapters import Trainable, trainable
from .memory.allocator import round_up, usable_bytes
from .memory.regime import resolve
from .search import _boundary, _crossing, _largest, _settle
from .step import StepMemory, reserved_peak, step_memory, with_fields
from .throughput import time_estimate

MAX_BATCH = 4096
MAX_SEQ = 1 << 20
MAX_GPUS = 512
SHAPE = ("max_seq_length", "per_device_train_batch_size")
__all__ = ["Sizer", "_boundary", "_largest", "_settle", "fewest_gpus", "fit_row", "fit_table", "max_micro_batch",
           "max_seq_length", "row_entry", "runs_on"]


class Sizer:
    """Reserved memory of one configuration with the micro-batch, the sequence length or the GPU count
    changed. A GPU enters the memory model only through its generation (Hopper's larger cuBLAS
    workspace), so values are cached per generation and shared by every GPU of a fit table.

    Replaying the caching allocator costs milliseconds per layer, so the searches over the sequence length and
    the micro-batch run on probes replayed at the grid shape (grid.grid: one replay per cell, its overhead scaled
    to each value's dynamic bytes); their first guess comes from a cheaper proxy still (the overhead in
    proportion to the dynamic bytes, as replayed for the unchanged configuration). The unchanged shape and every
    other change (the GPU count) are replayed at the run's own shape, and so is the answer of a search
    (confirm: it fits by its own replay, one more does not; exact=False keeps the proxy's answer)."""

    def __init__(self, cfg: RunConfig) -> None:
        self.cfg = cfg
        self.arch, _ = resolve_architecture(cfg.model, cfg.model_config)
        self._cache: dict[tuple[Any, ...], int] = {}
        self._mem: dict[tuple[Any, ...], StepMemory] = {}
        self._ratio: dict[tuple[bool, tuple[tuple[str, Any], ...]], float] = {}

    def _memory(self, gpu: Gpu, change: dict[str, Any], exact: bool = False) -> StepMemory:
        probe = not exact and any(name in change for name in SHAPE)  # a shape search's probe: the grid replay
        key = (probe, gpu.sm >= (9, 0), *sorted(change.items()))
        mem = self._mem.get(key)
        if mem is None:
            mem = self._mem[key] = step_memory(with_fields(self.cfg, gpu=gpu.id, **change), self.arch, gpu, "cuda",
                                               grid_shape=probe)
        return mem

    def reserved(self, gpu: Gpu, **change: Any) -> int:
        """max_memory_reserved on an ample card with the fields in `change` replaced (= estimate().reserved_bytes
        without a GPU): what a larger card would reserve. A change of the sequence length or the micro-batch is
        a search's probe (replayed at the grid shape); see exact_required."""
        return self._peak(gpu, change, False)

    def required(self, gpu: Gpu, **change: Any) -> int:
        """What `gpu` must hold with the fields in `change` replaced: the replayed reserved peak less the cached
        whole segments the allocator releases on a failed cudaMalloc (the fit verdict). Exact up to the first
        cudaMalloc that meets the card's wall; after it, the card's own replay (card.on_card) can differ, but
        replaying at every solver probe costs a replay each (its verdict is not monotone at the boundary either)."""
        return self._peak(gpu, change, True)

    def exact_required(self, gpu: Gpu, **change: Any) -> int:
        """required() replayed at the changed configuration's own shape (what its estimate prints)."""
        return self._peak(gpu, change, True, exact=True)

    def _peak(self, gpu: Gpu, change: dict[str, Any], needed: bool, exact: bool = False) -> int:
        key = (needed, exact, gpu.sm >= (9, 0), *sorted(change.items()))
        value = self._cache.get(key)
        if value is None:
            mem = self._memory(gpu, change, exact)
            value = self._cache[key] = reserved_peak(mem, self.cfg.expandable_segments, needed)
        return value

    def approx(self, gpu: Gpu, ref: tuple[tuple[str, Any], ...] = (), **change: Any) -> int:
        """The search's proxy for `reserved`: the cache's overhead in proportion to the dynamic bytes, in the ratio
        the replay of the configuration with the fields of `ref` replaced shows (by default the unchanged one's)."""
        key = (gpu.sm >= (9, 0), ref)
        if key not in self._ratio:
            base = self._memory(gpu, dict(ref))
            dynamic = max(base.peak.total - base.static_bytes, 1)
            self._ratio[key] = (self.required(gpu, **dict(ref)) - base.peak.total) / dynamic
        mem = self._memory(gpu, change)
        return round_up(mem.peak.total + int(self._ratio[key] * max(mem.peak.total - mem.static_bytes, 0)))

    def fits(self, gpu: Gpu, **change: Any) -> bool:
        """Whether the changed configuration starts on `gpu` and its reserved peak fits it."""
        usable = usable_bytes(gpu)  # the allocated peak first: a probe it refuses needs no replay
        return (runs_on(self.cfg, gpu) and self.allocated(gpu, change) <= usable
                and self.required(gpu, **change) <= usable)

    def allocated(self, gpu: Gpu, change: dict[str, Any]) -> int:
        """The allocated peak of a probe (reserved()'s and required()'s): a lower bound of both, which answers a probe
        it does not fit without the probe's replay (the reserved peak adds the cache's overhead, at least none)."""
        return self._memory(gpu, change).peak.total

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
                    seen.append((v, self.allocated(gpu, {name: v}) <= usable and value(v) <= usable))
                    return seen[-1][1]
                a = max([lo - 1, *(x for x, fit in seen if fit)])
                b = min([hi + 1, *(x for x, fit in seen if not fit)])
                last[cell] = _boundary(value, usable, a, b, v)
            return v <= last[cell]

        return _settle(ok, guess, high)

    def confirm(self, gpu: Gpu, name: str, found: int, high: int, largest: bool = True) -> int:
        """The search's answer `found` for field `name` settled by replays at each value's own shape: the value
        returned fits by its exact replay and the next one does not (or it is `high`; 0: 1 does not fit). From
        `found`, the first step along the slope of the allocated peak scaled by found's replay (search._crossing):
        two replays when the probes' grid replay agrees there, a few more when it does not.
        largest=False: the largest grid point at or below `found` that fits (grid.grid_floor): its exact replay
        is the grid replay the search made already, so no replay of its own; less than the largest by under the
        grid's rounding (4 steps per doubling)."""
        if not largest:
            v = min(found, high)
            while v > 0:
                g = grid_floor(self.cfg, name, v)
                if self.exact_required(gpu, **{name: g}) <= usable_bytes(gpu):
                    return g
                v = g - 1
            return 0
        v = min(max(found, 1), high)
        d = 1 if name != "max_seq_length" else max(1, v // 64)
        if v + d > high:
            d = max(v - 1, 0)
            v -= d
        slope = 0.0
        if d:
            lo, hi = (self._memory(gpu, {name: x}, exact=True).peak.total for x in (v, v + d))
            slope = (hi - lo) / d * self.exact_required(gpu, **{name: v}) / max(lo, 1)
        return _crossing(lambda x: self.exact_required(gpu, **{name: x}), usable_bytes(gpu), min(max(found, 1), high),
                         high, slope)

    def grid_largest(self, gpu: Gpu, name: str, guess: int, high: int) -> int:
        """The largest grid point of field `name` in [1, high] that fits `gpu` by its exact replay (0: none), walked
        to from the grid point at or below the proxy's guess: each probe is a grid point, whose exact replay is the
        grid replay the probes share, so a card costs two or three probes and no search inside a cell. The same
        answer as confirm(largest=False) after _settle where fitting is monotone over the grid points
        (scripts/table_identity.py holds the fit tables to it)."""
        usable = usable_bytes(gpu)

        def fits(v: int) -> bool:  # the allocated peak first: a value it refuses needs no replay
            change = {name: v}
            return (self._memory(gpu, change, exact=True).peak.total <= usable
                    and self.exact_required(gpu, **change) <= usable)

        g = grid_floor(self.cfg, name, min(max(guess, 1), high))
        if fits(g):
            while (up := grid_next(self.cfg, name, g)) <= high and fits(up):
                g = up
            return g
        while g > 1:
            g = grid_floor(self.cfg, name, g - 1)
            if g >= 1 and fits(g):
                return g
        return 0

    def grid_guess(self, gpu: Gpu, name: str, high: int) -> int:
        """The largest grid point of field `name` in [1, high] whose proxy (approx) fits `gpu`, 0: none. The same
        as grid_floor of _largest's answer for a non-decreasing proxy, found by bisecting the grid's few dozen
        points: every card of a fit table probes the same points, so most probes are cached (perf: a fit table's
        other cards need nothing finer, grid_largest starts from a grid point)."""
        usable = usable_bytes(gpu)
        points = _grid_points(self.cfg, name, high)
        lo, hi = -1, len(points)  # points[lo] fits, points[hi] does not (the ends: beyond the range)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.approx(gpu, (), **{name: points[mid]}) <= usable:
                lo = mid
            else:
                hi = mid
        return points[lo] if lo >= 0 else 0

    def max_micro_batch(self, gpu: Gpu, exact: bool = True, largest: bool = True) -> int:
        """Largest per-device micro-batch that fits `gpu` (0: none), confirmed by its own replay; largest=False:
        the largest grid point that fits by its exact replay."""
        if not runs_on(self.cfg, gpu):
            return 0
        if exact and not largest:
            guess = self.grid_guess(gpu, "per_device_train_batch_size", MAX_BATCH)
            return self.grid_largest(gpu, "per_device_train_batch_size", guess, MAX_BATCH)
        guess = _largest(lambda b: self.approx(gpu, per_device_train_batch_size=b), usable_bytes(gpu), MAX_BATCH)
        if not exact:
            return guess
        found = self._settle(gpu, "per_device_train_batch_size", guess, MAX_BATCH)
        return self.confirm(gpu, "per_device_train_batch_size", found, MAX_BATCH, largest)

    def max_seq_length(self, gpu: Gpu, exact: bool = True, largest: bool = True) -> int:
        """Longest sequence that fits `gpu` (0: none), confirmed by its own replay; largest=False: the longest
        grid point that fits by its exact replay."""
        if not runs_on(self.cfg, gpu):
            return 0
        limit = self.arch.max_positions or MAX_SEQ
        try:
            if exact and not largest:
                return self.grid_largest(gpu, "max_seq_length", self.grid_guess(gpu, "max_seq_length", limit), limit)
            guess = _largest(lambda s: self.approx(gpu, max_seq_length=s), usable_bytes(gpu), limit)
            if not exact:
                return guess
            found = self._settle(gpu, "max_seq_length", guess, limit)
            return self.confirm(gpu, "max_seq_length", found, limit, largest)
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
        mode = (self.cfg.parallelism if self.cfg.parallelism in ("fsdp", "zero2", "zero3", "fsdp_shard_grad_op")
                else "fsdp")
        usable = usable_bytes(gpu)
        widest = (("num_gpus", MAX_GPUS), ("parallelism", mode))
        if self.required(gpu, **dict(widest)) > usable:
            return 0, mode
        # Per-GPU memory falls as shards grow: one more than the largest count that still does not fit
        # (negated, "does not fit" is a bound on a non-decreasing value). The proxy takes its overhead ratio from
        # the sharded replay just made: the unsharded run's ratio, on dynamic bytes that sharding leaves as they are,
        # put Llama-2-70B LoRA's per-GPU reserved 1.4 GiB high and the search 16 replays from its answer.
        guess = _largest(lambda k: -self.approx(gpu, widest, num_gpus=k, parallelism=mode), -usable - 1,
                         MAX_GPUS - 1)
        if exact:
            guess = _settle(lambda k: k == 0 or not self.fits(gpu, num_gpus=k, parallelism=mode), guess, MAX_GPUS - 1)
        return guess + 1, mode


# The grid points of a field up to a limit, by (field, limit, prompt-tuning offset): a fit table's cards share them
_POINTS: dict[tuple[str, int, int], tuple[int, ...]] = {}


def _grid_points(cfg: RunConfig, name: str, high: int) -> tuple[int, ...]:
    """Every value of `name` in [1, high] whose shape is a grid point, ascending."""
    key = (name, high, virtual_tokens(cfg) if name == "max_seq_length" else 0)
    got = _POINTS.get(key)
    if got is None:
        out, v = [], grid_next(cfg, name, 0)
        while v <= high:
            if v >= 1:
                out.append(v)
            v = grid_next(cfg, name, v)
        got = _POINTS[key] = tuple(out)
    return got


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
    """Whether the run is a plan for `gpu`: bf16 mixed precision is not one on a GPU without bf16 hardware. Both
    gates ask torch.cuda.is_bf16_supported() (torch.autocast: "Current CUDA Device does not support bfloat16";
    TrainingArguments: "Your setup doesn't support bf16/gpu"). PyTorch 2.2 answered False there (pytorch #124996,
    a V100); later releases count emulation (including_emulation=True, torch/cuda/__init__.py, 2.13) and a T4
    answers True (MakazhanAlpamys/Soup #387), so the run starts, its bf16 emulated without bf16 tensor-core
    kernels. Either way the plan is fp16 (warnings.py says how: weights loaded in float16 for LoRA and QLoRA, the
    same memory; fp32 weights for full fine-tuning, since GradScaler refuses fp16 gradients)."""
    return not (cfg.bf16 is True and gpu.supports.get("bf16") is False)


def fit_row(sizer: Sizer, gpu: Gpu, largest: bool = True, searches: bool = True) -> dict[str, Any]:
    """Fits, headroom, largest micro-batch and longest sequence of the configuration on one `gpu`: the verdict
    and headroom by the replay at the run's own shape; the largest micro-batch and longest sequence confirmed
    by their own replays (Sizer.confirm; largest=False: they fit by their own replay, the largest up to the
    grid's rounding: the largest grid points that fit). searches=False: the verdict and headroom only (the
    page's first answer: the searches cost about ten replays more)."""
    usable = usable_bytes(gpu)
    reserved = sizer.required(gpu)
    if not runs_on(sizer.cfg, gpu):  # never a bf16 verdict on a card without bf16 (fp16 takes the same bytes)
        return {"gpu": gpu.id, "usable_bytes": usable, "fits": False, "headroom_bytes": usable - reserved,
                "max_micro_batch": 0, "max_seq_length": 0, "refusal": "gpu_no_bf16"}
    row: dict[str, Any] = {"gpu": gpu.id, "usable_bytes": usable, "fits": reserved <= usable,
                           "headroom_bytes": usable - reserved}
    return _searched(sizer, gpu, row, largest) if searches else row


def _searched(sizer: Sizer, gpu: Gpu, row: dict[str, Any], largest: bool) -> dict[str, Any]:
    """fit_row's verdict `row` with the card's largest micro-batch and longest sequence (a refusal has them)."""
    if "refusal" in row:
        return row
    batch = sizer.max_micro_batch(gpu, largest=largest)
    seq = sizer.max_seq_length(gpu, largest=largest)
    if row["fits"]:  # the verdict's own replay fits the run's own values: the row never says less
        batch = max(batch, sizer.cfg.per_device_train_batch_size)
        seq = max(seq, sizer.cfg.max_seq_length)
    # the searched values after fit_row's and before a table row's own (fit_table's order either way)
    out = {k: v for k, v in row.items() if k not in TABLE_ONLY}
    out.update(max_micro_batch=batch, max_seq_length=seq)
    out.update((k, row[k]) for k in TABLE_ONLY if k in row)
    return out


# What a fit table's row holds beyond its fit_row (fit_table): without them a row is the fit entry on that card.
TABLE_ONLY = ("name", "fewest_gpus", "fewest_gpus_parallelism", "time")


def row_entry(row: dict[str, Any]) -> dict[str, Any]:
    """A fit table's row as the fit_row it starts from (the own GPU's: the estimate's fit entry)."""
    return {k: v for k, v in row.items() if k not in TABLE_ONLY}


def fit_table(cfg: RunConfig, searches: bool = True,
              verdicts: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """For every catalog GPU: fits, headroom, largest micro-batch, longest sequence, fewest GPUs, and
    time (and cost when a price is given) on that many GPUs. On the configuration's own GPU the largest
    micro-batch and longest sequence are confirmed by their own replays (about five); on the other cards they
    are the largest grid points that fit by their own replay (Sizer.confirm, largest=False), so a row never
    says a value fits that the estimate on that card refuses. searches=False: the rows without the largest
    micro-batch and longest sequence, every other value as with them: the page's verdicts first, since the
    searches are most of the table's cost (examples/qlora-llama31-8b.json at r=24 in CPython: 17 ms without
    them, 441 ms with them). verdicts: that table of the same configuration, already computed: its rows get the
    searches (the page's third answer, without the fewest GPUs and times again)."""
    sizer = _sizer(cfg)
    own = find_gpu(cfg.gpu).id if cfg.gpu else None
    rows: list[dict[str, Any]] = []
    tr: Trainable | None = None  # what trains: the card, GPU count and sharding are not among what trainable reads
    for i, gpu in enumerate(gpus().values()):
        if verdicts is not None and i < len(verdicts) and verdicts[i]["gpu"] == gpu.id:
            rows.append(_searched(sizer, gpu, verdicts[i], gpu.id == own) if searches else verdicts[i])
            continue
        count, mode = sizer.fewest_gpus(gpu)
        row: dict[str, Any] = {**fit_row(sizer, gpu, gpu.id == own, searches), "name": gpu.name,
                               "fewest_gpus": count, "fewest_gpus_parallelism": mode, "time": None}
        if count:
            run = replace(cfg, gpu=gpu.id, num_gpus=count, parallelism=mode if count > 1 else "none")
            if tr is None:
                tr = trainable(run, sizer.arch)
            row["time"] = time_estimate(run, sizer.arch, resolve(run, sizer.arch, "cuda"), tr, gpu)
        rows.append(row)
    return rows


# The last fit table's Sizer: the page asks for a table's verdicts, then for the same table with its searches,
# whose probes the first one's caches answer in part (perf). Only while the configuration is the same.
_LAST: list[Sizer] = []


def _sizer(cfg: RunConfig) -> Sizer:
    if _LAST and _LAST[0].cfg == cfg:
        return _LAST[0]
    _LAST[:] = [Sizer(cfg)]
    return _LAST[0]
