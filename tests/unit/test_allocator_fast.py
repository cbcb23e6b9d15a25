# The rewritten caching allocator against its previous implementation (tests/unit/_allocator_ref.py, with
# malloc_all / free_all as plain loops): the same counters after every operation of random traces, and the
# same replayed peaks for whole steps.
from __future__ import annotations

import random

import pytest

from sizing import estimate
from sizing.memory import replay as replay_module
from sizing.memory.allocator import CachingAllocator
from sizing.step import step_memory

from . import _allocator_ref as ref
from . import _replay_ref as replay_ref
from .conftest import TINY_LLAMA

MiB = 2**20
COUNTERS = ("allocated", "reserved", "peak_allocated", "peak_reserved", "peak_needed", "cached_whole", "small_live",
            "small_peak")


@pytest.mark.parametrize("expandable", [False, True])
@pytest.mark.parametrize("seed", range(12))
def test_random_traces_give_the_reference_counters(seed: int, expandable: bool) -> None:
    rng = random.Random(seed)
    new, old = CachingAllocator(expandable), ref.CachingAllocator(expandable)
    live: list[tuple[object, object]] = []
    def size() -> int:  # around every threshold: 512 B rounding, 1 MiB small pool, 10 MiB, 2 MiB pages
        return rng.choice([rng.randint(0, 4096), rng.randint(MiB - 2048, MiB + 2048), rng.randint(1, 12 * MiB),
                           rng.randint(10 * MiB - 4096, 10 * MiB + 4096), rng.randint(1, 300) * MiB])

    for _ in range(1500):
        op = rng.random()
        if live and op < 0.35:
            a, b = live.pop(rng.randrange(len(live)))
            new.free(a)  # type: ignore[arg-type]
            old.free(b)  # type: ignore[arg-type]
        elif live and op < 0.45:  # a batch of frees, in a random order
            batch = [live.pop(rng.randrange(len(live))) for _ in range(min(len(live), rng.randint(1, 8)))]
            new.free_all(a for a, _ in batch)  # type: ignore[misc]
            old.free_all(b for _, b in batch)  # type: ignore[attr-defined]
        elif op < 0.55:  # a batch of requests, small and large mixed
            sizes = [size() for _ in range(rng.randint(1, 8))]
            live += zip(new.malloc_all(sizes), old.malloc_all(sizes), strict=True)  # type: ignore[attr-defined]
        else:
            n = size()
            live.append((new.malloc(n), old.malloc(n)))
        assert [getattr(new, c) for c in COUNTERS] == [getattr(old, c) for c in COUNTERS]


@pytest.mark.parametrize("expandable", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_malloc_free_all_is_malloc_all_then_free_all(seed: int, expandable: bool) -> None:
    rng = random.Random(100 + seed)
    new, old = CachingAllocator(expandable), ref.CachingAllocator(expandable)
    live: list[tuple[object, object]] = []
    for _ in range(600):
        sizes = [rng.choice([rng.randint(0, 4096), rng.randint(MiB - 2048, MiB + 2048), rng.randint(1, 12 * MiB),
                             rng.randint(1, 300) * MiB]) for _ in range(rng.randint(0, 6))]
        op = rng.random()
        if op < 0.3:
            new.malloc_free_all(sizes)
            old.free_all(old.malloc_all(sizes))  # type: ignore[attr-defined]
        elif live and op < 0.6:
            a, b = live.pop(rng.randrange(len(live)))
            new.free(a)  # type: ignore[arg-type]
            old.free(b)  # type: ignore[arg-type]
        else:
            live += zip(new.malloc_all(sizes), old.malloc_all(sizes), strict=True)  # type: ignore[attr-defined]
        assert [getattr(new, c) for c in COUNTERS] == [getattr(old, c) for c in COUNTERS]


RUNS = [
    {"model": "meta-llama/Llama-3.1-8B", "method": "qlora", "max_seq_length": 4096, "gradient_checkpointing": True},
    {"model": "Qwen/Qwen2.5-7B", "framework": "trl", "method": "qlora", "max_seq_length": 2048,
     "per_device_train_batch_size": 2},
    {"model_config": TINY_LLAMA, "method": "full", "max_seq_length": 512, "per_device_train_batch_size": 4},
    {"model_config": TINY_LLAMA, "method": "lora", "max_seq_length": 1000, "attn_implementation": "eager",
     "packing": False, "gradient_accumulation_steps": 4},
    {"model": "meta-llama/Llama-3.2-1B", "method": "full", "num_gpus": 4, "parallelism": "fsdp",
     "max_seq_length": 2048},
]


@pytest.mark.parametrize("expandable", [False, True])
@pytest.mark.parametrize("run", RUNS)
def test_replays_give_the_reference_peaks(run: dict[str, object], expandable: bool) -> None:
    est = estimate(run)
    tensors = step_memory(est.config, est.arch, None).tensors
    # the reference: the replay as it was (every step, tests/unit/_replay_ref.py) over the previous allocator
    assert replay_module.replay(tensors, expandable) == replay_ref.replay(tensors, expandable)
