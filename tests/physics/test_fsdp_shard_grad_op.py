"""FSDP SHARD_GRAD_OP (parallelism "fsdp_shard_grad_op", sizing/parallel.py Shares.kept_gathered), on the CPU.

Two gloo processes wrap a stack of linears with FullyShardedDataParallel (one unit per linear, the root holding
nothing of its own) under SHARD_GRAD_OP and under FULL_SHARD, run one forward and read, per unit, the bytes of its
unsharded flat parameter (`_full_param_padded`, which FSDP allocates and frees by resizing its storage). Under
SHARD_GRAD_OP every unit is still gathered at the end of forward; under FULL_SHARD none is; after backward neither
keeps any (SHARD_GRAD_OP frees each unit in its post-backward); a forward without gradients (an evaluation) leaves
every unit gathered under SHARD_GRAD_OP, none under FULL_SHARD.
"""

from __future__ import annotations

import textwrap

import pytest

pytest.importorskip("torch", reason="physics tests need torch: pip install -r requirements-physics.txt")

from harness import SPAWN_MAIN, run_probe, totals

from sizing.config import RunConfig
from sizing.parallel import UNITS_IN_FLIGHT, shares

PROBE = textwrap.dedent('''
    import json, sys
    import torch, torch.distributed as dist, torch.nn as nn

    def gathered(f):
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        out = 0
        for m in FSDP.fsdp_modules(f):
            h = m._handle
            if h is not None and hasattr(h.flat_param, "_full_param_padded"):
                out += h.flat_param._full_param_padded.untyped_storage().nbytes()
        return out

    def main(rank, world, out, init):
        dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy
        from torch.distributed.fsdp.wrap import ModuleWrapPolicy
        got = {}
        for name in ("SHARD_GRAD_OP", "FULL_SHARD"):
            torch.manual_seed(0)
            m = nn.Sequential(*[nn.Linear(256, 256, bias=False) for _ in range(6)])
            got["unit"] = 256 * 256 * 4
            f = FSDP(m, auto_wrap_policy=ModuleWrapPolicy({nn.Linear}), device_id=torch.device("cpu"),
                     sharding_strategy=getattr(ShardingStrategy, name))
            y = f(torch.randn(4, 256)).sum()
            got[name] = gathered(f)
            y.backward()
            got[name + "_after"] = gathered(f)
            with torch.no_grad():  # an evaluation's forward: no backward to reshard in
                f(torch.randn(4, 256))
            got[name + "_eval"] = gathered(f)
        if rank == 1:
            with open(out, "w") as fh:
                json.dump(got, fh)
        # both ranks done with every collective, then out without the process group's C++ teardown, which
        # aborts a rank now and then on a loaded 2-core machine (as in test_fsdp2_copy_out.py)
        dist.barrier()
        __import__("os")._exit(0)

''') + SPAWN_MAIN


def test_shard_grad_op_keeps_every_unit_gathered_until_backward(tmp_path):
    got = run_probe(tmp_path, PROBE)
    unit = got["unit"]
    assert got["SHARD_GRAD_OP"] == 6 * unit  # all six units gathered at the end of forward
    assert got["FULL_SHARD"] == 0  # each resharded after its forward
    assert got["SHARD_GRAD_OP_after"] == got["FULL_SHARD_after"] == 0  # and freed in backward
    # a forward without gradients (the Trainer's evaluation) has no backward: SHARD_GRAD_OP leaves all six gathered
    assert (got["SHARD_GRAD_OP_eval"], got["FULL_SHARD_eval"]) == (6 * unit, 0)
    # the engine: two units in flight (as FULL_SHARD) plus the rest of the decoder units kept gathered
    t = totals(base=6 * unit, gradients=6 * unit, layer_unit=unit, layer_grads=unit)
    sgo = shares(RunConfig(num_gpus=2, parallelism="fsdp_shard_grad_op", method="full"), t)
    full = shares(RunConfig(num_gpus=2, parallelism="fsdp", method="full"), t)
    assert (sgo.gathered, full.gathered, full.kept_gathered) == (UNITS_IN_FLIGHT * unit, UNITS_IN_FLIGHT * unit, 0)
    assert sgo.gathered + sgo.kept_gathered == got["SHARD_GRAD_OP"]
    assert (sgo.gradients, sgo.optimizer, sgo.comm_static) == (full.gradients, full.optimizer, False)
