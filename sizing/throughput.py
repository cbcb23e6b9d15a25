# Time and budget: FLOPs actually done per token, the GPU's dense throughput, a utilization figure,
# and the memory-bound cost of dequantizing 4-bit weights.
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .arch import Architecture
from .catalog import Gpu
from .config import RunConfig
from .memory.adapters import Trainable
from .memory.overhead import BNB_CUSTOM_GEMM_MAX_M
from .memory.regime import Regime

# Share of the dense tensor-core peak a fine-tuning step sustains (model FLOPs utilization).
# Published LoRA/QLoRA runs on the HF stack land between 0.2 and 0.5; 0.35 sits in the middle.
# The user can override it with `utilization`; scripts/validate.py prints what each source implies.
DEFAULT_UTILIZATION = 0.35
# Bytes moved per parameter when a 4-bit weight is dequantized for a matmul: read the packed
# data (0.5) and the absmax, write the bf16 copy (2), read it again in the GEMM (2).
DEQUANT_BYTES_PER_PARAM = 4.5


@dataclass(frozen=True)
class StepWork:
    flops_per_token: float
    dequant_bytes_per_micro_batch: float


def step_work(cfg: RunConfig, arch: Architecture, reg: Regime, tr: Trainable) -> StepWork:
    """FLOPs per token of one training step, and 4-bit dequantization traffic per micro-batch."""
    seq = cfg.max_seq_length
    per_layer_linear = sum(lin.in_features * lin.out_features * (lin.active if lin.count > 1 else 1)
                           for lin in arch.linears)
    body = 2 * arch.layers * per_layer_linear  # forward matmuls
    head = 2 * arch.vocab * arch.hidden
    # Causal attention: QK^T and PV over on average S/2 keys (flash/SDPA skip the masked half).
    attention = 2 * arch.layers * seq * arch.q_width * (2 if reg.attention == "eager" else 1)
    lora = 2 * arch.layers * sum(cfg.r * (lin.in_features + lin.out_features) for lin in tr.targets)
    forward = body + head + attention + lora
    # Backward: gradients w.r.t. inputs always (the chain runs through frozen layers), twice the
    # attention work, and weight gradients only where parameters train (a frozen base needs none).
    backward = body + head + 2 * attention + 2 * lora
    if reg.full:
        backward += body + head
    recompute = body + attention + lora if reg.checkpointing else 0
    flops = forward + backward + recompute
    dequant = 0.0
    if reg.quant == "4bit" and not reg.full:
        tokens = seq * cfg.per_device_train_batch_size
        passes = 1 + (1 if reg.checkpointing else 0) + (1 if tokens > BNB_CUSTOM_GEMM_MAX_M else 0)
        dequant = passes * arch.layers * per_layer_linear * DEQUANT_BYTES_PER_PARAM
    return StepWork(flops, dequant)


def peak_tflops(gpu: Gpu, cfg: RunConfig, reg: Regime) -> float | None:
    rec = gpu.record
    if cfg.fp16:
        return rec.get("fp16_dense_tflops")
    if cfg.bf16 or reg.compute == 2:
        value: float | None = rec.get("bf16_dense_tflops") or None
        return value
    # fp32 matmuls: PyTorch leaves TF32 off for matmuls by default
    return rec.get("fp32_tflops")


def time_estimate(cfg: RunConfig, arch: Architecture, reg: Regime, tr: Trainable,
                  gpu: Gpu) -> dict[str, Any] | None:
    tflops = peak_tflops(gpu, cfg, reg)
    if not tflops or not gpu.memory_bandwidth_GBps:
        return None
    util = cfg.utilization if cfg.utilization is not None else DEFAULT_UTILIZATION
    work = step_work(cfg, arch, reg, tr)
    tokens_micro = cfg.max_seq_length * cfg.per_device_train_batch_size
    micro_seconds = (work.flops_per_token * tokens_micro / (tflops * 1e12 * util)
                     + work.dequant_bytes_per_micro_batch / (gpu.memory_bandwidth_GBps * 1e9))
    step_seconds = micro_seconds * cfg.gradient_accumulation_steps
    per_gpu = tokens_micro / micro_seconds
    total_tps = per_gpu * cfg.num_gpus  # data parallel; communication time is not modelled
    hours = cost = None
    if cfg.dataset_tokens:
        hours = cfg.dataset_tokens * cfg.num_train_epochs / total_tps / 3600
        if cfg.price_per_gpu_hour is not None:
            cost = hours * cfg.num_gpus * cfg.price_per_gpu_hour
    return {"step_seconds": step_seconds, "tokens_per_second": total_tps, "tokens_per_second_per_gpu": per_gpu,
            "total_hours": hours, "cost": cost, "utilization": util, "flops_per_token": work.flops_per_token,
            "peak_tflops": tflops}
