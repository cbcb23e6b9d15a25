"""docs/recipes/trial.py end to end on the CPU: a tiny random-weight Llama, a generated JSONL, 2-3 steps.

Each trial runs in a subprocess, as a user would run it; the runs are shared by module-scoped fixtures so the
module stays well under a minute and a half on two cores. Nothing is downloaded (--random-weights and the
recipe's own byte-level tokenizer).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import random
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch", reason="the trial recipe needs torch (requirements-physics.txt installs the CPU build)")
jsonschema = pytest.importorskip("jsonschema", reason="the report is checked against its JSON Schema")
for _module in ("transformers", "peft", "accelerate"):
    if importlib.util.find_spec(_module) is None:
        pytest.skip(f"the trial recipe needs {_module} (requirements-physics.txt)", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]
RECIPES = ROOT / "docs" / "recipes"
TRIAL = RECIPES / "trial.py"
SECRET = "hf_TESTSECRET123"

TINY_LLAMA: dict[str, Any] = {
    "model_type": "llama", "vocab_size": 320, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": 256,
    "hidden_act": "silu", "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
}
LORA: dict[str, Any] = {
    "model": None, "model_config": TINY_LLAMA, "framework": "transformers", "method": "lora",
    "torch_dtype": "float32", "bf16": False, "fp16": False, "r": 4, "lora_alpha": 8, "lora_dropout": 0.0,
    "target_modules": "all-linear", "use_dora": False, "max_seq_length": 64, "per_device_train_batch_size": 2,
    "gradient_accumulation_steps": 2, "packing": False, "gradient_checkpointing": True,
    "attn_implementation": "sdpa", "optim": "adamw_torch", "num_gpus": 1, "parallelism": "none",
    "gpu": "H100-SXM-80GB",
}
QLORA: dict[str, Any] = {
    **LORA, "method": "qlora", "torch_dtype": "bfloat16", "bf16": True, "load_in_4bit": True,
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


def _data(path: Path) -> Path:
    """36 examples, text and chat, of very different lengths (some past max_seq_length)."""
    rnd = random.Random(7)
    words = ["alpha", "beta", "gamma", "delta", "memory", "adapter"]
    lines = []
    for i in range(36):
        if i % 3 == 0:
            msgs = [{"role": "user", "content": " ".join(rnd.choices(words, k=rnd.randint(1, 6)))},
                    {"role": "assistant", "content": " ".join(rnd.choices(words, k=rnd.randint(1, 12)))}]
            lines.append(json.dumps({"messages": msgs}))
        else:
            lines.append(json.dumps({"text": " ".join(rnd.choices(words, k=rnd.randint(2, 30)))}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def run_trial(tmp: Path, config: dict[str, Any], steps: int, launcher: tuple[str, ...] = (), **env: str) -> Trial:
    tmp.mkdir(parents=True, exist_ok=True)
    cfg = tmp / "config.json"
    cfg.write_text(json.dumps(config), encoding="utf-8")
    data = _data(tmp / "data.jsonl")
    out = tmp / "out"
    environ = {k: v for k, v in os.environ.items() if k != "TRIAL_SIMULATE_OOM_AT_STEP"}
    environ.update({"HF_TOKEN": SECRET, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
                    "OMP_NUM_THREADS": "2", **env})
    proc = subprocess.run([sys.executable, *launcher, str(TRIAL), str(cfg), "--data", str(data), "--out", str(out),
                           "--max-steps", str(steps), "--random-weights", "--seed", "0"],
                          capture_output=True, text=True, env=environ, timeout=300, check=False)
    return Trial(proc.returncode, proc.stdout, proc.stderr, out)


@pytest.fixture(scope="module")
def schema() -> Any:
    data = json.loads((RECIPES / "report.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(data)
    return jsonschema.Draft202012Validator(data)


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
    return run_trial(tmp_path_factory.mktemp("ddp"), LORA, steps=2, launcher=launcher, OMP_NUM_THREADS="1")


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
    assert all(s["tokens"] > 0 and s["seconds"] > 0 for s in steps)
    assert steps[0]["tokens"] >= steps[-1]["tokens"]  # longest samples first
    assert report["data"]["longest_train_tokens"] == LORA["max_seq_length"]  # truncated to max_seq_length
    assert report["config"] == LORA
    assert report["versions"]["torch"] and report["versions"]["transformers"] and report["versions"]["peft"]
    assert (lora.out / "adapter" / "adapter_config.json").exists()
    assert report["checks"]["reload_weights_equal"] is True
    _assert_cpu_nulls(report)


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


@pytest.mark.parametrize("name", ["lora", "oom", "ddp"])
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
