"""FSDP2 copies each all-gathered unit into its parameters, FSDP1 gathers in place; both copy the gradients once.

Two gloo processes train a tiny Llama (fp32) sharded per decoder layer, as torchtune shards it: FSDP2
(fully_shard, reshard_after_forward=True; the embedding and the head as units of their own, so the root keeps only
the final norm: torchtune >= 0.3 training.shard_model) or FSDP1 FULL_SHARD (torchtune 0.1-0.2). A TorchDispatchMode
on rank 1 sums the bytes written by split_with_sizes_copy, the op FSDP2's copy-out runs on the compute stream
(torch _fsdp_collectives.py foreach_all_gather_copy_out; torch.ops.fsdp.split_with_sizes_copy in torch 2.13), over
one forward and backward. Under FSDP2 that is the whole unsharded model twice (gathered for forward, gathered again
for backward); under FSDP1 nothing. The step-time roofline charges Traffic.copy_bytes, read and write, for it.
"""

from __future__ import annotations

import textwrap

import pytest

pytest.importorskip("torch", reason="physics tests need torch: pip install -r requirements-physics.txt")

from harness import MODEL_CONFIGS, SPAWN_MAIN, run_probe

from sizing import load_config
from sizing.catalog import resolve_architecture
from sizing.memory.adapters import trainable
from sizing.memory.regime import resolve
from sizing.time.step_ops import traffic

B, S = 1, 8

PROBE = textwrap.dedent('''
    import json, os, sys
    import torch
    import torch.distributed as dist
    import transformers
    from torch.utils._python_dispatch import TorchDispatchMode

    def _bytes(ts):
        ts = [ts] if isinstance(ts, torch.Tensor) else ts
        return sum(t.numel() * t.element_size() for t in ts)

    class CopyOut(TorchDispatchMode):
        """Bytes written by the all-gather copy-out (split_with_sizes_copy) and the reduce-scatter copy-in
        (torch.cat / _chunk_cat into the reduce-scatter input), from their `out` tensors."""
        def __init__(self):
            super().__init__()
            self.bytes = 0
            self.rs_bytes = 0
            self.flat = set()
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            name = str(func)
            # aten ops (torch 2.4-2.5) or the fsdp:: custom ops wrapping them (later releases)
            if "split_with_sizes_copy" in name:
                self.bytes += _bytes(kwargs.get("out", args[3] if len(args) > 3 else ()))
            elif ("chunk_cat" in name or name.startswith("aten.cat")) and "out" in kwargs:
                self.rs_bytes += _bytes(kwargs["out"])
            elif "chunk_cat" in name and len(args) > 3:
                self.rs_bytes += _bytes(args[3])
            out = func(*args, **kwargs)
            # FSDP1: autograd concatenates the views' gradients into a flat gradient of an unsharded flat parameter
            if name.startswith("aten.cat") and isinstance(out, torch.Tensor) and out.numel() in self.flat:
                self.rs_bytes += _bytes(out)
            return out

    def main(rank, world, out, init, conf, b, s, fsdp2):
        dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
        torch.manual_seed(0)
        d = dict(conf); mt = d.pop("model_type")
        cfg = transformers.AutoConfig.for_model(mt, **d)
        model = transformers.AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.float32,
                                                              attn_implementation="sdpa")
        params = sum(p.numel() * p.element_size() for p in model.parameters())
        if fsdp2:
            from torch.distributed.device_mesh import init_device_mesh
            from torch.distributed.fsdp import fully_shard
            mesh = init_device_mesh("cpu", (world,))
            for layer in model.model.layers:
                fully_shard(layer, mesh=mesh)
            fully_shard(model.model.embed_tokens, mesh=mesh)
            fully_shard(model.lm_head, mesh=mesh)
            f = fully_shard(model, mesh=mesh)
        else:
            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy
            from torch.distributed.fsdp.wrap import ModuleWrapPolicy
            from transformers.models.llama.modeling_llama import LlamaDecoderLayer
            f = FSDP(model, auto_wrap_policy=ModuleWrapPolicy({LlamaDecoderLayer}),
                     sharding_strategy=ShardingStrategy.FULL_SHARD, device_id=torch.device("cpu"))
        ids = torch.randint(0, cfg.vocab_size, (b, s))
        flat = {p.numel() * world for p in f.parameters()}  # FSDP1: the unsharded flat parameters' sizes
        for step in range(2):
            tr = CopyOut()
            tr.flat = flat if not fsdp2 else set()
            with tr:
                f(input_ids=ids, labels=ids).loss.backward()
            if rank == 1 and step == 1:
                with open(out, "w") as fh:
                    json.dump({"copied": tr.bytes, "rs_copied": tr.rs_bytes, "params": params}, fh)
            for p in f.parameters():
                p.grad = None
        # Both ranks done with every collective, then out without C++ teardown: the process group's destructor
        # aborted a rank now and then on a loaded 2-core machine ("terminate called without an active
        # exception", after the figures were written); nothing after this point is measured.
        dist.barrier()
        sys.stdout.flush()
        os._exit(0)

''') + SPAWN_MAIN


def _engine(framework_version: str | None) -> float:
    conf = {"model_config": dict(MODEL_CONFIGS["llama"]), "method": "full", "torch_dtype": "float32", "bf16": False,
            "max_seq_length": S, "per_device_train_batch_size": B, "gradient_checkpointing": False,
            "optim": "adamw_torch", "framework": "torchtune", "num_gpus": 2, "parallelism": "fsdp"}
    if framework_version:
        conf["framework_version"] = framework_version
    cfg = load_config(conf)
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    return traffic(cfg, arch, resolve(cfg, arch, "cpu"), trainable(cfg, arch)).copy_bytes


def test_fsdp2_copies_every_gathered_unit_out_for_forward_and_backward(tmp_path):
    got = run_probe(tmp_path, PROBE, MODEL_CONFIGS["llama"], B, S, True)
    # every parameter but the root's final norm (gathered once, kept through backward) is copied out twice
    hidden = MODEL_CONFIGS["llama"]["hidden_size"]
    assert got["copied"] == pytest.approx(2 * got["params"] - hidden * 4, abs=64), got
    # each backward copies every (trainable) unsharded gradient into the reduce-scatter input
    assert got["rs_copied"] == pytest.approx(got["params"], abs=64), got
    # the engine charges a read and a write of each copied byte
    assert _engine(None) / 2 == pytest.approx(got["copied"] + got["rs_copied"], rel=0.01)


def test_fsdp1_gathers_in_place_and_concatenates_the_gradients(tmp_path):
    got = run_probe(tmp_path, PROBE, MODEL_CONFIGS["llama"], B, S, False)
    assert got["copied"] == 0, got
    # each backward concatenates every unsharded gradient into its unit's flat gradient
    assert got["rs_copied"] == pytest.approx(got["params"], abs=64), got
    assert _engine("0.2.1") / 2 == pytest.approx(got["rs_copied"], rel=0.01)
