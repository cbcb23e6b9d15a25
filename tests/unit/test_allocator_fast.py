# The rewritten caching allocator against its previous implementation (tests/unit/_allocator_ref.py, with
# malloc_all / free_all as plain loops): the same counters after every operation of random traces. Whole
# replays of the engine's step records are held to the previous replay in test_replay_skip.py.
from __future__ import annotations

import random

import pytest

from sizing.memory.allocator import SMALL_SIZE, CachingAllocator, plan, round_size

from . import _allocator_ref as ref

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



@pytest.mark.parametrize("expandable", [False, True])
@pytest.mark.parametrize("seed", range(8))
def test_planned_runs_and_exact_fits_give_the_reference_counters(seed: int, expandable: bool) -> None:
    """run / run_free of plan(sizes) against the reference's malloc_all / free_all of the sizes themselves, on a
    few sizes that recur (so that most requests find a cached block of exactly their size, the fast path)."""
    rng = random.Random(500 + seed)
    few = [rng.choice([rng.randint(0, 4096), rng.randint(MiB - 2048, MiB + 2048), rng.randint(1, 12 * MiB)])
           for _ in range(3)] + [rng.randint(2, 40) * MiB for _ in range(3)]
    new, old = CachingAllocator(expandable), ref.CachingAllocator(expandable)
    live: list[tuple[list[object], list[object]]] = []
    exact = 0
    for _ in range(800):
        sizes = [rng.choice(few) for _ in range(rng.randint(0, 7))]
        op = rng.random()
        free_sizes = {size for size, _ in new._keys}
        exact += sum(round_size(n) > SMALL_SIZE and round_size(n) in free_sizes for n in sizes)
        if op < 0.3:
            new.run_free(plan(sizes))
            old.free_all(old.malloc_all(sizes))  # type: ignore[attr-defined]
        elif live and op < 0.6:
            a, b = live.pop(rng.randrange(len(live)))
            new.free_all(a)  # type: ignore[arg-type]
            old.free_all(b)  # type: ignore[attr-defined]
        else:
            live.append((new.run(plan(sizes)), old.malloc_all(sizes)))  # type: ignore[arg-type, attr-defined]
        assert [getattr(new, c) for c in COUNTERS] == [getattr(old, c) for c in COUNTERS]
    assert exact > 100  # the exact-fit path is exercised


def test_plan_by_hand() -> None:
    # 0 B and 1 B take one 512 B block each (round_size); 1 MiB is small, 1 MiB + 1 B is large (rounded to 512 B)
    assert plan([0, 1, MiB, MiB + 1, 700, 3 * MiB]) == (-(512 + 512 + MiB), MiB + 512, -1024, 3 * MiB)
    assert plan([]) == () and plan([5]) == (-512,)
