"""Shared pieces of the trial tests: a tiny random-weight Llama, generated data, the built single file."""

from __future__ import annotations

import importlib.util
import json
import random
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from tests.needs import cannot_run

ROOT = Path(__file__).resolve().parents[2]
RECIPES = ROOT / "docs" / "recipes"

TINY_LLAMA: dict[str, Any] = {
    "model_type": "llama", "vocab_size": 320, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": 256,
    "hidden_act": "silu", "rms_norm_eps": 1e-5, "tie_word_embeddings": False, "dtype": "float32",
}


def write_data(path: Path, rows: int = 36) -> Path:
    """Examples, text and chat, of very different lengths (some past max_seq_length)."""
    rnd = random.Random(7)
    words = ["alpha", "beta", "gamma", "delta", "memory", "adapter"]
    lines = []
    for i in range(rows):
        if i % 3 == 0:
            msgs = [{"role": "user", "content": " ".join(rnd.choices(words, k=rnd.randint(1, 6)))},
                    {"role": "assistant", "content": " ".join(rnd.choices(words, k=rnd.randint(1, 12)))}]
            lines.append(json.dumps({"messages": msgs}))
        else:
            lines.append(json.dumps({"text": " ".join(rnd.choices(words, k=rnd.randint(2, 30)))}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def require(modules: Iterable[str], where: str = "requirements-physics.txt") -> None:
    """Skip (fail under CI=true) when a module the trial needs is not installed."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        cannot_run(f"the trial recipe needs {', '.join(missing)} ({where})")


STACK = ("torch", "transformers", "peft", "accelerate")


@pytest.fixture(scope="session")
def schema() -> Any:
    require(["jsonschema"])
    import jsonschema
    data = json.loads((RECIPES / "report.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(data)
    return jsonschema.Draft202012Validator(data)
