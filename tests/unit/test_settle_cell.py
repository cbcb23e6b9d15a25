# solve.Sizer._settle answers the probes inside the guess's grid cell from the cell's boundary: exact where the
# reserved peak does not decrease within a cell (one replay, one overhead ratio). Checked here by brute force
# (every value of whole cells), and the solver's answers held to plain _settle's gallop (the oracle).
from __future__ import annotations

import random
from typing import Any

import pytest

from sizing import grid, solve, step
from sizing.catalog import gpus
from sizing.config import parse_config
from sizing.errors import SizingError
from sizing.memory.allocator import usable_bytes

from .conftest import TINY_LLAMA

SEQ, BATCH = "max_seq_length", "per_device_train_batch_size"


def _configs(n: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        method = rng.choice(["lora", "qlora", "full", "lora8"])
        cfg: dict[str, Any] = {
            "model_config": dict(TINY_LLAMA), "method": method,
            "framework": rng.choice(["transformers", "trl", "custom", "torchtune", "litgpt"]),
            "packing": rng.random() < 0.5, "gradient_checkpointing": rng.random() < 0.5,
            "attn_implementation": rng.choice(["sdpa", "eager", "flash_attention_2"]),
            "optim": rng.choice(["adamw_torch", "paged_adamw_8bit", "sgd"]),
            "expandable_segments": rng.random() < 0.3, "max_seq_length": rng.choice([256, 1000, 2048]),
            "per_device_train_batch_size": rng.choice([1, 4]),
        }
        if method != "full":
            cfg.update(r=rng.choice([8, 64]), target_modules=rng.choice(["all-linear", ["q_proj", "v_proj"]]))
            if rng.random() < 0.2:
                cfg.update(peft_type="prompt_tuning", num_virtual_tokens=rng.choice([7, 20]))
        if rng.random() < 0.3:
            cfg.update(num_gpus=rng.choice([2, 4]), parallelism=rng.choice(["ddp", "fsdp", "zero3"]))
        out.append(cfg)
    return out


def _parsed(seed: int, n: int) -> list[Any]:
    cfgs = []
    for raw in _configs(n, seed):
        try:
            cfgs.append(parse_config(raw))
        except SizingError:
            continue
    return cfgs


def test_grid_cell_is_the_set_of_values_with_one_grid_shape() -> None:
    cfgs = [*_parsed(0, 12), parse_config({"model_config": dict(TINY_LLAMA), "method": "lora",
                                           "peft_type": "prompt_tuning", "num_virtual_tokens": 13})]
    rng = random.Random(1)
    for cfg in cfgs:
        for name in (SEQ, BATCH):
            for value in [1, 2, 8, 9, 15, 16, 17, *(rng.randint(1, 200_000) for _ in range(20))]:
                lo, hi = grid.grid_cell(cfg, name, value)
                shape = grid.replay_shape(step.with_fields(cfg, **{name: value}))
                assert lo <= value <= hi
                for v in {lo, hi, (lo + hi) // 2}:
                    assert grid.replay_shape(step.with_fields(cfg, **{name: v})) == shape
                for v in (lo - 1, hi + 1):
                    if v >= 1:
                        assert grid.replay_shape(step.with_fields(cfg, **{name: v})) != shape


def test_grid_cell_by_brute_force() -> None:
    """The cell of every value up to 2^17 is the run of consecutive values with its grid shape (grid.grid itself)."""
    cfg = parse_config({"model_config": dict(TINY_LLAMA), "method": "lora"})
    start, last = 1, grid.grid(1)
    for v in range(1, 1 << 17):
        g = grid.grid(v)
        if g != last:
            start, last = v, g
        assert grid.grid_cell(cfg, BATCH, v) == (start, g), v
    assert grid.grid_cell(cfg, BATCH, 0) == (1, 0)  # as the bisection it replaces answered (never asked)


def test_reserved_peak_never_decreases_within_a_cell() -> None:
    """Every sequence length of every cell up to 1024, and every micro-batch up to 40, on two GPU generations
    (scripts/settle_cells.py runs the same check on the examples' real models, cells of the fit table)."""
    checked = 0
    for cfg in _parsed(10, 8):
        sizer = solve.Sizer(cfg)
        for gpu in (gpus()["a100-sxm-80gb"], gpus()["h100-sxm-80gb"]):
            for name, top in ((SEQ, 1024), (BATCH, 40)):
                prev: tuple[tuple[int, int], int] | None = None
                for v in range(1, top + 1):
                    cell = grid.grid_cell(cfg, name, v)
                    got = sizer.required(gpu, **{name: v})
                    if prev is not None and prev[0] == cell:
                        assert got >= prev[1], (cfg, gpu.id, name, v)
                        checked += 1
                    prev = cell, got
    assert checked > 8_000


class _Plain(solve.Sizer):
    """The solver with the previous settle: the gallop and bisection on fits() at every probe."""

    def _settle(self, gpu: Any, name: str, guess: int, high: int) -> int:
        return solve._settle(lambda v: v == 0 or self.fits(gpu, **{name: v}), guess, high)


@pytest.mark.parametrize("seed", range(2))
def test_the_cell_settle_equals_the_plain_gallop(seed: int) -> None:
    rng = random.Random(seed)
    cards = list(gpus().values())
    compared = 0
    for cfg in _parsed(seed + 20, 6):
        fast, plain = solve.Sizer(cfg), _Plain(cfg)
        for gpu in rng.sample(cards, 4):
            assert fast.max_seq_length(gpu) == plain.max_seq_length(gpu), (cfg, gpu.id)
            assert fast.max_micro_batch(gpu) == plain.max_micro_batch(gpu), (cfg, gpu.id)
            for guess in (1, 3, 100, 5000):  # any guess, a cell far from the answer included
                for name, high in ((SEQ, 1 << 16), (BATCH, 4096)):
                    assert fast._settle(gpu, name, guess, high) == plain._settle(gpu, name, guess, high)
                    compared += 1
    assert compared > 50


def test_boundary_is_the_largest_value_within_the_limit() -> None:
    rng = random.Random(5)
    for _ in range(300):
        lo = rng.randint(1, 50)
        hi = lo + rng.randint(0, 3000)
        steps = sorted(rng.randint(0, 10**6) for _ in range(hi - lo + 1))  # any non-decreasing staircase
        div = rng.choice([1, 1000, 2**17])  # flat runs of many values, as the 2 MiB rounding makes
        values = {lo + i: x // div for i, x in enumerate(steps)}
        limit = rng.randint(-1, max(values.values()) + 1)
        want = max((v for v, x in values.items() if x <= limit), default=lo - 1)
        for guess in (lo, hi, rng.randint(lo, hi), lo - 5, hi + 5):
            assert solve._boundary(values.__getitem__, limit, lo - 1, hi + 1, guess) == want


def test_usable_bytes_is_what_fits_compares() -> None:
    """The boundary is searched against usable_bytes, the bound fits() applies."""
    cfg = parse_config({"model_config": dict(TINY_LLAMA), "method": "qlora"})
    sizer, gpu = solve.Sizer(cfg), gpus()["l4-24gb"]
    assert sizer.fits(gpu) == (sizer.required(gpu) <= usable_bytes(gpu))


def test_step_reads_of_the_card_only_its_hopper_bit() -> None:
    """The caches (step._BASE/_STEPS, Sizer._mem) share one step between the cards of a generation: a cold
    _step on every catalog card (as the configuration's gpu too) equals the first card's of its generation."""
    for raw in ({"model_config": dict(TINY_LLAMA), "method": "qlora", "gradient_checkpointing": True},
                {"model_config": dict(TINY_LLAMA), "method": "full", "num_gpus": 2, "parallelism": "fsdp"}):
        cfg = parse_config(raw)
        arch = solve.Sizer(cfg).arch
        first: dict[bool, Any] = {}
        for gpu in gpus().values():
            step.clear_caches()
            got = step._step(step.with_fields(cfg, gpu=gpu.id), arch, gpu, "cuda")
            assert first.setdefault(gpu.sm >= (9, 0), got) == got, gpu.id
        assert len(first) == 2
