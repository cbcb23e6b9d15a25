# PyTorch's CUDA caching allocator, replayed: from the tensors a step allocates and frees to what the cache
# reserves (c10/cuda/CUDACachingAllocator.cpp and c10/core/AllocatorConfig.h, torch 2.x; memory-model.md §8).
from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable
from dataclasses import dataclass

from ..catalog import Gpu
from .overhead import CUDA_CONTEXT

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


def small_growth(live: int, peak: int) -> int:
    """Bytes of the 2 MiB small-pool segments a small pool holding `live` bytes has beyond one that held `peak`."""
    return (-(-live // SMALL_BUFFER) - -(-peak // SMALL_BUFFER)) * SMALL_BUFFER


def segment_size(size: int) -> int:
    """get_allocation_size(): the cudaMalloc a request causes when no cached block fits it."""
    if size <= SMALL_SIZE:
        return SMALL_BUFFER
    if size < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return -(-size // ROUND_LARGE) * ROUND_LARGE


@dataclass(eq=False, slots=True)
class _Block:
    size: int
    free: bool
    small: bool
    prev: _Block | None = None
    next: _Block | None = None
    addr: int = 0  # its address: the segment's base plus its offset in the segment (see CachingAllocator._end)


# Among free blocks of one size best fit takes the lowest address: the pool is a std::set ordered by
# BlockComparatorSize (stream, size, ptr) and get_free_block takes lower_bound of a key whose ptr is null
# (c10/cuda/CUDACachingAllocator.cpp, torch 2.x). Here that set is a sorted list of (size, address) keys, and
# lower_bound is bisect_left of (size,), which sorts before every key of that size.


class CachingAllocator:
    """Best-fit over cached free blocks per pool, split when the rest is worth keeping, coalesce on free;
    reserved only grows (no empty_cache). expandable: one segment per pool grown in 2 MiB pages."""

    def __init__(self, expandable: bool = False) -> None:
        self.expandable = expandable
        # The large pool's free blocks (small requests never reach a block list, see _small): their (size,
        # address) keys in order, and each block by its address (free blocks never share one).
        # Its hot paths below inline these updates (perf: a replay is ~6k calls).
        self._keys: list[tuple[int, int]] = []
        self._at: dict[int, _Block] = {}
        # Where the next segment starts. A new segment's cudaMalloc address is unknown: we assume a fresh process's
        # cudaMalloc hands out increasing addresses, so segments order by creation, then blocks by offset (an
        # expandable pool is one segment grown at its end). Only this order matters, never the values.
        self._end = 0
        self._tail: _Block | None = None  # expandable: the pool's last block
        self.allocated = self.reserved = self.peak_allocated = self.peak_reserved = 0
        self.small_live = self.small_peak = 0
        # When cudaMalloc fails the allocator frees its cached whole (unsplit) segments and retries
        # (release_cached_blocks in CUDACachingAllocator.cpp): what a card must hold is the reserved memory
        # minus those, at the worst moment. peak_reserved is what an ample card shows.
        self.cached_whole = self.peak_needed = 0

    dry = True  # run_free may take its dry path (a capped pool's small segments must pass its wall: memory/wall.py)

    def _remove_free(self, b: _Block) -> None:
        size = b.size
        if b.prev is None and b.next is None and not self.expandable:
            self.cached_whole -= size
        keys = self._keys
        del keys[bisect_left(keys, (size, b.addr))]
        del self._at[b.addr]
        b.free = False

    def malloc(self, nbytes: int) -> _Block:
        """Allocate a tensor of nbytes; returns its block."""
        size = -(-nbytes // MIN_BLOCK) * MIN_BLOCK  # round_size()
        if size <= SMALL_SIZE:
            return self._small(size if size > MIN_BLOCK else MIN_BLOCK)
        return self._large(size)

    def _large(self, size: int) -> _Block:
        # The large pool: best fit, the lowest-address free block of the smallest size that holds the request.
        keys = self._keys
        i = bisect_left(keys, (size,))
        if i < len(keys):
            have, addr = keys.pop(i)
            b = self._at.pop(addr)
            if b.prev is None and b.next is None and not self.expandable:
                self.cached_whole -= have
            rest = have - size
        else:
            b = self._new_segment(size)
            rest = b.size - size
        # should_split(): large blocks only if more than 1 MiB remains (small ones never come here).
        if rest > SMALL_SIZE:
            nxt = b.next
            addr = b.addr + size
            tail = _Block(rest, True, False, b, nxt, addr)
            if nxt is not None:
                nxt.prev = tail
            b.next, b.size = tail, size
            if self._tail is b:
                self._tail = tail
            insort(keys, (rest, addr))  # _add_free(tail): a split-off tail is never a whole segment
            self._at[addr] = tail
        self.allocated = allocated = self.allocated + b.size
        if allocated > self.peak_allocated:
            self.peak_allocated = allocated
        b.free = False
        return b

    def malloc_all(self, sizes: Iterable[int]) -> list[_Block]:
        """[malloc(n) for n in sizes], with each run of consecutive small requests counted as one: within a
        run the small pool's counters only grow, so its peaks are those at the run's end."""
        out: list[_Block] = []
        run = 0
        for n in sizes:
            size = -(-n // MIN_BLOCK) * MIN_BLOCK
            if size <= SMALL_SIZE:
                size = size if size > MIN_BLOCK else MIN_BLOCK
                run += size
                out.append(_Block(size, False, True))
            else:
                if run:
                    self._small(run)
                    run = 0
                out.append(self._large(size))
        if run:
            self._small(run)
        return out

    def malloc_free_all(self, sizes: Iterable[int]) -> None:
        """free_all(malloc_all(sizes)) (tensors made and dropped together), without the small ones' blocks."""
        self.run_free(plan(sizes))

    def run(self, requests: tuple[int, ...]) -> list[_Block]:
        """malloc_all of the sizes `requests` was planned from (plan()), each small run as one block: what
        free_all then does with them is the same (it frees the small ones' bytes at once)."""
        large, small = self._large, self._small
        return [large(s) if s > 0 else small(-s) for s in requests]

    def run_free(self, requests: tuple[int, ...], keep: int = 0) -> None:
        """malloc_free_all of the sizes `requests` was planned from (plan()); keep: bytes of its small requests
        that stay allocated (small tensors made among the transients and kept: a layer's gradients)."""
        if self.dry:
            if self._dry_run_free(requests):
                self.allocated += keep
                self.small_live += keep
                return
            if not keep and not self.expandable:  # new segments: still without a block per request
                from .kept_run import run_keep  # kept_run builds on this module

                run_keep(self, requests, (False,) * len(requests))
                return
        large, small = self._large, self._small
        blocks = []
        gone = -keep
        for s in requests:
            if s > 0:
                blocks.append(large(s))
            else:
                small(-s)
                gone -= s
        free = self.free
        for b in blocks:
            free(b)
        self.allocated -= gone
        self.small_live -= gone

    def _dry_run_free(self, requests: tuple[int, ...]) -> bool:
        """run_free(requests) without a block, when no request needs a new segment (False, nothing changed, when
        one does). Every block it takes is free again at its end, so the large pool ends as it began: its free
        blocks are the maximal free ranges of its segments (free() merges neighbours) and the live ranges are
        those it began with. Only the peaks and the small pool move; best fit is followed on a copy of the
        (size, address) keys, a split's tail put back as a key of its own. Within the run every counter moves one
        way (allocated, reserved and the small pool's bytes up, the cached whole segments down), so each peak is
        its value at the run's end, or for needed at its last small request (where the small pool last grew)."""
        got = _SUMS.get(requests)
        if got is None:
            got = _sums(requests)
        total, count, small, largest = got
        keys = self._keys
        if self.allocated + small + total + count * SMALL_SIZE <= self.peak_allocated and _holds(keys, total, largest):
            # No walk needed: best fit never needs a new segment (_holds), and no request gets more than 1 MiB above
            # its size (more is split off), so the allocated peak stays. Needed, at most the reserved bytes, moves
            # only if they pass it.
            live, small_peak = self.small_live + small, self.small_peak
            if live <= small_peak:
                return True
            reserved = self.reserved + small_growth(live, small_peak)
            if reserved <= self.peak_needed:
                self.reserved, self.small_peak = reserved, live
                if reserved > self.peak_reserved:
                    self.peak_reserved = reserved
                return True
        keys = keys[:]
        at = self._at
        large = small = whole = whole_small = 0
        whole_ok = not self.expandable
        for size in requests:
            if size < 0:  # _small(-size)
                small -= size
                whole_small = whole
                continue
            j = bisect_left(keys, (size,))
            if j == len(keys):
                return False  # a new segment (_new_segment): the real run
            have, addr = keys.pop(j)
            if whole_ok:
                b = at.get(addr)  # None: a split tail (its address lies inside a free block, never a block's own)
                if b is not None and b.prev is None and b.next is None:
                    whole += have
            if have - size > SMALL_SIZE:  # split as _large does
                insort(keys, (have - size, addr + size))
                have = size
            large += have
        top = self.allocated + large + small
        if top > self.peak_allocated:
            self.peak_allocated = top
        live, small_peak = self.small_live + small, self.small_peak
        if live > small_peak:  # the small pool grew, last at the last small request
            self.reserved = reserved = self.reserved + small_growth(live, small_peak)
            self.small_peak = live
            if reserved > self.peak_reserved:
                self.peak_reserved = reserved
            needed = reserved - self.cached_whole + whole_small
            if needed > self.peak_needed:
                self.peak_needed = needed
        return True

    def free_all(self, blocks: Iterable[_Block]) -> None:
        """free(b) for each block in order; the small ones' bytes subtracted at once (a free moves no peak)."""
        small = 0
        free = self.free
        for b in blocks:
            if b.small:
                small += b.size
            else:
                free(b)
        self.allocated -= small
        self.small_live -= small

    def _small(self, size: int) -> _Block:
        # The small pool packs blocks of at most 1 MiB into 2 MiB segments; what it holds is counted by its
        # peak (packing without holes): its fragmentation is bounded by a few segments, and skipping the
        # block bookkeeping for LoRA's many small tensors is what keeps a replay fast.
        self.allocated += size
        self.small_live += size
        if self.small_live > self.small_peak:  # small_growth inlined: once per small request
            self.reserved += -(-self.small_live // SMALL_BUFFER) * SMALL_BUFFER - -(-self.small_peak // SMALL_BUFFER) \
                * SMALL_BUFFER
            self.small_peak = self.small_live
            self.peak_reserved = max(self.peak_reserved, self.reserved)
            self.peak_needed = max(self.peak_needed, self.reserved - self.cached_whole)
        if self.allocated > self.peak_allocated:
            self.peak_allocated = self.allocated
        return _Block(size, False, True)

    def _new_segment(self, size: int) -> _Block:
        tail = self._tail
        if self.expandable:
            # Grow the pool's one segment; a free block at its end is extended instead of left behind.
            have = tail.size if tail is not None and tail.free else 0
            grow = -(-(size - have) // PAGE) * PAGE
            self._grow(grow)
            end, self._end = self._end, self._end + grow
            if tail is not None and have:
                self._remove_free(tail)
                tail.size += grow
                return tail
            b = _Block(grow, False, False, tail, None, end)
            if tail is not None:
                tail.next = b
            self._tail = b
            return b
        seg = segment_size(size)
        self._grow(seg)
        end, self._end = self._end, self._end + seg
        return _Block(seg, False, False, None, None, end)

    def _grow(self, nbytes: int) -> None:
        self.reserved += nbytes
        if self.reserved > self.peak_reserved:
            self.peak_reserved = self.reserved
        if self.reserved - self.cached_whole > self.peak_needed:
            self.peak_needed = self.reserved - self.cached_whole

    def free(self, b: _Block) -> None:
        """Return a tensor's block to the cache, merged with free neighbours of its segment."""
        self.allocated -= b.size
        if b.small:
            self.small_live -= b.size
            return
        prv = b.prev
        if prv is not None and prv.free:  # absorbed into its free predecessor
            self._remove_free(prv)
            prv.size += b.size
            prv.next = nxt = b.next
            if nxt is not None:
                nxt.prev = prv
            if self._tail is b:
                self._tail = prv
            b = prv
        nb = b.next
        if nb is not None and nb.free:  # absorbs its free successor
            self._remove_free(nb)
            b.size += nb.size
            b.next = nxt = nb.next
            if nxt is not None:
                nxt.prev = b
            if self._tail is nb:
                self._tail = b
        # _add_free(b), inlined: the commonest call of a replay
        b.free = True
        size = b.size
        if b.prev is None and b.next is None and not self.expandable:
            self.cached_whole += size
        insort(self._keys, (size, b.addr))
        self._at[b.addr] = b

    def counters(self) -> tuple[int, ...]:
        """The counters the allocator's future depends on (its peaks only take maxima of them)."""
        return self.allocated, self.reserved, self.cached_whole, self.small_live, self.small_peak

    def layout(self, roles: dict[_Block, int]) -> tuple[tuple[int, ...], ...]:
        """What the allocator's future answers depend on, the same for two isomorphic states (pool_state.layout)."""
        from .pool_state import layout  # pool_state builds on this module

        return layout(self, roles)


# Per requests tuple (plan()'s form): its large requests' bytes and count, its small bytes, and its large
# requests largest first (_dry_run_free)
_SUMS: dict[tuple[int, ...], tuple[int, int, int, tuple[int, ...]]] = {}


def _sums(requests: tuple[int, ...]) -> tuple[int, int, int, tuple[int, ...]]:
    if len(_SUMS) >= 4096:
        _SUMS.clear()
    large = sorted((s for s in requests if s > 0), reverse=True)
    got = _SUMS[requests] = sum(large), len(large), -sum(s for s in requests if s < 0), tuple(large)
    return got


def _holds(keys: list[tuple[int, int]], total: int, largest: tuple[int, ...]) -> bool:
    """A sufficient condition for best fit to place the large requests (their bytes `total`, `largest`: their sizes
    largest first) in the free blocks (`keys`) in any order, splits included: the largest block holds them all
    (whichever block a request takes, that block or what its split leaves holds the requests after it, each over
    1 MiB), or the i-th largest request fits the i-th largest block for every i (then each request can have a block
    of its own; best fit's smallest block that holds a request leaves such an assignment for the rest: a request
    given that block before takes the first request's, at least as large)."""
    n = len(largest)
    if not n:
        return True
    if n > len(keys):
        return bool(keys) and keys[-1][0] >= total
    if keys[-1][0] >= total:
        return True
    i = -1
    for size in largest:
        if size > keys[i][0]:
            return False
        i -= 1
    return True


def plan(sizes: Iterable[int]) -> tuple[int, ...]:
    """Requests as the replay's loops read them: a large request's block size (> 0), each run of consecutive
    small requests as minus their blocks' total (malloc_all counts such a run as one)."""
    out: list[int] = []
    run = 0
    for n in sizes:
        size = -(-n // MIN_BLOCK) * MIN_BLOCK  # round_size()
        if size <= SMALL_SIZE:
            run += size if size > MIN_BLOCK else MIN_BLOCK
        else:
            if run:
                out.append(-run)
                run = 0
            out.append(size)
    if run:
        out.append(-run)
    return tuple(out)


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
