# bitsandbytes Lion (the Trainer's lion_32bit, lion_8bit and their paged variants): one moment per parameter.
# Expected bytes follow bitsandbytes Optimizer1State.init_state (bitsandbytes/optim/optimizer.py at 95f9af30):
# state1 float32 (optim_bits 32, or any tensor under min_8bit_size 4096), else uint8 plus a float32 absmax per
# 256-value block; paged buffers of 100,000 elements or more come from CUDA managed memory.
from __future__ import annotations

import pytest

from sizing import choices
from sizing.config import parse_config
from sizing.estimate import estimate
from sizing.ladder import EIGHT_BIT
from sizing.memory.optimizer import optimizer_state


@pytest.mark.parametrize(("rows", "cols", "lion32", "lion8"), [
    (64, 64, 4 * 4096, 4096 + 4 * 16),  # 4096 values: 8-bit, 16 blocks
    (63, 64, 4 * 4032, 4 * 4032),  # under min_8bit_size: float32 in both
    (4096, 16, 4 * 65536, 65536 + 4 * 256),
    (1000, 3, 4 * 3000, 4 * 3000),
    (4097, 1, 4 * 4097, 4097 + 4 * 17),  # a partial last block counts whole
])
def test_lion_state_bytes(rows: int, cols: int, lion32: int, lion8: int) -> None:
    tensors = ((rows, cols, 1),)
    assert optimizer_state("lion_32bit", tensors, 2).resident_bytes == lion32
    assert optimizer_state("lion_8bit", tensors, 2).resident_bytes == lion8
    for optim in ("lion_32bit", "lion_8bit"):  # bitsandbytes' fused kernel: no foreach temporary
        assert optimizer_state(optim, tensors, 2).step_temporary_bytes == 0


def test_paged_lion_states_leave_the_allocator_from_100k_values() -> None:
    big, small = ((1000, 100, 1),), ((999, 100, 1),)
    got = optimizer_state("paged_lion_8bit", big, 2)
    assert (got.resident_bytes, got.paged_bytes) == (0, 100_000 + 4 * 391)
    got = optimizer_state("paged_lion_32bit", small, 2)
    assert (got.resident_bytes, got.paged_bytes) == (4 * 99_900, 0)


def test_lion_is_a_choice_and_halves_adamw_8bit_states() -> None:
    assert {"lion_32bit", "lion_8bit", "paged_lion_32bit", "paged_lion_8bit"} <= set(choices.OPTIMIZERS)
    assert "lion_8bit" in EIGHT_BIT
    base = {"model": "meta-llama/Llama-3.2-1B", "method": "full", "max_seq_length": 512, "gpu": "L4-24GB"}
    adam8 = estimate(parse_config({**base, "optim": "adamw_8bit"})).to_dict()["components"]["optimizer_states"]
    lion8 = estimate(parse_config({**base, "optim": "lion_8bit"})).to_dict()["components"]["optimizer_states"]
    # one uint8 moment against AdamW 8-bit's two, each with its blocks' absmax: half, within the small tensors'
    # float32 states (norm weights under 4096 values, 2 x 4 bytes each for AdamW against 4 for Lion)
    assert lion8 == pytest.approx(adam8 / 2, rel=1e-3)
