"""FSDP shards parameters, not buffers (PEFT tuners' frozen factors and indices: PSOFT's, TinyLoRA's, OSF's, FRoD's
U), measured on the CPU.

Two gloo processes wrap a small stack of linears, each carrying a frozen buffer as a tuner's layer does, with
FullyShardedDataParallel(FULL_SHARD, one unit per linear). On each rank the flat parameters hold half the parameter
bytes and the buffers stay whole: the engine's per-GPU share (sizing.parallel.shares) divides the parameters and
keeps Totals.buffers on every GPU.
"""

from __future__ import annotations

import textwrap

import pytest

pytest.importorskip("torch", reason="physics tests need torch: pip install -r requirements-physics.txt")

from harness import SPAWN_MAIN, run_probe, totals

from sizing.config import RunConfig
from sizing.parallel import shares

PROBE = textwrap.dedent('''
    import json, os, sys
    import torch
    import torch.distributed as dist, torch.nn as nn

    class Tuned(nn.Linear):
        """A linear with a frozen factor registered as a buffer, as PEFT's BufferDict registers a tuner's."""

        def __init__(self, i, o):
            super().__init__(i, o)
            self.register_buffer("factor", torch.randn(o, 64))

    def main(rank, world, out, init):
        dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy
        from torch.distributed.fsdp.wrap import ModuleWrapPolicy
        torch.manual_seed(0)
        m = nn.Sequential(Tuned(512, 512), Tuned(512, 1024), Tuned(1024, 256))
        params = sum(p.numel() * p.element_size() for p in m.parameters())
        buffers = sum(b.numel() * b.element_size() for b in m.buffers())
        f = FSDP(m, auto_wrap_policy=ModuleWrapPolicy({Tuned}), sharding_strategy=ShardingStrategy.FULL_SHARD,
                 device_id=torch.device("cpu"))
        local = sum(p.numel() * p.element_size() for p in f.parameters())  # the flat parameters' shards
        held = sum(b.numel() * b.element_size() for b in f.buffers())
        if rank == 1:
            with open(out, "w") as fh:
                json.dump({"params": params, "buffers": buffers, "local": local, "held": held}, fh)
        dist.barrier()
        os._exit(0)  # out without the process group's C++ teardown (as in test_fsdp_no_shard.py)

''') + SPAWN_MAIN


def test_fsdp_shards_parameters_and_keeps_buffers_whole(tmp_path):
    got = run_probe(tmp_path, PROBE)
    assert got["local"] == got["params"] // 2  # every unit's flat parameter halved (sizes even: no padding)
    assert got["held"] == got["buffers"]  # the buffers whole on this rank
    # the engine: the buffers inside the adapters' bytes, as sizing.step passes them
    t = totals(base=got["params"], adapters=got["buffers"], buffers=got["buffers"])
    sh = shares(RunConfig(num_gpus=2, parallelism="fsdp"), t)
    assert sh.weights - sh.gathered == got["local"] + got["held"]
