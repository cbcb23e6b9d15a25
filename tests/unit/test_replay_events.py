# A layer's backward events as one run_free (replay._event_run: every malloc, then the frees in the order
# allocated) against the op-by-op loop, by brute force: the same peaks on random records whose gradients are large
# (so the whole-layer run, replay._layer_runs, does not apply), on an ample card (also against the reference
# replay, tests/unit/_replay_ref.py) and on cards that cut the step (memory/wall.py).
from __future__ import annotations

import random
from dataclasses import replace

import pytest

from sizing.memory import replay as replay_module

from . import _replay_ref as ref
from .test_replay_skip import MiB, _record, _sizes


def _in_order(rng: random.Random) -> tuple[int, ...]:
    sizes = _sizes(rng, 5)
    return (*sizes, *(~i for i in range(len(sizes))))


@pytest.mark.parametrize("seed", range(4))
def test_events_as_one_run_give_the_op_by_op_peaks(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(900 + seed)
    fast = replay_module._event_run
    runs = 0
    for _ in range(40):
        r = replace(_record(rng), backward_events=_in_order(rng), layer_grads=(rng.randint(2, 80) * MiB,))
        for expandable in (False, True):
            ample = replay_module._replay(r, lambda e=expandable: replay_module.CachingAllocator(e))
            assert ample == ref.replay(r, expandable)
            caps = [ample[1], ample[1] // 2, ample[1] * 3 // 4, rng.randint(1, max(ample[1], 1))]
            got = [replay_module.replay(r, expandable, cap) for cap in caps]
            monkeypatch.setattr(replay_module, "_event_run", lambda events: None)
            assert replay_module._replay(r, lambda e=expandable: replay_module.CachingAllocator(e)) == ample
            assert [replay_module.replay(r, expandable, cap) for cap in caps] == got
            monkeypatch.setattr(replay_module, "_event_run", fast)
            runs += fast([(e > 0, e if e > 0 else ~e) for e in r.backward_events]) is not None
    assert runs > 40  # the shortcut is taken


@pytest.mark.parametrize("seed", range(4))
def test_a_layer_that_makes_no_large_gradient_as_one_run_gives_the_op_by_op_peaks(
        seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # Accumulated large gradients (full fine-tuning): after step 0 a layer's backward makes none, so its
    # transients are one run (replay._layer_runs[False]); held to the op-by-op loop and to the reference replay.
    rng = random.Random(950 + seed)
    fast = replay_module._layer_runs
    runs = 0
    for _ in range(40):
        r = replace(_record(rng), accumulating=True, layer_grads=(rng.randint(2, 80) * MiB, *_sizes(rng, 2)))
        for expandable in (False, True):
            ample = replay_module._replay(r, lambda e=expandable: replay_module.CachingAllocator(e))
            assert ample == ref.replay(r, expandable)
            caps = [ample[1], ample[1] // 2, ample[1] * 3 // 4, rng.randint(1, max(ample[1], 1))]
            got = [replay_module.replay(r, expandable, cap) for cap in caps]
            monkeypatch.setattr(replay_module, "_layer_runs", lambda *args: {})
            monkeypatch.setattr(replay_module, "_event_run", lambda events: None)
            assert replay_module._replay(r, lambda e=expandable: replay_module.CachingAllocator(e)) == ample
            assert [replay_module.replay(r, expandable, cap) for cap in caps] == got
            monkeypatch.undo()
            runs += False in fast(r, (), [(e > 0, e if e > 0 else ~e) for e in r.backward_events])
    assert runs > 40  # the shortcut is taken
