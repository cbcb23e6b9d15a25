# The caching allocator on a card of a given size: a cudaMalloc that would pass the card's usable bytes first
# releases every cached whole segment, then retries, then fails (CUDACachingAllocator.cpp malloc(), torch 2.13).
from __future__ import annotations

from collections.abc import Callable

from .allocator import CachingAllocator, _Block, small_growth

# What is modelled (c10/cuda/CUDACachingAllocator.cpp at v2.13.0, DeviceCachingAllocator::malloc):
#   block_found = alloc_block(params, false)                        a new segment, if the card has room
#     || (release_available_cached_blocks(params) && alloc_block())  returns false at once unless max_split_size
#                                                                     is set (default SIZE_MAX): a no-op here
#     || (release_cached_blocks() && alloc_block(params, true))      frees every cached segment with no
#                                                                     neighbours (!prev && !next), large and small
#                                                                     pools of every stream, then retries once
#   and then OutOfMemoryError. max_memory_reserved is the peak of the device-wide reserved_bytes counter, which
#   release_block lowers: on a small card it saturates at the wall instead of reaching the ample card's value.
# Not modelled: garbage_collection_threshold (acts only with set_per_process_memory_fraction < 1), max_split_size
#   (not a configuration field), and expandable segments' unmap_block (free pages returned from the middle of a
#   segment): an expandable large pool releases nothing here (its small pool does), as in the needed figure.


class OutOfMemory(Exception):
    """The retry after release_cached_blocks failed too: what the card would have needed at that moment."""

    def __init__(self, needed: int) -> None:
        super().__init__(needed)
        self.needed = needed


class Wall:
    """One device's usable bytes, shared by the allocator pools of every stream (one reserved_bytes counter)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.pools: list[CappedAllocator] = []
        self.peak_reserved = 0  # torch.cuda.max_memory_reserved on this card
        self.peak_needed = 0  # the most the card held at a cudaMalloc, cached whole segments released if that failed

    def reserved(self) -> int:
        """The device's reserved bytes now."""
        return sum(p.reserved for p in self.pools)

    def grow(self, size: Callable[[], int]) -> None:
        """A cudaMalloc of size() bytes: released-and-retried at the wall, OutOfMemory if still over it (size is
        asked again after the release: the small pool's packing restarts from its live bytes)."""
        total, nbytes = self.reserved(), size()
        if total + nbytes > self.capacity:
            for p in self.pools:
                p.release()
            total, nbytes = self.reserved(), size()
            if total + nbytes > self.capacity:
                raise OutOfMemory(total + nbytes)
            self.peak_needed = max(self.peak_needed, total + nbytes)
        else:
            self.peak_needed = max(self.peak_needed, total + nbytes - sum(p.cached_whole for p in self.pools))
        self.peak_reserved = max(self.peak_reserved, total + nbytes)


class CappedAllocator(CachingAllocator):
    """CachingAllocator whose every new segment goes through the card's Wall (a separate class: the ample
    replay's hot paths stay as they are)."""

    dry = False  # run_free's dry path would pass no new small segment through the wall

    def __init__(self, wall: Wall, expandable: bool = False) -> None:
        super().__init__(expandable)
        self.wall = wall
        wall.pools.append(self)

    def _grow(self, nbytes: int) -> None:
        self.wall.grow(lambda: nbytes)
        super()._grow(nbytes)

    def _small(self, size: int) -> _Block:
        live = self.small_live + size
        if small_growth(live, self.small_peak) > 0:  # new 2 MiB small segments
            self.wall.grow(lambda: small_growth(live, self.small_peak))
        return super()._small(size)

    def release(self) -> None:
        """release_cached_blocks() for this pool: cudaFree every cached block that is a whole segment."""
        if not self.expandable:
            kept = []
            for key in self._keys:
                b = self._at[key[1]]
                if b.prev is None and b.next is None:
                    del self._at[key[1]]
                    self.reserved -= key[0]
                    self.cached_whole -= key[0]
                else:
                    kept.append(key)  # the rest, in order
            self._keys[:] = kept  # in place: a malloc that led here holds the list (CachingAllocator._large)
        # The small pool packs its blocks (CachingAllocator._small): its free segments are those above the live
        # bytes, and release_blocks(small_blocks) frees them; its peak restarts from what is live.
        self.reserved -= small_growth(self.small_peak, self.small_live)
        self.small_peak = self.small_live
