"""FSDP NO_SHARD (fsdp_qlora's "ddp" option, parallelism "fsdp_no_shard" in sizing/parallel.py), measured on the CPU.

Two gloo processes wrap a small stack of linears with FullyShardedDataParallel(sharding_strategy=NO_SHARD,
use_orig_params=False, one unit per linear) and trace, through a TorchDispatchMode on rank 1, what the wrap keeps
and what one backward leaves. Unlike DDP (tests/physics/test_comm_buffers.py) the wrap allocates no gradient
buckets: it keeps only the flat parameters that replace the originals. After backward every unit's flat gradient
is whole on every rank (all-reduced in place, not sharded): the engine's per-GPU gradients are the model's.
"""

from __future__ import annotations

import textwrap

import pytest

pytest.importorskip("torch", reason="physics tests need torch: pip install -r requirements-physics.txt")

from harness import LIVE_TRACKER, SPAWN_MAIN, run_probe, totals

from sizing.config import RunConfig
from sizing.parallel import shares

PROBE = LIVE_TRACKER + textwrap.dedent('''
    import json, sys
    import torch.distributed as dist, torch.nn as nn

    def main(rank, world, out, init):
        dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy
        from torch.distributed.fsdp.wrap import ModuleWrapPolicy
        torch.manual_seed(0)
        m = nn.Sequential(nn.Linear(512, 512), nn.Linear(512, 1024), nn.Linear(1024, 256))
        params = sum(p.numel() * p.element_size() for p in m.parameters())
        tr = Live()
        with tr:
            f = FSDP(m, auto_wrap_policy=ModuleWrapPolicy({nn.Linear}), sharding_strategy=ShardingStrategy.NO_SHARD,
                     use_orig_params=False, device_id=torch.device("cpu"))
        kept = sum(n for n, _ in tr.live.values())
        f(torch.randn(4, 512)).sum().backward()
        grads = sum(p.grad.numel() * p.grad.element_size() for p in f.parameters() if p.grad is not None)
        if rank == 1:
            with open(out, "w") as fh:
                json.dump({"kept": kept, "params": params, "grads": grads}, fh)
        # both ranks done with every collective, then out without the process group's C++ teardown, which
        # aborts a rank now and then on a loaded 2-core machine (as in test_fsdp2_copy_out.py)
        dist.barrier()
        __import__("os")._exit(0)

''') + SPAWN_MAIN


def test_fsdp_no_shard_keeps_no_buckets_and_whole_gradients(tmp_path):
    got = run_probe(tmp_path, PROBE)
    # the wrap keeps the flat parameters (which replace the originals) and nothing gradient-sized besides
    assert got["kept"] == got["params"]
    assert got["grads"] == got["params"]  # every flat gradient whole on this rank
    t = totals(base=got["params"], gradients=got["params"])
    sh = shares(RunConfig(num_gpus=2, parallelism="fsdp_no_shard"), t)
    ddp = shares(RunConfig(num_gpus=2, parallelism="ddp"), t)
    assert (sh.weights, sh.gradients, sh.comm_static) == (got["params"], got["grads"], False)
    assert ddp.comm_static and ddp.comm_buffers == got["params"]  # what NO_SHARD does not allocate
