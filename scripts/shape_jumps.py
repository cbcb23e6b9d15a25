"""Jumps of the printed reserved memory between neighbouring shapes: one token (or one sequence) more.

For each configuration, on an Ampere and a Hopper card (the memory model reads only that of the GPU), this
prints the ample card's reserved peak (`estimate().reserved_bytes` without a GPU) and what the card must hold
(`Sizer.required`, the fit verdict) at every value v-1, v, v+1 around each replay-grid point v (the last value
of a cell) of the sequence length and of the micro-batch, and counts the jumps over --limit (2 %):
- sequence: one token more changes the step's tensors by a few bytes per token, so the relative change between
  neighbours is the jump;
- micro-batch: one sequence more adds a whole sequence's tensors (memory is piecewise linear in it), so the jump is
  the change of the increment, |f(v+1) - 2 f(v) + f(v-1)| / f(v), the second difference.
Decreases (a larger shape printed smaller) are counted apart.

    PYTHONPATH=. python scripts/shape_jumps.py                    # the examples and walk's four configurations
    PYTHONPATH=. python scripts/shape_jumps.py CONFIG.json --limit 1 --show 5
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from sizing.catalog import find_gpu, resolve_architecture
from sizing.config import parse_config
from sizing.errors import SizingError
from sizing.estimate import estimate
from sizing.grid import grid
from sizing.solve import Sizer

ROOT = Path(__file__).resolve().parents[1]
# The four configurations of /work/notes/walk.md (settle cells, 16:00): where the grid's jumps were found.
WALK: dict[str, dict[str, Any]] = {
    "walk-full-llama32-1b-eager": {
        "model": "meta-llama/Llama-3.2-1B", "method": "full", "attn_implementation": "eager", "max_seq_length": 1024,
        "per_device_train_batch_size": 2, "gpu": "A100-SXM-40GB", "gradient_checkpointing": False},
    "walk-lora64-qwen25-7b-fa2-trl": {
        "model": "Qwen/Qwen2.5-7B", "method": "lora", "r": 64, "target_modules": "all-linear",
        "attn_implementation": "flash_attention_2", "packing": True, "max_seq_length": 4096,
        "per_device_train_batch_size": 1, "gpu": "H100-SXM-80GB", "framework": "trl"},
    "walk-qlora-gemma2-9b-paged-expandable": {
        "model": "google/gemma-2-9b", "method": "qlora", "r": 16, "attn_implementation": "sdpa",
        "gradient_checkpointing": True, "max_seq_length": 2048, "per_device_train_batch_size": 4, "gpu": "L4-24GB",
        "optim": "paged_adamw_8bit", "expandable_segments": True},
    "walk-full-llama31-8b-fsdp4": {
        "model": "meta-llama/Llama-3.1-8B", "method": "full", "num_gpus": 4, "parallelism": "fsdp",
        "attn_implementation": "sdpa", "gradient_checkpointing": True, "max_seq_length": 2048,
        "per_device_train_batch_size": 1, "gpu": "H100-SXM-80GB"},
}
CARDS = ("A100-PCIe-80GB", "H100-SXM-80GB")


def grid_points(low: int, high: int) -> list[int]:
    """The replay grid's values in [low, high] (the last value of each cell)."""
    out, v = [], low
    while v <= high:
        g = grid(v)
        if g <= high:
            out.append(g)
        v = g + 1
    return out


def figures(raw: dict[str, Any], name: str, value: int, card: str) -> tuple[int, int] | None:
    """(reserved on an ample card, required on `card`) with `name` set to value; None when refused."""
    try:
        cfg = parse_config({**raw, name: value, "gpu": None})
        ample = estimate(cfg).reserved_bytes
        need = Sizer(parse_config({**raw, name: value, "gpu": card})).required(find_gpu(card))
    except SizingError:
        return None
    return ample, need


def sweep(raw: dict[str, Any], name: str, limit: float, show: int) -> tuple[int, int, int, float, list[str]]:
    """(points, jumps over limit, decreases, largest relative jump, the worst lines) of one field on both cards."""
    cfg = parse_config(raw)
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    top = min(arch.max_positions or 131072, 131072)
    values = grid_points(64, top) if name == "max_seq_length" else grid_points(2, 64)
    points = jumps = drops = 0
    worst: list[tuple[float, str]] = []
    for card in CARDS:
        for v in values:
            got = [figures(raw, name, x, card) for x in (v - 1, v, v + 1)]
            if None in got:
                continue
            for i, tier in enumerate(("reserved", "required")):
                a, b, c = (g[i] for g in got if g is not None)
                points += 1
                drops += (b < a) + (c < b)
                if name == "max_seq_length":
                    rel, what = max((b - a) / b, (c - b) / b, key=abs), "step"
                else:
                    rel, what = (c - 2 * b + a) / b, "second difference"
                jumps += abs(rel) > limit
                worst.append((abs(rel), f"{card} {v - 1}, {v}, {v + 1}: {tier} {a / 1e9:.3f}, "
                              f"{b / 1e9:.3f}, {c / 1e9:.3f} GB ({what} {rel:+.2%})"))
    worst.sort(reverse=True)
    return points, jumps, drops, worst[0][0] if worst else 0.0, [w for _, w in worst[:show]]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*")
    ap.add_argument("--limit", type=float, default=2.0, help="a jump, in percent (default 2)")
    ap.add_argument("--show", type=int, default=3, help="largest jumps printed per configuration")
    args = ap.parse_args()
    configs = ({Path(p).stem: json.loads(Path(p).read_text()) for p in args.files} if args.files else
               {**{p.stem: json.loads(p.read_text()) for p in sorted((ROOT / "examples").glob("*.json"))}, **WALK})
    total = over = down = 0
    for label, raw in configs.items():
        for name in ("max_seq_length", "per_device_train_batch_size"):
            points, jumps, drops, largest, lines = sweep(raw, name, args.limit / 100, args.show)
            total, over, down = total + points, over + jumps, down + drops
            print(f"{label} {name}: {points} grid points, {jumps} jumps > {args.limit:g} %, largest {largest:.2%}, "
                  f"{drops} decreases")
            for line in lines:
                print("   ", line)
    print(f"all: {total} grid points, {over} jumps > {args.limit:g} %, {down} decreases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
