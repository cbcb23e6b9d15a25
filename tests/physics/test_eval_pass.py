"""The Trainer's evaluation pass (eval_strategy), measured on the CPU: prediction_step runs the prepared model under
torch.no_grad (autocast, outputs converted to fp32 by accelerate) with per_device_eval_batch_size sequences, computes
the loss inside the forward and drops the outputs. Nothing is saved for a backward, yet at the loss the bf16
logits, their fp32 upcast and the log-softmax output are alive together; with config.use_cache (transformers < 5,
TRL < 0.22) the forward also keeps every layer's k and v in a DynamicCache. The engine's evaluation moments
(timeline._evaluation) must hold the live bytes measured above the model and its inputs."""

from __future__ import annotations

import gc

import pytest

for _mod in ("torch", "transformers", "peft"):  # so the engine's unit tests run without torch
    pytest.importorskip(_mod, reason=f"physics tests need {_mod}: pip install -r requirements-physics.txt")

import harness  # noqa: E402
import torch  # noqa: E402

from sizing import estimate  # noqa: E402

# peft 0.21 calls transformers' deprecated is_gradient_checkpointing (get_peft_model)
pytestmark = [pytest.mark.physics, pytest.mark.filterwarnings("ignore::FutureWarning")]

EVAL_BATCH = 4  # twice the training batch (harness.B): the Trainer's default is 8 whatever the training batch


def _eval_peak(use_cache: bool) -> int:
    """Peak live bytes of one evaluation forward + loss above the model, its buffers and the batch."""
    m, _ = harness.build("llama", "lora_fp32")
    m.eval()  # Trainer.evaluation_loop: model.eval() (no dropout, no checkpointing)
    m.config.use_cache = use_cache
    vocab = harness.MODEL_CONFIGS["llama"]["vocab_size"]
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, vocab, (EVAL_BATCH, harness.S), generator=g)
    inputs = dict(input_ids=ids, attention_mask=torch.ones_like(ids), labels=ids.clone())
    tracker, start = harness.tracking(list(m.parameters()) + list(m.buffers()) + list(inputs.values()))
    with harness.one_thread(), harness.Fp32Matmul(), tracker, torch.no_grad(), \
            torch.autocast("cpu", dtype=torch.bfloat16):
        out = m(**inputs)
        logits = out.logits.float()  # accelerate's convert_to_fp32 on the prepared model's outputs
        loss = out.loss.detach()
        del out, logits, loss
        gc.collect()
    del m
    gc.collect()
    return tracker.peak - start


def _engine(version: str | None) -> int:
    """The engine's evaluation peak above the weights, adapters and states (the CPU holds no cuBLAS workspace)."""
    run = {**harness.engine_config("llama", "lora_fp32"), "eval_strategy": "steps",
           "per_device_eval_batch_size": EVAL_BATCH, "framework_version": version}
    moments = [m for m in estimate(run, backend="cpu").moments if m.phase == "eval"]
    assert len(moments) == 2, [m.what for m in estimate(run, backend="cpu").moments]
    return max(m.parts.get("activations", 0) + m.parts.get("logits_and_loss", 0) for m in moments)


@pytest.mark.parametrize(("version", "use_cache"), [(None, False), ("4.55.4", True)],
                         ids=["trainer_5_no_cache", "trainer_4_cache"])
def test_eval_pass_peak(version: str | None, use_cache: bool) -> None:
    measured = _eval_peak(use_cache)
    engine = _engine(version)
    # the loss over the evaluation batch's logits is the peak: 10 bytes per logit (bf16, fp32 upcast, log-softmax)
    logits = EVAL_BATCH * harness.S * harness.MODEL_CONFIGS["llama"]["vocab_size"]
    assert measured >= 10 * logits
    assert engine == pytest.approx(measured, rel=0.02), (engine, measured)


def test_eval_pass_cache_is_every_layers_kv() -> None:
    """The KV cache a transformers 4 Trainer's evaluation forward builds: every layer's k and v in bf16."""
    measured = _eval_peak(True) - _eval_peak(False)
    cfg = harness.MODEL_CONFIGS["llama"]
    kv = 2 * cfg["num_hidden_layers"] * EVAL_BATCH * harness.S * cfg["num_key_value_heads"] * cfg["head_dim"] * 2
    assert measured == pytest.approx(kv, rel=0.02), (measured, kv)
    assert _engine("4.55.4") - _engine(None) == kv
