# Seconds per optimizer step: each op at max(compute, memory, launch floor); host launches vs GPU time.
from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from ..arch import Architecture
from ..catalog import Gpu
from ..config import RunConfig
from ..memory.adapters import Trainable
from ..memory.regime import Regime
from .device import Device, device, model_data
from .elementwise import attention_kernel
from .op import Op
from .ops import micro_batch_ops
from .step_ops import Traffic, forward_gathers, step_ops, traffic

# The share of communication hidden behind compute when the framework overlaps it (DDP gradient buckets
# during backward, FSDP prefetch of the next layer's all-gather); no timed multi-GPU row pins it down.
COMM_OVERLAP = 0.8
# Host memory bandwidth a CPU-side optimizer step streams at (one socket, DDR4/DDR5 STREAM ~20-40 GB/s).
HOST_GBPS = 20.0


def tile_efficiency(m: int, n: int, sm: int) -> float:
    """Share of the SMs' work that is useful for an m x n output: tile padding times wave quantization.

    cuBLAS picks among tile shapes; 128x128 and 64x64 (the latter ~80 % as fast per SM) bound the choice
    (NVIDIA Matrix Multiplication Background guide: tile and wave quantization)."""
    best = 0.0
    for tile, rate in ((128, 1.0), (64, 0.8)):
        tm, tn = math.ceil(m / tile), math.ceil(n / tile)
        tiles = tm * tn
        waves = math.ceil(tiles / sm)
        useful = (m * n) / (tm * tn * tile * tile)
        best = max(best, rate * useful * tiles / (waves * sm))
    return best


def gemm_efficiency(op: Op, dev: Device) -> float:
    """The GPU's large-GEMM efficiency scaled by the shape: small m or n idle SMs, short k pays the epilogue."""
    m, k, n = op.shape
    return dev.gemm_efficiency * tile_efficiency(m, n, dev.sm_count) * k / (k + 64)


def op_seconds(op: Op, dev: Device, floor: float) -> float:
    """GPU seconds of one instance of `op`: the slower of its FLOPs and its bytes, never under the launch floor."""
    memory = op.bytes / (dev.bandwidth * dev.bandwidth_efficiency)
    compute = 0.0
    if op.shape[0]:
        peak = dev.fp32_flops if op.fp32 else dev.peak_flops
        compute = op.flops / (peak * gemm_efficiency(op, dev))
    elif op.attention:
        att = model_data()["attention_efficiency"]
        rel = att["mem_efficient"] if op.attention == "mem_efficient" else \
            att["flash_backward" if op.phase == "backward" else "flash_forward"]
        compute = op.flops / (dev.peak_flops * dev.gemm_efficiency * rel)
    return max(compute, memory, op.kernels * floor)


@dataclass
class StepTime:
    """One optimizer step of one GPU, split by kind of work (seconds)."""

    seconds: float
    micro_batch_seconds: float
    flops_per_token: float
    matmul_dtype: str
    peak_flops: float
    attention_kernel: str
    bound: str  # "gpu" or "host" (kernel launches)
    breakdown: dict[str, float] = field(default_factory=dict)
    gemm_efficiency: float = 0.0
    fitted: bool = False  # the GPU's efficiency was fitted on its own timed runs


@dataclass(frozen=True)
class Inventory:
    """The work of one optimizer step, independent of the efficiencies: built once, timed several times."""

    kernel: str
    ops: tuple[Op, ...]
    step: tuple[Op, ...]
    traffic: Traffic
    plan: tuple[Planned, ...] = field(default=(), compare=False)  # `ops` as step_time reads them (_plan)


# One op as step_time's loop reads it: (kind 0 gemm / 1 attention / 2 memory, count, flops, bytes, kernels,
# views, m, k, n, fp32, attention-efficiency key): tuples unpack faster than a dataclass's attributes (perf).
Planned = tuple[int, float, float, float, float, float, int, int, int, bool, str]


def _plan(ops: tuple[Op, ...]) -> tuple[Planned, ...]:
    out = []
    for op in ops:
        m, k, n = op.shape
        kind = 0 if m else 1 if op.attention else 2
        key = "mem_efficient" if op.attention == "mem_efficient" else \
            "flash_backward" if op.phase == "backward" else "flash_forward"
        out.append((kind, op.count, op.flops, op.bytes, op.kernels, op.views, m, k, n, op.fp32, key))
    return tuple(out)


# A micro-batch's ops by what micro_batch_ops reads (tests/unit/test_time_plan.py holds the list of fields), the
# architecture by identity (it is kept in the value, so its id is no other object's): a fit table's 27 cards
# share one shape and one op list (perf: the list and its plan were half of a card's time estimate).
_OPS: dict[tuple[object, ...], tuple[Architecture, tuple[Op, ...], tuple[Planned, ...]]] = {}
OPS_FIELDS = ("max_seq_length", "per_device_train_batch_size", "r")


def _micro_ops(cfg: RunConfig, arch: Architecture, reg: Regime, tr: Trainable,
               kernel: str) -> tuple[tuple[Op, ...], tuple[Planned, ...]]:
    key = (cfg.max_seq_length, cfg.per_device_train_batch_size, cfg.r, id(arch), reg, tr, kernel)
    got = _OPS.get(key)
    if got is None or got[0] is not arch:
        if len(_OPS) >= 64:
            _OPS.clear()
        ops = tuple(micro_batch_ops(cfg, arch, reg, tr, kernel))
        got = _OPS[key] = arch, ops, _plan(ops)
    return got[1], got[2]


def inventory(cfg: RunConfig, arch: Architecture, reg: Regime, tr: Trainable, gpu: Gpu) -> Inventory:
    """Every kernel of a micro-batch, the once-per-step work and the step's transfers."""
    kernel = attention_kernel(reg, gpu.sm[0])
    shards = cfg.num_gpus if cfg.parallelism in ("fsdp", "zero2", "zero3", "fsdp_shard_grad_op") else 1
    ops, plan = _micro_ops(cfg, arch, reg, tr, kernel)
    return Inventory(kernel, ops, tuple(step_ops(cfg, arch, reg, tr, shards)),
                     traffic(cfg, arch, reg, tr, gpu.usable_bytes), plan)


def forward_seconds(cfg: RunConfig, arch: Architecture, reg: Regime, tr: Trainable, gpu: Gpu,
                    batch: int | None = None) -> float | None:
    """Seconds of one evaluation batch on one GPU: the forward kernels of a micro-batch of `batch` sequences
    (per_device_eval_batch_size by default; the Trainer's evaluation runs the forward and the loss only), at max(GPU
    time, host launches) as a micro-batch's, and the all-gathers of sharded weights it waits for (step_ops.
    forward_gathers: overlapped with the forward as training's collectives are with the step); None when the catalog
    lacks the GPU's figures."""
    dev = device(cfg, reg, gpu)
    if dev is None:
        return None
    run = replace(cfg, per_device_train_batch_size=batch or cfg.per_device_eval_batch_size)
    ops = [op for op in _micro_ops(run, arch, reg, tr, attention_kernel(reg, gpu.sm[0]))[0] if op.phase == "forward"]
    launch, view, floor = _launch_costs(reg)
    seconds = _ops_seconds(ops, dev, floor, launch, view)
    return seconds + _exposed(*forward_gathers(cfg, arch, reg), dev, seconds)


def _exposed(link_bytes: float, pcie_bytes: float, dev: Device, window: float) -> float:
    """Seconds of communication the compute does not hide: what outlasts the `window` it overlaps, and the share
    COMM_OVERLAP leaves exposed of the rest."""
    comm = link_bytes / dev.link_GBps + pcie_bytes / dev.pcie_GBps
    return max(0.0, comm - window) + (1 - COMM_OVERLAP) * min(comm, window)


def _launch_costs(reg: Regime, scale: float = 1.0) -> tuple[float, float, float]:
    """Host seconds per kernel launch and per view-like op (`scale`: the range's corner), and a kernel's least GPU
    time."""
    data = model_data()
    launch = data["launch_seconds_compiled" if reg.compiled else "launch_seconds"] * scale
    view = 0.0 if reg.compiled else data["view_seconds"] * scale  # Inductor traces views away
    return launch, view, data.get("kernel_floor_seconds", 3e-6)


def _ops_seconds(ops: Iterable[Op], dev: Device, floor: float, launch: float, view: float) -> float:
    """Ops run one after another: the slower of their GPU time (op_seconds each) and the host's launches."""
    busy = host = 0.0
    for op in ops:
        busy += op.count * op_seconds(op, dev, floor)
        host += op.count * op.kernels * launch + op.count * op.views * view
    return max(busy, host)


# tile_efficiency by its three ints: a fit table asks the same few dozen GEMM shapes on each card three times.
_TILES: dict[tuple[int, int, int], float] = {}


def step_time(cfg: RunConfig, arch: Architecture, reg: Regime, tr: Trainable, gpu: Gpu,
              gemm_efficiency: float | None = None, launch_scale: float = 1.0,
              inv: Inventory | None = None) -> StepTime | None:
    """Seconds per optimizer step on one GPU of the run, or None when the catalog lacks the GPU's figures.

    `gemm_efficiency` and `launch_scale` move the two least certain inputs (for the range's corners)."""
    dev = device(cfg, reg, gpu)
    if dev is None:
        return None
    if gemm_efficiency is not None:
        dev = replace(dev, gemm_efficiency=gemm_efficiency)
    launch, view, floor = _launch_costs(reg, launch_scale)
    inv = inv or inventory(cfg, arch, reg, tr, gpu)
    kernel = inv.kernel
    # op_seconds for every op, inlined with the same float operations in the same order (perf: 27 cards x 3
    # runs x ~140 ops a fit table); tests/unit/test_time_plan.py holds it to op_seconds.
    att = model_data()["attention_efficiency"]
    bw = dev.bandwidth * dev.bandwidth_efficiency
    peak, fp32_peak, eff, sm = dev.peak_flops, dev.fp32_flops, dev.gemm_efficiency, dev.sm_count
    tiles = _TILES
    gemm = attention = memory = host = flops = 0.0
    for kind, count, op_flops, op_bytes, kernels, views, m, k, n, fp32, key in inv.plan or _plan(inv.ops):
        # max(compute, memory, launches), spelled out as max() compares (the builtin's call was a third of this)
        t = op_bytes / bw
        least = kernels * floor
        if least > t:
            t = least
        if kind == 0:
            tile = tiles.get((m, n, sm))
            if tile is None:
                if len(tiles) >= 8192:
                    tiles.clear()
                tile = tiles[m, n, sm] = tile_efficiency(m, n, sm)
            compute = op_flops / ((fp32_peak if fp32 else peak) * (eff * tile * k / (k + 64)))
            gemm += count * (t if t > compute else compute)
        elif kind == 1:
            compute = op_flops / (peak * eff * att[key])
            attention += count * (t if t > compute else compute)
        else:
            memory += count * (t if t > 0.0 else 0.0)
        host += count * (kernels * launch + views * view)
        flops += count * op_flops
    parts = {"gemm": gemm, "attention": attention, "memory": memory}
    gpu_micro = math.fsum(parts.values())  # not sum(): CPython 3.12+ compensates float sums, 3.11 does not
    micro = max(gpu_micro, host)
    accum = cfg.gradient_accumulation_steps
    optimizer = _ops_seconds(inv.step, dev, floor, launch, view)
    traf = inv.traffic
    window = micro * accum if traf.overlap_window == "step" else micro * 0.6
    exposed = _exposed(traf.link_bytes, traf.pcie_bytes, dev, window)
    host_optimizer = traf.cpu_optimizer_bytes / (HOST_GBPS * 1e9)
    paging = traf.paged_bytes / dev.pcie_GBps  # the update waits for its pages: nothing overlaps it
    fsdp_copies = traf.copy_bytes / (dev.bandwidth * dev.bandwidth_efficiency)
    seconds = micro * accum + optimizer + exposed + host_optimizer + paging + fsdp_copies
    breakdown = {k: v * accum for k, v in parts.items()}
    breakdown.update({"launch_wait": (micro - gpu_micro) * accum, "optimizer": optimizer,
                      "communication": exposed, "host_optimizer": host_optimizer,
                      "optimizer_paging": paging, "fsdp_copies": fsdp_copies})
    tokens = cfg.max_seq_length * cfg.per_device_train_batch_size
    return StepTime(seconds, micro, flops / tokens, dev.matmul_dtype, dev.peak_flops, kernel,
                    "host" if host > gpu_micro else "gpu", breakdown, dev.gemm_efficiency, dev.fitted)
