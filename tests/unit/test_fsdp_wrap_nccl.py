"""The FSDP wrap's broadcast over NCCL (sizing/memory/fsdp_init.py): its buffers wait for NCCL's stream.

ProcessGroupNCCL records a broadcast's input on its stream (collective(): recordStream unless
TORCH_NCCL_AVOID_RECORD_STREAMS, default false), so the caching allocator only queues an event when the tensor is
freed (DeviceCachingAllocator::free: stream_uses -> insert_events) and hands the block out again at the first
malloc whose process_events() finds the broadcast done; the CPU knows it is done after its next blocking copy (a
parameter's move to the GPU, or CPU offload's move of a shard to the host: memcpy_and_sync). A unit's flat
parameter and shard therefore cannot reuse its own buckets. CUDA-only: the sizes below are derived by hand.
"""

from __future__ import annotations

from sizing.memory.allocator import CachingAllocator
from sizing.memory.fsdp_init import broadcast_coalesced, fsdp1_init

MiB = 2**20


def test_buckets_wait_instead_of_returning_to_the_pool() -> None:
    a = CachingAllocator(False)
    waiting: list = []
    # [100, 200] closes at 300 >= 250 (a 300 MiB cat), [260] alone (a view of the tensor itself), [10, 20]
    alone = broadcast_coalesced(a, (100 * MiB, 200 * MiB, 260 * MiB, 10 * MiB, 20 * MiB), waiting=waiting)
    assert alone == (2,)
    assert sorted(b.size for b in waiting) == [30 * MiB, 300 * MiB]
    assert a.allocated == 330 * MiB  # nothing went back to the pool
    assert a.reserved == 330 * MiB


def test_the_flat_parameter_cannot_reuse_its_units_bucket() -> None:
    """Two units of 40 + 60 MiB, 50 MiB shards. Unit 1: 40 and 60 MiB segments, the bucket's 100 MiB cat (waits),
    the flat parameter in a new 100 MiB segment, the shard's 50 MiB: 350 MiB. Unit 2: its 40 MiB tensor reuses the
    free 40 MiB block, its copy synchronises, so the cat comes back; 60 MiB reused, the new cat and flat parameter
    take the two free 100 MiB blocks, the shard a new 50 MiB segment: 400 MiB (without NCCL: 300 MiB, the flat
    parameter in the cat's block). The second cat still waits at the end."""
    a = CachingAllocator(False)
    waiting = fsdp1_init(a, ((40 * MiB, 60 * MiB),) * 2, (50 * MiB,) * 2, sync=True)
    assert a.reserved == 400 * MiB
    assert [b.size for b in waiting] == [100 * MiB]
    assert a.allocated == 100 * MiB
    plain = CachingAllocator(False)
    broadcast_coalesced(plain, (40 * MiB, 60 * MiB))  # gloo: freed at once (tests/physics/test_fsdp_broadcast.py)
    assert plain.reserved == 100 * MiB and plain.allocated == 0


def test_a_tensor_broadcast_alone_waits_itself() -> None:
    """A 300 MiB tensor fills its bucket alone: the bucket is the tensor (a view), so the tensor's own block waits:
    the 300 MiB tensor, the 300 MiB flat parameter, the 150 MiB shard; at the end the tensor is still held."""
    a = CachingAllocator(False)
    waiting = fsdp1_init(a, ((300 * MiB,),), (150 * MiB,), sync=True)
    assert [b.size for b in waiting] == [300 * MiB]
    assert a.reserved == 750 * MiB and a.allocated == 300 * MiB


def test_cpu_offload_synchronises_after_each_unit() -> None:
    """Under CPU offload each shard goes to the host with a blocking copy: the unit's cat is back in the pool before
    the next unit, which reuses all of unit 1's blocks: 40 + 60 + 100 (cat) + 100 (flat) + 50 (shard) = 350 MiB."""
    a = CachingAllocator(False)
    waiting = fsdp1_init(a, ((40 * MiB, 60 * MiB),) * 2, (50 * MiB,) * 2, sync=True, offload=True)
    assert a.reserved == 350 * MiB
    assert waiting == [] and a.allocated == 0
