"""Engine speed on CPython: estimate() and fit_table() for the example configurations, cold and warm.

Each configuration runs in a fresh process (cold: no replay cached), then once more in the same process
(warm: the replay cache filled by the first call). Prints seconds; the best of --repeat fresh processes.

    python scripts/bench_engine.py                 # the three example files
    python scripts/bench_engine.py --repeat 5 examples/qlora-llama31-8b.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def measure(path: str) -> dict[str, float]:
    """Seconds of a cold and a warm estimate and fit table of one configuration file, in this process."""
    from sizing.config import parse_config
    from sizing.estimate import estimate
    from sizing.solve import fit_table

    cfg = parse_config(json.loads(Path(path).read_text()))
    out = {}
    for name, fn in (("estimate", estimate), ("fit_table", fit_table)):
        t = time.perf_counter()
        fn(cfg)
        out[f"{name}_cold"] = time.perf_counter() - t
    for name, fn in (("estimate", estimate), ("fit_table", fit_table)):
        t = time.perf_counter()
        fn(cfg)
        out[f"{name}_warm"] = time.perf_counter() - t
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", default=sorted(str(p) for p in (ROOT / "examples").glob("*.json")))
    ap.add_argument("--repeat", type=int, default=3, help="fresh processes per file (the best is printed)")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(measure(args.one)))
        return 0
    print(f"{'configuration':32} {'estimate cold':>14} {'warm':>8} {'fit_table cold':>15} {'warm':>8}  (s, best of "
          f"{args.repeat})")
    for path in args.files:
        runs = [json.loads(subprocess.run([sys.executable, __file__, "--one", path], check=True, capture_output=True,
                                          text=True, cwd=ROOT).stdout) for _ in range(args.repeat)]
        best = {k: min(r[k] for r in runs) for k in runs[0]}
        print(f"{Path(path).name:32} {best['estimate_cold']:14.4f} {best['estimate_warm']:8.4f} "
              f"{best['fit_table_cold']:15.4f} {best['fit_table_warm']:8.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
