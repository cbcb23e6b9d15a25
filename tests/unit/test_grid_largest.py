# The fit table's other cards: the largest micro-batch and longest sequence as the largest grid point that fits by
# its exact replay (solve.Sizer.grid_largest, a walk over grid points from the proxy's guess), and the fewest GPUs
# (a search from a proxy whose overhead ratio is the sharded replay's). Both held to brute force: every grid point,
# every GPU count.
from __future__ import annotations

import json
from dataclasses import replace
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from sizing import grid, solve
from sizing.catalog import gpus
from sizing.config import parse_config
from sizing.memory.allocator import usable_bytes

from .conftest import TINY_LLAMA

SEQ, BATCH = "max_seq_length", "per_device_train_batch_size"
ROOT = Path(__file__).resolve().parents[2]
CARDS = ("rtx-4060-ti-16gb", "l4-24gb", "a100-sxm-80gb", "h100-sxm-80gb")


def _grid_points(cfg: Any, name: str, high: int) -> list[int]:
    """Every grid point of `name` in [1, high], ascending (brute force: every value whose grid floor is itself)."""
    points, v = [], 1
    while v <= high:
        points.append(v)
        v = grid.grid_next(cfg, name, v)
    return points


def test_grid_next_and_floor_walk_the_grid() -> None:
    for raw in ({"model_config": dict(TINY_LLAMA), "method": "lora"},
                {"model_config": dict(TINY_LLAMA), "method": "lora", "peft_type": "prompt_tuning",
                 "num_virtual_tokens": 13}):
        cfg = parse_config(raw)
        for name in (SEQ, BATCH):
            points = _grid_points(cfg, name, 70_000)
            if name == BATCH:  # a sequence's grid is that of its length with the virtual tokens
                assert points[:12] == [*range(1, 9), 10, 12, 14, 16]  # 4 steps per doubling above 8
            for a, b in pairwise(points):
                assert grid.grid_floor(cfg, name, b - 1) == a  # nothing in between is a grid point
                assert grid.grid_floor(cfg, name, b) == b


CONFIGS: list[dict[str, Any]] = [
    {"model_config": dict(TINY_LLAMA), "method": "lora", "max_seq_length": 4096, "gradient_checkpointing": True},
    {"model_config": dict(TINY_LLAMA), "method": "full", "max_seq_length": 1024},
    {"model_config": dict(TINY_LLAMA), "method": "qlora", "max_seq_length": 2048, "per_device_train_batch_size": 4},
]


@pytest.mark.parametrize("raw", CONFIGS)
def test_grid_largest_is_the_last_grid_point_that_fits(raw: dict[str, Any]) -> None:
    """Where fitting is monotone over the grid points (checked here, every point), the answer from any guess is the
    largest grid point that fits by its exact replay, and the table's row for the card says the same."""
    cfg = parse_config(raw)
    sizer = solve.Sizer(cfg)
    longest = sizer.arch.max_positions or solve.MAX_SEQ  # max_seq_length's bound, as the fit row's search has it
    for card in CARDS:
        gpu = gpus()[card]
        usable = usable_bytes(gpu)
        for name, high in ((SEQ, longest), (BATCH, 512)):
            fits = [v for v in _grid_points(cfg, name, high) if sizer.exact_required(gpu, **{name: v}) <= usable]
            want = max(fits, default=0)
            assert fits == [v for v in _grid_points(cfg, name, want)], "not monotone: pick another configuration"
            for guess in (1, 3, want, want + 1, 5 * want + 7, high):
                assert sizer.grid_largest(gpu, name, guess, high) == want, (card, name, guess)
        row = solve.fit_row(sizer, gpu, largest=False)
        assert (row["max_micro_batch"], row["max_seq_length"]) == (
            max(sizer.grid_largest(gpu, BATCH, 1, solve.MAX_BATCH), cfg.per_device_train_batch_size),
            max(sizer.grid_largest(gpu, SEQ, 1, longest), cfg.max_seq_length))


def test_fewest_gpus_is_the_smallest_count_that_fits() -> None:
    """examples/qlora-llama31-8b.json at r=8 on 16 GB cards: per-GPU reserved is not monotone in the count there
    (this replay reserves ~3 GiB more from 64 GPUs to 106 than at 32 or 107), and the solver's proxy, with the
    unsharded run's overhead ratio, once sent the search to 107. Brute force: every count below the answer fails."""
    raw = json.loads((ROOT / "examples" / "qlora-llama31-8b.json").read_text(encoding="utf-8"))
    cfg = replace(parse_config(raw), r=8)
    sizer = solve.Sizer(cfg)
    for card in ("rtx-4060-ti-16gb", "rtx-5080-16gb"):
        gpu = gpus()[card]
        count, mode = sizer.fewest_gpus(gpu)
        assert mode == "fsdp" and 1 < count < 32, (card, count)
        assert sizer.fits(gpu, num_gpus=count, parallelism=mode)
        assert not sizer.fits(gpu, num_gpus=1, parallelism="none", cpu_offload=False)
        for k in range(2, count):
            assert not sizer.fits(gpu, num_gpus=k, parallelism=mode), (card, k)
