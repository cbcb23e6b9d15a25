# What a gradient-checkpointed decoder layer's recomputation in backward allocates, as the engine counts it (the
# timeline's layer-backward moment and the allocator replay's recompute), held to the bytes recorded on the CPU
# with the real model classes (tests/physics/data/ckpt_forward.json `recompute_kept`, record_ckpt_forward.py:
# torch 2.13, transformers 5.24, peft 0.21.2): what the recomputed layer's blocks still hold at its end, less its
# output. Llama, Mistral (MHA), Qwen2, Qwen3 and Gemma; full and LoRA (fp32 and bf16 adapters, one with dropout);
# bf16, fp32, fp32 weights under bf16 autocast; SDPA and eager; reentrant and non-reentrant checkpointing.
from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

from sizing import load_config
from sizing.catalog import resolve_architecture
from sizing.memory.activations import layer_saved
from sizing.memory.adapters import trainable
from sizing.memory.allocator import round_size
from sizing.memory.regime import resolve
from sizing.memory.replay import Replay, replay
from sizing.step import step_memory

DATA = json.loads((pathlib.Path(__file__).parents[1] / "physics" / "data" / "ckpt_forward.json").read_text())
SHAPE = DATA["shape"]
N = SHAPE["B"] * SHAPE["S"]
CASES = sorted(DATA["cases"])
LAST_LAYER = "last decoder layer (backward through the body)"


def _config(case: str) -> dict[str, Any]:
    style, regime, precision, attn, _mode, *drop = case.split("/")
    cfg: dict[str, Any] = {
        "model_config": SHAPE["configs"][style], "method": "full" if regime == "full" else "lora",
        "torch_dtype": "bfloat16" if precision == "bf16" else "float32", "bf16": precision != "fp32",
        "max_seq_length": SHAPE["S"], "per_device_train_batch_size": SHAPE["B"], "packing": True,
        "gradient_checkpointing": True, "attn_implementation": attn, "framework": "transformers"}
    if regime != "full":
        cfg.update(r=SHAPE["lora_r"], lora_alpha=2 * SHAPE["lora_r"], target_modules="all-linear",
                   lora_dropout=float(drop[0].removeprefix("drop")) if drop else 0.0,
                   adapter_dtype="bfloat16" if regime == "lora_bf16" else "float32")
    return cfg


def _recompute_peak(r: Replay) -> int:
    """The allocated peak the replay reaches with one checkpointed layer and nothing else: its kept input and its
    recomputation in backward (the forward makes and drops the saved tensors alone, without the constants)."""
    alone = Replay(static=(), layers=1, saved=r.saved, layer_constant=r.layer_constant, checkpoint=r.checkpoint,
                   forward_transient=0, backward_transient=0, backward_events=(), gathered_unit=0, head_saved=(),
                   loss_forward=0, loss_backward=(), head_grads=(), layer_grads=(), comm_buffer=0, comm_static=False,
                   states_per_grad=0.0, temp_per_grad=0.0, accumulating=False)
    return replay(alone, False)[0]


@pytest.mark.parametrize("case", CASES)
def test_the_recompute_allocates_what_was_recorded(case: str) -> None:
    """The recomputation allocates the layer's saved tensors and its constants (autocast's weight casts, made
    again and saved by the matmuls), but not what is the kept checkpoint input itself: with an fp32 residual
    stream the first norm saves its input uncast (x.to(torch.float32) of an fp32 x is x)."""
    want = DATA["cases"][case]["recompute_kept"]
    cfg = load_config(_config(case))
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    reg = resolve(cfg, arch, "cpu")
    assert reg.checkpointing
    ls = layer_saved(arch, reg, trainable(cfg, arch), cfg.r, SHAPE["S"])
    assert ls.input_per_token == (4 * arch.hidden if reg.resid == 4 else 0)
    mem = step_memory(cfg, arch, None, "cpu")
    # the replay: the recompute runs the saved groups and the layer's constants
    r = mem.tensors
    assert sum(r.saved) + r.layer_constant == want
    assert _recompute_peak(r) == sum(map(round_size, (r.checkpoint, *r.saved, *filter(None, [r.layer_constant]))))
    # the timeline: the last layer's backward above the kept inputs, the rotary tables and the backward's walk
    moment = next(m for m in mem.moments if m.what == LAST_LAYER)
    kept = arch.layers * ls.checkpoint_per_token * N + 2 * SHAPE["S"] * arch.head_dim * reg.resid
    if reg.attention == "eager":  # its float mask, each checkpointed layer's input (tests/physics/test_activations.py)
        kept += arch.mask_kinds * SHAPE["B"] * SHAPE["S"] ** 2 * reg.resid
    assert moment.parts["activations"] - kept - mem.detail["layer_backward_bytes"] == want


def test_an_fp32_residual_recompute_makes_no_copy_of_its_input() -> None:
    """The mechanism, in the recordings themselves: the recomputation's first op is the input norm's
    hidden_states.to(torch.float32), a new 4 * hidden bytes a token, when the residual stream is bf16, and with an
    fp32 one (fp32 weights, fp32 weights under autocast: 44 cases) it starts at pow(2) of the kept input itself."""
    fp32 = 0
    for case in CASES:
        rec = DATA["cases"][case]
        style = case.split("/")[0]
        bf16_stream = case.split("/")[2] == "bf16"
        fp32 += not bf16_stream
        assert rec["recompute_ops"][0] == ("_to_copy" if bf16_stream else "pow"), case
        if bf16_stream:
            assert rec["recompute"][0] == 4 * SHAPE["configs"][style]["hidden_size"] * N, case
    assert fp32 == 44
