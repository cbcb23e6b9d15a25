"""A tied embedding under optimizer-in-backward (torchtune optimizer_in_bwd, memory/timeline.py), on the CPU.

torchtune steps each parameter in its post-accumulate-grad hook (training.register_optim_in_bwd_hooks). A tied
head and embedding are one parameter with one AccumulateGrad: autograd keeps the head's V x H gradient in that
node's input buffer from the start of backward until the embedding's arrives at its end, so it is alive through
the whole body's backward, and the weight is stepped last. A tiny tied model (Gemma style, fp32, full) is traced
with the physics harness's LiveMem through one backward with per-parameter AdamW hooks.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="physics tests need torch: pip install -r requirements-physics.txt")

import torch
import transformers
from harness import MODEL_CONFIGS, LiveMem

from sizing import load_config
from sizing.catalog import resolve_architecture
from sizing.step import step_memory

B, S = 1, 8


def test_tied_gradient_waits_for_the_embedding_under_optimizer_in_backward():
    conf = dict(MODEL_CONFIGS["gemma"])
    mt = conf.pop("model_type")
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(mt, **conf),
                                                          torch_dtype=torch.float32, attn_implementation="sdpa")
    v, h = conf["vocab_size"], conf["hidden_size"]
    tied = model.get_input_embeddings().weight
    assert tied is model.get_output_embeddings().weight
    order: list[str] = []
    names = {p: n for n, p in model.named_parameters()}
    optims = {p: torch.optim.AdamW([p], foreach=False) for p in model.parameters()}

    def step(p: torch.nn.Parameter) -> None:  # torchtune's optim_step hook: step, then zero_grad
        order.append(names[p])
        optims[p].step()
        optims[p].zero_grad()

    for p in model.parameters():
        p.register_post_accumulate_grad_hook(step)
    ids = torch.randint(0, v, (B, S))
    loss = model(input_ids=ids, labels=ids).loss
    tr = LiveMem()
    with tr:
        loss.backward()
    assert order[-1] == names[tied]  # the tied weight is stepped after every decoder layer's parameters
    events = tr.events
    head = next(i for i, e in enumerate(events) if e == ("m", v * h * 4))  # the head's gradient (first V x H)
    freed = [i for i, e in enumerate(events) if e == ("f", v * h * 4)]
    # freed only after the embedding's own V x H gradient was made, at the end of backward
    embed = next(i for i, e in enumerate(events) if i > head and e == ("m", v * h * 4))
    assert freed and min(freed) > embed
    # the engine: the head's gradient is alive through the body's backward, and the tied moment is modelled
    cfg = load_config({"model_config": MODEL_CONFIGS["gemma"], "method": "full", "torch_dtype": "float32",
                       "bf16": False, "max_seq_length": S, "per_device_train_batch_size": B, "packing": True,
                       "gradient_checkpointing": False, "optim": "adamw_torch", "framework": "torchtune",
                       "optimizer_in_backward": True, "attn_implementation": "sdpa"})
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    mem = step_memory(cfg, arch, None, backend="cpu")
    body = next(m for m in mem.moments if m.step == 1 and m.what.startswith("last decoder layer"))
    assert body.parts["gradients"] == v * h * 4
    end = next(m for m in mem.moments if m.step == 1 and m.what.startswith("embedding backward (tied"))
    assert end.parts["gradients"] == 3 * v * h * 4  # the two inputs of autograd's sum and the sum
