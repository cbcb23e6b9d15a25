# Reserved memory on the card the user named: the step's replay re-run against the card's usable bytes
# (memory/wall.py) when an ample card would reserve more than that card has.
from __future__ import annotations

from .memory.allocator import ROUND_LARGE, round_up
from .memory.replay import capped
from .step import StepMemory, _replayed, outside, reserved_peak


def on_card(mem: StepMemory, expandable: bool, capacity: int) -> tuple[int, int]:
    """(max_memory_reserved, needed) of the run on a card whose reserved memory may reach `capacity` bytes, by
    the step's replay against that wall; needed > capacity: that replay ran out of memory (reserved is then the
    peak it reached before, at least the allocated peak)."""
    reserved, needed = reserved_peak(mem, expandable), reserved_peak(mem, expandable, True)
    if reserved <= capacity:  # the wall is never reached: the capped replay would be the ample one
        return reserved, needed
    wall = capacity // ROUND_LARGE * ROUND_LARGE  # reserved is whole 2 MiB pages
    total = mem.peak.total
    step = round_up(total + mem.cache_overhead(expandable)), round_up(total + mem.cache_overhead(expandable, True))
    dynamic = max(total - mem.static_bytes, 0)
    if step[0] > capacity and (total > capacity or not dynamic):
        step = min(round_up(total), wall), max(step[1], capacity + 1)  # the allocated peak alone is over the card
    elif step[0] > capacity:
        # The replay ran at the run's own shape (the estimate: the line below is the identity) or, for a solver's
        # probe, at the grid shape (step.grid) with its overhead scaled by the dynamic bytes
        # (StepMemory.cache_overhead): x at the grid shape is total + (x - allocated) * dynamic / replay_dynamic
        # here, so the card's capacity maps back to the grid shape through the same line.
        allocated, _, _ = _replayed(mem.tensors, expandable)
        grid_dynamic = max(mem.replay_dynamic, 1)
        cap = allocated + (capacity - total) * grid_dynamic // dynamic
        _, got, least = capped(mem.tensors, expandable, cap)

        def scale(x: int) -> int:
            over = max(x - allocated, 0)
            return round_up(total + (over if grid_dynamic == dynamic else int(over / grid_dynamic * dynamic)))

        step = min(scale(got), wall), (min(scale(least), capacity) if least <= cap else max(scale(least), capacity + 1))
    # A moment outside the step (a model load) over the card saturates at the wall too (not replayed against it:
    # bounded by the wall, not derived), and runs out of memory when what it must hold is over the card.
    parts = [step] + [(min(round_up(o.reserved), wall), round_up(o.needed)) for o in outside(mem, expandable)]
    return max(r for r, _ in parts), max(n for _, n in parts)
