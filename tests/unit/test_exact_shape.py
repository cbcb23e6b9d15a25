# The estimate at the run's own shape: its reserved and required figures are the allocator replay of the step's
# tensors at that very shape (oracle: the full reference replay, tests/unit/_replay_ref.py, over the reference
# allocator), at and around the replay grid's cell boundaries where the grid's scaled overhead used to jump; and
# the fit table's longest sequence and largest micro-batch fit by that replay while one more does not.
from __future__ import annotations

import random
from typing import Any

import pytest

from sizing import step
from sizing.catalog import find_gpu, resolve_architecture
from sizing.config import RunConfig, parse_config
from sizing.errors import SizingError
from sizing.estimate import estimate
from sizing.memory.allocator import round_up, usable_bytes
from sizing.solve import Sizer, fit_table

from . import _replay_ref as ref
from .conftest import TINY_LLAMA


def _oracle(cfg: RunConfig, needed: bool) -> int:
    """round_up(allocated peak + what the reference replay of the step's tensors at cfg's shape reserves above its
    own allocated peak), at least any moment outside the step (the NF4 load): the definition of reserved_peak."""
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    gpu = find_gpu(cfg.gpu) if cfg.gpu else None
    mem = step._step(cfg, arch, gpu, "cuda")
    allocated, reserved, least = ref.replay(mem.tensors, cfg.expandable_segments)
    got = round_up(mem.peak.total + max((least if needed else reserved) - allocated, 0))
    outside = [round_up(o.needed if needed else o.reserved) for o in step.outside(mem, cfg.expandable_segments)]
    return max([got, *outside])


def _configs(n: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        method = rng.choice(["lora", "qlora", "full"])
        cfg: dict[str, Any] = {
            "model_config": dict(TINY_LLAMA), "method": method,
            "framework": rng.choice(["transformers", "trl", "custom", "litgpt"]),
            "packing": rng.random() < 0.5, "gradient_checkpointing": rng.random() < 0.5,
            "attn_implementation": rng.choice(["sdpa", "eager"]),
            "optim": rng.choice(["adamw_torch", "paged_adamw_8bit"]), "expandable_segments": rng.random() < 0.3}
        if method != "full":
            cfg.update(r=rng.choice([8, 64]), target_modules="all-linear")
        if rng.random() < 0.3:
            cfg.update(num_gpus=2, parallelism=rng.choice(["ddp", "fsdp"]))
        out.append(cfg)
    return out


# Shapes at and around the grid's cell ends (grid.grid: 256, 320 and 1024 end cells; 257, 321, 1025 start the
# next), off-grid micro-batches (9 and 11 replayed at 10 and 12 before) and a few others.
SHAPES = [(255, 1), (256, 1), (257, 1), (320, 3), (321, 3), (1023, 2), (1024, 2), (1025, 2), (700, 9), (700, 11)]


@pytest.mark.parametrize("seed", range(2))
def test_the_estimate_is_the_replay_at_its_own_shape(seed: int) -> None:
    checked = 0
    for raw in _configs(5, seed):
        for seq, batch in SHAPES:
            try:
                cfg = parse_config({**raw, "max_seq_length": seq, "per_device_train_batch_size": batch})
                est = estimate(cfg)
            except SizingError:
                continue
            assert est.detail["ample_reserved_bytes"] == _oracle(cfg, False), (raw, seq, batch)
            gpu = find_gpu("A100-SXM-80GB")
            assert Sizer(cfg).required(gpu) == _oracle(parse_config({**raw, "max_seq_length": seq,
                                                                     "per_device_train_batch_size": batch,
                                                                     "gpu": gpu.id}), True)
            checked += 1
    assert checked >= 30


def test_no_jump_at_the_cell_boundary_walk_found() -> None:
    """Full FSDP Llama-3.1-8B x4 (walk.md): seq 28672 ends a grid cell. The grid's scaled overhead printed
    92.1 -> 71.2 GB for one token more; the reference replays at both shapes differ by 0.04 %."""
    raw = {"model": "meta-llama/Llama-3.1-8B", "method": "full", "num_gpus": 4, "parallelism": "fsdp",
           "attn_implementation": "sdpa", "gradient_checkpointing": True, "per_device_train_batch_size": 1,
           "gpu": "A100-PCIe-80GB"}
    a, b = (parse_config({**raw, "max_seq_length": s}) for s in (28672, 28673))
    got = [Sizer(c).required(find_gpu(c.gpu or "")) for c in (a, b)]
    want = [_oracle(c, True) for c in (a, b)]
    assert got == want
    assert abs(want[1] - want[0]) / want[0] < 0.001


def _next_grid_point(x: int) -> int:
    """The replay grid's next point above x (4 steps per doubling: m * 2^k, m in 4..7; every integer up to 8),
    written out here from grid.py's rule rather than imported."""
    y = x + 1
    while y > 8 and (y >> (y.bit_length() - 3)) << (y.bit_length() - 3) != y:
        y += 1
    return y


def test_the_fit_tables_answers_fit_by_their_own_replay_and_one_more_does_not() -> None:
    """Own GPU: its answers fit by their own replay and one more does not. Other cards: their answers are grid
    points (or the run's own value) that fit by their own replay, and the next grid point does not."""
    cfg = parse_config({"model": "meta-llama/Llama-3.2-1B", "method": "lora", "r": 16,
                        "target_modules": "all-linear", "max_seq_length": 1000, "per_device_train_batch_size": 3,
                        "packing": True, "gradient_checkpointing": True, "gpu": "L4-24GB"})
    limit = resolve_architecture(cfg.model, cfg.model_config)[0].max_positions
    checked = 0
    table = fit_table(cfg)
    for row in [r for r in table if r["gpu"] == cfg.gpu] + table[::5]:
        gpu = find_gpu(row["gpu"])
        if not row["max_seq_length"]:
            continue
        run = parse_config({**_plain(cfg), "gpu": gpu.id})
        s, b = row["max_seq_length"], row["max_micro_batch"]
        own = gpu.id == cfg.gpu
        s_next, b_next = (s + 1, b + 1) if own else (_next_grid_point(s), _next_grid_point(b))
        assert _oracle(parse_config({**_plain(run), "max_seq_length": s}), True) <= usable_bytes(gpu)
        if s != limit and s_next <= limit:
            assert _oracle(parse_config({**_plain(run), "max_seq_length": s_next}), True) > usable_bytes(gpu)
        assert _oracle(parse_config({**_plain(run), "per_device_train_batch_size": b}), True) <= usable_bytes(gpu)
        assert _oracle(parse_config({**_plain(run), "per_device_train_batch_size": b_next}), True) > usable_bytes(gpu)
        assert row["fits"] == (_oracle(run, True) <= usable_bytes(gpu))
        checked += 1
    assert checked >= 4


def _plain(cfg: RunConfig) -> dict[str, Any]:
    from sizing.config import config_to_dict

    return config_to_dict(cfg)


def test_crossing_answers_a_value_that_fits_whose_next_does_not() -> None:
    """search._crossing on random staircases, monotone or with drops (the allocator's cliffs): its answer fits and
    the next value does not (oracle: the values themselves); on a monotone one it is the largest that fits."""
    from sizing.search import _crossing

    rng = random.Random(3)
    for _ in range(400):
        high = rng.randint(1, 3000)
        steps = [rng.choice([0, 0, 0, 1, 2, 50]) * rng.randint(1, 1000) for _ in range(high)]
        monotone = rng.random() < 0.5
        if not monotone:  # a few cliffs down
            for i in rng.sample(range(high), min(3, high)):
                steps[i] = -rng.randint(1, 20_000)
        values = [1000]
        for s in steps[1:]:
            values.append(values[-1] + s)
        limit = rng.randint(min(values) - 10, max(values) + 10)
        slope = rng.choice([0.0, 1.0, 300.0, 1e6])  # a wrong slope only costs probes
        got = _crossing(lambda v, vs=values: vs[v - 1], limit, rng.randint(1, high), high, slope)
        assert 0 <= got <= high
        assert got == 0 or values[got - 1] <= limit
        assert got == high or values[got] > limit
        if monotone:
            assert got == max((v for v in range(1, high + 1) if values[v - 1] <= limit), default=0)
