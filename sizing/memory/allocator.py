# PyTorch's CUDA caching allocator: from the bytes the step allocates to what it reserves, and the
# device memory nvidia-smi shows (c10/cuda/CUDACachingAllocator.cpp; memory-model.md §8).
from __future__ import annotations

from ..catalog import Gpu
from .overhead import CUDA_CONTEXT

ALLOC_ROUND = 2 * 2**20  # the caching allocator rounds large blocks to 2 MiB


def reserved_bytes(allocated: int, static: int, frag: float) -> int:
    """max_memory_reserved for an allocated peak: the dynamic part fragments the cache, and large
    blocks are rounded to 2 MiB. One rule for the estimate, its range and the solvers."""
    n = allocated + int(frag * max(allocated - static, 0))
    return -(-n // ALLOC_ROUND) * ALLOC_ROUND


def usable_bytes(gpu: Gpu) -> int:
    """What the run's reserved memory may reach: CUDA's total minus the process's CUDA context."""
    return gpu.usable_bytes - CUDA_CONTEXT[1]
