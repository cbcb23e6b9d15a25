# A run of allocations freed together but for a few kept blocks, answered without a block per transient: the
# replay's first backward of a layer whose gradients are large (they stay, everything else the layer makes goes),
# the optimizer's states (all stay, never freed), and a dry run_free that needs new segments (none stays).
from __future__ import annotations

from bisect import bisect_left, insort

from .allocator import SMALL_SIZE, CachingAllocator, _Block, segment_size, small_growth


def run_keep(a: CachingAllocator, requests: tuple[int, ...], kept: tuple[bool, ...],
             forever: bool = False) -> list[_Block] | None:
    """The blocks of the large requests flagged in `kept`, in order, after mallocs of every request (plan()'s form)
    followed by frees of all the others (kept small requests' bytes stay allocated); None, nothing changed, when an
    expandable pool would need to grow (the caller then runs them one by one).

    Every malloc comes before every free, so each counter moves one way during the mallocs and every peak is its
    value at their end (needed, which only grows then: at the last cudaMalloc or small request that grew the small
    pool, where the allocator takes it), as in CachingAllocator._dry_run_free, whose best fit on a copy of the
    (size, address) keys this follows; a request no key holds gets a new segment at the pool's end, as _new_segment.
    The frees leave the large pool's free blocks the maximal free ranges around the live blocks, so the pool after
    the run is the one before with each kept block carved out of the free block it was placed in (the gaps left of
    and right of it stay free blocks of their own), and each new segment free and whole but for its kept blocks.
    forever: the kept blocks are never freed (the optimizer's states): adjacent ones as one block, none returned
    (a live block is never merged with, so only where the live ranges end matters to the pool's future)."""
    keys = a._keys[:]
    at = a._at
    expandable = a.expandable
    live0 = a.small_live
    inside: dict[int, _Block] = {}  # a split tail's address -> the free block (or new segment) it lies in
    placed: list[tuple[_Block, int, int]] = []  # each kept block: (free block or new segment it lies in, address, size)
    segments: list[_Block] = []  # new segments, as free whole blocks (their contents placed)
    large = small = keep_small = keep_large = whole = grown = 0
    taken: tuple[int, int, int] | None = None  # (small, grown, whole) where the allocator last takes needed
    end = a._end
    # The tail a split just left, held out of `keys` while the requests after it are carved from it: best fit takes
    # it for a request of `size` when size <= its size and every key below it (the largest: `below`) is smaller
    # than size (a key of its own size sorts after it only if its address is higher). The optimizer's states take
    # ~95 % of their requests from the tail before (perf: no pop, insort or lookup for those).
    held: tuple[int, int, _Block] | None = None  # (size, address, the free block or new segment it lies in)
    below = -1
    for size, keep in zip(requests, kept, strict=True):
        if size < 0:  # _small(-size)
            small -= size
            if keep:
                keep_small -= size
            if live0 + small > a.small_peak:
                taken = small, grown, whole
            continue
        if held is not None:
            have, addr, b = held
            if below < size <= have:
                if have - size > SMALL_SIZE:  # split again: the rest stays held (once below it, `below` keeps
                    held = have - size, addr + size, b  # every request off it: it goes back to the keys)
                    have = size
                else:
                    held = None
                large += have
                if keep:
                    keep_large += have
                    last = placed[-1] if forever and placed else None
                    if last is not None and last[0] is b and last[1] + last[2] == addr:  # right after it: one block
                        placed[-1] = b, last[1], last[2] + have
                    else:
                        placed.append((b, addr, have))
                continue
            insort(keys, (have, addr))  # back among the keys: best fit chooses among them all
            inside[addr] = b
            held = None
        j = bisect_left(keys, (size,))
        if j == len(keys):  # _new_segment
            if expandable:
                return None
            b = _Block(segment_size(size), True, False, None, None, end)
            segments.append(b)
            have, addr = b.size, end
            end += have
            grown += have
            taken = small, grown, whole  # _grow
        else:
            have, addr = keys.pop(j)
            got = at.get(addr)  # None: a split tail (its address lies inside a free block, never a block's own)
            if got is None:
                b = inside[addr]
            else:
                b = got
                if b.prev is None and b.next is None and not expandable:
                    whole += have
        if have - size > SMALL_SIZE:  # split as _large does: the tail held for the requests after
            held = have - size, addr + size, b
            p = bisect_left(keys, (have - size, addr + size))
            below = keys[p - 1][0] if p else -1
            have = size
        large += have
        if keep:
            keep_large += have
            placed.append((b, addr, have))
    needed = None
    if taken is not None:  # reserved (the small pool as it then stood) less the cached whole segments not yet taken
        small_then, grown_then, whole_then = taken
        live = live0 + small_then
        pool = small_growth(live, a.small_peak) if live > a.small_peak else 0
        needed = a.reserved + grown_then + pool - a.cached_whole + whole_then
    top = a.allocated + large + small
    if top > a.peak_allocated:
        a.peak_allocated = top
    live, small_peak = a.small_live + small, a.small_peak
    if live > small_peak:
        a.reserved += small_growth(live, small_peak)
        a.small_peak = live
    a.reserved += grown
    a._end = end
    if a.reserved > a.peak_reserved:
        a.peak_reserved = a.reserved
    if needed is not None and needed > a.peak_needed:
        a.peak_needed = needed
    a.allocated += keep_small + keep_large
    a.small_live += keep_small
    for seg in segments:  # each new segment as a cached whole one, its kept blocks then carved out of it
        a._keys.insert(bisect_left(a._keys, (seg.size, seg.addr)), (seg.size, seg.addr))
        a._at[seg.addr] = seg
        if not a.expandable:
            a.cached_whole += seg.size
    out: list[_Block] = []
    by_block: dict[_Block, list[_Block]] = {}
    for free, addr, size in placed:
        run = by_block.get(free)
        if forever and run and run[-1].addr + run[-1].size == addr:  # placed in address order within a free block
            run[-1].size += size
            continue
        blk = _Block(size, False, False, None, None, addr)
        out.append(blk)
        by_block.setdefault(free, []).append(blk)
    if forever:
        out = []
    for free, live_blocks in by_block.items():  # in address order: each takes the start of what the last left
        _carve(a, free, live_blocks)
    return out


def _carve(a: CachingAllocator, free: _Block, live: list[_Block]) -> None:
    """Replace the free block `free` by the live blocks (inside it, by address) and the free gaps between them."""
    if free.prev is None and free.next is None and not a.expandable:
        a.cached_whole -= free.size
    del a._keys[bisect_left(a._keys, (free.size, free.addr))]
    del a._at[free.addr]
    pieces: list[_Block] = []
    pos, end = free.addr, free.addr + free.size
    for blk in live:
        if blk.addr > pos:
            pieces.append(_Block(blk.addr - pos, True, False, None, None, pos))
        pieces.append(blk)
        pos = blk.addr + blk.size
    if end > pos:
        pieces.append(_Block(end - pos, True, False, None, None, pos))
    prev = free.prev
    for blk in pieces:
        blk.prev = prev
        if prev is not None:
            prev.next = blk
        prev = blk
    nxt = free.next
    prev.next = nxt  # type: ignore[union-attr]
    if nxt is not None:
        nxt.prev = prev
    if a._tail is free:
        a._tail = prev
    for blk in pieces:
        if blk.free:
            insort(a._keys, (blk.size, blk.addr))
            a._at[blk.addr] = blk
