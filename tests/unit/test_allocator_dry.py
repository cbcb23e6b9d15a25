# run_free's dry path (CachingAllocator._dry_run_free: best fit followed on sizes and addresses, no block touched)
# against the real run of the same requests: the same exact state (counters, peaks, every free block's size and
# address, the next segment's address) after every run_free of random traces, both when the dry path answers
# and when it hands over to the real run (a request that needs a new segment).
from __future__ import annotations

import random

import pytest

from sizing.memory.allocator import CachingAllocator, _Block, plan
from sizing.memory.pool_state import exact_state

MiB = 2**20


def _size(rng: random.Random, few: list[int]) -> int:
    return rng.choice([rng.randint(0, 4096), rng.randint(MiB - 2048, MiB + 2048), rng.randint(1, 12 * MiB),
                       rng.randint(10 * MiB - 4096, 10 * MiB + 4096), rng.randint(1, 300) * MiB, rng.choice(few)])


@pytest.mark.parametrize("expandable", [False, True])
@pytest.mark.parametrize("seed", range(10))
def test_dry_run_free_leaves_the_real_runs_state(seed: int, expandable: bool) -> None:
    rng = random.Random(700 + seed)
    few = [rng.randint(2, 64) * MiB + rng.choice([0, 512, 3 * 512]) for _ in range(4)]  # sizes that recur
    dry, real = CachingAllocator(expandable), CachingAllocator(expandable)
    real.dry = False
    answers: list[bool] = []
    dry_path = dry._dry_run_free

    def spy(requests: tuple[int, ...]) -> bool:
        answers.append(dry_path(requests))
        return answers[-1]

    dry._dry_run_free = spy  # type: ignore[method-assign]
    live: list[tuple[_Block, _Block]] = []
    unwalked = by_own = 0  # runs the dry path answers without following best fit (allocator._holds), by its 2nd way
    for _ in range(700):
        op = rng.random()
        if live and op < 0.3:
            a, b = live.pop(rng.randrange(len(live)))
            dry.free(a)
            real.free(b)
        elif op < 0.55:
            sizes = [_size(rng, few) for _ in range(rng.randint(1, 4))]
            live += zip(dry.run(plan(sizes)), real.run(plan(sizes)), strict=True)
        else:
            requests = plan(_size(rng, few) for _ in range(rng.randint(0, 12)))
            small = -sum(x for x in requests if x < 0)
            keep = rng.choice([0, small // 2, small])  # small bytes that stay allocated (a layer's gradients)
            large = sorted((x for x in requests if x > 0), reverse=True)
            if dry.allocated + small + sum(large) + len(large) * MiB <= dry.peak_allocated:
                one = bool(dry._keys) and dry._keys[-1][0] >= sum(large)  # the largest block holds them all
                own = len(large) <= len(dry._keys) and all(  # or each its own block, largest to largest
                    x <= key[0] for x, key in zip(large, reversed(dry._keys), strict=False))
                unwalked += one or own
                by_own += own and not one and len(large) > 1
            dry.run_free(requests, keep)
            real.run_free(requests, keep)
        assert exact_state(dry) == exact_state(real)
    assert answers.count(True) > 100 and answers.count(False) > 10  # both ways are exercised
    assert unwalked > 20 and by_own > (20 if not expandable else 0)


def test_a_split_tail_below_a_cached_block_of_its_size_is_taken_first() -> None:
    # Two whole cached segments, 30 MiB at address 0 and 10 MiB at 30 MiB. 20 MiB splits the first, leaving a
    # 10 MiB tail at 20 MiB; the next 10 MiB request takes that tail (lower address), not the whole 10 MiB
    # segment, which stays whole: when the small pool then grows, needed = 42 - 10 MiB, below the 40 MiB peak.
    pools = [CachingAllocator(), CachingAllocator()]
    pools[1].dry = False
    for a in pools:
        a.free_all([a.malloc(30 * MiB), a.malloc(10 * MiB)])
        assert a.cached_whole == 40 * MiB and a.peak_needed == 40 * MiB
        a.run_free((20 * MiB, 10 * MiB, -512))
        assert (a.reserved, a.peak_reserved, a.peak_needed) == (42 * MiB, 42 * MiB, 40 * MiB)
    assert exact_state(pools[0]) == exact_state(pools[1])


def test_a_block_taken_whole_raises_the_peak_by_up_to_1_mib_more_than_the_request() -> None:
    # A cached 22 MiB segment and 0.5 MiB allocated in the small pool, peak 22 MiB. A 21 MiB request takes the
    # segment whole (1 MiB would remain: not split), so the run's allocated peak is 22.5 MiB, above 0.5 + 21: the
    # dry path's bound without the walk must leave room for that 1 MiB.
    pools = [CachingAllocator(), CachingAllocator()]
    pools[1].dry = False
    for a in pools:
        a.free(a.malloc(22 * MiB))
        a.malloc(MiB // 2)
        assert (a.allocated, a.peak_allocated) == (MiB // 2, 22 * MiB)
        a.run_free((21 * MiB,))
        assert a.peak_allocated == 22 * MiB + MiB // 2
    assert exact_state(pools[0]) == exact_state(pools[1])
