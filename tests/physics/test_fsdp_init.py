"""The FSDP wrap before the first step (sizing/memory/fsdp_init.py), measured with FSDP1 on the CPU.

Two gloo processes wrap a meta-device model of three units with FullyShardedDataParallel (FULL_SHARD,
param_init_fn=to_empty, the path of every rank but 0 under sync_module_states) and trace, through a
TorchDispatchMode on rank 1, the tensors each unit's wrap allocates and frees. The engine's replay of the
wrap must allocate and free the same blocks in the same order: the unit's tensors, the flat parameter, the
shard while both are alive, then the originals. (sync_module_states itself needs a GPU: FSDP refuses CPU
parameters with it, so its broadcast buckets are not part of this check.)
"""

from __future__ import annotations

import textwrap

import pytest

pytest.importorskip("torch", reason="physics tests need torch: pip install -r requirements-physics.txt")

from harness import LIVE_TRACKER, SPAWN_MAIN, Recording, run_probe

from sizing.memory.fsdp_init import fsdp1_init

PROBE = LIVE_TRACKER + textwrap.dedent('''
    import json, sys
    import torch.distributed as dist, torch.nn as nn

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(256, 256, bias=False)
            self.b = nn.Linear(256, 512, bias=False)

    def main(rank, world, out, init):
        dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy
        from torch.distributed.fsdp.wrap import ModuleWrapPolicy
        with torch.device("meta"):
            m = nn.Sequential(Layer(), Layer(), Layer())
        tr = Live(views=True)  # FSDP's flat parameter and shard include views of the inputs
        with tr:
            FSDP(m, auto_wrap_policy=ModuleWrapPolicy({Layer}), sharding_strategy=ShardingStrategy.FULL_SHARD,
                 device_id=torch.device("cpu"),
                 param_init_fn=lambda mod: mod.to_empty(device=torch.device("cpu"), recurse=False))
        if rank == 1:
            with open(out, "w") as fh:
                json.dump(tr.events, fh)
        # both ranks done with every collective, then out without the process group's C++ teardown, which
        # aborts a rank now and then on a loaded 2-core machine (as in test_fsdp2_copy_out.py)
        dist.barrier()
        __import__("os")._exit(0)

''') + SPAWN_MAIN



def test_fsdp1_wrap_sequence(tmp_path):
    events = run_probe(tmp_path, PROBE)
    measured = [tuple(e[:2]) for e in events if e[1] >= 256 * 256]  # blocks, not scalars
    a_bytes, b_bytes = 256 * 256 * 4, 512 * 256 * 4
    units = ((a_bytes, b_bytes),) * 3
    shard = (a_bytes + b_bytes) // 2
    rec = Recording()
    fsdp1_init(rec, units, (shard,) * 3, sync=False)
    engine = rec.events[:-3]  # the engine then frees its shards (the replay re-allocates them as static)
    # FSDP frees the flat parameter by resizing its storage to 0 (shard(): orig_storage._resize_(0)), which a
    # dispatch trace does not see as a free; compare without the engine's flat-parameter frees.
    flat = a_bytes + b_bytes
    engine = [e for e in engine if e != ("f", flat)]
    assert sorted(measured[i] for i in range(len(measured)) if measured[i][0] == "m") == sorted(
        e for e in engine if e[0] == "m")
    # per unit: the tensors, the flat parameter, the shard, then the tensors' frees (in any order)
    per = len(engine) // 3
    for u in range(3):
        got, want = measured[u * per:(u + 1) * per], engine[u * per:(u + 1) * per]
        assert got[:4] == want[:4]
        assert sorted(got[4:]) == sorted(want[4:])
