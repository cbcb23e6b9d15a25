# Work done once per optimizer step: gradient accumulation, clipping, the optimizer update, communication.
from __future__ import annotations

import math
from dataclasses import dataclass

from ..arch import Architecture
from ..choices import BNB_OPTIMIZERS
from ..config import RunConfig
from ..memory.adapters import Trainable
from ..memory.regime import Regime
from .op import Op

# torch.optim multi_tensor_apply: a launch covers at most 320 blocks of 65536 elements and ~36-110 tensors
# (depth-dependent tensor lists; torch/csrc MultiTensorApply.cuh); 48 is the 3-4-list middle.
FOREACH_ELEMS_PER_LAUNCH = 320 * 65536
FOREACH_TENSORS_PER_LAUNCH = 48


def _launches(tensors: int, params: int) -> float:
    return float(max(math.ceil(tensors / FOREACH_TENSORS_PER_LAUNCH), math.ceil(params / FOREACH_ELEMS_PER_LAUNCH)))


def optimizer_bytes_per_param(optim: str, p: int, g: int) -> tuple[float, float]:
    """DRAM bytes per trainable parameter of one update, and how many element-wise passes (foreach ops) it takes.

    AdamW fused: read p, g, m, v and write p, m, v once: 2p + g + 4s. AdamW foreach (torch _multi_tensor_adamw):
    lerp m, mul v, addcmul v, sqrt -> tmp, div tmp, add eps, addcdiv p, weight decay -> 4p + 2g + 14s, 8 ops.
    bitsandbytes 8-bit: one fused kernel per tensor, states of 1 byte. SGD without momentum: 2p + g."""
    s = p  # torch keeps Adam states in the parameter's dtype
    if optim == "adamw_torch_fused":
        return 2 * p + g + 4 * s, 1
    if optim in ("adamw_bnb_8bit", "adamw_8bit", "paged_adamw_8bit"):
        return 2 * p + g + 4 * 1, 1
    if optim in ("paged_adamw_32bit", "adamw_bnb"):
        return 2 * p + g + 4 * 4, 1
    if optim in ("lion_32bit", "paged_lion_32bit"):  # bitsandbytes Lion: one fused kernel, one moment
        return 2 * p + g + 2 * 4, 1
    if optim in ("lion_8bit", "paged_lion_8bit"):
        return 2 * p + g + 2 * 1, 1
    if optim == "sgd":
        return 2 * p + g, 1
    if optim == "adafactor":  # factored second moment: row/col means, update and RMS clip, ~6 passes over p
        return 6 * p + 3 * g, 6
    return 4 * p + 2 * g + 14 * s, 8  # adamw_torch: foreach


def step_ops(cfg: RunConfig, arch: Architecture, reg: Regime, tr: Trainable, shards: int) -> list[Op]:
    """Accumulation adds, gradient clipping and the optimizer update over this GPU's trainable parameters."""
    params = (arch.total_params if reg.full else tr.params) / shards
    tensors = max(1, sum(k for _, _, k in tr.tensors) // shards)
    p = reg.weight if reg.full else reg.adapter
    g = p
    ops: list[Op] = []
    if cfg.gradient_accumulation_steps > 1:  # .grad += new gradient after the first micro-batch
        ops.append(Op("grad_accumulate", "step", cfg.gradient_accumulation_steps - 1, 0.0, 3.0 * g * params,
                      float(tensors)))
    if cfg.framework in ("transformers", "trl", "custom"):  # HF Trainer / PEFT harness clip at max_grad_norm=1
        ops.append(Op("grad_clip", "step", 1, 0.0, 3.0 * g * params, 2 * _launches(tensors, int(params))))
    bytes_pp, passes = optimizer_bytes_per_param(cfg.optim, p, g)
    kernels = float(tensors) if cfg.optim in BNB_OPTIMIZERS else passes * _launches(tensors, int(params))
    if not (cfg.cpu_offload and cfg.parallelism in ("fsdp", "zero2", "zero3", "fsdp_no_shard", "fsdp_shard_grad_op")):
        ops.append(Op("optimizer", "step", 1, 0.0, bytes_pp * params, kernels))
    return ops


@dataclass(frozen=True)
class Traffic:
    """Bytes a GPU sends per optimizer step over its link, and over PCIe to the host."""

    link_bytes: float
    pcie_bytes: float
    overlap_window: str  # "backward" (DDP buckets) | "step" (FSDP prefetch) | ""
    cpu_optimizer_bytes: float  # host memory traffic of a CPU-side optimizer step
    paged_bytes: float = 0.0  # paged optimizer states migrated over PCIe (out and back in) every step
    copy_bytes: float = 0.0  # FSDP's gradient copy-in (and FSDP2's all-gather copy-out) on the compute stream


PAGED = ("paged_adamw_8bit", "paged_adamw_32bit", "paged_lion_8bit", "paged_lion_32bit")
# per parameter: AdamW's m and v, Lion's one moment
STATE_BYTES = {"paged_adamw_8bit": 2, "paged_adamw_32bit": 8, "paged_lion_8bit": 1, "paged_lion_32bit": 4}


def weight_bytes(arch: Architecture, reg: Regime) -> float:
    """The base weights' bytes as the collectives move them (a quantized base: about 0.6 bytes a parameter with its
    quantization state and the layers left in 16 bits)."""
    return arch.total_params * (reg.weight if not reg.quant else 0.6)


def forward_gathers(cfg: RunConfig, arch: Architecture, reg: Regime) -> tuple[float, float]:
    """Bytes a GPU takes in to run one forward on sharded weights (FSDP, ZeRO-3: each unit all-gathered before its
    forward, as in training's): over its link, at the all-gather's (n-1)/n, and under CPU offload its own shard
    copied in from the host. (0, 0) where every GPU holds the weights whole (DDP, ZeRO-2) or there is one GPU."""
    n = cfg.num_gpus
    if n == 1 or cfg.parallelism not in ("fsdp", "fsdp_shard_grad_op", "zero3"):
        return 0.0, 0.0
    weights = weight_bytes(arch, reg)
    return (n - 1) / n * weights, weights / n if cfg.cpu_offload else 0.0


def paged_overflow(cfg: RunConfig, arch: Architecture, reg: Regime, tr: Trainable, usable: int) -> float:
    """Paged (unified-memory) optimizer states that do not fit beside weights and gradients: they are evicted to
    host memory and paged back for every update (bitsandbytes paged optimizers, cudaMallocManaged)."""
    if cfg.optim not in PAGED:
        return 0.0
    shards = cfg.num_gpus if cfg.parallelism in ("fsdp", "zero2", "zero3", "fsdp_shard_grad_op") else 1
    params = (arch.total_params if reg.full else tr.params) / shards
    p = reg.weight if reg.full else reg.adapter
    weights = weight_bytes(arch, reg) / shards
    grads = 0.0 if cfg.optimizer_in_backward else params * p
    states = params * STATE_BYTES[cfg.optim]
    return min(states, max(0.0, weights + grads + states - usable))


def traffic(cfg: RunConfig, arch: Architecture, reg: Regime, tr: Trainable, usable: int | None = None) -> Traffic:
    """Bytes per GPU at NCCL's bus-bandwidth factors (nccl-tests doc/PERFORMANCE.md L136-140): 2(n-1)/n of the buffer
    per all-reduce, (n-1)/n per all-gather / reduce-scatter; divided by the link's busbw they give the time."""
    paged = 2 * paged_overflow(cfg, arch, reg, tr, usable) if usable else 0.0
    n = cfg.num_gpus
    params = arch.total_params if reg.full else tr.params
    trainable = params * (reg.weight if reg.full else reg.adapter)  # bytes
    weights = weight_bytes(arch, reg)
    share = (n - 1) / n if n > 1 else 0.0
    accum = cfg.gradient_accumulation_steps
    if n == 1 or cfg.parallelism == "none":
        return Traffic(0.0, 0.0, "", 0.0, paged)
    if cfg.parallelism in ("ddp", "fsdp_no_shard"):  # NO_SHARD all-reduces each unit's flat gradient
        return Traffic(2 * share * trainable, 0.0, "backward", 0.0, paged)
    # FSDP / ZeRO-3: all-gather weights for forward and again for backward (per micro-batch), reduce-scatter
    # gradients; ZeRO-2 keeps weights whole and reduce-scatters gradients, all-gathers the updated shards.
    # LoRA shards and gathers the frozen base weights too: torchtune's FSDP1 FULL_SHARD wrap of every decoder layer
    # (recipes/lora_finetune_distributed.py @0217d44c L332-351) and FSDP2 fully_shard per layer with
    # reshard_after_forward=True (torchtune/training/_distributed.py @30b8519e L586-623).
    zero2 = cfg.parallelism == "zero2"
    gathers = 1 if cfg.parallelism == "fsdp_shard_grad_op" else 2  # SHARD_GRAD_OP keeps forward's gather for backward
    link = share * trainable * 2 if zero2 else share * (weights * gathers * accum + trainable * accum)
    pcie = cpu = 0.0
    if cfg.cpu_offload:  # sharded params up and gradients down every step; the update runs on the host
        pcie = (weights * 2 * accum + trainable) / n
        cpu = params / n * 16  # fp32 Adam on the host: ~16 B/param read+write (master, m, v, grad)
    # Copies on the compute stream's path, each a read and a write, overlapping none of the step's kernels. Every
    # backward copies the unsharded gradients into one flat buffer for the reduce-scatter: FSDP1's autograd
    # concatenates the views' gradients into the flat parameter's gradient, FSDP2 copies them into the
    # reduce-scatter input and the compute stream waits for it (torch 2.4 _composable/fsdp/_fsdp_collectives.py
    # foreach_reduce_scatter_copy_in, copy_in_event). FSDP2 also copies every gathered unit out of the all-gather
    # buffer into its parameters (foreach_all_gather_copy_out: split_with_sizes_copy, called by
    # FSDPParamGroup.wait_for_unshard after the all-gather); FSDP1 gathers into the flat parameter in place.
    # Measured on CPU: tests/physics/test_fsdp2_copy_out.py.
    copy = 0.0
    if cfg.parallelism in ("fsdp", "fsdp_shard_grad_op"):
        copy = 2 * ((weights * gathers if reg.profile.fsdp2 else 0.0) + trainable) * accum
    return Traffic(link, pcie, "step", cpu, paged, copy)
