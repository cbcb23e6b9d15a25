"""framework: trl runs TRL's SFTTrainer with SFTConfig's own defaults (bf16 and gradient checkpointing on, its
packing, its fused LM-head loss); trl and datasets are pinned in requirements-physics.txt as in
docs/recipes/requirements.txt."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from sizing import estimate
from tests.recipes.conftest import RECIPES, STACK, TINY_LLAMA, require, write_data

# bf16 and gradient_checkpointing left out: the trl defaults (true) apply, as sizing reads them
TRL: dict[str, Any] = {"model": None, "model_config": TINY_LLAMA, "framework": "trl", "method": "lora", "r": 4,
                       "max_seq_length": 64, "per_device_train_batch_size": 2, "packing": True,
                       "optim": "adamw_torch", "eval_strategy": "steps", "per_device_eval_batch_size": 3,
                       "compute_metrics": True, "preprocess_logits_for_metrics": "argmax", "eval_samples": 5,
                       "batch_eval_metrics": True}


def test_trl_sft_trainer_run(tmp_path: Path, schema: Any) -> None:
    require([*STACK, "trl", "datasets"])
    (tmp_path / "config.json").write_text(json.dumps(TRL), encoding="utf-8")
    data = write_data(tmp_path / "data.jsonl")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "2"}
    proc = subprocess.run([sys.executable, str(RECIPES / "trial.py"), str(tmp_path / "config.json"), "--data",
                           str(data), "--out", str(tmp_path / "out"), "--max-steps", "2", "--random-weights"],
                          capture_output=True, text=True, env=env, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))
    schema.validate(report)
    cfg = report["config"]
    assert cfg["bf16"] is True and cfg["gradient_checkpointing"] is True  # SFTConfig's defaults
    assert report["data"]["packing_by"] == "trl" and report["versions"]["trl"]
    assert report["model"]["trainable_parameters"] == estimate(TRL).detail["trainable_params"]
    assert report["checks"]["reload_matches"] is True and report["checks"]["base_differs"] is True
    # SFTTrainer's own evaluation (packed like its training data) after each step, counted in that step
    assert [step.get("evaluated") for step in report["measurements"]["steps"]] == [True, True]
    # with compute_metrics over the argmax (TRL makes the logits again for it: its fused loss makes none), batch by
    # batch (batch_eval_metrics: the counts summed until the last batch)
    assert all(0 <= step["eval_token_accuracy"] <= 1 for step in report["measurements"]["steps"])
