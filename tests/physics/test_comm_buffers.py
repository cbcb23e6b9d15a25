"""Communication buffers that exist before the first step (sizing/parallel.py, memory/timeline.py comm_static),
measured on the CPU: DDP's Reducer allocates its flat gradient buckets when DDP is constructed, so they are alive
in the first forward already, not only from backward on.

One gloo process (DDP builds its Reducer for any world size) wraps a model with frozen and trainable parameters
and traces, through a TorchDispatchMode, what the construction allocates and keeps: the buckets, one element per
trainable parameter element (gradient_as_bucket_view=False, the default).
"""

from __future__ import annotations

import textwrap

import pytest

pytest.importorskip("torch", reason="physics tests need torch: pip install -r requirements-physics.txt")

from harness import LIVE_TRACKER, run_probe, totals

from sizing.config import RunConfig
from sizing.parallel import shares

PROBE = LIVE_TRACKER + textwrap.dedent('''
    import json, sys
    import torch.distributed as dist, torch.nn as nn

    # a file store, not a TCP port: no window in which another probe can take the port
    dist.init_process_group("gloo", init_method="file://" + sys.argv[1] + ".store", rank=0, world_size=1)
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(512, 512), nn.Linear(512, 1024), nn.Linear(1024, 256))
    m[1].weight.requires_grad_(False)  # a frozen base weight: no bucket space
    tr = Live()
    with tr:
        ddp = nn.parallel.DistributedDataParallel(m)
    kept = sum(n for n, _ in tr.live.values())
    trainable = sum(p.numel() * p.element_size() for p in m.parameters() if p.requires_grad)
    with open(sys.argv[1], "w") as fh:
        json.dump({"kept": kept, "trainable": trainable}, fh)
    dist.destroy_process_group()
''')


def test_ddp_buckets_exist_from_construction(tmp_path):
    got = run_probe(tmp_path, PROBE)
    # the engine: DDP's comm buffers are the trainable gradients' bytes, allocated once before the first step
    t = totals(gradients=got["trainable"])
    sh = shares(RunConfig(num_gpus=2, parallelism="ddp"), t)
    assert sh.comm_static
    assert got["kept"] == sh.comm_buffers
