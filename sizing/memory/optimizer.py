# Optimizer state per trainable tensor (memory-model.md §4.1) and the step's temporaries.
from __future__ import annotations

from dataclasses import dataclass

MIN_8BIT_SIZE = 4096  # bnb Optimizer2State: smaller tensors keep 32-bit state
PAGED_MIN_NUMEL = 100_000  # bnb get_paged: only buffers this large come from managed memory
BLOCK_8BIT = 256  # blockwise absmax, one fp32 per 256 values


@dataclass(frozen=True)
class OptimizerState:
    resident_bytes: int  # inside PyTorch's allocator (allocated / reserved)
    paged_bytes: int  # bnb paged state: cudaMallocManaged, invisible to torch counters
    step_temporary_bytes: int  # transient inside optimizer.step()


def _moment8bit_bytes(numel: int) -> int:
    """One bitsandbytes 8-bit moment (Optimizer1State / Optimizer2State.init_state, optim/optimizer.py at 95f9af30):
    uint8 with a float32 absmax per 256-value block; a tensor under min_8bit_size (4096) keeps it in float32.
    AdamW keeps two (exp_avg, exp_avg_sq), Lion one."""
    if numel < MIN_8BIT_SIZE:
        return 4 * numel
    return numel + 4 * -(-numel // BLOCK_8BIT)


LION = ("lion_32bit", "lion_8bit", "paged_lion_32bit", "paged_lion_8bit")  # TrainingArguments OptimizerNames


def optimizer_state(optim: str, tensors: tuple[tuple[int, int, int], ...], param_bytes: int) -> OptimizerState:
    """State bytes for `tensors` (rows, cols, count) trained with `optim` (TrainingArguments names).

    param_bytes is the trainable parameters' element size: torch AdamW keeps its moments in it.
    """
    resident = paged = temp = 0
    paged_optim = optim.startswith("paged_")
    for rows, cols, count in tensors:
        numel = rows * cols
        if optim in ("adamw_torch", "adamw_torch_fused"):
            state = 2 * param_bytes * numel  # exp_avg, exp_avg_sq = zeros_like(p)
        elif optim in ("adamw_bnb", "paged_adamw_32bit"):
            state = 8 * numel  # bnb 32-bit: always fp32 states
        elif optim in ("adamw_bnb_8bit", "adamw_8bit", "paged_adamw_8bit"):
            state = 2 * _moment8bit_bytes(numel)
        elif optim in ("lion_32bit", "paged_lion_32bit"):
            state = 4 * numel  # bnb Lion 32-bit: one float32 moment (Optimizer1State, optim_bits=32)
        elif optim in ("lion_8bit", "paged_lion_8bit"):
            state = _moment8bit_bytes(numel)
        elif optim == "adafactor":
            # transformers Adafactor: factored second moment (a row and a column vector) for matrices,
            # a full one for vectors; no first moment with the default beta1=None.
            state = param_bytes * ((rows + cols) if rows > 1 else numel)
        else:  # sgd without momentum (TrainingArguments default) keeps nothing
            state = 0
        if paged_optim and numel >= PAGED_MIN_NUMEL:
            paged += state * count
        else:
            resident += state * count
    if optim == "adamw_torch":
        # foreach AdamW: torch._foreach_sqrt(exp_avg_sqs) materializes one state-sized temporary.
        total_numel = sum(r * c * k for r, c, k in tensors)
        temp = param_bytes * total_numel
    return OptimizerState(resident, paged, temp)


def zero_fp32_optimizer(optim: str, tensors: tuple[tuple[int, int, int], ...], params: int) -> OptimizerState:
    """DeepSpeed ZeRO (stages 1-3) over half-precision trainable parameters: each rank keeps an fp32 master copy of
    its partition and runs the optimizer on it, so the states are fp32 whatever the parameters' dtype, and the step
    first flattens the partition's gradients into an fp32 copy (stage3.py v0.14.0 _create_fp32_partitions
    `.clone().float()`, _prepare_fp32_grad_for_sub_group `.to(fp32 dtype)`; stage_1_and_2.py
    single_partition_of_fp32_groups). Bytes for the whole model: the caller takes one GPU's share."""
    st = optimizer_state(optim, tensors, 4)
    return OptimizerState(st.resident_bytes + 4 * params, st.paged_bytes, st.step_temporary_bytes + 4 * params)
