"""FSDP's sync_module_states broadcast (sizing/memory/fsdp_init.broadcast_coalesced), measured on the CPU.

FSDP1's wrap broadcasts rank 0's parameters with dist._broadcast_coalesced (torch v2.2 fsdp/_init_utils.py
_sync_params_and_buffers). FSDP itself refuses CPU parameters with sync_module_states, so the probe calls the
same C++ routine directly: two gloo processes, fp32 tensors of 300, 300, 1100, 300, 300, 100 and 100 KiB under a
512 KiB bucket limit, traced on rank 0 (the source rank) through a TorchDispatchMode. The engine's replay of
the broadcast must allocate and free the same flattened buckets in the same order: buckets close once they
hold >= the limit, a single-tensor bucket is a view (no copy), and two broadcasts are in flight at most.
"""

from __future__ import annotations

import textwrap

import pytest

pytest.importorskip("torch", reason="physics tests need torch: pip install -r requirements-physics.txt")

from harness import LIVE_TRACKER, SPAWN_MAIN, Recording, run_probe

from sizing.memory.fsdp_init import broadcast_coalesced

KiB = 1024
SIZES = (300, 300, 1100, 300, 300, 100, 100)  # KiB
LIMIT = 512 * KiB

PROBE = LIVE_TRACKER + textwrap.dedent(f'''
    import json, sys
    import torch.distributed as dist

    def main(rank, world, out, init):
        dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
        tensors = [torch.full((s * 1024 // 4,), float(rank)) for s in {SIZES!r}]
        tr = Live()
        with tr:
            dist._broadcast_coalesced(dist.group.WORLD, tensors, {LIMIT}, 0)
        assert all(float(t[0]) == 0.0 for t in tensors)  # rank 0's values everywhere
        if rank == 0:
            with open(out, "w") as fh:
                json.dump(tr.events, fh)
        # both ranks done with every collective, then out without the process group's C++ teardown, which
        # aborts a rank now and then on a loaded 2-core machine (as in test_fsdp2_copy_out.py)
        dist.barrier()
        __import__("os")._exit(0)

''') + SPAWN_MAIN



def test_broadcast_buckets_as_rank_0_allocates_them(tmp_path):
    measured = [tuple(e[:2]) for e in run_probe(tmp_path, PROBE)]
    rec = Recording()
    broadcast_coalesced(rec, tuple(s * KiB for s in SIZES), LIMIT)
    # By hand: buckets [300, 300] (600 >= 512: closed), [1100] (alone: a view), [300, 300], [100, 100] (the
    # rest); the third waits for the first to finish, the fourth for the second (a view: nothing to free).
    assert rec.events == [("m", 600 * KiB), ("f", 600 * KiB), ("m", 600 * KiB), ("m", 200 * KiB),
                          ("f", 600 * KiB), ("f", 200 * KiB)]
    assert measured == rec.events
