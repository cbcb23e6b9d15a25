"""docs/recipes/trial.py (the built single file) end to end on the CPU: a tiny random-weight Llama, a generated
JSONL, 2-3 steps.

Each trial runs in a subprocess, as a user would run it; the runs are shared by module-scoped fixtures so the
module stays well under a minute and a half on two cores. Nothing is downloaded (--random-weights and the
recipe's own byte-level tokenizer).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sizing import estimate
from sizing.config import config_to_dict, parse_config
from tests.recipes.conftest import STACK, TINY_LLAMA, require, write_data


@pytest.fixture(autouse=True, scope="module")
def _stack() -> None:
    require(STACK)


ROOT = Path(__file__).resolve().parents[2]
RECIPES = ROOT / "docs" / "recipes"
TRIAL = RECIPES / "trial.py"
SECRET = "hf_TESTSECRET123"

# a hand-written partial config: no target_modules, gradient_checkpointing or lora_dropout (PEFT's and the
# Trainer's defaults, exactly as sizing reads them)
LORA: dict[str, Any] = {
    "model": None, "model_config": TINY_LLAMA, "framework": "transformers", "method": "lora",
    "torch_dtype": "float32", "bf16": False, "fp16": False, "r": 4, "lora_alpha": 8, "use_dora": False,
    "max_seq_length": 64, "per_device_train_batch_size": 2, "gradient_accumulation_steps": 2, "packing": False,
    "attn_implementation": "sdpa", "optim": "adamw_torch", "num_gpus": 1, "parallelism": "none",
    "gpu": "H100-SXM-80GB",
}
QLORA: dict[str, Any] = {
    **LORA, "target_modules": "all-linear", "gradient_checkpointing": True,
    "method": "qlora", "torch_dtype": "bfloat16", "bf16": True, "load_in_4bit": True,
    "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": True, "bnb_4bit_compute_dtype": "bfloat16",
    "prepare_model_for_kbit_training": True,
}


@dataclass
class Trial:
    returncode: int
    stdout: str
    stderr: str
    out: Path

    @property
    def report(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.out / "report.json").read_text(encoding="utf-8"))
        return data


def run_trial(tmp: Path, config: dict[str, Any], steps: int, launcher: tuple[str, ...] = (), **env: str) -> Trial:
    tmp.mkdir(parents=True, exist_ok=True)
    cfg = tmp / "config.json"
    cfg.write_text(json.dumps(config), encoding="utf-8")
    data = write_data(tmp / "data.jsonl")
    out = tmp / "out"
    environ = {k: v for k, v in os.environ.items() if k != "TRIAL_SIMULATE_OOM_AT_STEP"}
    environ.update({"HF_TOKEN": SECRET, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
                    "OMP_NUM_THREADS": "2", **env})
    proc = subprocess.run([sys.executable, *launcher, str(TRIAL), str(cfg), "--data", str(data), "--out", str(out),
                           "--max-steps", str(steps), "--random-weights", "--seed", "0"],
                          capture_output=True, text=True, env=environ, timeout=300, check=False)
    return Trial(proc.returncode, proc.stdout, proc.stderr, out)


@pytest.fixture(scope="module")
def lora(tmp_path_factory: pytest.TempPathFactory) -> Trial:
    return run_trial(tmp_path_factory.mktemp("lora"), LORA, steps=3)


@pytest.fixture(scope="module")
def qlora(tmp_path_factory: pytest.TempPathFactory) -> Trial:
    trial = run_trial(tmp_path_factory.mktemp("qlora"), QLORA, steps=2)
    if trial.returncode != 0:
        reason = _bnb_cpu_problem()
        if reason:
            print(f"QLoRA trial skipped: {reason}")
            pytest.skip(f"4-bit on the bitsandbytes CPU backend does not run here: {reason}")
    return trial


@pytest.fixture(scope="module")
def ddp(tmp_path_factory: pytest.TempPathFactory) -> Trial:
    """Two CPU processes (gloo), as `accelerate launch` / torchrun start them on GPUs."""
    launcher = ("-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2")
    config = {**LORA, "num_gpus": 2, "parallelism": "ddp"}
    return run_trial(tmp_path_factory.mktemp("ddp"), config, steps=2, launcher=launcher, OMP_NUM_THREADS="1")


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory) -> Trial:
    """Full fine-tuning in bf16, with packing: the case whose reload once passed on the untrained base; with the
    Trainer's evaluation pass after every step, at an evaluation batch of its own."""
    config = {**LORA, "method": "full", "torch_dtype": "bfloat16", "bf16": True, "packing": True,
              "gradient_checkpointing": True, "eval_strategy": "steps", "per_device_eval_batch_size": 3,
              "compute_metrics": True, "eval_samples": 7, "eval_accumulation_steps": 2,
              "eval_do_concat_batches": False}
    return run_trial(tmp_path_factory.mktemp("full"), config, steps=2)


@pytest.fixture(scope="module")
def oom(tmp_path_factory: pytest.TempPathFactory) -> Trial:
    return run_trial(tmp_path_factory.mktemp("oom"), LORA, steps=3, TRIAL_SIMULATE_OOM_AT_STEP="2")


def _bnb_cpu_problem() -> str | None:
    """Why 4-bit quantization cannot run on this CPU, or None when it can (then a failure is the recipe's)."""
    if importlib.util.find_spec("bitsandbytes") is None:
        return "bitsandbytes is not installed"
    probe = ("import torch, bitsandbytes.functional as F\n"
             "w = torch.randn(64, 64, dtype=torch.bfloat16)\n"
             "q, s = F.quantize_4bit(w, quant_type='nf4', compress_statistics=True)\n"
             "F.dequantize_4bit(q, s)\n")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False)
    return None if proc.returncode == 0 else (proc.stderr.strip().splitlines() or ["unknown error"])[-1]


def _assert_ok(trial: Trial, schema: Any) -> dict[str, Any]:
    assert trial.returncode == 0, trial.stderr[-3000:]
    report = trial.report
    schema.validate(report)
    assert report["status"] == "ok", report["message"]
    checks = report["checks"]
    assert checks["reload_matches"] is True, checks
    assert math.isfinite(checks["eval_loss_before"]) and math.isfinite(checks["eval_loss_after"])
    assert "Traceback" not in trial.stderr
    return report


def _assert_cpu_nulls(report: dict[str, Any]) -> None:
    if report["hardware"]["gpu_count"]:
        pytest.skip("a GPU is present: the GPU figures are measured, not null")
    for step in report["measurements"]["steps"]:
        for key in ("max_memory_allocated_bytes", "max_memory_reserved_bytes", "device_used_bytes"):
            assert step[key] is None
        assert step["reason"] and "CUDA" in step["reason"]
    for key in ("max_memory_allocated_bytes", "max_memory_reserved_bytes", "device_used_bytes"):
        peak = report["measurements"]["peaks"][key]
        assert peak["value"] is None and peak["reason"]
    before = report["measurements"]["before_train"]
    assert before["allocated_bytes"] is None and before["reserved_bytes"] is None and "CUDA" in before["reason"]


def test_lora_trial_report(lora: Trial, schema: Any) -> None:
    report = _assert_ok(lora, schema)
    steps = report["measurements"]["steps"]
    assert [s["step"] for s in steps] == [1, 2, 3]
    assert not any(s.get("evaluated") for s in steps)  # eval_strategy "no": no evaluation inside training
    assert all(s["tokens"] > 0 and s["seconds"] > 0 for s in steps)
    assert steps[0]["tokens"] >= steps[-1]["tokens"]  # longest samples first
    assert report["data"]["longest_train_tokens"] == LORA["max_seq_length"]  # truncated to max_seq_length
    assert report["config_as_given"] == LORA and report["config"] == config_to_dict(parse_config(LORA))
    # the run sizing estimates: PEFT's default targets (q_proj, v_proj), not all-linear
    assert report["config"]["target_modules"] is None and report["config"]["lora_alpha"] == 8.0
    assert report["model"]["trainable_parameters"] == estimate(LORA).detail["trainable_params"]
    assert report["checks"]["reload_weights_compared"] == 8 and report["checks"]["base_differs"] is True
    assert report["versions"]["torch"] and report["versions"]["transformers"] and report["versions"]["peft"]
    assert (lora.out / "adapter" / "adapter_config.json").exists()
    assert report["checks"]["reload_weights_equal"] is True
    _assert_cpu_nulls(report)


def test_full_fine_tuning_with_packing(full: Trial, schema: Any) -> None:
    report = _assert_ok(full, schema)
    assert report["model"]["trainable_parameters"] == report["model"]["parameters"]
    # the configured evaluation ran inside training, after each measured step (not only the trial's own two)
    assert [s.get("evaluated") for s in report["measurements"]["steps"]] == [True, True]
    # with compute_metrics, over eval_samples sequences (the held-out ones repeated), whose metric each step records
    # (the predictions kept as a list of batches: eval_do_concat_batches false)
    assert report["data"]["metrics_eval_sequences"] == 7
    assert all(0 <= s["eval_token_accuracy"] <= 1 for s in report["measurements"]["steps"])
    assert report["data"]["packing"] is True and report["data"]["packing_by"] == "trial"
    steps = report["measurements"]["steps"]
    assert all(s["tokens"] == LORA["per_device_train_batch_size"] * 2 * LORA["max_seq_length"] for s in steps)
    checks = report["checks"]  # every tensor of the state dict compared bit for bit, not only the logits
    assert checks["reload_weights_equal"] is True and checks["reload_weights_compared"] >= 21
    assert checks["base_differs"] is True
    assert (full.out / "model" / "config.json").exists()


def test_qlora_trial_report(qlora: Trial, schema: Any) -> None:
    report = _assert_ok(qlora, schema)
    assert report["config"]["method"] == "qlora"
    assert report["model"]["trainable_parameters"] < report["model"]["parameters"]
    _assert_cpu_nulls(report)


def test_simulated_oom_is_reported_with_its_step(oom: Trial, schema: Any) -> None:
    assert oom.returncode == 3, oom.stderr[-3000:]
    report = oom.report
    schema.validate(report)
    assert report["status"] == "oom"
    assert report["failure"]["kind"] == "out_of_memory" and report["failure"]["step"] == 2
    assert "step 2" in report["message"]
    assert [s["completed"] for s in report["measurements"]["steps"]] == [True, False]
    assert "Traceback" not in oom.stderr and "out of memory at step 2" in oom.stderr
    assert (oom.out / "random-base" / "config.json").exists()  # what was saved before the OOM is kept


def test_ddp_each_rank_reports_its_own_figures(ddp: Trial, schema: Any) -> None:
    report = _assert_ok(ddp, schema)
    assert report["rank"] == 0 and report["world_size"] == 2
    other = json.loads((ddp.out / "report.rank1.json").read_text(encoding="utf-8"))
    schema.validate(other)
    assert other["rank"] == 1 and other["status"] == "ok" and other["hardware"]["world_size"] == 2
    assert other["checks"]["reload_matches"] is None and other["checks"]["reload_reason"]
    assert len(other["measurements"]["steps"]) == 2


@pytest.mark.parametrize("name", ["lora", "oom", "ddp", "stopped"])
def test_token_never_leaks(name: str, request: pytest.FixtureRequest) -> None:
    trial: Trial = request.getfixturevalue(name)
    assert SECRET not in trial.stdout and SECRET not in trial.stderr
    for path in trial.out.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_sizing_report_reads_the_trial_report(lora: Trial, oom: Trial) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for trial, status in ((lora, "ok"), (oom, "oom")):
        text = subprocess.run([sys.executable, "-m", "sizing", "report", str(trial.out / "report.json")],
                              capture_output=True, text=True, env=env, cwd=ROOT, timeout=60, check=False)
        assert text.returncode == 0, text.stderr
        assert f"Trial: {status}" in text.stdout and "allocated" in text.stdout
        js = subprocess.run([sys.executable, "-m", "sizing", "report", str(trial.out / "report.json"), "--json"],
                            capture_output=True, text=True, env=env, cwd=ROOT, timeout=60, check=False)
        cmp = json.loads(js.stdout)
        assert cmp["status"] == status
        assert cmp["figures"]["allocated"]["estimated_bytes"] > 0


@pytest.fixture(scope="module")
def stopped(tmp_path_factory: pytest.TempPathFactory) -> Trial:
    """SIGTERM from outside (a stopped rental) once two steps are in the report."""
    tmp = tmp_path_factory.mktemp("sigterm")
    cfg = tmp / "config.json"
    cfg.write_text(json.dumps(LORA), encoding="utf-8")
    data = write_data(tmp / "data.jsonl")
    out = tmp / "out"
    env = {**os.environ, "HF_TOKEN": SECRET, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "2"}
    proc = subprocess.Popen([sys.executable, str(TRIAL), str(cfg), "--data", str(data), "--out", str(out),
                             "--max-steps", "50", "--random-weights"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            steps = json.loads((out / "report.json").read_text(encoding="utf-8"))["measurements"]["steps"]
        except (OSError, ValueError, KeyError):
            steps = []
        if len([s for s in steps if s["completed"]]) >= 2:
            break
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    return Trial(proc.returncode, stdout, stderr, out)


def test_sigterm_from_outside_keeps_the_measured_steps(stopped: Trial, schema: Any) -> None:
    report = stopped.report
    schema.validate(report)
    assert stopped.returncode == 143, stopped.stderr[-2000:]
    assert report["status"] == "interrupted" and "SIGTERM" in report["message"]
    done = [s for s in report["measurements"]["steps"] if s["completed"]]
    assert len(done) >= 2 and [s["step"] for s in done] == list(range(1, len(done) + 1))
    assert report["measurements"]["peaks"] is not None and report["finished_at"]
