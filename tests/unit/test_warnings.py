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
