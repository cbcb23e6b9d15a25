"""scripts/device_trials.py: the prepared GPU check runs end to end with the command the GPU run uses (on the CPU
here, figures null), and every configuration of its GPU set is one sizing accepts and that fits the card it names.
TRIAL_COMPAT_PYTHONPATH (a folder with another transformers, e.g. 5.17.0 of the preinstalled H200 image) runs the
same command again on that version."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sizing import estimate
from tests.recipes.conftest import STACK, require

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "device_trials.py"


def _configurations() -> dict[str, dict[str, object]]:
    spec = importlib.util.spec_from_file_location("device_trials", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    runs: dict[str, dict[str, object]] = module.configurations("gpu")
    return runs


def test_every_gpu_configuration_is_valid_and_fits() -> None:
    runs = _configurations()
    assert len(runs) >= 5 and {"llama1b-lora-512", "llama1b-lora-2048"} <= set(runs)
    for name, config in runs.items():
        est = estimate(config)
        assert est.fits[0]["fits"], name


def _run_tiny(tmp_path: Path, extra_path: str | None = None) -> dict[str, object]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "2"}
    # the documented command: PYTHONPATH=. (sizing and recipes from the checkout), a second stack in front
    env["PYTHONPATH"] = os.pathsep.join([p for p in (extra_path, str(ROOT), env.get("PYTHONPATH")) if p])
    out = tmp_path / "OUT"
    proc = subprocess.run([sys.executable, str(SCRIPT), str(out), "--set", "tiny", "--max-steps", "2"],
                          capture_output=True, text=True, env=env, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "tiny-lora" in proc.stdout and "reload" in proc.stdout
    summary: dict[str, object] = json.loads((out / "summary.json").read_text("utf-8"))
    row = summary["runs"][0]  # type: ignore[index]
    assert row["returncode"] == 0 and row["comparison"]["figures"]["allocated"]["estimated_bytes"] > 0
    assert row["comparison"]["checks"]["reload_matches"] is True
    # only the summary, the reports and the log tail come back
    names = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert names == ["summary.json", "tiny-lora/report.json", "tiny-lora/trial.log"], names
    return summary


def test_the_tiny_set_runs_end_to_end(tmp_path: Path) -> None:
    require(STACK)
    _run_tiny(tmp_path)


@pytest.mark.skipif(not os.environ.get("TRIAL_COMPAT_PYTHONPATH"),
                    reason="TRIAL_COMPAT_PYTHONPATH names no second transformers to run on")
def test_the_tiny_set_runs_on_another_transformers(tmp_path: Path) -> None:
    summary = _run_tiny(tmp_path, os.environ["TRIAL_COMPAT_PYTHONPATH"])
    report = json.loads((tmp_path / "OUT" / "tiny-lora" / "report.json").read_text("utf-8"))
    assert report["versions"]["transformers"] != importlib.metadata.version("transformers"), summary
