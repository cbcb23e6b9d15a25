"""The device check: the trial recipe on a set of configurations, each report against the estimate.

    PYTHONPATH=. python scripts/device_trials.py OUT [--set gpu|tiny] [--max-steps 6] [--budget 480] [--timeout 150]

(PYTHONPATH=. where `sizing` is not installed; `pip install -e .` installs it; `recipes` comes from the checkout.)

For a session that is lent a GPU: one command, no model hub (random weights with the catalog's own
config.json, the recipe's byte-level tokenizer, generated text). It builds the single-file trial.py from
recipes/trial exactly as the site ships it, then runs each configuration in its own process (so one run's
cache does not leak into the next) with `--random-weights --base-cache`, so each random base is built once
and shared by the runs of that model. Each run gets at most --timeout seconds and never more than what is
left of --budget; a run past its time gets SIGTERM (the trial then writes an `interrupted` report with the
steps it measured), then SIGKILL 20 s later. OUT receives only summary.json (rewritten after every run),
each run's report*.json and the tail of its log; the bases, adapters and data stay in --work.

It runs on a preinstalled image as it is (Python 3.12, torch 2.11, transformers 5.17, PEFT, Accelerate):
the recipe finds the checkpointing argument's name by looking, and the QLoRA runs are skipped, and say so,
where bitsandbytes is not installed. It has not run on a GPU yet; by its parts (process start and imports
~15 s, a 1.2 B random base built once in bf16 ~20 s per model, six steps of at most 2 x 2,048 tokens, eval,
save and reload ~20 s) a run should take under a minute, the six-run set about 4-6 minutes. `tiny` is the
CPU smoke test of the same command (the GPU figures are null).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from recipes import build
from sizing import SizingError
from sizing.catalog import models
from sizing.report import compare, read_report

GiB = 2**30
LOG_TAIL = 20_000  # characters of each run's log that come back

BASE: dict[str, Any] = {
    "framework": "transformers", "torch_dtype": "bfloat16", "bf16": True, "fp16": False, "r": 16, "lora_alpha": 32,
    "lora_dropout": 0.05, "target_modules": "all-linear", "use_dora": False, "per_device_train_batch_size": 2,
    "gradient_accumulation_steps": 1, "packing": True, "gradient_checkpointing": True, "attn_implementation": "sdpa",
    "optim": "adamw_torch_fused", "num_gpus": 1, "parallelism": "none", "gpu": "H200-SXM-141GB",
}
QLORA: dict[str, Any] = {"method": "qlora", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
                         "bnb_4bit_use_double_quant": True, "bnb_4bit_compute_dtype": "bfloat16",
                         "prepare_model_for_kbit_training": True}
TINY: dict[str, Any] = {"model_type": "llama", "vocab_size": 320, "hidden_size": 64, "intermediate_size": 128,
                        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
                        "max_position_embeddings": 512, "tie_word_embeddings": False}


def _catalog(model: str) -> dict[str, Any]:
    return dict(models()[model.lower()]["config"])


def configurations(which: str) -> dict[str, dict[str, Any]]:
    """name -> run configuration (the calculator's contract, with the model's config.json inline)."""
    if which == "tiny":
        return {"tiny-lora": {**BASE, "model": None, "model_config": TINY, "method": "lora", "torch_dtype": "float32",
                              "bf16": False, "max_seq_length": 64, "gpu": "H100-SXM-80GB"}}
    llama, qwen = _catalog("meta-llama/Llama-3.2-1B"), _catalog("Qwen/Qwen2.5-0.5B")
    runs: dict[str, dict[str, Any]] = {}
    for seq in (512, 2048):
        runs[f"llama1b-lora-{seq}"] = {**BASE, "model": None, "model_config": llama, "method": "lora",
                                       "max_seq_length": seq}
        runs[f"llama1b-qlora-{seq}"] = {**BASE, **QLORA, "model": None, "model_config": llama, "max_seq_length": seq}
    runs["llama1b-full-1024"] = {**BASE, "model": None, "model_config": llama, "method": "full",
                                 "max_seq_length": 1024, "optim": "adamw_torch"}
    runs["qwen05b-lora-nockpt-1024"] = {**BASE, "model": None, "model_config": qwen, "method": "lora",
                                        "max_seq_length": 1024, "gradient_checkpointing": False,
                                        "per_device_train_batch_size": 4}
    return runs


def write_data(path: Path, rows: int = 400, words: int = 3000) -> None:
    """Text long enough to fill the longest context with the byte-level tokenizer (one token per byte)."""
    rng = random.Random(0)
    vocab = ["memory", "adapter", "gradient", "token", "layer", "batch", "optimizer", "kernel", "cache", "loss"]
    with path.open("w", encoding="utf-8") as fh:
        for _ in range(rows):
            fh.write(json.dumps({"text": " ".join(rng.choice(vocab) for _ in range(words))}) + "\n")


def base_key(config: dict[str, Any]) -> str:
    """Runs of the same architecture share one random base (the trial checks the build's fingerprint)."""
    mc = config["model_config"]
    return f"{mc.get('model_type')}-{mc.get('hidden_size')}x{mc.get('num_hidden_layers')}"


def trial_command(trial: Path, config: Path, data: Path, out: Path, base: Path, steps: int) -> list[str]:
    """The command each run uses (the CPU test runs the same one)."""
    return [sys.executable, str(trial), str(config), "--data", str(data), "--out", str(out), "--max-steps",
            str(steps), "--random-weights", "--base-cache", str(base)]


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)  # the trial writes an interrupted report with its steps
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run_one(name: str, config: dict[str, Any], work: Path, out: Path, trial: Path, data: Path, steps: int,
            seconds: float) -> dict[str, Any]:
    """One trial in its own process, its report compared; only the reports and the log tail go to OUT."""
    row: dict[str, Any] = {"name": name, "returncode": None, "seconds": 0.0, "limit_seconds": round(seconds)}
    if config.get("method") in ("qlora", "lora8") and importlib.util.find_spec("bitsandbytes") is None:
        row.update(returncode="skipped", skipped="bitsandbytes is not installed here: the QLoRA run is skipped")
        return row
    folder = work / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, indent=1), "utf-8")
    command = trial_command(trial, folder / "config.json", data, folder / "out", work / "bases" / base_key(config),
                            steps)
    t0 = time.perf_counter()
    with (folder / "trial.log").open("w", encoding="utf-8") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, text=True)
        try:
            rc: int | str = proc.wait(timeout=max(1.0, seconds))
        except subprocess.TimeoutExpired:
            _stop(proc)
            rc = "timeout"
    row.update(returncode=rc, seconds=round(time.perf_counter() - t0, 1))
    target = out / name
    target.mkdir(parents=True, exist_ok=True)
    for report in sorted((folder / "out").glob("report*.json")):
        shutil.copy2(report, target / report.name)
    text = (folder / "trial.log").read_text(encoding="utf-8", errors="replace")
    (target / "trial.log").write_text(text[-LOG_TAIL:], "utf-8")
    try:
        row["comparison"] = compare(read_report(str(folder / "out" / "report.json")))
    except SizingError as err:
        row["error"] = err.to_dict()
    return row


def _gib(value: Any) -> str:
    return "-" if value is None else f"{value / GiB:.2f}"


def _pair(fig: dict[str, Any]) -> str:
    return f"{_gib(fig['estimated_bytes'])}/{_gib(fig['measured_bytes'])}"


def table(rows: list[dict[str, Any]]) -> str:
    """One line per run: estimated/measured GiB, step seconds, the reload and eval checks."""
    head = (f"{'run':26} {'rc':>7} {'alloc e/m':>11} {'resv e/m':>11} {'device e/m':>11} {'before':>7} "
            f"{'step s e/m':>11} {'reload':>7} {'eval loss':>15}")
    lines = [head]
    for row in rows:
        cmp = row.get("comparison")
        if cmp is None:
            why = row.get("skipped") or (row.get("error") or {}).get("message")
            lines.append(f"{row['name']:26} {row['returncode']!s:>7}  {why}")
            continue
        f, before, t, c = cmp["figures"], cmp.get("before_train") or {}, cmp["time"], cmp["checks"]
        est, meas = t["estimated_step_seconds"], t["measured_step_seconds"]
        step = f"{'-' if est is None else f'{est:.2f}'}/{'-' if meas is None else f'{meas:.2f}'}"
        loss = "-" if c["eval_loss_before"] is None or c["eval_loss_after"] is None else \
            f"{c['eval_loss_before']:.3f}>{c['eval_loss_after']:.3f}"
        lines.append(f"{row['name']:26} {row['returncode']!s:>7} {_pair(f['allocated']):>11} "
                     f"{_pair(f['reserved']):>11} {_pair(f['device']):>11} {_gib(before.get('reserved_bytes')):>7} "
                     f"{step:>11} {c['reload_matches']!s:>7} {loss:>15}")
        lines += [f"{'':26} check failed: {x}" for x in cmp.get("failed_checks") or []]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the set; 0 when every run that was not skipped ended ok."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--set", dest="which", default="gpu", choices=("gpu", "tiny"))
    parser.add_argument("--max-steps", type=int, default=6)
    parser.add_argument("--budget", type=float, default=480.0, help="seconds for the whole set")
    parser.add_argument("--timeout", type=float, default=150.0, help="seconds per run at most")
    parser.add_argument("--work", default=None, help="scratch folder (default: a new one under the temp dir)")
    args = parser.parse_args(argv)
    start = time.monotonic()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="device-trials-"))
    work.mkdir(parents=True, exist_ok=True)
    trial = work / "trial.py"
    trial.write_text(build.build(), encoding="utf-8")  # the file the site ships
    data = work / "data.jsonl"
    write_data(data, rows=400 if args.which == "gpu" else 40, words=3000 if args.which == "gpu" else 40)
    rows: list[dict[str, Any]] = []
    summary = {"set": args.which, "budget_seconds": args.budget, "python": sys.version.split()[0], "runs": rows,
               "environment": {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES",)}}
    for name, config in configurations(args.which).items():
        left = args.budget - (time.monotonic() - start)
        if left < 30:
            rows.append({"name": name, "returncode": "skipped", "skipped": f"budget spent ({left:.0f} s left)"})
        else:
            rows.append(run_one(name, config, work, out, trial, data, args.max_steps, min(args.timeout, left - 10)))
        print(f"{name}: rc {rows[-1]['returncode']}, {rows[-1].get('seconds', 0)} s", flush=True)
        summary["elapsed_seconds"] = round(time.monotonic() - start, 1)
        (out / "summary.json").write_text(json.dumps(summary, indent=1), "utf-8")
    print(table(rows))
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if all(row["returncode"] in (0, "skipped") for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
