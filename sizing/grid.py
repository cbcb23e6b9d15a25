# The replay grid: the shapes the caching allocator is replayed at, and the cells of values sharing one.
from __future__ import annotations

from .config import RunConfig


def grid(x: int) -> int:
    """x rounded up to 4 steps per doubling (m·2^k, m in 4..7): the shapes the allocator is replayed at, so
    the solvers' probes share replays; tensors are at most 25 % larger than the real ones there."""
    if x <= 8:
        return x
    k = x.bit_length() - 3
    return -(-x >> k) << k


def grid_floor(cfg: RunConfig, name: str, value: int) -> int:
    """The largest value of `name` at or below `value` whose shape is a grid point (its exact replay is the
    grid's own replay: solve.Sizer.confirm's cheap answer for the fit table's other cards)."""
    offset = virtual_tokens(cfg) if name == "max_seq_length" else 0
    x = value + offset
    if x <= 8:
        return value
    k = x.bit_length() - 3
    return max((x >> k << k) - offset, 0)


def grid_next(cfg: RunConfig, name: str, value: int) -> int:
    """The smallest value of `name` above `value` whose shape is a grid point (grid_floor's next one up)."""
    offset = virtual_tokens(cfg) if name == "max_seq_length" else 0
    return grid(value + offset + 1) - offset


def virtual_tokens(cfg: RunConfig) -> int:
    """Tokens prompt tuning and P-tuning put before the input's (step.step_memory adds them to the sequence)."""
    return cfg.num_virtual_tokens if cfg.is_peft and cfg.peft_type in ("prompt_tuning", "p_tuning") else 0


def replay_shape(cfg: RunConfig) -> tuple[int, int]:
    """The (sequence, micro-batch) grid shape whose replay step_memory(cfg) carries: configurations that differ
    only in their shape and share it share the cache's overhead ratio (solve.Sizer's searches use this)."""
    return grid(cfg.max_seq_length + virtual_tokens(cfg)), grid(cfg.per_device_train_batch_size)


def grid_cell(cfg: RunConfig, name: str, value: int) -> tuple[int, int]:
    """The values [lo, hi] of `name` (max_seq_length or per_device_train_batch_size) around `value` whose
    step_memory carries the same grid replay as value's (the cell step_memory's grid shape puts value in)."""
    offset = virtual_tokens(cfg) if name == "max_seq_length" else 0
    g = grid(value + offset)  # grid is non-decreasing, grid(y) >= y and grid(g) == g: the cell ends at g
    return _previous(g) + 1 - offset, g - offset


def _previous(g: int) -> int:
    """The grid point before the grid point g (0 before 1): the cell of g starts one above it."""
    if g <= 8:
        return max(g - 1, 0)
    k = g.bit_length() - 3
    m = g >> k  # 4..7
    return (m - 1) << k if m > 4 else 7 << (k - 1)
