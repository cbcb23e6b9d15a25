"""Warnings of the estimate: stable codes with the parameters a page needs to say them in its language."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sizing import estimate

EXAMPLE = json.loads((Path(__file__).resolve().parents[2] / "examples" / "qlora-llama31-8b.json").read_text("utf-8"))


def codes(est: Any) -> dict[str, dict[str, Any]]:
    return {w["code"]: w for w in est.warnings}


def test_logits_that_dominate_the_peak_are_named_with_their_share() -> None:
    est = estimate(EXAMPLE)
    share = est.components["logits_and_loss"] / sum(est.components.values())
    assert share >= 0.25
    assert codes(est)["logits_dominate"]["params"]["percent"] == round(100 * share)
    fused = estimate({**EXAMPLE, "loss_implementation": "fused_linear_ce"})  # what the warning advises
    assert fused.components["logits_and_loss"] < est.components["logits_and_loss"] / 2
    assert "logits_dominate" not in codes(fused)


def test_a_run_that_does_not_fit_its_gpu_says_by_how_much_first() -> None:
    est = estimate({**EXAMPLE, "model": "meta-llama/Llama-3.1-70B", "method": "lora", "load_in_4bit": False,
                    "gpu": "RTX-4090-24GB"})
    assert est.warnings[0]["code"] == "does_not_fit"
    params = est.warnings[0]["params"]
    assert params["bytes"] == -est.fits[0]["headroom_bytes"] > 0 and params["gpu_name"] == "GeForce RTX 4090 24GB"
    assert "does_not_fit" not in codes(estimate(EXAMPLE))


def test_a_bf16_run_gets_no_fits_verdict_on_a_card_without_bf16() -> None:
    # No bf16 hardware: PyTorch 2.2 refuses the run there, later releases emulate bf16 (solve.runs_on). Either way
    # the plan is fp16.
    from sizing import estimate
    from sizing.solve import fit_table

    run = {"model": "meta-llama/Llama-3.2-1B", "method": "lora", "bf16": True, "max_seq_length": 256,
           "per_device_train_batch_size": 1, "gpu": "T4-16GB"}
    est = estimate(run)
    assert est.fits[0]["fits"] is False and est.fits[0]["refusal"] == "gpu_no_bf16"
    assert est.warnings[0]["code"] == "gpu_no_bf16"
    # the fp16 plan with the weights loaded in float16 takes the same bytes; left in the checkpoint's bfloat16, fp16
    # autocast would cast every weight and promote the residual stream to fp32 (regime.half_mismatch)
    fp16 = estimate({**run, "bf16": False, "fp16": True, "torch_dtype": "float16"})
    assert fp16.fits[0]["fits"] is True and fp16.allocated_bytes == est.allocated_bytes  # same bytes
    assert estimate({**run, "bf16": False, "fp16": True}).allocated_bytes > est.allocated_bytes
    for row in fit_table(est.config):
        if row["gpu"] in ("T4-16GB", "V100-16GB", "V100-32GB"):
            assert not row["fits"] and row["fewest_gpus"] == 0 and row["max_micro_batch"] == 0


def test_16_bit_weights_in_the_other_dtype_than_autocast_say_what_they_cost() -> None:
    """A float16 base under bf16 autocast (or the reverse): autocast casts every weight it multiplies and the residual
    stream promotes to fp32 (measured: tests/physics/test_activations.py, *_fp16w); the same dtype, or fp32 weights
    (their casts are the usual mixed precision), or a base up-cast by prepare_model_for_kbit_training, do not warn."""
    run = {"model": "meta-llama/Llama-3.2-1B", "method": "lora", "max_seq_length": 256, "gpu": "L4-24GB"}
    mixed = estimate({**run, "torch_dtype": "float16", "bf16": True})
    assert "half_mismatch" in codes(mixed)
    assert "half_mismatch" in codes(estimate({**run, "torch_dtype": "bfloat16", "bf16": False, "fp16": True}))
    same = estimate({**run, "torch_dtype": "bfloat16", "bf16": True})
    assert "half_mismatch" not in codes(same) and mixed.allocated_bytes > same.allocated_bytes
    assert "half_mismatch" not in codes(estimate({**run, "torch_dtype": "float32", "bf16": True}))
    assert "half_mismatch" not in codes(estimate({**run, "method": "qlora", "load_in_4bit": True,
                                                  "torch_dtype": "float16", "bf16": True}))


def test_every_warning_code_has_the_page_words_in_three_languages() -> None:
    # The page shows a warning by its code (calculator_text "w_<code>"): a code the engine can emit without words
    # would reach a Russian or Uzbek reader as the English message.
    import re
    from pathlib import Path

    from sitebuild.calculator_text import TEXT

    root = Path(__file__).resolve().parents[2] / "sizing"
    codes = {c for path in root.rglob("*.py") for c in re.findall(r'_w\(\s*"([a-z0-9_]+)"', path.read_text("utf-8"))}
    assert "moe_fused_experts" in codes and len(codes) > 10
    missing = {c: [lang for lang in ("ru", "uz", "en") if not TEXT.get(f"w_{c}", {}).get(lang)] for c in codes}
    assert not {c: langs for c, langs in missing.items() if langs}


def test_soft_capped_attention_is_sized_as_eager_and_says_so() -> None:
    """Gemma 2 soft-caps its scores: no framework runs them through SDPA (transformers 5 Gemma2PreTrainedModel
    _supports_sdpa = False, LitGPT model.py and torchtune models/gemma2/_attention.py compute them by hand), so the
    contract's default "sdpa" is the eager estimate (measured: tests/physics/test_activations.py, gemma2 cases), with
    a warning that says why; a model without the cap keeps SDPA and no warning."""
    gemma2 = {**EXAMPLE, "model": "google/gemma-2-9b", "max_seq_length": 1024}
    sdpa, eager = estimate(gemma2), estimate({**gemma2, "attn_implementation": "eager"})
    assert (sdpa.allocated_bytes, sdpa.reserved_bytes) == (eager.allocated_bytes, eager.reserved_bytes)
    assert "softcap_eager" in codes(sdpa) and "softcap_eager" not in codes(eager)
    assert "softcap_eager" not in codes(estimate(EXAMPLE))
    flash = estimate({**gemma2, "attn_implementation": "flash_attention_2"})
    assert flash.allocated_bytes < sdpa.allocated_bytes


def test_gpt_oss_lora_reaches_attention_only() -> None:
    # PEFT maps no v4 names onto gpt-oss's experts: all-linear adapts q/k/v/o, so lora_dropout is allowed (the
    # physics harness trains it with 0.05) and the page says the experts stay as loaded, not that LoRA reaches them
    run = {"model": "openai/gpt-oss-20b", "method": "lora", "target_modules": "all-linear", "lora_dropout": 0.05,
           "bf16": True, "max_seq_length": 512, "per_device_train_batch_size": 1}
    found = codes(estimate(run))
    assert "moe_experts_not_adapted" in found
    assert not {"moe_experts_dropout", "moe_fused_experts", "moe_approximate"} & set(found)


def test_an_evaluation_batch_that_sets_the_peak_says_so() -> None:
    """The Trainer evaluates at per_device_eval_batch_size (8 by default) whatever the training batch: at the loss its
    bf16 logits, their fp32 upcast and the log-softmax output are alive together, 10 bytes a logit
    (tests/physics/test_eval_pass.py), which for eight 4096-token sequences over Llama 3's vocabulary is above the
    one-sequence training step; an evaluation batch of one is not, and leaves the allocated peak where it was."""
    plain = estimate(EXAMPLE)
    at8 = estimate({**EXAMPLE, "eval_strategy": "steps"})
    assert at8.peak_moment.phase == "eval" and "eval_peak" in codes(at8)
    logits = 8 * EXAMPLE["max_seq_length"] * 128256
    assert at8.peak_moment.parts["logits_and_loss"] >= 10 * logits
    at1 = estimate({**EXAMPLE, "eval_strategy": "epoch", "per_device_eval_batch_size": 1})
    assert "eval_peak" not in codes(at1) and at1.allocated_bytes == plain.allocated_bytes
