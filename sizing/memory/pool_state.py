# The caching allocator's state as its future sees it: the layout two states are compared by (the replay's step
# skip), a copy of it (the replay's shape-free prefix, replayed once and copied for each shape) and its exact value
# (the NF4 load's chunk skip).
from __future__ import annotations

from .allocator import CachingAllocator, _Block


def layout(a: CachingAllocator, roles: dict[_Block, int]) -> tuple[tuple[int, ...], ...]:
    """What the allocator's future answers depend on, the same for two isomorphic states: the segments
    that hold a free block or a block in `roles` (the caller's live blocks, numbered), in address order (best fit
    breaks ties between equal sizes by address, so their order is part of the future); each as its blocks'
    (size, code): a free block -2 - its place in its size's list, a role its number, else -1. A segment
    with neither is never touched again (nothing frees its blocks) and is left out."""
    place: dict[_Block, int] = {}
    last, i = 0, 0
    for size, addr in a._keys:  # by size, then address
        i = i + 1 if size == last else 0
        last = size
        place[a._at[addr]] = -2 - i
    heads: dict[_Block, _Block] = {}
    order: dict[_Block, None] = {}  # segment heads in discovery order
    for start in (*place, *sorted((b for b in roles if not b.small), key=roles.__getitem__)):
        path = []
        while start.prev is not None and start not in heads:
            path.append(start)
            start = start.prev
        head = heads.get(start, start)
        for x in path:
            heads[x] = head
        order[head] = None
    out = []
    for head in sorted(order, key=lambda h: h.addr):
        seg: list[int] = []
        blk: _Block | None = head
        while blk is not None:
            seg += blk.size, place[blk] if blk.free else roles.get(blk, -1)
            blk = blk.next
        out.append(tuple(seg))
    return tuple(out)


def copy_state(a: CachingAllocator) -> CachingAllocator:
    """A plain allocator whose every future answer is a's, for a state whose live blocks nobody frees (the
    replay's prefix: weights, adapters, FSDP's wrap): its counters, its free blocks by address, and every block
    of the segments those (and an expandable pool's last block) lie in. A segment of live blocks only is left
    out: a request never reaches it, and no free can (layout leaves it out for the same reason)."""
    new = CachingAllocator(a.expandable)
    for name in ("allocated", "reserved", "peak_allocated", "peak_reserved", "small_live", "small_peak",
                 "cached_whole", "peak_needed"):
        setattr(new, name, getattr(a, name))
    twin: dict[_Block, _Block] = {}
    starts = [a._at[addr] for _, addr in a._keys] + ([a._tail] if a._tail is not None else [])
    for start in starts:
        if start in twin:
            continue
        head = start
        while head.prev is not None:
            head = head.prev
        prev: _Block | None = None
        blk: _Block | None = head
        while blk is not None:  # the segment, block by block, linked as it is
            copy = twin[blk] = _Block(blk.size, blk.free, blk.small, prev, None, blk.addr)
            if prev is not None:
                prev.next = copy
            prev, blk = copy, blk.next
    new._keys = list(a._keys)
    new._at = {addr: twin[b] for addr, b in a._at.items()}
    new._tail = twin[a._tail] if a._tail is not None else None
    new._end = a._end
    return new


def exact_state(a: CachingAllocator) -> tuple[object, ...]:
    """The allocator's state itself, not up to isomorphism as layout(): the counters and peaks, every cached free
    block (size, address), the expandable pool's last block and the next segment's address. Equal before and
    after a replay that frees all it allocates, the replay changed nothing (memory/load.py's chunk skip)."""
    free = tuple(a._keys)  # (size, address) of every free block, in best fit's order
    tail = None if a._tail is None else (a._tail.addr, a._tail.size, a._tail.free)
    return (a.allocated, a.reserved, a.peak_allocated, a.peak_reserved, a.peak_needed, a.cached_whole,
            a.small_live, a.small_peak, a._end, tail, free)
