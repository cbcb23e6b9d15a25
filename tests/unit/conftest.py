# Shared configurations for the engine's unit tests.
from __future__ import annotations

from typing import Any

import pytest

# The design document's CPU-verified model (memory-model.md §11).
TINY_LLAMA: dict[str, Any] = {
    "model_type": "llama", "hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 4,
    "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 8192,
    "tie_word_embeddings": False, "max_position_embeddings": 2048, "torch_dtype": "bfloat16",
}


@pytest.fixture
def tiny_run() -> dict[str, Any]:
    return {"model_config": TINY_LLAMA, "max_seq_length": 256, "per_device_train_batch_size": 2, "packing": True,
            "r": 16, "lora_alpha": 32, "target_modules": "all-linear", "optim": "adamw_torch_fused",
            "bf16": True}
