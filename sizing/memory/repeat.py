# A block of allocator operations run again and again (the FSDP wrap's decoder units): once the part of the pool it
# can reach is the same at two starts, every later run repeats the last, so the rest are added at once (perf: a 70B
# wrap is 81 units of ~25 operations, and a fit table replays dozens of wraps).
from __future__ import annotations

from bisect import bisect_left, insort
from dataclasses import dataclass

from .allocator import CachingAllocator, _Block


@dataclass
class Mark:
    """The pool at the start of a run of the block: what the block can reach (exactly, addresses included), the
    counters, where the next segment starts and how many blocks the caller kept; then the run's own peaks."""

    reach: tuple[object, ...]
    digest: int  # hash(reach): most marks compared differ (perf)
    counters: tuple[int, int, int, int, int]  # allocated, reserved, cached_whole, small_live, small_peak
    end: int
    kept: int
    peaks: tuple[int, int, int] = (-1, -1, -1)  # allocated, reserved, needed within the run from here (-1: none)


def mark(a: CachingAllocator, least: int, live: list[_Block], kept: int) -> Mark:
    """The pool now, for a block whose large requests are at least `least` bytes and that frees, of the blocks
    alive now, only those of `live`: the segments holding a free block of `least` bytes or more or a block of
    `live`, each as its blocks' (address, size, code: -2 free, i the i-th of `live`, -1 another live block), and
    live's small blocks. Every other segment is out of the block's reach: best fit never takes a free block
    smaller than the request, and nothing frees its live blocks, so none of its free blocks merges."""
    roles = {b: i for i, b in enumerate(live)}
    heads: dict[int, _Block] = {}
    keys, at = a._keys, a._at
    starts = [at[addr] for _, addr in keys[bisect_left(keys, (least,)):]] + [b for b in live if not b.small]
    for b in starts:
        while b.prev is not None:
            b = b.prev
        heads[b.addr] = b
    segments = []
    for addr in sorted(heads):
        seg: list[tuple[int, int, int]] = []
        blk: _Block | None = heads[addr]
        while blk is not None:
            seg.append((blk.addr, blk.size, -2 if blk.free else roles.get(blk, -1)))
            blk = blk.next
        segments.append(tuple(seg))
    small = tuple((i, b.size) for i, b in enumerate(live) if b.small)
    counters = a.allocated, a.reserved, a.cached_whole, a.small_live, a.small_peak
    reach = tuple(segments), small
    return Mark(reach, hash(reach), counters, a._end, kept)


def repeats(before: Mark, after: Mark) -> bool:
    """Whether a run of the block that went from `before` to `after` is repeated by the next: the same reach and
    the same small pool (its growth depends on its absolute bytes). Then the next run takes the same blocks and
    frees the same ones, makes segments of the same sizes above the last, and moves every counter by as much; the
    segments this run made are out of its reach (the reach is the same set of addresses), so they stay as made."""
    return before.digest == after.digest and before.counters[3:] == after.counters[3:] and before.reach == after.reach


def jump(a: CachingAllocator, before: Mark, after: Mark, peaks: tuple[int, int, int], count: int,
         kept: list[_Block]) -> bool:
    """The state after `count` more runs of the operations that went from `before` to `after` (their own peaks
    `peaks`, -1: none), given that the next run repeats them (repeats()): each run adds copies of the segments they
    made, shifted by the bytes they reserved, and appends copies of the blocks they kept (kept[before.kept:]); the
    counters move `count` times as much, and each peak is theirs shifted to the first or the last run. False, the
    pool untouched, when the segments they made hold other live blocks than those kept (then they run one by one)."""
    shift = after.end - before.end
    own = kept[before.kept:after.kept]
    if len(kept) != after.kept:
        return False
    heads: dict[int, _Block] = {}
    for b in [a._at[addr] for _, addr in a._keys if addr >= before.end] + [b for b in own if not b.small]:
        while b.prev is not None:
            b = b.prev
        heads[b.addr] = b
    index = {b: i for i, b in enumerate(own)}
    segments: list[list[_Block]] = []
    pos = before.end
    for addr in sorted(heads):
        seg: list[_Block] = []
        blk: _Block | None = heads[addr]
        while blk is not None:
            if blk.addr != pos or not (blk.free or blk in index):
                return False  # a gap (a segment of live blocks only) or a live block not kept
            seg.append(blk)
            pos += blk.size
            blk = blk.next
        segments.append(seg)
    if pos != after.end:
        return False
    for t in range(1, count + 1):
        copies = [_Block(b.size, False, True) if b.small else b for b in own]
        for seg in segments:
            prev: _Block | None = None
            for blk in seg:
                copy = _Block(blk.size, blk.free, False, prev, None, blk.addr + t * shift)
                if prev is not None:
                    prev.next = copy
                prev = copy
                if blk.free:
                    insort(a._keys, (copy.size, copy.addr))
                    a._at[copy.addr] = copy
                else:
                    copies[index[blk]] = copy
        kept += copies
    moves = [y - x for x, y in zip(before.counters[:3], after.counters[:3], strict=True)]
    a.allocated += count * moves[0]
    a.reserved += count * moves[1]
    a.cached_whole += count * moves[2]
    a._end += count * shift
    # a peak moves as the run's start's counters: needed (reserved less the cached whole segments) as both
    allocated, reserved, needed = (peak + max(move, count * move) if peak >= 0 else -1
                                   for peak, move in zip(peaks, (*moves[:2], moves[1] - moves[2]), strict=True))
    a.peak_allocated = max(a.peak_allocated, allocated)
    a.peak_reserved = max(a.peak_reserved, reserved)
    a.peak_needed = max(a.peak_needed, needed)
    return True
