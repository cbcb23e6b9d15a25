# The FSDP wrap's decoder units added at once once the pool within their reach repeats (sizing/memory/repeat.py),
# against the wrap run unit by unit: the same pool to the address (pool_state.exact_state, and the live blocks'
# layout) on random wraps (unit sizes around the allocator's thresholds, shards large and small, with and without
# the broadcast), the same replayed peaks as the reference replay (tests/unit/_replay_ref.py), and the jump does
# happen on the engine's own wraps.
from __future__ import annotations

import random
from typing import Any

import pytest

from sizing.estimate import estimate
from sizing.memory import fsdp_init
from sizing.memory.allocator import CachingAllocator
from sizing.memory.pool_state import exact_state, layout
from sizing.memory.replay import Replay, replay
from sizing.step import step_memory

from . import _replay_ref as ref

MiB = 2**20


class _OneByOne(CachingAllocator):
    """The same allocator, which fsdp1_init runs unit by unit (the jump is for the plain class only)."""


def _size(rng: random.Random) -> int:
    return rng.choice([rng.randint(1, 4096), rng.randint(MiB - 2048, MiB + 2048), rng.randint(1, 12 * MiB),
                       rng.randint(10 * MiB - 4096, 10 * MiB + 4096), rng.randint(1, 600) * MiB,
                       rng.choice([2 * MiB, 16 * MiB, 128 * MiB, 470 * MiB])])


def _wrap(rng: random.Random) -> tuple[tuple[tuple[int, ...], ...], tuple[int, ...], bool]:
    layer = tuple(_size(rng) for _ in range(rng.randint(1, 8)))
    root = tuple(_size(rng) for _ in range(rng.randint(1, 3)))
    shard = rng.choice([_size(rng), -(-sum(layer) // rng.choice([2, 3, 4, 8, 16, 64, 300]))])
    layers = rng.randint(1, 45)
    return (layer,) * layers + (root,), (shard,) * layers + (-(-sum(root) // 4),), rng.random() < 0.7


@pytest.mark.parametrize("seed", range(12))
def test_jumped_wrap_is_the_unit_by_unit_pool(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    jumped = _spy(monkeypatch)
    rng = random.Random(seed)
    for _ in range(25):
        units, shards, sync = _wrap(rng)
        pools = CachingAllocator(False), _OneByOne(False)
        waiting = [fsdp_init.fsdp1_init(a, units, shards, sync) for a in pools]
        assert exact_state(pools[0]) == exact_state(pools[1])
        roles = [{b: i for i, b in enumerate(w)} for w in waiting]
        assert layout(pools[0], roles[0]) == layout(pools[1], roles[1])
        later = [_size(rng) for _ in range(6)]
        for a, w in zip(pools, waiting, strict=True):  # what follows sees the same pool
            for b in w:
                a.free(b)
            for n in later:
                a.malloc(n)
        assert exact_state(pools[0]) == exact_state(pools[1])
    assert sum(jumped) >= 3  # the jump is exercised, not only the unit-by-unit path


@pytest.mark.parametrize("seed", range(6))
def test_replay_after_jumped_wrap_is_the_reference(seed: int) -> None:
    rng = random.Random(100 + seed)
    for _ in range(6):
        units, shards, sync = _wrap(rng)
        r = Replay(static=shards, layers=len(units), saved=(_size(rng), _size(rng)), layer_constant=0,
                   checkpoint=_size(rng), forward_transient=0, backward_transient=0, backward_events=(_size(rng), ~0),
                   gathered_unit=sum(units[0]), head_saved=(_size(rng),), loss_forward=0, loss_backward=(_size(rng),),
                   head_grads=(), layer_grads=(_size(rng),), comm_buffer=_size(rng), comm_static=False,
                   states_per_grad=2.0, temp_per_grad=0.0, accumulating=False, init_units=units, init_shards=shards,
                   init_sync=sync)
        assert replay(r, False) == ref.replay(r, False)


RUNS = [
    {"model": "meta-llama/Llama-3.1-70B", "method": "lora", "num_gpus": 8, "parallelism": "fsdp",
     "max_seq_length": 2048, "gradient_checkpointing": True},
    {"model": "meta-llama/Llama-3.1-8B", "method": "qlora", "num_gpus": 2, "parallelism": "fsdp",
     "max_seq_length": 1024, "gradient_checkpointing": True},
    {"model": "meta-llama/Llama-3.2-1B", "method": "full", "num_gpus": 4, "parallelism": "fsdp",
     "max_seq_length": 2048},
]


@pytest.mark.parametrize("run", RUNS)
def test_engine_wraps_jump(run: dict[str, object], monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine's own wraps: units jumped, the pool as unit by unit, the replay as the reference's."""
    jumped = _spy(monkeypatch)
    est = estimate(run)
    r = step_memory(est.config, est.arch, None).tensors
    assert r.init_units
    pools = CachingAllocator(False), _OneByOne(False)
    for a in pools:
        fsdp_init.fsdp1_init(a, r.init_units, r.init_shards, r.init_sync, r.init_offload)
    assert exact_state(pools[0]) == exact_state(pools[1])
    assert True in jumped
    assert replay(r, False) == ref.replay(r, False)


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Each jump fsdp1_init makes: whether it was made (False: the units then ran one by one)."""
    jumped: list[bool] = []
    real = fsdp_init.jump

    def counted(*args: Any) -> bool:
        jumped.append(real(*args))
        return jumped[-1]

    monkeypatch.setattr(fsdp_init, "jump", counted)
    return jumped
