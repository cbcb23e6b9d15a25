# The caching allocator replay against the rules of c10/cuda/CUDACachingAllocator.cpp, derived by hand.
from __future__ import annotations

from sizing import estimate
from sizing.memory.allocator import CachingAllocator, round_size, segment_size
from sizing.step import grid

from . import _allocator_ref as _ref

MiB = 2**20


def test_request_sizes_and_segments_follow_the_allocator_source() -> None:
    assert round_size(1) == 512 and round_size(513) == 1024  # kMinBlockSize
    assert segment_size(MiB) == 2 * MiB  # small pool: 2 MiB segments (kSmallBuffer)
    assert segment_size(MiB + 512) == 20 * MiB  # 1-10 MiB: kLargeBuffer
    assert segment_size(10 * MiB) == 10 * MiB  # >= kMinLargeAlloc: rounded to 2 MiB
    assert segment_size(11 * MiB) == 12 * MiB


def test_a_large_block_is_split_only_when_more_than_1_mib_remains() -> None:
    a = CachingAllocator()
    a.malloc(11 * MiB + 512)  # 12 MiB segment, 1 MiB - 512 B left: not split, counted as allocated
    assert (a.allocated, a.reserved) == (12 * MiB, 12 * MiB)
    b = CachingAllocator()
    b.malloc(3 * MiB)  # 20 MiB segment, split: 17 MiB stays cached
    assert (b.allocated, b.reserved) == (3 * MiB, 20 * MiB)
    b.malloc(16 * MiB)  # best fit: the 17 MiB remainder (1 MiB left, not split)
    assert (b.allocated, b.reserved) == (20 * MiB, 20 * MiB)


def test_freed_neighbours_coalesce_and_are_reused() -> None:
    a = CachingAllocator()
    x, y = a.malloc(3 * MiB), a.malloc(3 * MiB)  # both carved from one 20 MiB segment
    assert a.reserved == 20 * MiB
    a.free(x)
    a.free(y)
    a.malloc(19 * MiB)  # the whole segment again, no new cudaMalloc
    assert a.reserved == 20 * MiB and a.peak_reserved == 20 * MiB


def test_expandable_segments_grow_a_free_tail_instead_of_a_new_segment() -> None:
    # Expandable: the large pool maps 20 MiB pages (kLargeBuffer, CUDACachingAllocator.cpp SegmentRange).
    fixed, grown = CachingAllocator(), CachingAllocator(expandable=True)
    for a in (fixed, grown):
        a.free(a.malloc(11 * MiB))  # fixed: a 12 MiB segment; expandable: one 20 MiB page, all free again
        a.malloc(13 * MiB)
    assert fixed.reserved == 12 * MiB + 14 * MiB  # a second segment
    assert grown.reserved == 20 * MiB  # 13 MiB fits the page already mapped
    grown.malloc(10 * MiB)  # the page's free 7 MiB tail is extended by one more page: 7 + 20 >= 10
    assert grown.reserved == 40 * MiB
    grown.malloc(17 * MiB)  # 17 MiB left at the end: it fits
    assert grown.reserved == 40 * MiB


def test_reserved_covers_allocated_with_either_segment_kind() -> None:
    run = {"model": "meta-llama/Llama-3.1-8B", "method": "full", "bf16": True, "max_seq_length": 2048,
           "per_device_train_batch_size": 4, "gradient_checkpointing": True, "gpu": "H200-SXM-141GB"}
    plain, expandable = estimate(run), estimate({**run, "expandable_segments": True})
    assert plain.reserved_bytes >= plain.allocated_bytes
    assert expandable.allocated_bytes == plain.allocated_bytes
    assert plain.allocated_bytes <= expandable.reserved_bytes


def test_replay_grid_rounds_up_by_at_most_a_quarter() -> None:
    for x in range(1, 5000):
        g = grid(x)
        assert x <= g <= max(x, 1.25 * x) and grid(g) == g


def test_a_full_card_releases_cached_whole_segments_before_it_fails() -> None:
    # release_cached_blocks(): on a failed cudaMalloc the unsplit cached segments are freed and the request
    # retried, so a card needs less than an ample card ends up reserving.
    a = CachingAllocator()
    a.free(a.malloc(100 * MiB))  # a whole 100 MiB segment, cached
    a.malloc(120 * MiB)  # does not fit it: a new segment
    assert a.peak_reserved == 220 * MiB
    assert a.peak_needed == 120 * MiB  # the cached 100 MiB would have been released first


def test_equal_sizes_go_to_the_lowest_address_first() -> None:
    """Best fit among free blocks of one size takes the lowest address (BlockComparatorSize orders the pool by
    (stream, size, ptr)), not the one cached first. Derived by hand, segments at increasing addresses: a 20 MiB
    segment A, then a 40 MiB segment split into 20 MiB live + a 20 MiB free tail; A freed after the tail."""
    for ref in (False, True):
        a = _ref.CachingAllocator() if ref else CachingAllocator()
        first = a.malloc(20 * MiB)  # segment 0: A, whole
        a.free(a.malloc(40 * MiB))  # segment 1, cached whole
        a.malloc(20 * MiB)  # splits segment 1: a free 20 MiB tail at offset 20 MiB
        a.free(first)  # A cached, after the tail, at a lower address
        assert a.cached_whole == 20 * MiB
        a.malloc(20 * MiB)  # takes A (segment 0), not the tail: no whole segment stays cached
        assert a.cached_whole == 0
        a.malloc(50 * MiB)  # a new segment: reserved 110 MiB, none of it releasable
        assert (a.reserved, a.peak_needed) == (110 * MiB, 110 * MiB)  # the tail taken instead: 90 MiB needed


def test_expandable_equal_sizes_take_the_lower_offset() -> None:
    """Expandable segments: one segment, so the lowest address is the lowest offset. Three 20 MiB blocks at 0, 20
    and 40 MiB; the last (the segment's end) freed first, then the first. A 20 MiB request takes offset 0, so a
    30 MiB one extends the free 20 MiB end by one 20 MiB page: reserved 80 MiB (taking the end first: 100 MiB)."""
    for ref in (False, True):
        a = _ref.CachingAllocator(True) if ref else CachingAllocator(True)
        x, _, z = a.malloc(20 * MiB), a.malloc(20 * MiB), a.malloc(20 * MiB)
        a.free(z)
        a.free(x)
        a.malloc(20 * MiB)
        a.malloc(30 * MiB)
        assert a.reserved == 80 * MiB
