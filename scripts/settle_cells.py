"""Brute force: the reserved peak never decreases within a grid cell, on the cells a fit table settles in.

solve.Sizer._settle answers the probes inside its guess's grid cell from the cell's boundary, which is exact
where the required bytes do not decrease within that cell (one replay, one overhead ratio). For each
configuration and catalog GPU this walks every value of the cells holding the fit table's largest micro-batch
and longest sequence (and the next cell up) and prints the cells and values checked and any decrease.

    python scripts/settle_cells.py                     # the example files
    python scripts/settle_cells.py CONFIG.json --gpus h100-sxm-80gb l4-24gb
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sizing.catalog import gpus  # noqa: E402
from sizing.config import parse_config  # noqa: E402
from sizing.grid import grid_cell  # noqa: E402
from sizing.solve import Sizer  # noqa: E402


def check(path: str, cards: list[str] | None) -> tuple[int, int, list[str], list[str]]:
    """(cells, values, decreases within a cell, decreases into the next cell) over the settle cells of one
    configuration on the catalog GPUs (the second: informative, the settle does not rely on it)."""
    cfg = parse_config(json.loads(Path(path).read_text()))
    sizer = Sizer(cfg)
    seen: set[tuple[bool, str, int]] = set()
    values, bad, across = 0, [], []
    for gpu in gpus().values():
        if cards and gpu.id.lower() not in cards:
            continue
        for name, answer in (("max_seq_length", sizer.max_seq_length(gpu)),
                             ("per_device_train_batch_size", sizer.max_micro_batch(gpu))):
            for v in {max(answer, 1), answer + 1}:
                lo, hi = grid_cell(cfg, name, v)
                key = (gpu.sm >= (9, 0), name, lo)
                if key in seen:
                    continue
                seen.add(key)
                prev = None
                for x in range(max(lo, 1), hi + 1):
                    got = sizer.required(gpu, **{name: x})
                    values += 1
                    if prev is not None and got < prev:
                        bad.append(f"{gpu.id} {name}={x}: {got} < {prev}")
                    prev = got
                nxt = sizer.required(gpu, **{name: hi + 1})
                if prev is not None and nxt < prev:
                    across.append(f"{gpu.id} {name}={hi + 1}: {nxt} < {prev}")
    return len(seen), values, bad, across


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", default=sorted(str(p) for p in (ROOT / "examples").glob("*.json")))
    ap.add_argument("--gpus", nargs="*", help="catalog GPU ids (default: all)")
    args = ap.parse_args()
    failed = False
    for path in args.files:
        cells, values, bad, across = check(path, [g.lower() for g in args.gpus] if args.gpus else None)
        print(f"{Path(path).name}: {cells} cells, {values} values, {len(bad)} decreases within a cell, "
              f"{len(across)} into the next cell")
        for line in bad[:20]:
            print("  within:", line)
        for line in across[:5]:
            print("  across:", line)
        failed |= bool(bad)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
