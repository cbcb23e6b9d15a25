# The caching allocator as it was before perf's rewrite (sizing/memory/allocator.py at 1a97c50), with best fit's
# tie-break between equal sizes by address (alloc): the oracle test_allocator_fast.py holds the faster one to.
from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable
from dataclasses import dataclass

from sizing.catalog import Gpu
from sizing.memory.overhead import CUDA_CONTEXT

# The allocator's constants (CUDACachingAllocator.cpp / AllocatorConfig.h):
MIN_BLOCK = 512  # kMinBlockSize: every request is rounded up to 512 B
SMALL_SIZE = 1 << 20  # kSmallSize: requests up to 1 MiB come from the small pool
SMALL_BUFFER = 2 << 20  # kSmallBuffer: small-pool segments are 2 MiB
LARGE_BUFFER = 20 << 20  # kLargeBuffer: requests of 1-10 MiB get a 20 MiB segment
MIN_LARGE_ALLOC = 10 << 20  # kMinLargeAlloc
ROUND_LARGE = 2 << 20  # kRoundLarge: larger segments are rounded up to 2 MiB
ALLOC_ROUND = ROUND_LARGE
# Expandable segments map the large pool's physical memory in 20 MiB pages (kLargeBuffer; the small pool's
# are 2 MiB): CUDACachingAllocator.cpp v2.13.0, "2 MiB pages for small segments, 20 MiB pages for large
# segments" (SegmentRange) and find_expandable_block's `pool->is_small ? kSmallBuffer : kLargeBuffer`.
PAGE = LARGE_BUFFER


def round_size(size: int) -> int:
    """round_size(): the block size a request occupies."""
    return max(MIN_BLOCK, -(-size // MIN_BLOCK) * MIN_BLOCK)


def segment_size(size: int) -> int:
    """get_allocation_size(): the cudaMalloc a request causes when no cached block fits it."""
    if size <= SMALL_SIZE:
        return SMALL_BUFFER
    if size < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return -(-size // ROUND_LARGE) * ROUND_LARGE


@dataclass(eq=False)
class _Block:
    size: int
    free: bool
    small: bool
    prev: _Block | None = None
    next: _Block | None = None
    segment: int = 0  # which cudaMalloc it lies in, numbered in creation order


class CachingAllocator:
    """Best-fit over cached free blocks per pool, split when the rest is worth keeping, coalesce on free;
    reserved only grows (no empty_cache). expandable: one segment per pool grown in 2 MiB pages."""

    def __init__(self, expandable: bool = False) -> None:
        self.expandable = expandable
        # Free blocks per pool (small?): the sorted distinct sizes, and the blocks of each size.
        self._sizes: dict[bool, list[int]] = {True: [], False: []}
        self._bucket: dict[bool, dict[int, dict[int, _Block]]] = {True: {}, False: {}}
        self._tail: dict[bool, _Block | None] = {True: None, False: None}  # expandable: last block per pool
        self.allocated = self.reserved = self.peak_allocated = self.peak_reserved = 0
        self.small_live = self.small_peak = 0
        # When cudaMalloc fails the allocator frees its cached whole (unsplit) segments and retries
        # (release_cached_blocks in CUDACachingAllocator.cpp): what a card must hold is the reserved memory
        # minus those, at the worst moment. peak_reserved is what an ample card shows.
        self.cached_whole = self.peak_needed = 0
        self.segments = 0  # cudaMallocs so far

    def _add_free(self, small: bool, b: _Block) -> None:
        b.free = True
        if b.prev is None and b.next is None and not self.expandable:
            self.cached_whole += b.size
        bucket = self._bucket[small].get(b.size)
        if bucket is None:
            bucket = self._bucket[small][b.size] = {}
            insort(self._sizes[small], b.size)
        bucket[id(b)] = b

    def _remove_free(self, small: bool, b: _Block) -> None:
        if b.prev is None and b.next is None and not self.expandable:
            self.cached_whole -= b.size
        bucket = self._bucket[small][b.size]
        del bucket[id(b)]
        if not bucket:
            del self._bucket[small][b.size]
            sizes = self._sizes[small]
            del sizes[bisect_left(sizes, b.size)]
        b.free = False

    def _best_fit(self, small: bool, size: int) -> _Block | None:
        sizes = self._sizes[small]
        i = bisect_left(sizes, size)
        if i == len(sizes):
            return None
        # std::set<Block*, BlockComparatorSize> orders by (stream, size, ptr) and get_free_block takes the
        # lower_bound of (stream, size, nullptr): the smallest size that fits, then the lowest address. A
        # fresh process's cudaMalloc is assumed to return increasing addresses: ptr orders as (segment, offset).
        b = min(self._bucket[small][sizes[i]].values(), key=_address)
        self._remove_free(small, b)
        return b

    def malloc(self, nbytes: int) -> _Block:
        """Allocate a tensor of nbytes; returns its block."""
        size = max(MIN_BLOCK, -(-nbytes // MIN_BLOCK) * MIN_BLOCK)  # round_size()
        small = size <= SMALL_SIZE
        if small:
            return self._small(size)
        b = self._best_fit(small, size) or self._new_segment(size, small)
        rest = b.size - size
        # should_split(): small blocks split if 512 B remain, large ones only if more than 1 MiB remains.
        if (rest >= MIN_BLOCK) if small else (rest > SMALL_SIZE):
            tail = _Block(rest, True, small, b, b.next, b.segment)
            if b.next is not None:
                b.next.prev = tail
            b.next, b.size = tail, size
            if self._tail[small] is b:
                self._tail[small] = tail
            self._add_free(small, tail)
        self.allocated += b.size
        if self.allocated > self.peak_allocated:
            self.peak_allocated = self.allocated
        b.free = False
        return b

    def _small(self, size: int) -> _Block:
        # The small pool packs blocks of at most 1 MiB into 2 MiB segments; what it holds is counted by its
        # peak (packing without holes): its fragmentation is bounded by a few segments, and skipping the
        # block bookkeeping for LoRA's many small tensors is what keeps a replay fast.
        self.allocated += size
        self.small_live += size
        if self.small_live > self.small_peak:
            self.reserved += -(-self.small_live // SMALL_BUFFER) * SMALL_BUFFER - -(-self.small_peak // SMALL_BUFFER) \
                * SMALL_BUFFER
            self.small_peak = self.small_live
            self.peak_reserved = max(self.peak_reserved, self.reserved)
            self.peak_needed = max(self.peak_needed, self.reserved - self.cached_whole)
        if self.allocated > self.peak_allocated:
            self.peak_allocated = self.allocated
        return _Block(size, False, True)

    def _new_segment(self, size: int, small: bool) -> _Block:
        tail = self._tail[small]
        if self.expandable and not small:
            # Grow the pool's one segment; a free block at its end is extended instead of left behind.
            have = tail.size if tail is not None and tail.free else 0
            grow = -(-(size - have) // PAGE) * PAGE
            self._grow(grow)
            if tail is not None and have:
                self._remove_free(small, tail)
                tail.size += grow
                return tail
            b = _Block(grow, False, small, tail)  # expandable: one segment, number 0
            if tail is not None:
                tail.next = b
            self._tail[small] = b
            return b
        seg = segment_size(size)
        self._grow(seg)
        self.segments += 1
        return _Block(seg, False, small, segment=self.segments)

    def _grow(self, nbytes: int) -> None:
        self.reserved += nbytes
        if self.reserved > self.peak_reserved:
            self.peak_reserved = self.reserved
        if self.reserved - self.cached_whole > self.peak_needed:
            self.peak_needed = self.reserved - self.cached_whole

    def free(self, b: _Block) -> None:
        """Return a tensor's block to the cache, merged with free neighbours of its segment."""
        small = b.small
        self.allocated -= b.size
        if small:
            self.small_live -= b.size
            return
        for nb in (b.prev, b.next):
            if nb is not None and nb.free:
                self._remove_free(small, nb)
                if nb is b.prev:
                    nb.size += b.size
                    nb.next = b.next
                    if b.next is not None:
                        b.next.prev = nb
                    if self._tail[small] is b:
                        self._tail[small] = nb
                    b = nb
                else:
                    b.size += nb.size
                    b.next = nb.next
                    if nb.next is not None:
                        nb.next.prev = b
                    if self._tail[small] is nb:
                        self._tail[small] = b
        self._add_free(small, b)


def _address(b: _Block) -> tuple[int, int]:
    """Where a block lies: its segment's number, then the bytes of the blocks before it in the segment."""
    offset = 0
    p = b.prev
    while p is not None:
        offset += p.size
        p = p.prev
    return b.segment, offset


def round_up(n: int) -> int:
    """Reserved memory is whole 2 MiB pages (segments are rounded to kRoundLarge)."""
    return -(-n // ROUND_LARGE) * ROUND_LARGE


def reserved_bytes(allocated: int, static: int, frag: float) -> int:
    """A reserved peak from an allocated one by a ratio: kept for callers outside the engine."""
    n = allocated + int(frag * max(allocated - static, 0))
    return -(-n // ALLOC_ROUND) * ALLOC_ROUND


def usable_bytes(gpu: Gpu) -> int:
    """What the run's reserved memory may reach: CUDA's total minus the process's CUDA context."""
    return gpu.usable_bytes - CUDA_CONTEXT[1]


def _malloc_all(self: CachingAllocator, sizes: Iterable[int]) -> list[_Block]:
    """The definition the faster allocator's batched call must equal: one malloc after the other."""
    return [self.malloc(n) for n in sizes]


def _free_all(self: CachingAllocator, blocks: Iterable[_Block]) -> None:
    for b in blocks:
        self.free(b)


CachingAllocator.malloc_all = _malloc_all  # type: ignore[attr-defined]
CachingAllocator.free_all = _free_all  # type: ignore[attr-defined]
