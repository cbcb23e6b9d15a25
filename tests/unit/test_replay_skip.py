# The replay, which stops when a step starts from the state the previous step started from, against the full
# replay of every step (tests/unit/_replay_ref.py over the reference allocator): the same peaks on random step
# records (sizes around the allocator's thresholds, checkpointing, FSDP's stream pools, DDP buckets,
# accumulation, expandable segments) and on the engine's own records; and the stop does happen.
from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from sizing import estimate
from sizing.memory import allocator as allocator_module
from sizing.memory import replay as replay_module
from sizing.memory.replay import Replay
from sizing.step import step_memory

from . import _replay_ref as ref
from .conftest import TINY_LLAMA

MiB = 2**20


def _size(rng: random.Random) -> int:
    return rng.choice([rng.randint(1, 4096), rng.randint(MiB - 2048, MiB + 2048), rng.randint(1, 12 * MiB),
                       rng.randint(10 * MiB - 4096, 10 * MiB + 4096), rng.randint(1, 300) * MiB,
                       rng.choice([3 * MiB, 8 * MiB, 64 * MiB])])  # repeated sizes: cached blocks get reused


def _sizes(rng: random.Random, most: int) -> tuple[int, ...]:
    return tuple(_size(rng) for _ in range(rng.randint(0, most)))


def _events(rng: random.Random) -> tuple[int, ...]:
    sizes = _sizes(rng, 4)  # one layer's backward transients, freed in any order
    return (*sizes, *(~i for i in rng.sample(range(len(sizes)), len(sizes))))


def _record(rng: random.Random) -> Replay:
    checkpoint = rng.random() < 0.5
    fsdp = rng.random() < 0.25
    return Replay(
        static=_sizes(rng, 12), layers=rng.randint(1, 6), saved=_sizes(rng, 6),
        layer_constant=rng.choice([0, _size(rng)]), checkpoint=_size(rng) if checkpoint else 0,
        forward_transient=rng.choice([0, _size(rng)]), backward_transient=rng.choice([0, _size(rng)]),
        backward_events=_events(rng),
        gathered_unit=_size(rng) if fsdp else 0, head_saved=_sizes(rng, 2), loss_forward=rng.choice([0, _size(rng)]),
        loss_backward=_sizes(rng, 2), head_grads=_sizes(rng, 3), layer_grads=_sizes(rng, 4),
        comm_buffer=rng.choice([0, _size(rng)]), comm_static=not fsdp and rng.random() < 0.5,
        states_per_grad=rng.choice([0.0, 1.0, 2.0, 0.5]), temp_per_grad=rng.choice([0.0, 1.0]),
        accumulating=rng.random() < 0.5)


@pytest.fixture
def layouts(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Every layout the replay compares, to count the steps it skipped."""
    seen: list[Any] = []
    real = allocator_module.CachingAllocator.layout

    def spy(self: allocator_module.CachingAllocator, roles: dict[Any, int]) -> Any:
        out = real(self, roles)
        seen.append((id(self), out))
        return out

    monkeypatch.setattr(allocator_module.CachingAllocator, "layout", spy)
    yield seen


@pytest.mark.parametrize("seed", range(6))
def test_random_records_give_the_full_replays_peaks(seed: int, layouts: list[Any]) -> None:
    rng = random.Random(seed)
    skipped = 0
    for _ in range(60):
        r = _record(rng)
        for expandable in (False, True):
            layouts.clear()
            assert replay_module.replay(r, expandable) == ref.replay(r, expandable), (r, expandable)
            skipped += len(layouts) > len({pool for pool, _ in layouts})  # a second comparison: counters matched
    assert skipped > 10  # the stop is exercised, not only the full path


RUNS = [
    {"model": "meta-llama/Llama-3.1-8B", "method": "qlora", "max_seq_length": 4096, "gradient_checkpointing": True},
    {"model": "meta-llama/Llama-3.1-8B", "method": "qlora", "max_seq_length": 4096, "gradient_checkpointing": True,
     "gradient_accumulation_steps": 4},
    {"model": "Qwen/Qwen2.5-7B", "framework": "trl", "method": "qlora", "max_seq_length": 2048,
     "per_device_train_batch_size": 2},
    {"model_config": TINY_LLAMA, "method": "full", "max_seq_length": 512, "per_device_train_batch_size": 4},
    {"model_config": TINY_LLAMA, "method": "lora", "max_seq_length": 1000, "attn_implementation": "eager",
     "packing": False, "gradient_accumulation_steps": 4},
    {"model": "meta-llama/Llama-3.2-1B", "method": "full", "num_gpus": 4, "parallelism": "fsdp",
     "max_seq_length": 2048},
    {"model": "meta-llama/Llama-3.2-1B", "method": "lora", "num_gpus": 2, "parallelism": "ddp"},
]


@pytest.mark.parametrize("expandable", [False, True])
@pytest.mark.parametrize("run", RUNS)
def test_engine_records_give_the_full_replays_peaks(run: dict[str, object], expandable: bool) -> None:
    est = estimate(run)
    tensors = step_memory(est.config, est.arch, None).tensors
    assert replay_module.replay(tensors, expandable) == ref.replay(tensors, expandable)


SIZES = [3 * MiB, 8 * MiB, 30 * MiB, 64 * MiB, 200 * 1024]  # few sizes: different histories meet in one state


def _history(rng: random.Random, expandable: bool) -> tuple[allocator_module.CachingAllocator, list[Any]]:
    a = allocator_module.CachingAllocator(expandable)
    live: list[Any] = []
    for _ in range(rng.randint(2, 9)):
        if live and rng.random() < 0.4:
            a.free(live.pop(rng.randrange(len(live))))
        else:
            live.append(a.malloc(rng.choice(SIZES)))
    return a, live


def _future(a: allocator_module.CachingAllocator, live: list[Any], ops: list[tuple[int, int]]) -> list[tuple[int, ...]]:
    live = list(live)
    out = []
    for kind, x in ops:
        if kind and live:
            a.free(live.pop(x % len(live)))
        else:
            live.append(a.malloc(SIZES[x % len(SIZES)]))
        out.append(a.counters())  # the peaks only take maxima of these (reserved: at each growth)
    return out


@pytest.mark.parametrize("expandable", [False, True])
def test_states_with_one_layout_have_one_future(expandable: bool) -> None:
    """Allocators that reached equal counters and layouts by different histories answer every later sequence
    of operations alike (their live blocks numbered in allocation order); and the layout tells apart states
    whose futures differ (what skipping on counters alone would get wrong)."""
    rng = random.Random(7)
    by_state: dict[Any, list[tuple[list[Any], int]]] = {}
    met = told_apart = 0
    for n in range(4000):
        seed = rng.random()
        a, live = _history(random.Random(seed), expandable)
        key = (a.counters(), a.layout({b: i for i, b in enumerate(live)}))
        by_state.setdefault(key, []).append(([seed], n))
    futures = [[(rng.random() < 0.45, rng.randrange(64)) for _ in range(12)] for _ in range(8)]

    def answers(seed: float) -> list[list[tuple[int, ...]]]:
        out = []
        for ops in futures:
            a, live = _history(random.Random(seed), expandable)
            out.append(_future(a, live, ops))
        return out

    by_counters: dict[Any, set[Any]] = {}
    for key, group in by_state.items():
        first = answers(group[0][0][0])
        for (seed,), _ in group[1:]:
            met += 1
            assert answers(seed) == first
        by_counters.setdefault(key[0], set()).add(tuple(map(tuple, first)))
    told_apart = sum(len(v) > 1 for v in by_counters.values())
    assert met > 100
    assert told_apart > 0


def test_layout_by_hand() -> None:
    """The encoding on states derived by hand from the allocator's rules (a 3 MiB request takes a 20 MiB segment
    and leaves a 17 MiB free tail; a 30 MiB one takes a 30 MiB segment, whole)."""
    a = allocator_module.CachingAllocator()
    small = a.malloc(3 * MiB)
    assert a.layout({}) == ((3 * MiB, -1, 17 * MiB, -2),)
    assert a.layout({small: 0}) == ((3 * MiB, 0, 17 * MiB, -2),)
    whole = a.malloc(30 * MiB)  # allocated, held by nobody: never touched again, so left out
    assert a.layout({}) == ((3 * MiB, -1, 17 * MiB, -2),)
    a.free(whole)  # a cached whole segment; segments come in best-fit order (sizes ascending): after the tail's
    assert a.layout({}) == ((3 * MiB, -1, 17 * MiB, -2), (30 * MiB, -2))
    a.free(small)  # merged back into one free 20 MiB segment
    assert a.layout({}) == ((20 * MiB, -2), (30 * MiB, -2))
    b = a.malloc(30 * MiB)
    c = a.malloc(30 * MiB)
    a.free(b)
    a.free(c)  # two cached 30 MiB segments: the second place in their size's list is -3
    assert a.layout({}) == ((20 * MiB, -2), (30 * MiB, -2), (30 * MiB, -3))
    assert a.counters() == (0, 80 * MiB, 80 * MiB, 0, 0)
