# Time and budget of a run: the step-time roofline (sizing/time/), its range from the timed runs' residuals, cost.
from __future__ import annotations

import math
from typing import Any

from .arch import Architecture
from .catalog import Gpu
from .config import RunConfig
from .frameworks import logging_steps
from .memory.adapters import Trainable
from .memory.regime import Regime
from .step import eval_batch, eval_batches
from .time.device import model_data
from .time.roofline import Inventory, forward_seconds, inventory, step_time


def residual_band() -> tuple[float, float]:
    """Factors (low, high) by which measured step times scatter around the estimate (90th pct of |log ratio|)."""
    lo, hi = model_data()["residual_log_quantiles"]
    return math.exp(float(lo)), math.exp(float(hi))


def _span(value: float | None, low: float, high: float) -> list[float] | None:
    return None if value is None else [value * low, value * high]


def step_bounds(cfg: RunConfig, arch: Architecture, reg: Regime, tr: Trainable, gpu: Gpu,
                seconds: float, fitted: bool, inv: Inventory | None = None) -> tuple[float, float]:
    """Low and high step seconds: the timed runs' residual band around the corners of the two unfitted inputs,
    the host cost per kernel launch and, on a GPU without timed runs, its GEMM efficiency."""
    data = model_data()
    launch_lo, launch_hi = (x / data["launch_seconds"] for x in data["launch_seconds_span"])
    eff_lo, eff_hi = (None, None) if fitted else data["unfitted_gemm_efficiency_span"]
    inv = inv or inventory(cfg, arch, reg, tr, gpu)
    fast = step_time(cfg, arch, reg, tr, gpu, eff_hi, launch_lo, inv)
    slow = step_time(cfg, arch, reg, tr, gpu, eff_lo, launch_hi, inv)
    low, high = residual_band()
    fastest = min(seconds, fast.seconds if fast else seconds)
    slowest = max(seconds, slow.seconds if slow else seconds)
    return fastest * low, slowest * high


def evaluation_hours(cfg: RunConfig, arch: Architecture, reg: Regime, tr: Trainable, gpu: Gpu,
                     tokens_step: int) -> float | None:
    """Hours the Trainer's evaluation passes take over the run (inside total_hours): eval_strategy "epoch" evaluates
    after each epoch, "steps" every eval_steps optimizer steps (the trainer's logging_steps when unset:
    frameworks.logging_steps) and after the last, each pass the forward of eval_samples sequences,
    per_device_eval_batch_size per GPU at a time (step.eval_batch, step.eval_batches), with the all-gathers a sharded
    forward waits for; None without an evaluation, or without eval_samples (the set's size) or the dataset's tokens."""
    if cfg.eval_strategy == "no" or not cfg.eval_samples or not cfg.dataset_tokens:
        return None
    batch = forward_seconds(cfg, arch, reg, tr, gpu, eval_batch(cfg))
    if batch is None:
        return None
    if cfg.eval_strategy == "epoch":
        passes = math.ceil(cfg.num_train_epochs)
    else:  # DefaultFlowCallback (trainer_callback.py, 5.24): every eval_steps steps, and after the last one if not
        steps = math.ceil(cfg.dataset_tokens * cfg.num_train_epochs / (tokens_step * cfg.num_gpus))
        passes = math.ceil(steps / (cfg.eval_steps or logging_steps(cfg)))
    return passes * eval_batches(cfg) * batch / 3600


def time_estimate(cfg: RunConfig, arch: Architecture, reg: Regime, tr: Trainable,
                  gpu: Gpu) -> dict[str, Any] | None:
    """Step seconds, tokens/s, total hours and cost (with their ranges), or None without the GPU's figures."""
    inv = inventory(cfg, arch, reg, tr, gpu)
    st = step_time(cfg, arch, reg, tr, gpu, inv=inv)
    if st is None:
        return None
    s_lo, s_hi = step_bounds(cfg, arch, reg, tr, gpu, st.seconds, st.fitted, inv)
    tokens_step = cfg.max_seq_length * cfg.per_device_train_batch_size * cfg.gradient_accumulation_steps
    per_gpu = tokens_step / st.seconds
    total_tps = per_gpu * cfg.num_gpus  # every GPU trains its own micro-batches (data parallel)
    hours = cost = per_million = eval_hours = None
    if cfg.dataset_tokens:
        hours = cfg.dataset_tokens * cfg.num_train_epochs / total_tps / 3600
        eval_hours = evaluation_hours(cfg, arch, reg, tr, gpu, tokens_step)
        if eval_hours is not None:
            hours += eval_hours
    if cfg.price_per_gpu_hour is not None:
        per_million = 1e6 / total_tps / 3600 * cfg.num_gpus * cfg.price_per_gpu_hour
        if hours is not None:
            cost = hours * cfg.num_gpus * cfg.price_per_gpu_hour
    low, high = s_lo / st.seconds, s_hi / st.seconds  # time scales by the factor; throughput by its inverse
    useful = st.flops_per_token * total_tps / cfg.num_gpus
    return {
        "step_seconds": st.seconds, "tokens_per_second": total_tps, "tokens_per_second_per_gpu": per_gpu,
        "total_hours": hours, "evaluation_hours": eval_hours, "cost": cost, "cost_per_million_tokens": per_million,
        "range": {"step_seconds": _span(st.seconds, low, high),
                  "tokens_per_second": _span(total_tps, 1 / high, 1 / low),
                  "total_hours": _span(hours, low, high), "cost": _span(cost, low, high),
                  "cost_per_million_tokens": _span(per_million, low, high)},
        # achieved share of the matmul peak (model FLOPs utilization), not an input
        "utilization": useful / st.peak_flops, "flops_per_token": st.flops_per_token,
        "peak_tflops": round(st.peak_flops / 1e12, 2), "matmul_dtype": st.matmul_dtype,
        "attention_kernel": st.attention_kernel, "bound": st.bound,
        "breakdown_seconds": {k: round(v, 6) for k, v in st.breakdown.items()},
    }
