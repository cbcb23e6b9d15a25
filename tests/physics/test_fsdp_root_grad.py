"""FSDP's root unit gradient at the end of backward (sizing/memory/timeline.py), measured with FSDP1 on the CPU.

Two gloo processes train a tiny Llama (fp32, everything trainable) wrapped with FullyShardedDataParallel
(FULL_SHARD, one unit per decoder layer, the root holding the embeddings, final norm and LM head) and trace,
through a TorchDispatchMode on rank 1, the second step's backward. The root unit's parameters are views of
one flat parameter: autograd keeps the head's gradient from the start of backward until the embedding's
arrives at its end, then concatenates the pieces into the flat gradient that is reduce-scattered. The
gradient bytes alive at that concatenation (the layers' gradient shards, the pieces and the flat copy) must be
the engine's moment "FSDP root unit's flat gradient".
"""

from __future__ import annotations

import textwrap

import pytest

pytest.importorskip("torch", reason="physics tests need torch: pip install -r requirements-physics.txt")

from harness import LIVE_TRACKER, MODEL_CONFIGS, SPAWN_MAIN, run_probe

from sizing import load_config
from sizing.catalog import resolve_architecture
from sizing.step import step_memory

B, S = 1, 8  # few tokens: the gradients dominate what backward allocates

PROBE = LIVE_TRACKER + textwrap.dedent('''
    import json, sys
    import torch.distributed as dist
    import transformers

    def main(rank, world, out, init, conf, b, s):
        dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy
        from torch.distributed.fsdp.wrap import ModuleWrapPolicy
        from transformers.models.llama.modeling_llama import LlamaDecoderLayer
        torch.manual_seed(0)
        d = dict(conf); mt = d.pop("model_type")
        cfg = transformers.AutoConfig.for_model(mt, **d)
        model = transformers.AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.float32,
                                                          attn_implementation="sdpa")
        f = FSDP(model, auto_wrap_policy=ModuleWrapPolicy({LlamaDecoderLayer}),
                 sharding_strategy=ShardingStrategy.FULL_SHARD, device_id=torch.device("cpu"))
        ids = torch.randint(0, cfg.vocab_size, (b, s))
        for step in range(2):
            loss = f(input_ids=ids, labels=ids).loss
            tr = Live()
            with tr:
                loss.backward()
            if rank == 1 and step == 1:
                with open(out, "w") as fh:
                    json.dump(tr.events, fh)
            for p in f.parameters():
                p.grad = None
        # both ranks done with every collective, then out without the process group's C++ teardown, which
        # aborts a rank now and then on a loaded 2-core machine (as in test_fsdp2_copy_out.py)
        dist.barrier()
        __import__("os")._exit(0)

''') + SPAWN_MAIN


def _engine_config() -> dict:
    return {"model_config": dict(MODEL_CONFIGS["llama"]), "method": "full", "torch_dtype": "float32",
            "bf16": False, "max_seq_length": S, "per_device_train_batch_size": B, "packing": True,
            "gradient_checkpointing": False, "attn_implementation": "sdpa", "optim": "adamw_torch",
            "framework": "transformers", "num_gpus": 2, "parallelism": "fsdp"}


def test_fsdp1_root_flat_gradient(tmp_path):
    events = run_probe(tmp_path, PROBE, MODEL_CONFIGS["llama"], B, S)
    conf = MODEL_CONFIGS["llama"]
    v, h = conf["vocab_size"], conf["hidden_size"]
    root = (2 * v * h + h) * 4  # embed_tokens, lm_head, final norm in fp32
    # The root's flat gradient is the largest concatenation backward makes (padded to the world size).
    cats = [i for i, e in enumerate(events) if e[0] == "m" and e[2] == "cat"]
    at = max(cats, key=lambda i: events[i][1])
    assert root <= events[at][1] <= root + 8, events[at]
    # The head's gradient (the first V x H matmul of backward) is alive until then: made before, freed after.
    head = next(i for i, e in enumerate(events) if e[0] == "m" and e[1] == v * h * 4)
    assert head < at
    live = sum(e[1] if e[0] == "m" else -e[1] for e in events[:at + 1])
    cfg = load_config(_engine_config())
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    mem = step_memory(cfg, arch, None, backend="cpu")
    moment = next(m for m in mem.moments if m.step == 1 and m.what.startswith("FSDP root unit"))
    # what backward has made by then: the gradients (the layers' shards, the root's pieces and flat copy) and
    # whatever of its transients is still alive (measured: a few KiB at this size)
    assert moment.parts["gradients"] == pytest.approx(live, rel=0.02), (moment.parts, live)
