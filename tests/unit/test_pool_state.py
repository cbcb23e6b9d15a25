# The allocator's state copied (pool_state.copy_state) answers every later request as the original does, and a
# replay started from the cached copy of its prefix (weights, FSDP's wrap) gives the full replay's peaks.
from __future__ import annotations

import random
from dataclasses import replace

import pytest

from sizing.memory import replay as replay_module
from sizing.memory.allocator import CachingAllocator, _Block
from sizing.memory.pool_state import copy_state
from sizing.memory.replay import Replay

from . import _replay_ref as ref
from .test_replay_skip import _record, _size, _sizes

MiB = 2**20
COUNTERS = ("allocated", "reserved", "peak_allocated", "peak_reserved", "peak_needed", "cached_whole", "small_live",
            "small_peak")


# 8 MiB gets a 20 MiB segment and leaves a 12 MiB tail; 12 MiB gets a whole 12 MiB segment: one size's cached
# blocks in different segments, so that which of them comes first matters to the future.
FEW = [8 * MiB, 12 * MiB, 20 * MiB, 4 * MiB, 16 * MiB]


def _request(rng: random.Random) -> int:
    return rng.choice(FEW) if rng.random() < 0.6 else _size(rng)


def _history(rng: random.Random, a: CachingAllocator, steps: int) -> list[_Block]:
    live: list[_Block] = []
    for _ in range(steps):
        if live and rng.random() < 0.4:
            a.free(live.pop(rng.randrange(len(live))))
        else:
            live.append(a.malloc(_request(rng)))
    return live


@pytest.mark.parametrize("expandable", [False, True])
@pytest.mark.parametrize("seed", range(10))
def test_a_copy_answers_every_later_request_as_the_original(seed: int, expandable: bool) -> None:
    rng = random.Random(seed)
    a = CachingAllocator(expandable)
    _history(rng, a, rng.randint(0, 200))  # what stays live here is never freed (a replay's prefix)
    b = copy_state(a)
    assert [getattr(b, c) for c in COUNTERS] == [getattr(a, c) for c in COUNTERS]
    assert b.layout({}) == a.layout({})
    mine: list[tuple[_Block, _Block]] = []
    for _ in range(400):  # the same future on both, block by block
        if mine and rng.random() < 0.45:
            x, y = mine.pop(rng.randrange(len(mine)))
            a.free(x)
            b.free(y)
        else:
            n = _request(rng)
            x, y = a.malloc(n), b.malloc(n)
            assert x.size == y.size
            mine.append((x, y))
        assert [getattr(b, c) for c in COUNTERS] == [getattr(a, c) for c in COUNTERS]
    roles = {x: i for i, (x, _) in enumerate(mine)}
    assert b.layout({y: i for i, (_, y) in enumerate(mine)}) == a.layout(roles)


def test_a_copy_shares_no_block_with_the_original() -> None:
    rng = random.Random(3)
    for expandable in (False, True):
        a = CachingAllocator(expandable)
        _history(rng, a, 100)
        b = copy_state(a)
        ours = {id(x) for x in a._at.values()} | {id(a._tail)}
        theirs = {id(x) for x in b._at.values()} | {id(b._tail)}
        assert ours.isdisjoint(theirs - {id(None)})


@pytest.mark.parametrize("seed", range(4))
def test_replays_from_the_cached_prefix_give_the_full_replays_peaks(seed: int) -> None:
    rng = random.Random(40 + seed)
    replay_module.PREFIX.clear()
    for _ in range(25):
        r = _record(rng)
        if rng.random() < 0.3:  # an FSDP wrap before the step (fsdp_init), units of a few tensors
            units = tuple(_sizes(rng, 4) for _ in range(rng.randint(1, 3)))
            r = replace(r, init_units=units, init_shards=tuple(max(sum(u) // 4, 1) for u in units),
                        init_sync=rng.random() < 0.5, init_offload=rng.random() < 0.3)
        for shape in range(3):  # shapes of one configuration: the same prefix, other per-layer sizes
            s: Replay = replace(r, saved=_sizes(rng, 6), layers=rng.randint(1, 5)) if shape else r
            for expandable in (False, True):
                assert replay_module.replay(s, expandable) == ref.replay(s, expandable), (s, expandable)
    assert len(replay_module.PREFIX) >= 25  # one prefix per record and segment kind, shared by its shapes
