"""The checkpointed decoder layer's allocation order (tests/physics/data/ckpt_forward.json, whose recompute
tests/unit/test_ckpt_recompute.py holds the engine to) measured again with the installed stack: a few of the
recorded cases, every storage's size and free order, and what the recomputation keeps, equal to the fixture's."""

from __future__ import annotations

import json
import pathlib
import warnings

import pytest

for _mod in ("torch", "transformers", "peft"):  # so the engine's unit tests run without torch
    pytest.importorskip(_mod, reason=f"physics tests need {_mod}: pip install -r requirements-physics.txt")

import harness  # noqa: E402
import record_ckpt_forward  # noqa: E402
import torch  # noqa: E402

pytestmark = pytest.mark.physics

DATA = json.loads((pathlib.Path(__file__).parent / "data" / "ckpt_forward.json").read_text())
CASES = [("llama", "lora_fp32", "bf16", "sdpa", "reentrant", 0.0),
         ("llama", "lora_fp32", "bf16", "sdpa", "non_reentrant", 0.05),
         ("gemma", "full", "fp32", "eager", "non_reentrant", 0.0),
         ("qwen3", "lora_bf16", "bf16", "sdpa", "reentrant", 0.0),
         ("llama", "full", "fp32_autocast", "sdpa", "reentrant", 0.0)]


@pytest.mark.parametrize("case", CASES, ids=lambda c: record_ckpt_forward.key(*c))
def test_the_installed_stack_runs_the_recorded_order(case: tuple[str, str, str, str, str, float]) -> None:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with warnings.catch_warnings(), harness.cuda_autocast_shim():
            warnings.simplefilter("ignore")
            got = record_ckpt_forward.measure(*case)
    finally:
        torch.set_num_threads(threads)
    want = DATA["cases"][record_ckpt_forward.key(*case)]
    assert {k: got[k] for k in ("forward", "out", "cached", "recompute_kept")} == \
        {k: want[k] for k in ("forward", "out", "cached", "recompute_kept")}
