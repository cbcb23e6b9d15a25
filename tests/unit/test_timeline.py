# Peaks and phases against the design's absolute CPU measurements (memory-model.md §11 table C).
from __future__ import annotations

from typing import Any

import pytest

from sizing import estimate
from sizing.memory.overhead import CUBLAS_WS_HOPPER

MiB = 2**20


@pytest.mark.parametrize(("overrides", "step0_mib", "step1_mib", "checkpointing"), [
    ({"method": "full"}, 83.659, 110.230, False),
    ({"method": "full", "attn_implementation": "eager"}, 109.096, 135.668, False),
    ({"method": "full", "torch_dtype": "float32"}, 111.507, 164.650, False),
    ({"method": "full", "torch_dtype": "float32"}, 106.297, 135.042, True),
    ({"method": "lora"}, 86.717, 88.913, False),
    ({"method": "lora", "lora_dropout": 0.05}, 102.592, 104.788, False),
    ({"method": "lora", "use_dora": True}, 104.605, 106.870, False),
    ({"method": "qlora", "adapter_dtype": "bfloat16", "prepare_model_for_kbit_training": False,
      "bnb_4bit_use_double_quant": True, "bnb_4bit_compute_dtype": "bfloat16"}, 77.753, 78.851, False),
])
def test_step_peaks(tiny_run: dict[str, Any], overrides: dict[str, Any], step0_mib: float, step1_mib: float,
                    checkpointing: bool) -> None:
    est = estimate({**tiny_run, **overrides, "gradient_checkpointing": checkpointing}, backend="cpu")
    # The CPU has no cuBLAS workspace; the estimate adds Hopper's 32 MiB.
    step0 = max(m.total for m in est.moments if m.step == 0) - CUBLAS_WS_HOPPER
    step1 = max(m.total for m in est.moments if m.step == 1) - CUBLAS_WS_HOPPER
    assert step0 / MiB == pytest.approx(step0_mib, rel=0.01)
    assert step1 / MiB == pytest.approx(step1_mib, rel=0.01)


def test_full_fp32_checkpointed_first_step_peaks_in_the_optimizer(tiny_run: dict[str, Any]) -> None:
    est = estimate({**tiny_run, "method": "full", "torch_dtype": "float32", "gradient_checkpointing": True})
    first = max((m for m in est.moments if m.step == 0), key=lambda m: m.total)
    assert first.phase == "optimizer"


def test_llama3_loss_backward_is_twelve_nv() -> None:
    # memory-model.md §7.1: 12·N·V at the loss backward, 5.87 GiB for Llama-3 at 4k tokens.
    est = estimate({"model": "meta-llama/Meta-Llama-3-8B", "method": "qlora", "bf16": True, "max_seq_length": 4096,
                    "per_device_train_batch_size": 1, "packing": True, "bnb_4bit_compute_dtype": "bfloat16",
                    "gradient_checkpointing": True})
    assert est.peak_moment.phase == "backward"
    assert est.components["logits_and_loss"] - 8 * 4096 == 12 * 4096 * 128256
    assert est.components["logits_and_loss"] / 2**30 == pytest.approx(5.87, abs=0.01)


def test_reserved_and_device_order(tiny_run: dict[str, Any]) -> None:
    est = estimate({**tiny_run, "method": "lora"})
    assert est.allocated_bytes <= est.reserved_bytes < est.device_bytes
    lo, hi = est.range_bytes["allocated"]
    assert lo <= est.allocated_bytes <= hi
