"""DeepSpeed ZeRO-3's reduce bucket (sizing/parallel.py ZERO_REDUCE_BUCKET), measured on the CPU. Opt-in: DeepSpeed is
not in requirements-physics.txt; set SIZING_DEEPSPEED=1 with `deepspeed` importable (measured with 0.19.8, its CPU
accelerator and gloo: pip install --no-deps --no-build-isolation deepspeed hjson py-cpuinfo msgpack ninja einops
nvidia-ml-py next to the physics stack).

Two gloo processes build a tiny Llama (fp32, everything trainable) and hand it to deepspeed.initialize with ZeRO
stage 3 and no other setting, as accelerate's DeepSpeed plugin does. What initialize allocates and keeps must hold
one flat buffer of reduce_bucket_size elements in the trainable dtype: the engine's ZeRO-3 comm buffer.
"""

from __future__ import annotations

import os
import textwrap

import pytest

pytest.importorskip("torch", reason="physics tests need torch: pip install -r requirements-physics.txt")

from harness import LIVE_TRACKER, MODEL_CONFIGS, SPAWN_MAIN, run_probe, totals

from sizing.config import RunConfig
from sizing.parallel import shares

OPT_IN = pytest.mark.skipif(os.environ.get("SIZING_DEEPSPEED") != "1",
                            reason="DeepSpeed on the CPU: set SIZING_DEEPSPEED=1 (not a pinned dependency)")

PROBE = LIVE_TRACKER + textwrap.dedent('''
    import json, os, sys
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    import transformers

    def main(rank, world, out, init, conf):
        os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
        import deepspeed
        deepspeed.init_distributed(dist_backend="gloo", auto_mpi_discovery=False, init_method=init, rank=rank,
                                   world_size=world)
        d = dict(conf); mt = d.pop("model_type")
        model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(mt, **d),
                                                              torch_dtype=torch.float32)
        ds_cfg = {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3},
                  "zero_force_ds_cpu_optimizer": False}
        tr = Live()
        with tr:
            deepspeed.initialize(model=model, optimizer=torch.optim.AdamW(model.parameters()), config=ds_cfg)
        if rank == 1:
            with open(out, "w") as fh:
                json.dump(sorted((n for n, _ in tr.live.values()), reverse=True), fh)

''') + SPAWN_MAIN


@OPT_IN
def test_zero3_keeps_one_reduce_bucket(tmp_path):
    pytest.importorskip("deepspeed", reason="SIZING_DEEPSPEED=1 needs deepspeed importable")
    kept = run_probe(tmp_path, PROBE, MODEL_CONFIGS["llama"], timeout=600)
    t = totals(grad_elem=4)
    sh = shares(RunConfig(num_gpus=2, parallelism="zero3"), t)
    assert sh.comm_static
    assert kept[0] == sh.comm_buffers  # 2,000,000,000 bytes: 5e8 fp32 elements, far above this model's 7M parameters
