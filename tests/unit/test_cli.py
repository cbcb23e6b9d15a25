# The command line: a table, the JSON contract, and one clear line on bad input.
from __future__ import annotations

import json
from pathlib import Path

import pytest

from sizing.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "qlora-llama31-8b.json"


def test_estimate_prints_breakdown_peak_and_fit(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    for text in ("weights", "quantization_state", "logits_and_loss", "Peak: backward", "H100-SXM-80GB: fits"):
        assert text in out


def test_estimate_json_follows_the_contract(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", str(EXAMPLE), "--json", "--gpu", "L4-24GB", "--set", "r=64"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data["peak"]) >= {"allocated_bytes", "reserved_bytes", "device_bytes", "phase"}
    assert set(data["components"]) == {"weights", "quantization_state", "adapters", "gradients", "optimizer_states",
                                       "master_weights", "activations", "logits_and_loss", "workspace"}
    assert sum(data["components"].values()) == data["peak"]["allocated_bytes"]
    assert data["fits"][0]["gpu"] == "L4-24GB" and data["config"]["r"] == 64


def test_bad_input_is_one_line_with_code_and_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"model": "meta-llama/Llama-3.1-8B", "r": -1}))
    assert main(["estimate", str(cfg)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "out_of_range [r]" in err
    cfg.write_text("{not json")
    assert main(["estimate", str(cfg)]) == 2
    assert "bad_json" in capsys.readouterr().err


def test_models_and_gpus_list_the_catalogs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert len(out.splitlines()) >= 40 and "not supported" not in out
    assert main(["gpus"]) == 0
    assert "H200-SXM-141GB" in capsys.readouterr().out
