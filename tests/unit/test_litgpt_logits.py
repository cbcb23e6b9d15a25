# LitGPT's LoRA step around its LM head and loss, as the engine counts it (memory/loss.py _litgpt_chunked, the
# timeline's "model returns its logits" moment), held to the bytes recorded on the CPU with LitGPT's own source at
# 5895df100 under Lightning 2.3.0's Fabric, bf16-true (tests/physics/data/litgpt_lora.json, record_litgpt_lora.py):
# Fabric hands the chunked logits back as fp32 copies, the loop's `logits` keeps them until its next forward
# returns, and the loss saves fp32 log-softmax outputs. A tiny Llama-shaped model, V = 32 H so that the logits
# dominate as in the config-hub rows; LoRA with micro-batches of 1, 2 and 4 sequences of 512, with and without LoRA on
# the head, with and without accumulation; full fine-tuning (finetune/full.py) with micro-batches of 1 and 2.
from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

from sizing import load_config
from sizing.catalog import resolve_architecture
from sizing.memory.overhead import CUBLAS_WS_OLDER
from sizing.step import StepMemory, step_memory

DATA = json.loads((pathlib.Path(__file__).parents[1] / "physics" / "data" / "litgpt_lora.json").read_text())
SHAPE = DATA["shape"]
TARGETS = ["query", "key", "value", "projection", "mlp"]
RETURNED = "the model returns its logits (the last micro-batch's still held)"
LOSS = "cross-entropy on the logits (end of forward)"
BACKWARD = "gradient of the logits (start of backward)"
BODY = "last decoder layer (backward through the body)"


def _case(key: str) -> tuple[int, int, bool]:
    """(micro-batch, accumulation, LoRA on the head); full fine-tuning: `full_b{batch}`."""
    if key.startswith("full_"):
        return int(key[6:]), 1, True
    batch, acc, head = key.split("_")
    return int(batch[1:]), int(acc[3:]), head == "head1"


def _memory(key: str) -> StepMemory:
    batch, acc, head = _case(key)
    lora = SHAPE["lora"]
    method: dict[str, Any] = {"method": "full"} if key.startswith("full_") else {
        "method": "lora", "r": lora["lora_r"], "lora_alpha": lora["lora_alpha"], "lora_dropout": lora["lora_dropout"],
        "target_modules": TARGETS + (["lm_head"] if head else [])}
    cfg = load_config({"model_config": SHAPE["hf_config"], **method, "framework": "litgpt", "torch_dtype": "bfloat16",
                       "bf16": False, "max_seq_length": SHAPE["S"], "packing": False,
                       "per_device_train_batch_size": batch, "gradient_accumulation_steps": acc,
                       "gradient_checkpointing": False, "optim": "adamw_torch", "attn_implementation": "sdpa",
                       "loss_implementation": "chunked_ce"})
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    return step_memory(cfg, arch, None, backend="cpu")


def _moment(mem: StepMemory, what: str) -> dict[str, int]:
    return next(m.parts for m in mem.moments if m.step == 1 and m.what == what)


def _without_workspace(parts: dict[str, Any]) -> int:
    """A moment's bytes less the cuBLAS workspace, which a CPU run does not allocate."""
    return sum(parts.values()) - CUBLAS_WS_OLDER


@pytest.mark.parametrize("key", sorted(DATA["cases"]))
def test_logits_and_loss_at_each_moment(key: str) -> None:
    """Above what is live before the head (the body's saved tensors, the weights, the previous logits), the bytes of
    the head's output when the model returns, of the loss's forward and of its backward, to 1 % of N x V: the head's
    LoRA inputs (dropout mask and product) are what is left, counted with the body's."""
    got = DATA["cases"][key]
    mem = _memory(key)
    batch, _, _ = _case(key)
    nv = batch * SHAPE["S"] * SHAPE["V"]
    above_body = got["pre_head"] - got["held"]  # the previous logits are the loop's, not the body's
    for what, measured in ((RETURNED, got["returned"]), (LOSS, got["loss"]), (BACKWARD, got["backward"])):
        engine = _moment(mem, what)["logits_and_loss"]
        assert (measured - above_body) / nv == pytest.approx(engine / nv, abs=0.08), what


@pytest.mark.parametrize("key", sorted(DATA["cases"]))
def test_the_loop_holds_fp32_logits_through_the_step(key: str) -> None:
    """The loop's `logits` (Fabric's fp32 copies, 4 N x V) outlive the backward and the optimizer step."""
    got = DATA["cases"][key]
    batch, _, _ = _case(key)
    assert got["held"] == 4 * batch * SHAPE["S"] * SHAPE["V"]
    assert _moment(_memory(key), BODY)["logits_and_loss"] == got["held"]


@pytest.mark.parametrize("key", sorted(DATA["cases"]))
def test_the_peak(key: str) -> None:
    """The whole run's high-water mark to 1 %: the model's return with the previous logits held (the loss's
    backward is within 0.1 % of it)."""
    got = DATA["cases"][key]
    mem = _memory(key)
    assert _without_workspace(mem.peak.parts) == pytest.approx(got["peak"], rel=0.01)
    for what, measured in ((RETURNED, got["returned"]), (LOSS, got["loss"]), (BACKWARD, got["backward"])):
        if _case(key)[1] == 1:  # with accumulation the recorded micro-batch carries no gradients; step 1's do
            assert _without_workspace(_moment(mem, what)) == pytest.approx(measured, rel=0.01), what
