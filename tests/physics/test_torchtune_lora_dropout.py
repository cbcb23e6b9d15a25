"""torchtune 0.1's LoRA layers run without dropout whatever lora_dropout says (frameworks.Profile.ignores_lora_dropout).

Its builders never pass lora_dropout on (models/llama2/_component_builders.py v0.1.0 l.215-221 and l.320-327;
fixed by 9f31a882, first in v0.2.0), so every LoRALinear holds nn.Dropout(p=0.0). Measured here: in training
mode that module returns its input tensor itself, so it allocates nothing and autograd saves no mask.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="physics tests need torch: pip install -r requirements-physics.txt")

from harness import LiveMem  # noqa: E402

from sizing import estimate  # noqa: E402

RUN = {"model": "meta-llama/Llama-2-7b-hf", "framework": "torchtune", "method": "lora", "torch_dtype": "bfloat16",
       "r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "v_proj", "gate_proj", "up_proj", "down_proj"],
       "max_seq_length": 512, "per_device_train_batch_size": 2, "gradient_checkpointing": False}


def test_dropout_of_zero_returns_its_input():
    x = torch.randn(2, 64, 256, dtype=torch.bfloat16, requires_grad=True)
    drop = torch.nn.Dropout(p=0.0).train()
    with LiveMem() as tr:
        tr.add(x)
        y = drop(x)
    assert y is x
    assert tr.events == [("m", x.untyped_storage().nbytes())]  # the input only: dropout allocated nothing


@pytest.mark.parametrize("version", ["0.1", "0.2"])
def test_lora_dropout_counts_from_0_2(version):
    """0.1: the estimate with lora_dropout 0.05 is the one without dropout; 0.2 keeps the dropout's tensors."""
    with_dropout = estimate({**RUN, "framework_version": version, "lora_dropout": 0.05})
    without = estimate({**RUN, "framework_version": version, "lora_dropout": 0.0})
    same = with_dropout.detail["layer_saved_bytes_per_token"] == without.detail["layer_saved_bytes_per_token"]
    assert same == (version == "0.1")
