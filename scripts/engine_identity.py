"""Bit-identity of the engine's answers between two versions of `sizing/`: estimates, fit tables and times.

The configurations are the example files plus a seeded random sample of valid ones (LoRA / QLoRA / LoRA-8bit /
full and the other PEFT types, DDP / FSDP / ZeRO, eager / SDPA / FlashAttention-2, packing on and off,
checkpointing, several catalog models and a tiny config.json model, expandable segments). Every answer (the
estimate's JSON, the fit table's rows, or the refusal's code and message) is written as one JSON line;
`--ref REV` runs the same sample on `git archive REV sizing` in a fresh process and reports every line that differs.

    python scripts/engine_identity.py --ref HEAD          # current tree against the last commit
    python scripts/engine_identity.py --out answers.jsonl # just write this tree's answers
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MODELS = ["meta-llama/Llama-3.1-8B", "Qwen/Qwen2.5-7B", "mistralai/Mistral-7B-v0.3", "meta-llama/Llama-3.2-1B",
          "Qwen/Qwen2.5-0.5B", "meta-llama/Llama-3.1-70B", "google/gemma-2-9b", "microsoft/phi-3-mini-4k-instruct"]
TINY = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 4,
        "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 8192,
        "tie_word_embeddings": False, "max_position_embeddings": 4096, "torch_dtype": "bfloat16"}
GPUS = ["H100-SXM-80GB", "A100-SXM-40GB", "L4-24GB", "RTX-4090-24GB", "T4-16GB", "H200-SXM-141GB"]


def sample(n: int, seed: int) -> list[dict[str, Any]]:
    """The example files and n random configurations (seeded)."""
    out = [json.loads(p.read_text()) for p in sorted((ROOT / "examples").glob("*.json"))]
    rng = random.Random(seed)
    for _ in range(n):
        method = rng.choice(["lora", "qlora", "full", "lora8"])
        cfg: dict[str, Any] = {
            "method": method, "framework": rng.choice(["transformers", "trl", "custom", "torchtune", "litgpt"]),
            "max_seq_length": rng.choice([128, 512, 1000, 2048, 4096]),
            "per_device_train_batch_size": rng.choice([1, 2, 3, 8]),
            "gradient_accumulation_steps": rng.choice([1, 4]),
            "packing": rng.random() < 0.5, "gradient_checkpointing": rng.random() < 0.6,
            "attn_implementation": rng.choice(["sdpa", "eager", "flash_attention_2"]),
            "optim": rng.choice(["adamw_torch", "adamw_torch_fused", "paged_adamw_8bit", "adamw_bnb_8bit", "sgd"]),
            "gpu": rng.choice(GPUS), "expandable_segments": rng.random() < 0.3,
            "dataset_tokens": 10_000_000,
        }
        if rng.random() < 0.25:
            cfg["model_config"] = TINY
        else:
            cfg["model"] = rng.choice(MODELS)
        if method != "full":
            cfg.update(r=rng.choice([8, 16, 64]), target_modules=rng.choice(["all-linear", ["q_proj", "v_proj"]]),
                       lora_dropout=rng.choice([0.0, 0.05]))
        if method != "full" and rng.random() < 0.4:  # the other PEFT methods (sizing/memory/peft_methods.py)
            cfg["peft_type"] = rng.choice(["lora_fa", "adalora", "ia3", "vera", "loha", "lokr", "oft", "boft",
                                           "prompt_tuning", "prefix_tuning", "ln_tuning"])
        if rng.random() < 0.35:
            cfg.update(num_gpus=rng.choice([2, 4, 8]), parallelism=rng.choice(["ddp", "fsdp", "zero2", "zero3"]))
        if rng.random() < 0.5:
            cfg["bf16"] = True
        out.append(cfg)
    return out


def answers(configs: list[dict[str, Any]], tables_every: int) -> list[str]:
    """One JSON line per configuration: its estimate (and every `tables_every`-th one's fit table) or refusal."""
    from sizing.config import parse_config
    from sizing.errors import SizingError
    from sizing.estimate import estimate
    from sizing.solve import fit_table

    lines = []
    for i, raw in enumerate(configs):
        rec: dict[str, Any] = {"i": i}
        try:
            cfg = parse_config(raw)
            rec["estimate"] = estimate(cfg).to_dict()
            if i % tables_every == 0:
                rec["fit_table"] = fit_table(cfg)
        except SizingError as err:
            rec["error"] = [err.code, str(err)]
        lines.append(json.dumps(rec, sort_keys=True, default=repr))
    return lines


def run_tree(src: Path, n: int, seed: int, tables_every: int) -> list[str]:
    """This script's answers with `sizing` imported from `src`, in a fresh process."""
    with tempfile.NamedTemporaryFile(suffix=".jsonl", delete=False) as f:
        out = f.name
    env = {**os.environ, "PYTHONPATH": str(src)}
    subprocess.run([sys.executable, __file__, "--out", out, "-n", str(n), "--seed", str(seed),
                    "--tables-every", str(tables_every)], check=True, env=env, cwd=src)
    lines = Path(out).read_text().splitlines()
    os.unlink(out)
    return lines


def run_rev(rev: str, n: int, seed: int, tables_every: int) -> list[str]:
    """This script's answers with `sizing` from git revision `rev`."""
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "ref.tar"
        subprocess.run(["git", "archive", "-o", str(archive), rev, "sizing"], check=True, cwd=ROOT)
        with tarfile.open(archive) as tar:
            tar.extractall(Path(tmp) / "ref")
        return run_tree(Path(tmp) / "ref", n, seed, tables_every)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=300, help="random configurations (besides the examples)")
    ap.add_argument("--seed", type=int, default=15)
    ap.add_argument("--tables-every", type=int, default=10, help="a fit table for every k-th configuration")
    ap.add_argument("--out", help="write this tree's answers here")
    ap.add_argument("--ref", help="git revision to compare the current tree with")
    ap.add_argument("--ref-dir", help="or a folder holding the other version's sizing/")
    args = ap.parse_args()
    if args.out:
        t = time.perf_counter()
        lines = answers(sample(args.n, args.seed), args.tables_every)
        Path(args.out).write_text("\n".join(lines) + "\n")
        print(f"{len(lines)} answers in {time.perf_counter() - t:.1f} s", file=sys.stderr)
        return 0
    if args.ref_dir:
        ref = run_tree(Path(args.ref_dir).resolve(), args.n, args.seed, args.tables_every)
        args.ref = args.ref_dir
    elif not args.ref:
        ap.error("give --out, --ref or --ref-dir")
    else:
        ref = run_rev(args.ref, args.n, args.seed, args.tables_every)
    new = run_tree(ROOT, args.n, args.seed, args.tables_every)
    diff = [i for i, (a, b) in enumerate(zip(ref, new, strict=True)) if a != b]
    # by each record's own keys: the substring '"error"' is also in every estimate (its range's error figures)
    records = [json.loads(line) for line in new]
    kinds = {k: sum(k in rec for rec in records) for k in ("estimate", "fit_table", "error")}
    print(f"{len(new)} configurations ({kinds}); {len(diff)} differ from {args.ref}")
    for i in diff[:5]:
        changed = _paths(json.loads(ref[i]), json.loads(new[i]))
        print(f"configuration {i}: {len(changed)} value(s) differ")
        for path, a, b in changed[:8]:
            print(f"  {path}: ref {json.dumps(a)[:160]} new {json.dumps(b)[:160]}")
    return 1 if diff else 0


def _paths(a: Any, b: Any, at: str = "") -> list[tuple[str, Any, Any]]:
    """The leaves where two answers differ, by their path ("estimate.fits.0.max_seq_length")."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) for d in _paths(a.get(k), b.get(k), f"{at}.{k}" if at else k)]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in _paths(x, y, f"{at}.{i}")]
    return [] if a == b else [(at, a, b)]


if __name__ == "__main__":
    sys.exit(main())
