"""Regenerate sizing/data/residuals.json: the measured/estimated ratio of every published row scored as
written (scripts/validate.py), as source-balanced distributions pooled from the tier down to the regime
(method x tier x single/multi-GPU; scripts/residual_bands.py); each group stores its band, row and source
counts and typical error. The engine prints them as the range and the confidence (sizing/uncertainty.py).
Usage: python scripts/residuals.py [--check]   (--check: fail when the committed file is stale)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from residual_bands import COVERAGE, PRIOR_SOURCES, build_groups
from validate import ROOT, load_csv, score_as_written
from validate_range import residuals

OUT = ROOT / "sizing" / "data" / "residuals.json"


def build(csv_path: Path) -> dict[str, object]:
    """The residuals document for the rows of `csv_path`."""
    scored, _, _ = score_as_written(load_csv(csv_path))
    return {"_about": __doc__.splitlines()[0], "source": str(csv_path.relative_to(ROOT)),
            "coverage": COVERAGE, "prior_sources": PRIOR_SOURCES, "groups": build_groups(residuals(scored))}


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
