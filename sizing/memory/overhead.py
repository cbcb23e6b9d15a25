# What PyTorch and CUDA add around the tensors (memory-model.md §8): workspaces, transients of
# quantized matmuls, the caching allocator's reserve and the CUDA context. All [APPROX].
from __future__ import annotations

from dataclasses import dataclass

from .regime import Regime

MiB = 2**20
GiB = 2**30
# PyTorch sets the cuBLAS workspace from the caching allocator: 32 MiB on sm_90+, 8 MiB before
# (aten/src/ATen/cuda/CublasHandlePool.cpp::parseChosenWorkspaceSize).
CUBLAS_WS_HOPPER = 32 * MiB
CUBLAS_WS_OLDER = 8 * MiB + 128 * 1024
# bnb gemm_4bit takes the dequantize + F.linear path above this many rows (backends/cuda/ops.py).
BNB_CUSTOM_GEMM_MAX_M = 1536
# CUDA context with lazy module loading after cuBLAS init: 0.3-0.6 GiB (PyTorch PR #86509,
# unsloth PR #9362 measured ~612 MiB on B200).
CUDA_CONTEXT = (int(0.3 * GiB), int(0.5 * GiB), int(0.65 * GiB))
# Caching allocator: max_reserved / max_allocated is 1.05-1.25 for fine-tuning; the slack comes from
# blocks freed and re-split as activation shapes come and go, so it scales with the dynamic part.
FRAGMENTATION = (0.05, 0.15, 0.25)
FRAGMENTATION_EXPANDABLE = (0.0, 0.03, 0.06)  # PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True


@dataclass(frozen=True)
class Overhead:
    cublas_workspace: int
    dequant_forward: int  # transient dequantized weight in the forward
    dequant_backward: int  # and in the backward (always: grad_input = grad_output @ W)


def overhead(reg: Regime, largest_linear_elems: int, tokens: int, hopper: bool, head_elems: int) -> Overhead:
    """cuBLAS workspace and the transient dequantized weights of quantized matmuls."""
    ws = CUBLAS_WS_HOPPER if hopper else CUBLAS_WS_OLDER
    fwd = bwd = 0
    prof = reg.profile
    if reg.quant == "4bit" and not reg.full:
        # torchao NF4: weight.to(bf16); bnb: dequantize to the compute dtype (bnb 0.42: fp16, then bf16).
        b = 2 if prof.torchao_nf4 else reg.quant_compute * prof.dequant_copies
        bwd = largest_linear_elems * b
        # bnb >= 0.45 runs a custom 4-bit GEMM for small token counts; older bnb and torchao always dequantize.
        always = prof.torchao_nf4 or prof.dequant_copies > 1
        fwd = bwd if always or tokens > BNB_CUSTOM_GEMM_MAX_M else 0
        if prof.quantize_lm_head:
            fwd = max(fwd, head_elems * b)
    elif reg.quant == "8bit" and not reg.full:
        bwd = largest_linear_elems * 2  # CB.to(fp16) in MatMul8bitLt.backward
    return Overhead(ws, fwd, bwd)


def fragmentation(expandable: bool) -> tuple[float, float, float]:
    """(low, typical, high) share of the dynamic bytes the cache keeps reserved on top of them."""
    return FRAGMENTATION_EXPANDABLE if expandable else FRAGMENTATION
