"""A bitsandbytes 4-bit base under FSDP (sizing/parallel.py Totals.quant_state_sharded), measured on the CPU.

Two gloo processes quantize a two-layer stack of bnb Linear4bit (NF4, double quantization, bf16 quant storage, the
QLoRA-under-FSDP setting) and wrap it with FSDP1 (FULL_SHARD). FSDP flattens and shards the parameters, i.e. the
packed 4-bit data; absmax, the nested absmax and the code tables live in a QuantState on the module, which is not
a parameter or buffer: each rank keeps all of it and the forward dequantizes the gathered weight with it. The
engine keeps the whole quantization state on every GPU and shards the packed data.
"""

from __future__ import annotations

import textwrap

import pytest

pytest.importorskip("torch", reason="physics tests need torch: pip install -r requirements-physics.txt")
pytest.importorskip("bitsandbytes", reason="physics tests need bitsandbytes: pip install -r requirements-physics.txt")

from harness import SPAWN_MAIN, run_probe, totals

from sizing.config import RunConfig
from sizing.memory.weights import bytes_4bit
from sizing.parallel import shares

SHAPES = ((256, 512), (512, 256))  # (in, out) of each Linear4bit

PROBE = textwrap.dedent('''
    import json, sys
    import torch, torch.distributed as dist, torch.nn as nn
    import bitsandbytes as bnb

    def qs_bytes(qs):
        ts = [qs.absmax, qs.code] + ([qs.state2.absmax, qs.state2.code, qs.offset] if qs.nested else [])
        return sum(t.numel() * t.element_size() for t in ts)

    def main(rank, world, out, init, shapes):
        dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy
        torch.manual_seed(0)
        m = nn.Sequential(*[bnb.nn.Linear4bit(i, o, bias=False, compute_dtype=torch.bfloat16, compress_statistics=True,
                                              quant_type="nf4", quant_storage=torch.bfloat16) for i, o in shapes])
        m = m.to("cpu")  # quantizes
        packed = sum(l.weight.numel() * l.weight.element_size() for l in m)
        f = FSDP(m, sharding_strategy=ShardingStrategy.FULL_SHARD, device_id=torch.device("cpu"))
        shard = sum(p.numel() * p.element_size() for p in f.parameters())
        with torch.no_grad():
            y = f(torch.randn(2, shapes[0][0], dtype=torch.bfloat16))  # dequantizes the gathered weights
        state = sum(qs_bytes(l.quant_state) for l in m)
        if rank == 1:
            with open(out, "w") as fh:
                json.dump({"packed": packed, "shard": shard, "state": state, "out": list(y.shape)}, fh)
        # both ranks done with every collective, then out without the process group's C++ teardown, which
        # aborts a rank now and then on a loaded 2-core machine (as in test_fsdp2_copy_out.py)
        dist.barrier()
        __import__("os")._exit(0)

''') + SPAWN_MAIN


def test_bnb_quant_state_is_not_sharded(tmp_path):
    got = run_probe(tmp_path, PROBE, SHAPES)
    assert got["out"] == [2, SHAPES[-1][1]]
    data = sum(bytes_4bit(i * o, True)[0] for i, o in SHAPES)
    state = sum(bytes_4bit(i * o, True)[1] for i, o in SHAPES)
    assert got["packed"] == data
    assert got["shard"] == data // 2  # the packed data is sharded (no padding at these sizes)
    t = totals(base=data, quant_state=state)
    assert got["state"] == shares(RunConfig(num_gpus=2, parallelism="fsdp"), t).quant_state == state
