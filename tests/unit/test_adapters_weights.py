# Parameter counts and bytes against hand-derived numbers (memory-model.md §1, §3).
from __future__ import annotations

import pytest

from sizing.arch import ATTN_IN, Linear
from sizing.memory.adapters import lora_params
from sizing.memory.weights import bytes_4bit, bytes_int8


def test_lora_on_one_square_projection() -> None:
    # r * (in + out) = 16 * 8192 = 131,072 parameters; 256 KiB in bf16.
    n = lora_params(Linear("q_proj", 4096, 4096, ATTN_IN), r=16, dora=False)
    assert n == 131_072
    assert n * 2 == 256 * 1024


def test_dora_adds_one_magnitude_per_output() -> None:
    assert lora_params(Linear("q_proj", 4096, 1024, ATTN_IN), r=8, dora=True) == 8 * (4096 + 1024) + 1024


@pytest.mark.parametrize(("double_quant", "bytes_per_param"), [(False, 0.562515), (True, 0.516129)])
def test_4bit_bytes_per_param_match_bitsandbytes(double_quant: bool, bytes_per_param: float) -> None:
    # A 4096x1024 weight measured with bitsandbytes 0.50.2 (memory-model.md §1.1), constants included.
    data, state = bytes_4bit(4096 * 1024, double_quant)
    assert data == 4096 * 1024 // 2
    assert (data + state) / (4096 * 1024) == pytest.approx(bytes_per_param, abs=5e-7)


def test_int8_keeps_one_fp32_scale_per_output_row() -> None:
    assert bytes_int8(4096, 1024) == (4096 * 1024, 4 * 1024)


def test_llama3_8b_lora_all_linear_count() -> None:
    # memory-model.md §3.1: 1,310,720 per layer, 41.94 M in total at r=16.
    from sizing import estimate

    est = estimate({"model": "meta-llama/Llama-3.1-8B", "method": "lora", "r": 16, "target_modules": "all-linear",
                    "max_seq_length": 512, "per_device_train_batch_size": 1})
    assert est.detail["trainable_params"] == 32 * 1_310_720


def test_tiny_model_parameter_bytes_match_pytorch(tiny_run: dict[str, object]) -> None:
    # Parameter bytes measured by verify_saved_tensors.py (memory-model.md §11 table D).
    from sizing import estimate

    full = estimate({**tiny_run, "method": "full"}).detail
    assert full["param_bytes"] == 13_931_008
    lora = estimate({**tiny_run, "method": "lora"}).detail
    assert lora["param_bytes"] == 13_931_008 + 1_150_976
    assert lora["trainable_params"] == 287_744
    qlora = estimate({**tiny_run, "method": "qlora", "adapter_dtype": "bfloat16",
                      "prepare_model_for_kbit_training": False}).detail
    # bf16 params (adapters included, TRL-style bf16 adapters) + packed 4-bit data
    assert qlora["param_bytes"] == 8_968_704 + 1_384_448
