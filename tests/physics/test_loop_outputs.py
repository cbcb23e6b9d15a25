"""What the training loop keeps alive (frameworks.py profiles), measured on CPU: a plain PyTorch loop
`out = model(**batch); out.loss.backward(); optimizer.step()` keeps `out` (its logits and, without
checkpointing, the DynamicCache built from config.use_cache) through backward and the optimizer step;
transformers.Trainer drops the outputs after the loss. The bytes the engine adds for framework
"custom" over "transformers" must equal the bytes the plain loop still holds after backward."""

from __future__ import annotations

import gc

import pytest

for _mod in ("torch", "transformers", "peft"):  # so the engine's unit tests run without torch
    pytest.importorskip(_mod, reason=f"physics tests need {_mod}: pip install -r requirements-physics.txt")

import harness  # noqa: E402
import torch  # noqa: E402

from sizing import estimate  # noqa: E402

pytestmark = pytest.mark.physics


def _held_after_backward(keep: bool, gc_on: bool) -> int:
    """Live bytes after loss.backward(), above params and grads, for a loop that keeps `out` or drops it."""
    m, _ = harness.build("llama", "full", gc_mode="non_reentrant" if gc_on else None)
    inputs = harness.make_inputs(harness.MODEL_CONFIGS["llama"]["vocab_size"])
    tracker = harness.LiveMem()
    params = list(m.parameters())
    for t in params + list(m.buffers()) + list(inputs.values()):
        tracker.add(t)
    gc.collect()
    with harness.Fp32Matmul(), tracker:  # the tracker innermost: it sees each product's result, not fp32 copies
        out = m(**inputs)  # a bf16 model without autocast: what a plain loop over a bf16 checkpoint runs
        loss = out.loss
        if not keep:
            del out
        loss.backward()
        del loss
        gc.collect()
    grads = sum(p.grad.numel() * p.grad.element_size() for p in params if p.grad is not None)
    held = tracker.cur - grads
    del m
    gc.collect()
    return held


@pytest.mark.parametrize("gc_on", [False, True], ids=["no_checkpointing", "checkpointing"])
def test_custom_loop_keeps_logits_and_cache_through_the_step(gc_on: bool) -> None:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        measured = _held_after_backward(True, gc_on) - _held_after_backward(False, gc_on)
    finally:
        torch.set_num_threads(threads)
    run = {**harness.engine_config("llama", "full", gc_on=gc_on), "bf16": False}
    custom, trainer = estimate({**run, "framework": "custom"}), estimate(run)

    def optimizer_moment(e):  # the step-1 optimizer.step() moment
        return next(m for m in e.moments if m.phase == "optimizer" and m.step == 1).total

    engine = optimizer_moment(custom) - optimizer_moment(trainer)
    assert engine == pytest.approx(measured, rel=0.01), (engine, measured)
    assert measured > 0
