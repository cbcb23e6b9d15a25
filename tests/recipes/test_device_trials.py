"""scripts/device_trials.py: the prepared GPU check runs end to end (on the CPU here, figures null), and every
configuration of its GPU set is one sizing accepts and that fits the card it names."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from sizing import estimate

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import device_trials  # noqa: E402


def test_every_gpu_configuration_is_valid_and_fits() -> None:
    runs = device_trials.configurations("gpu")
    assert len(runs) >= 5 and {"llama1b-lora-512", "llama1b-lora-2048"} <= set(runs)
    for name, config in runs.items():
        est = estimate(config)
        assert est.fits[0]["fits"], name


@pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in ("torch", "transformers", "peft")),
                    reason="the trial recipe needs the physics stack (requirements-physics.txt)")
def test_the_tiny_set_runs_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert device_trials.main([str(tmp_path), "--set", "tiny", "--max-steps", "2"]) == 0
    rows = json.loads((tmp_path / "summary.json").read_text("utf-8"))
    figures = rows[0]["comparison"]["figures"]
    assert rows[0]["returncode"] == 0 and figures["allocated"]["estimated_bytes"] > 0
    assert "tiny-lora" in capsys.readouterr().out
