"""Regenerate sizing/data/residuals.json: the measured/estimated ratio of every published row scored as
written (scripts/validate.py), grouped by regime (method x tier x framework x single/multi-GPU) and its
broader parents; each group with at least MIN_ROWS rows stores the QUANTILES of its ratios (nearest rank),
widened to hold the estimate itself. The engine prints them as the range (sizing/uncertainty.py).
Usage: python scripts/residuals.py [--check]   (--check: fail when the committed file is stale)
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from sizing.uncertainty import regime_keys
from validate import ROOT, load_csv, score_as_written

OUT = ROOT / "sizing" / "data" / "residuals.json"
MIN_ROWS = 6  # fewer rows say too little about a spread: the broader group is used instead
QUANTILES = (0.05, 0.95)  # in-sample coverage of 90 %, for at least 80 % on rows the file never saw


def quantile(values: list[float], q: float) -> float:
    """Nearest-rank quantile of sorted values."""
    return values[min(len(values) - 1, max(0, math.ceil(q * len(values)) - 1))]


def build(csv_path: Path) -> dict[str, object]:
    """The residuals document for the rows of `csv_path`."""
    scored, _, _ = score_as_written(load_csv(csv_path))
    ratios: dict[str, list[float]] = {}
    for s in scored:
        if s.measured_gib is None or s.metric not in ("allocated", "reserved", "device") or not s.estimated_gib:
            continue  # out-of-memory rows bound nothing; an unnamed statistic is no tier
        for key in regime_keys(s.method, s.metric, s.framework, s.gpus > 1):
            ratios.setdefault(key, []).append(s.measured_gib / s.estimated_gib)
    groups = {}
    for key, vals in sorted(ratios.items()):
        if len(vals) < MIN_ROWS:
            continue
        vals.sort()
        lo, hi = quantile(vals, QUANTILES[0]), quantile(vals, QUANTILES[1])
        groups[key] = {"n": len(vals), "low": round(min(lo, 1.0), 4), "high": round(max(hi, 1.0), 4)}
    return {"_about": __doc__.splitlines()[0], "source": str(csv_path.relative_to(ROOT)), "min_rows": MIN_ROWS,
            "quantiles": list(QUANTILES), "groups": groups}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail when the committed file differs")
    args = parser.parse_args()
    text = json.dumps(build(ROOT / "validation" / "measurements.csv"), indent=1, ensure_ascii=False) + "\n"
    if args.check:
        same = OUT.is_file() and OUT.read_text(encoding="utf-8") == text
        print("residuals.json is current" if same else "residuals.json is stale: run python scripts/residuals.py")
        return 0 if same else 1
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}: {len(json.loads(text)['groups'])} groups")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
