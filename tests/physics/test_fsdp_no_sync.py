"""Gradient accumulation under FSDP no_sync (sizing/parallel.py Shares.carried), measured on the CPU.

The Trainer (accelerator.no_sync) and LitGPT (fabric.no_backward_sync) run every micro-batch of an accumulation
window but the last inside FullyShardedDataParallel.no_sync(). Two gloo processes wrap a small stack of linears
(FULL_SHARD, one unit per linear) and run one backward inside no_sync, then one outside: inside, every rank keeps
the whole unsharded gradient of every unit (what the engine carries through micro-batches 2..k); the synced
backward leaves each rank its 1/2 shard (what the optimizer step sees).
"""

from __future__ import annotations

import textwrap

import pytest

pytest.importorskip("torch", reason="physics tests need torch: pip install -r requirements-physics.txt")

from harness import SPAWN_MAIN, run_probe, totals

from sizing.config import RunConfig
from sizing.parallel import shares

PROBE = textwrap.dedent('''
    import json, sys
    import torch, torch.distributed as dist, torch.nn as nn

    def grad_bytes(f):
        return sum(p.grad.numel() * p.grad.element_size() for p in f.parameters() if p.grad is not None)

    def main(rank, world, out, init):
        dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy
        from torch.distributed.fsdp.wrap import ModuleWrapPolicy
        torch.manual_seed(0)
        m = nn.Sequential(nn.Linear(512, 512), nn.Linear(512, 1024), nn.Linear(1024, 256))
        params = sum(p.numel() * p.element_size() for p in m.parameters())
        f = FSDP(m, auto_wrap_policy=ModuleWrapPolicy({nn.Linear}), sharding_strategy=ShardingStrategy.FULL_SHARD,
                 device_id=torch.device("cpu"))
        with f.no_sync():
            f(torch.randn(4, 512)).sum().backward()
        inside = grad_bytes(f)
        f(torch.randn(4, 512)).sum().backward()
        synced = grad_bytes(f)
        if rank == 1:
            with open(out, "w") as fh:
                json.dump({"params": params, "inside": inside, "synced": synced}, fh)
        # both ranks done with every collective, then out without the process group's C++ teardown, which
        # aborts a rank now and then on a loaded 2-core machine (as in test_fsdp2_copy_out.py)
        dist.barrier()
        __import__("os")._exit(0)

''') + SPAWN_MAIN


def test_fsdp_no_sync_accumulates_unsharded_gradients(tmp_path):
    got = run_probe(tmp_path, PROBE)
    assert got["inside"] == got["params"]  # whole gradients on this rank inside no_sync
    assert got["synced"] == pytest.approx(got["params"] / 2, abs=64)  # its shard once synced (padding: a few B)
    t = totals(base=got["params"], gradients=got["params"])
    for framework, carried in (("transformers", got["inside"]), ("litgpt", got["inside"]), ("torchtune", -1)):
        sh = shares(RunConfig(num_gpus=2, parallelism="fsdp", framework=framework, gradient_accumulation_steps=4), t)
        assert sh.carried == carried, framework  # torchtune reduce-scatters every micro-batch (FSDP2, no no_sync)
        assert sh.gradients == pytest.approx(got["synced"], abs=64)
    assert shares(RunConfig(num_gpus=2, parallelism="fsdp", gradient_accumulation_steps=1), t).carried == -1
    # under CPU offload too: torch's no_sync docstring says the gradients are offloaded only after the sync
    off = shares(RunConfig(num_gpus=2, parallelism="fsdp", cpu_offload=True, gradient_accumulation_steps=4), t)
    assert off.carried == got["inside"]
