"""The device check: the trial recipe on a set of configurations, each report against the estimate.

    PYTHONPATH=. python scripts/device_trials.py OUT [--set gpu|tiny] [--max-steps 6] [--timeout 300]

(PYTHONPATH=. where `sizing` is not installed; `pip install -e .` installs it.)

For a session that is lent a GPU: one command, no model hub (random weights with the catalog's own
config.json, the recipe's byte-level tokenizer, generated text). Each configuration runs
`docs/recipes/trial.py --random-weights` in its own process (so one run's cache does not leak into the
next), then `sizing.report.compare` puts its measured peaks next to the estimate. It prints one row per
run and writes OUT/summary.json. The `gpu` set pairs runs that differ only in context length (512 vs
2,048 tokens) to show a reserved floor left by loading (`before_train`), and covers LoRA, QLoRA and full
fine-tuning on Llama and Qwen shapes; it is sized for a device budget of minutes (six runs of a few
steps on models of at most 1.2 B parameters, each capped by --timeout) and has not run on a GPU yet:
no session so far was lent one. `tiny` is a CPU smoke test of the same path (the figures are null).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from sizing import SizingError
from sizing.catalog import models
from sizing.report import compare, read_report

ROOT = Path(__file__).resolve().parents[1]

TRIAL = ROOT / "docs" / "recipes" / "trial.py"
GiB = 2**30

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


def run_one(name: str, config: dict[str, Any], out: Path, data: Path, steps: int, timeout: int) -> dict[str, Any]:
    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, indent=1), "utf-8")
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, str(TRIAL), str(folder / "config.json"), "--data", str(data), "--out",
                               str(folder), "--max-steps", str(steps), "--random-weights"],
                              capture_output=True, text=True, timeout=timeout, check=False)
        (folder / "trial.log").write_text(proc.stdout + proc.stderr, "utf-8")
        rc: int | str = proc.returncode
    except subprocess.TimeoutExpired:
        rc = "timeout"
    row: dict[str, Any] = {"name": name, "returncode": rc, "seconds": round(time.perf_counter() - t0, 1)}
    try:
        row["comparison"] = compare(read_report(str(folder / "report.json")))
    except SizingError as err:
        row["error"] = err.to_dict()
    return row


def _gib(value: Any) -> str:
    return "-" if value is None else f"{value / GiB:.2f}"


def table(rows: list[dict[str, Any]]) -> str:
    head = (f"{'run':26} {'rc':>4} {'alloc est':>9} {'meas':>6} {'diff%':>6} {'resv est':>9} {'meas':>6} "
            f"{'diff%':>6} {'before':>7} {'floor':>5} {'step s est/meas':>16}")
    lines = [head]
    for row in rows:
        cmp = row.get("comparison")
        if cmp is None:
            lines.append(f"{row['name']:26} {row['returncode']!s:>4}  no report: {row.get('error', {}).get('message')}")
            continue
        a, r = cmp["figures"]["allocated"], cmp["figures"]["reserved"]
        before, t = cmp.get("before_train") or {}, cmp["time"]

        def pct(v: Any) -> str:
            return "-" if v is None else f"{v:+.1f}"

        step = (f"{t['estimated_step_seconds'] or 0:.2f}/{t['measured_step_seconds']:.2f}"
                if t["measured_step_seconds"] is not None else "-")
        floor = "yes" if before.get("reserved_peak_is_this_floor") else "-"
        lines.append(f"{row['name']:26} {row['returncode']!s:>4} {_gib(a['estimated_bytes']):>9} "
                     f"{_gib(a['measured_bytes']):>6} {pct(a['difference_percent']):>6} "
                     f"{_gib(r['estimated_bytes']):>9} {_gib(r['measured_bytes']):>6} "
                     f"{pct(r['difference_percent']):>6} {_gib(before.get('reserved_bytes')):>7} {floor:>5} "
                     f"{step:>16}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--set", dest="which", default="gpu", choices=("gpu", "tiny"))
    parser.add_argument("--max-steps", type=int, default=6)
    parser.add_argument("--timeout", type=int, default=300, help="seconds per run")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    data = out / "data.jsonl"
    write_data(data)
    rows = []
    for name, config in configurations(args.which).items():
        rows.append(run_one(name, config, out, data, args.max_steps, args.timeout))
        print(f"{name}: rc {rows[-1]['returncode']}, {rows[-1]['seconds']} s", flush=True)
    (out / "summary.json").write_text(json.dumps(rows, indent=1), "utf-8")
    print(table(rows))
    return 0 if all(row["returncode"] == 0 for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
