# Reserved memory on the card the user named: the step's replay re-run against the card's usable bytes
# (memory/wall.py) when an ample card would reserve more than that card has.
from __future__ import annotations

from functools import lru_cache

from .memory.allocator import ROUND_LARGE, round_up
from .memory.replay import Replay, replay
from .step import StepMemory, _replayed, outside, reserved_peak


@lru_cache(maxsize=512)
def _capped(r: Replay, expandable: bool, capacity: int) -> tuple[int, int, int]:
    return replay(r, expandable, capacity)


def on_card(mem: StepMemory, expandable: bool, capacity: int) -> tuple[int, int]:
    """(max_memory_reserved, needed) of the run on a card whose reserved memory may reach `capacity` bytes;
    needed > capacity: it runs out of memory there (reserved is then the ample card's, for the message)."""
    reserved, needed = reserved_peak(mem, expandable), reserved_peak(mem, expandable, True)
    if reserved <= capacity:  # the wall is never reached: the capped replay would be the ample one
        return reserved, needed
    wall = capacity // ROUND_LARGE * ROUND_LARGE  # reserved is whole 2 MiB pages
    total = mem.peak.total
    step_reserved = round_up(total + mem.cache_overhead(expandable))
    step = step_reserved, round_up(total + mem.cache_overhead(expandable, True))
    dynamic = max(total - mem.static_bytes, 0)
    if step_reserved > capacity and (total > capacity or not dynamic):
        step = step_reserved, max(step[1], capacity + 1)  # the allocated peak alone is over the card
    elif step_reserved > capacity:
        # The replay runs at the grid shape (step.grid) and its overhead is scaled by the dynamic bytes
        # (StepMemory.cache_overhead): x at the grid shape is total + (x - allocated) * dynamic / replay_dynamic
        # here, so the card's capacity maps back to the grid shape through the same line.
        allocated, _, _ = _replayed(mem.tensors, expandable)
        grid_dynamic = max(mem.replay_dynamic, 1)
        cap = allocated + (capacity - total) * grid_dynamic // dynamic
        _, got, least = _capped(mem.tensors, expandable, cap)

        def scale(x: int) -> int:
            return round_up(total + int(max(x - allocated, 0) / grid_dynamic * dynamic))

        step = ((min(scale(got), wall), min(scale(least), capacity)) if least <= cap
                else (step_reserved, max(step[1], scale(least), capacity + 1)))
    # A moment outside the step (a model load) over the card: its own peak saturates at the wall too when what it
    # must hold fits (not replayed against the wall: the card's reserved is bounded by the wall, not derived).
    parts = [step] + [(min(round_up(o.reserved), wall) if round_up(o.needed) <= capacity else round_up(o.reserved),
                       round_up(o.needed)) for o in outside(mem, expandable)]
    least = max(n for _, n in parts)
    return (max(r for r, _ in parts) if least <= capacity else reserved), least
