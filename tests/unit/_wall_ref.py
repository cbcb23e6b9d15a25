# A slow, plain simulator of the caching allocator at a card's wall (CUDACachingAllocator.cpp malloc():
# alloc_block || release_cached_blocks && alloc_block || OOM): segments as lists of blocks, every question
# answered by scanning them. tests/unit/test_allocator_wall.py holds sizing/memory/wall.py to it.
from __future__ import annotations

from sizing.memory.allocator import SMALL_BUFFER, SMALL_SIZE, round_size, segment_size


class RefOOM(Exception):
    """The retry failed: the card would have needed `needed` bytes."""

    def __init__(self, needed: int) -> None:
        super().__init__(needed)
        self.needed = needed


class Block:
    def __init__(self, size: int, free: bool, stamp: int) -> None:
        self.size, self.free, self.stamp = size, free, stamp


class RefAllocator:
    """One large pool of explicit segments and the small pool as packed bytes (the engine's abstraction of it:
    ceil(peak live / 2 MiB) segments, its peak restarting from the live bytes when its free segments go)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.segments: list[list[Block]] = []
        self.clock = 0
        self.small_live = self.small_peak = 0
        self.peak_reserved = self.peak_needed = 0

    def _tick(self) -> int:
        self.clock += 1
        return self.clock

    def reserved(self) -> int:
        small = -(-self.small_peak // SMALL_BUFFER) * SMALL_BUFFER
        return small + sum(b.size for seg in self.segments for b in seg)

    def cached_whole(self) -> int:
        return sum(seg[0].size for seg in self.segments if len(seg) == 1 and seg[0].free)

    def release(self) -> None:
        self.segments = [seg for seg in self.segments if not (len(seg) == 1 and seg[0].free)]
        self.small_peak = self.small_live

    def cuda_malloc(self, growth: object) -> None:
        """growth(): the bytes the new segment(s) take, asked again after a release."""
        get = growth if callable(growth) else (lambda: growth)
        nbytes = get()
        if self.reserved() + nbytes <= self.capacity:
            self.peak_needed = max(self.peak_needed, self.reserved() + nbytes - self.cached_whole())
        else:
            self.release()
            nbytes = get()
            if self.reserved() + nbytes > self.capacity:
                raise RefOOM(self.reserved() + nbytes)
            self.peak_needed = max(self.peak_needed, self.reserved() + nbytes)
        self.peak_reserved = max(self.peak_reserved, self.reserved() + nbytes)

    def malloc(self, nbytes: int) -> object:
        size = round_size(nbytes)
        if size <= SMALL_SIZE:
            live = self.small_live + size

            def growth() -> int:
                return (-(-live // SMALL_BUFFER) - -(-self.small_peak // SMALL_BUFFER)) * SMALL_BUFFER

            if growth() > 0:
                self.cuda_malloc(growth)
            self.small_live = live
            self.small_peak = max(self.small_peak, live)
            return ("small", size)
        # best fit: the smallest free block that holds the request, the lowest address among equals
        # (BlockComparatorSize: stream, size, ptr), segments assumed at increasing addresses in creation order
        fits = [(b.size, i, j) for i, seg in enumerate(self.segments) for j, b in enumerate(seg)
                if b.free and b.size >= size]
        if fits:
            _, i, j = min(fits)
        else:
            seg_bytes = segment_size(size)
            self.cuda_malloc(seg_bytes)
            self.segments.append([Block(seg_bytes, True, self._tick())])
            i, j = len(self.segments) - 1, 0
        seg, b = self.segments[i], self.segments[i][j]
        b.free = False
        if b.size - size > SMALL_SIZE:  # should_split() for the large pool
            seg.insert(j + 1, Block(b.size - size, True, self._tick()))
            b.size = size
        return b

    def free(self, handle: object) -> None:
        if isinstance(handle, tuple):
            self.small_live -= handle[1]
            return
        for seg in self.segments:
            for j, b in enumerate(seg):
                if b is handle:
                    b.free = True
                    lo, hi = j, j + 1
                    if j > 0 and seg[j - 1].free:
                        lo = j - 1
                    if j + 1 < len(seg) and seg[j + 1].free:
                        hi = j + 2
                    merged = Block(sum(x.size for x in seg[lo:hi]), True, self._tick())
                    seg[lo:hi] = [merged]
                    return
        raise AssertionError("freed a block that is not live")
