# The printed range comes from the measured residuals (sizing/data/residuals.json, scripts/residuals.py).
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from sizing import estimate
from sizing.uncertainty import UNMEASURED, band

ROOT = Path(__file__).resolve().parents[2]


def test_residuals_file_is_regenerated_from_the_rows() -> None:
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "residuals.py"), "--check"], capture_output=True,
                         text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stdout + run.stderr


def test_a_regime_without_rows_falls_back_to_a_broader_group_or_the_unmeasured_band() -> None:
    lo, hi, key = band("lora8", "allocated", False)
    assert key in ("allocated/single", "allocated") and lo <= 1.0 <= hi
    assert band("lora8", "no-tier", False) == (UNMEASURED["low"], UNMEASURED["high"], "")


def test_the_range_holds_the_estimate_on_every_tier() -> None:
    est = estimate({"model": "meta-llama/Llama-3.1-8B", "method": "qlora", "load_in_4bit": True, "bf16": True,
                    "gpu": "L40S-48GB", "num_gpus": 2, "parallelism": "fsdp"})
    point = {"allocated": est.allocated_bytes, "reserved": est.reserved_bytes, "device": est.device_bytes}
    for tier, (lo, hi) in est.range_bytes.items():
        assert lo <= point[tier] <= hi, tier
