"""The causal-LM head and loss of each transformers release (frameworks.hf_logits, memory/loss.py), measured on the
CPU with the real model classes: tests/physics/data/hf_loss.json holds what record_hf_loss.py measured under 4.38.2
(forward upcasts and returns fp32 logits, the loss shifts a copy), 4.46.3 (Llama: ForCausalLMLoss upcasts and
shifts a copy, the output keeps bf16 logits; Mistral still upcasts in its forward) and 5.24.0 (labels padded, no
copy). The installed release is measured again here. In N x V bytes (tokens x vocabulary):
  release        forward  backward  custom loop keeps (after backward)
  4.38.2         12       12        4 (fp32 out.logits)
  4.46.3 Llama   14       12        2
  5.24.0         10       12        2
"""

from __future__ import annotations

import json
import pathlib

import pytest

for _mod in ("torch", "transformers", "accelerate"):  # so the engine's unit tests run without torch
    pytest.importorskip(_mod, reason=f"physics tests need {_mod}: pip install -r requirements-physics.txt")

import record_hf_loss  # noqa: E402
import transformers  # noqa: E402

from sizing import load_config  # noqa: E402
from sizing.catalog import resolve_architecture  # noqa: E402
from sizing.step import step_memory  # noqa: E402

pytestmark = pytest.mark.physics

DATA = json.loads((pathlib.Path(__file__).parent / "data" / "hf_loss.json").read_text())
SHAPE = DATA["shape"]
NV = SHAPE["B"] * SHAPE["S"] * SHAPE["V"]
# what the engine leaves out: the head's N x H tensors and the shifted labels (under 1 % of N x V here)
TOL = 0.01 * NV
RECORDED = [(release, style, loop) for release, styles in DATA["releases"].items() for style in styles
            for loop in ("trainer", "custom")]


def _engine(release: str, style: str, loop: str) -> dict[str, int]:
    """logits_and_loss of the engine's step 0 at the forward's loss, the logits' gradient and the optimizer step."""
    trainer = loop == "trainer"
    cfg = load_config({"model_config": SHAPE["configs"][style], "method": "lora", "r": 8, "lora_dropout": 0.0,
                       "framework": "transformers" if trainer else "custom", "framework_version": release,
                       "torch_dtype": "bfloat16", "bf16": trainer, "max_seq_length": SHAPE["S"],
                       "per_device_train_batch_size": SHAPE["B"], "packing": True, "gradient_checkpointing": True})
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    moments = [m for m in step_memory(cfg, arch, None, backend="cpu").moments if m.step == 0]

    def part(what: str) -> int:
        return next(m for m in moments if m.what.startswith(what)).parts["logits_and_loss"]

    return {"fwd": part("cross-entropy on the logits"), "bwd": part("gradient of the logits"),
            "held": part("optimizer.step()")}


@pytest.mark.parametrize(("release", "style", "loop"), RECORDED, ids=["-".join(c) for c in RECORDED])
def test_engine_holds_the_recorded_release(release: str, style: str, loop: str) -> None:
    measured = DATA["releases"][release][style][loop]
    engine = _engine(release, style, loop)
    for key in ("fwd", "bwd", "held"):
        assert engine[key] == pytest.approx(measured[key], abs=TOL), (key, engine, measured)


def test_the_releases_differ_as_recorded() -> None:
    """The fixture's three paths, in N x V: the upcast forward (12 / 12 / custom keeps 4), the shifted copy of
    ForCausalLMLoss (14 forward), the padded labels (10 forward); Mistral kept the upcast through 4.47."""
    rel = DATA["releases"]

    def nv(release: str, style: str, loop: str, key: str) -> int:
        return round(rel[release][style][loop][key] / NV)

    assert [nv(r, "llama", "trainer", "fwd") for r in ("4.38.2", "4.46.3", "5.24.0")] == [12, 14, 10]
    assert {nv(r, "llama", "trainer", "bwd") for r in ("4.38.2", "4.46.3", "5.24.0")} == {12}
    assert [nv(r, "llama", "custom", "held") for r in ("4.38.2", "4.46.3", "5.24.0")] == [4, 2, 2]
    assert rel["4.46.3"]["mistral"] == rel["4.38.2"]["mistral"]


def test_installed_release_measures_as_engine() -> None:
    """The installed transformers, measured now, against the engine at that release."""
    release = transformers.__version__
    for loop in ("trainer", "custom"):
        measured = record_hf_loss.measure("llama", loop)
        engine = _engine(release, "llama", loop)
        for key in ("fwd", "bwd", "held"):
            assert engine[key] == pytest.approx(measured[key], abs=TOL), (loop, key, engine, measured)
