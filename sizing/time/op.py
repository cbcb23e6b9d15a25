# One kernel (or a group of small kernels) of the step, with its FLOPs, bytes and launches.
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Op:
    """`count` launches of one kernel shape (or a group of small kernels) in one micro-batch."""

    name: str
    phase: str  # forward | backward | recompute
    count: float
    flops: float = 0.0  # per instance
    bytes: float = 0.0  # DRAM traffic per instance
    kernels: float = 1.0  # launches per instance
    shape: tuple[int, int, int] = (0, 0, 0)  # GEMM (M, K, N); zeros for non-GEMM work
    fp32: bool = False  # math runs on the fp32 path (fp32 adapters without autocast)
    attention: str = ""  # attention kernel: flash | mem_efficient | math
    views: float = 0.0  # host-only ops per instance (view, t, detach, _unsafe_view): dispatched, no kernel


def gemm(name: str, phase: str, count: float, m: int, k: int, n: int, a_bytes: int, w_bytes: int,
         fp32: bool = False) -> Op:
    """A (m x k) @ (k x n) GEMM: 2mkn FLOPs; reads both operands, writes the output."""
    return Op(name, phase, count, 2.0 * m * k * n, float(a_bytes * m * k + w_bytes * k * n + a_bytes * m * n),
              1.0, (m, k, n), fp32, views=VIEWS_PER_GEMM)


# Host-only aten ops, counted with a TorchDispatchMode over one HF Llama + PEFT training step on CPU
# (tests/unit/test_time_host_ops.py): per decoder layer, forward + recompute + backward, 375 view-like ops with
# LoRA on all linears (76 mm) and 205 with full fine-tuning (27 mm): ~3.5 per mm plus ~37 per layer and pass.
VIEWS_PER_GEMM = 3.5
VIEWS_PER_LAYER_PASS = 37.0
