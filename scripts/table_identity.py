"""Fit tables of this tree against another version of `sizing/`, row by row and field by field.

The cases are bench_table.py's configurations at ranks 8, 32, 33, 64, 132 and 164 (in that order in one process,
as the page recomputes after each edit, caches warm) and a few catalog models and methods (full, LoRA, QLoRA;
1B to 70B; with and without gradient checkpointing; FSDP; expandable segments). Each side runs in a fresh process
with its own `sizing` on PYTHONPATH (the other's from `git archive REV sizing`, as engine_identity.py's); every row
of every table must be equal.

    PYTHONPATH=. python3 scripts/table_identity.py --ref main
    PYTHONPATH=. python3 scripts/table_identity.py --ref-dir ../other   # a folder holding sizing/
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RANKS = (8, 32, 33, 64, 132, 164)
BASE = {"framework": "transformers", "max_seq_length": 2048, "per_device_train_batch_size": 1,
        "gpu": "H100-SXM-80GB", "dataset_tokens": 10_000_000}
CATALOG: list[dict[str, Any]] = [
    {**BASE, "model": "meta-llama/Llama-3.2-1B", "method": "full", "gradient_checkpointing": False},
    {**BASE, "model": "meta-llama/Llama-3.2-1B", "method": "full", "gradient_checkpointing": True, "bf16": True},
    {**BASE, "model": "Qwen/Qwen2.5-7B", "method": "lora", "r": 16, "gradient_checkpointing": False},
    {**BASE, "model": "mistralai/Mistral-7B-v0.3", "method": "qlora", "r": 64, "gradient_checkpointing": True,
     "per_device_train_batch_size": 4, "gpu": "A100-SXM-40GB"},
    {**BASE, "model": "meta-llama/Llama-3.1-8B", "method": "full", "gradient_checkpointing": True,
     "num_gpus": 4, "parallelism": "fsdp"},
    {**BASE, "model": "meta-llama/Llama-3.1-70B", "method": "qlora", "r": 16, "gradient_checkpointing": True,
     "max_seq_length": 4096},
    {**BASE, "model": "meta-llama/Llama-3.1-70B", "method": "lora", "r": 8, "gradient_checkpointing": False,
     "expandable_segments": True},
    {**BASE, "model": "google/gemma-2-9b", "method": "lora", "r": 32, "gradient_checkpointing": True,
     "gradient_accumulation_steps": 4, "gpu": "L4-24GB"},
]


def cases() -> list[tuple[str, dict[str, Any]]]:
    """(name, raw configuration) of every table, in the order one process computes them."""
    from bench_table import CONFIGS  # scripts/ is the script's own folder: first on the import path

    out = [(f"{name} r={r}", {**raw, "r": r}) for name, raw in CONFIGS.items() for r in RANKS]
    return out + [(f"catalog {i} {raw['model']} {raw['method']}", raw) for i, raw in enumerate(CATALOG)]


def tables() -> list[str]:
    """One JSON line per case: its fit table, or its refusal's code."""
    from sizing.config import parse_config
    from sizing.errors import SizingError
    from sizing.solve import fit_table

    lines = []
    for name, raw in cases():
        try:
            got: Any = fit_table(parse_config(raw))
        except SizingError as err:
            got = ["error", err.code]
        lines.append(json.dumps({"case": name, "rows": got}, sort_keys=True, default=repr))
    return lines


def run_tree(src: Path) -> list[dict[str, Any]]:
    """tables() with `sizing` imported from `src`, in a fresh process."""
    with tempfile.NamedTemporaryFile(suffix=".jsonl", delete=False) as f:
        out = f.name
    env = {**os.environ, "PYTHONPATH": str(src)}
    subprocess.run([sys.executable, __file__, "--out", out], check=True, env=env, cwd=src)
    lines = Path(out).read_text().splitlines()
    os.unlink(out)
    return [json.loads(line) for line in lines]


def run_rev(rev: str) -> list[dict[str, Any]]:
    """tables() with `sizing` from git revision `rev`."""
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "ref.tar"
        subprocess.run(["git", "archive", "-o", str(archive), rev, "sizing"], check=True, cwd=ROOT)
        with tarfile.open(archive) as tar:
            tar.extractall(Path(tmp) / "ref")
        return run_tree(Path(tmp) / "ref")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ref", default="main", help="git revision to compare the current tree with")
    ap.add_argument("--ref-dir", help="or a folder holding the other version's sizing/")
    ap.add_argument("--out", help="write this tree's tables here (the subprocess's job)")
    args = ap.parse_args()
    if args.out:
        Path(args.out).write_text("\n".join(tables()) + "\n")
        return 0
    ref = run_tree(Path(args.ref_dir).resolve()) if args.ref_dir else run_rev(args.ref)
    new = run_tree(ROOT)
    rows = differ = 0
    for a, b in zip(ref, new, strict=True):
        if not isinstance(a["rows"], list) or not isinstance(a["rows"][0], dict):
            differ += a != b
            continue
        for ra, rb in zip(a["rows"], b["rows"], strict=True):
            rows += 1
            for key in sorted(set(ra) | set(rb)):
                if ra.get(key) != rb.get(key):
                    differ += 1
                    print(f"{a['case']} {ra.get('gpu')} {key}: ref {ra.get(key)!r} new {rb.get(key)!r}")
    print(f"{len(new)} tables, {rows} rows; {differ} fields differ from {args.ref_dir or args.ref}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
