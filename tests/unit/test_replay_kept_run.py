# kept_run.run_keep (a run of mallocs freed together but for the kept blocks, without a block per transient) against
# the reference allocator doing each malloc and free (tests/unit/_allocator_ref.py): the same counters and peaks
# after it and after a random future of mallocs and frees, on random histories; and the replay that uses it for a
# layer's first backward with large gradients against the full replay (tests/unit/_replay_ref.py).
from __future__ import annotations

import random
from typing import Any

import pytest

from sizing.memory import replay as replay_module
from sizing.memory.allocator import CachingAllocator, plan
from sizing.memory.kept_run import run_keep
from sizing.memory.replay import Replay

from . import _replay_ref
from ._allocator_ref import CachingAllocator as RefAllocator

MiB = 2**20
SIZES = [200 * 1024, MiB - 512, MiB + 512, 3 * MiB, 8 * MiB, 10 * MiB, 30 * MiB, 64 * MiB]


def _state(a: Any) -> tuple[int, ...]:
    return (a.allocated, a.reserved, a.peak_allocated, a.peak_reserved, a.peak_needed, a.cached_whole,
            a.small_live, a.small_peak)


def _pool(a: Any, live: list[Any]) -> tuple[object, ...]:
    """The large pool's free block sizes, and each live block with its neighbours in its segment (a free one's
    size; -1: live, whatever its size: a live block is never merged with)."""
    free = sorted(a._keys) if isinstance(a, CachingAllocator) else [size for size, bucket in a._bucket[False].items()
                                                                     for _ in bucket]

    def side(b: Any) -> int | None:
        return None if b is None else b.size if b.free else -1

    return (sorted(size for size, *_ in free) if free and isinstance(free[0], tuple) else sorted(free),
            [(b.size, side(b.prev), side(b.next)) for b in live])


def _size(rng: random.Random) -> int:
    return rng.choice([rng.choice(SIZES), rng.randint(1, 12 * MiB), rng.randint(1, 80) * MiB])


def _twins(rng: random.Random, expandable: bool) -> tuple[CachingAllocator, RefAllocator, list[Any], list[Any]]:
    """The allocator and the reference one after the same random history, and their live blocks (alike)."""
    a, ref = CachingAllocator(expandable), RefAllocator(expandable)
    live: list[Any] = []
    live_ref: list[Any] = []
    for _ in range(rng.randint(0, 14)):
        _same_op(rng, a, ref, live, live_ref)
    return a, ref, live, live_ref


def _same_op(rng: random.Random, a: CachingAllocator, ref: RefAllocator, live: list[Any], live_ref: list[Any]) -> None:
    """One random free (of the same live block) or malloc (of the same size) on both allocators."""
    if live and rng.random() < 0.45:
        i = rng.randrange(len(live))
        a.free(live.pop(i))
        ref.free(live_ref.pop(i))
    else:
        size = _size(rng)
        live.append(a.malloc(size))
        live_ref.append(ref.malloc(size))


def _requests(rng: random.Random, repeated: bool) -> list[int]:
    """A few random sizes; repeated: runs of one size (the optimizer's states, two per gradient, layer after layer),
    which split one free block after another (kept_run's held tail)."""
    if not repeated:
        return [_size(rng) for _ in range(rng.randint(1, 8))]
    kinds = [_size(rng) for _ in range(rng.randint(1, 3))]
    return [size for _ in range(rng.randint(1, 10)) for size in [rng.choice(kinds)] * rng.randint(1, 6)]


@pytest.mark.parametrize("repeated", [False, True])
@pytest.mark.parametrize("forever", [False, True])
@pytest.mark.parametrize("expandable", [False, True])
def test_run_keep_is_the_mallocs_and_frees(expandable: bool, forever: bool, repeated: bool) -> None:
    """forever: every request kept and never freed (the optimizer's states): the same pool up to where its live
    ranges are cut, so the future frees only the blocks from before."""
    rng = random.Random(11 + expandable + 2 * forever + 4 * repeated)
    ran = refused = grew = 0
    for _ in range(1500):
        a, ref, live, live_ref = _twins(rng, expandable)
        sizes = _requests(rng, repeated)
        keep = [forever or rng.random() < 0.4 for _ in sizes]
        # run_keep takes plan()'s form: one request per size here (a small one kept or not as a whole)
        requests = tuple(x for n in sizes for x in plan((n,)))
        before = _state(a), a.layout({b: i for i, b in enumerate(live)})
        got = run_keep(a, requests, tuple(keep), forever)
        if got is None:  # an expandable pool would have grown: nothing changed
            refused += 1
            assert (_state(a), a.layout({b: i for i, b in enumerate(live)})) == before
            continue
        ran += 1
        grew += a.reserved > before[0][1]
        made = [ref.malloc(n) for n in sizes]
        for blk, k in zip(made, keep, strict=True):
            if not k:
                ref.free(blk)
        kept_ref = [blk for blk, k, n in zip(made, keep, requests, strict=True) if k and n > 0]
        if forever:
            assert got == []
        else:
            assert [b.size for b in got] == [b.size for b in kept_ref]
            live, live_ref = live + got, live_ref + kept_ref
        assert _state(a) == _state(ref)
        assert _pool(a, live) == _pool(ref, live_ref)
        for _ in range(12):  # the same future: the pools are alike, not only their counters
            _same_op(rng, a, ref, live, live_ref)
            assert _state(a) == _state(ref)
            assert _pool(a, live) == _pool(ref, live_ref)
    assert ran > 200
    # non-expandable: new segments too, never refused; expandable: a pool that would grow is refused
    assert (refused > 100) if expandable else (grew > 100 and not refused)


def _record(rng: random.Random) -> Replay:
    """A step record whose layers' gradients include large ones (the replay's run_keep case)."""
    sizes = [_size(rng) for _ in range(rng.randint(0, 5))]
    events = (*sizes, *(~i for i in rng.sample(range(len(sizes)), len(sizes))))
    grads = tuple(rng.choice([rng.randint(1, 4096), rng.randint(MiB, 3 * MiB), rng.randint(1, 40) * MiB])
                  for _ in range(rng.randint(1, 6)))
    checkpoint = rng.random() < 0.6
    return Replay(
        static=tuple(_size(rng) for _ in range(rng.randint(0, 8))), layers=rng.randint(1, 8),
        saved=tuple(_size(rng) for _ in range(rng.randint(0, 6))), layer_constant=rng.choice([0, _size(rng)]),
        checkpoint=_size(rng) if checkpoint else 0, forward_transient=rng.choice([0, _size(rng)]),
        backward_transient=rng.choice([0, _size(rng)]), backward_events=events, gathered_unit=0,
        head_saved=(_size(rng),), loss_forward=rng.choice([0, _size(rng)]), loss_backward=(_size(rng),),
        head_grads=(_size(rng),), layer_grads=grads, comm_buffer=rng.choice([0, _size(rng)]), comm_static=False,
        states_per_grad=rng.choice([0.0, 1.0, 2.0]), temp_per_grad=rng.choice([0.0, 1.0]),
        accumulating=rng.random() < 0.5)


@pytest.mark.parametrize("seed", range(3))
def test_replay_with_kept_runs_gives_the_full_replays_peaks(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(100 + seed)
    used: list[bool] = []

    def spy(a: CachingAllocator, requests: tuple[int, ...], kept: tuple[bool, ...], forever: bool = False) -> Any:
        got = run_keep(a, requests, kept, forever)
        used.append(got is not None)
        return got

    monkeypatch.setattr(replay_module, "run_keep", spy)
    for _ in range(80):
        r = _record(rng)
        for expandable in (False, True):
            assert replay_module.replay(r, expandable) == _replay_ref.replay(r, expandable), (r, expandable)
    assert sum(used) > 100  # the kept runs are exercised, not only the op-by-op path
