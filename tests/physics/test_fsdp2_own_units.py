"""The LM head as an FSDP2 unit of its own (torchtune custom_sharded_layers), measured on the CPU.

Two gloo processes train a tiny Llama (fp32, everything trainable) sharded the way torchtune's
training.shard_model does it with `custom_sharded_layers: ['tok_embeddings', 'output']` (v0.3.0
_distributed.py l.618): fully_shard() on each decoder layer, on the input embedding and on the head, then on
the whole model, whose root keeps only the final norm. A TorchDispatchMode on rank 1 traces the second step's
backward. The head's post-backward reduce-scatter copies its unsharded V x H gradient into the reduce-scatter
input before freeing it (torch _fsdp_collectives.py foreach_reduce): both are alive at once, at the start of
backward, and must be the engine's moment "LM head's reduce-scatter"; the head's gradient is then gone before
the decoder layers' backward (in the engine: only this GPU's shard of it stays).
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="physics tests need torch: pip install -r requirements-physics.txt")

from harness import MODEL_CONFIGS, run_probe
from test_fsdp_root_grad import PROBE as FSDP1_PROBE
from test_fsdp_root_grad import B, S  # the same few tokens
from test_fsdp_root_grad import _engine_config as FSDP1_CONFIG

from sizing import load_config
from sizing.catalog import resolve_architecture
from sizing.step import step_memory

# The FSDP1 probe's tracer and launcher, with torchtune's FSDP2 sharding in place of the FSDP1 wrap.
SWAPS = (
    ("    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy\n"
     "    from torch.distributed.fsdp.wrap import ModuleWrapPolicy\n",
     "    from torch.distributed.device_mesh import init_device_mesh\n"
     "    from torch.distributed.fsdp import fully_shard\n"
     "    mesh = init_device_mesh('cpu', (world,))\n"),
    ("    f = FSDP(model, auto_wrap_policy=ModuleWrapPolicy({LlamaDecoderLayer}),\n"
     "             sharding_strategy=ShardingStrategy.FULL_SHARD, device_id=torch.device(\"cpu\"))\n",
     "    for layer in model.model.layers:\n"
     "        fully_shard(layer, mesh=mesh)\n"
     "    fully_shard(model.model.embed_tokens, mesh=mesh)\n"
     "    fully_shard(model.lm_head, mesh=mesh)\n"
     "    f = fully_shard(model, mesh=mesh)\n"),
)


def _probe() -> str:
    text = FSDP1_PROBE
    for old, new in SWAPS:
        assert old in text, old
        text = text.replace(old, new)
    return text


def _engine_config() -> dict:
    """The FSDP1 probe's run (same model, tokens and sharding), trained by torchtune with its own head unit."""
    return {**FSDP1_CONFIG(), "framework": "torchtune", "fsdp_shard_embeddings": True}


def test_fsdp2_head_unit_reduce_scatter(tmp_path):
    events = run_probe(tmp_path, _probe(), MODEL_CONFIGS["llama"], B, S)
    conf = MODEL_CONFIGS["llama"]
    v, h = conf["vocab_size"], conf["hidden_size"]
    head = v * h * 4  # the head's fp32 gradient
    made = [i for i, e in enumerate(events) if e[0] == "m" and e[1] == head]
    # backward allocates, V x H each: the head's all-gather output (the unsharded parameter is resized in place,
    # which the tracer does not see), the head's gradient (mm), its reduce-scatter input (empty); then the 1/2 output
    grad = next(i for i in made if events[i][2] == "mm")
    rs_in = next(i for i in made if i > grad)
    assert events[rs_in][2] == "empty" and events[rs_in + 1][:2] == ["m", head // 2], events[grad:rs_in + 2]
    at = rs_in + 1
    assert events[at + 1] == ["f", head, ""]  # unsharded_grads.clear(): the gradient goes once both are made
    # what backward has made by then, less the last layer's prefetched all-gather output (weights, not gradients)
    layer = next(e[1] for e in events[:grad] if e[0] == "m" and e[2] == "empty" and e[1] != head)
    live = sum(e[1] if e[0] == "m" else -e[1] for e in events[:at + 1]) - layer
    cfg = load_config(_engine_config())
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    mem = step_memory(cfg, arch, None, backend="cpu")
    moment = next(m for m in mem.moments if m.step == 1 and m.what.startswith("LM head's reduce-scatter"))
    # the gradient, the reduce-scatter input and output; the rest (the head input's gradient) is a few KiB here
    assert moment.parts["gradients"] == pytest.approx(live, rel=0.01), (moment.parts, live)
    # through the loss backward the head is the one unit gathered; at the reduce-scatter, the prefetched layer
    # (its all-gather output is one decoder layer's parameters: the engine's unit)
    loss = next(m for m in mem.moments if m.step == 1 and m.what.startswith("gradient of the logits"))
    assert loss.parts["weights"] - moment.parts["weights"] == head - layer
