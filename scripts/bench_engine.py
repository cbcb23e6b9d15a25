"""Engine speed on CPython: estimate() and fit_table() for the example configurations, cold and warm, and the
page's recompute after a rank change (sizing.web: the peak, then the fit table; CPU seconds).

Each configuration runs in a fresh process (cold: no replay cached), then once more in the same process
(warm: the replay cache filled by the first call). Prints seconds; the best of --repeat fresh processes.

    python scripts/bench_engine.py                 # the three example files
    python scripts/bench_engine.py --repeat 5 examples/qlora-llama31-8b.json
    python scripts/bench_engine.py --against /tmp/old   # the same, alternating with the sizing/ in /tmp/old

With --against, each repetition runs this tree's and the other tree's process one after the other, so both
see the same load; the best of each is printed on its own row. Also prints CPU seconds (process time), which
a loaded machine disturbs less than wall-clock seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def measure(path: str) -> dict[str, float]:
    """Seconds (wall and CPU) of a cold and a warm estimate and fit table of one configuration file."""
    from sizing.config import parse_config
    from sizing.estimate import estimate
    from sizing.solve import fit_table

    cfg = parse_config(json.loads(Path(path).read_text()))
    out = {}
    for phase in ("cold", "warm"):  # warm: the same calls again, the replay cache filled by the first
        for name, fn in (("estimate", estimate), ("fit_table", fit_table)):
            t, c = time.perf_counter(), time.process_time()
            fn(cfg)
            out[f"{name}_{phase}"] = time.perf_counter() - t
            out[f"{name}_{phase}_cpu"] = time.process_time() - c
    return {**out, **_page(json.loads(Path(path).read_text()))}  # after the engine's: this configuration answered


def _page(data: dict[str, object]) -> dict[str, float]:
    """The page's two calls after a rank change (worker.js: the peak, then the answer with the fit table), CPU
    seconds, in a process that answered the configuration before (as the page has); a tree whose
    compute_json has no peak argument (before the peak answer) gets its first answer as it was then."""
    from sizing import web

    text = json.dumps(data)
    web.compute_json(text, False)
    web.compute_json(text, True)
    changed = json.dumps({**data, "r": int(data.get("r") or 16) + 1})  # type: ignore[call-overload]
    c = time.process_time()
    try:
        web.compute_json(changed, False, None, True)
    except TypeError:
        web.compute_json(changed, False)
    peak = time.process_time() - c
    web.compute_json(changed, True)
    return {"page_peak_cpu": peak, "page_table_cpu": time.process_time() - c - peak}


def _runs(path: str, src: Path, repeat: int) -> list[dict[str, float]]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    return [json.loads(subprocess.run([sys.executable, __file__, "--one", path], check=True, capture_output=True,
                                      text=True, cwd=ROOT, env=env).stdout) for _ in range(repeat)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", default=sorted(str(p) for p in (ROOT / "examples").glob("*.json")))
    ap.add_argument("--repeat", type=int, default=3, help="fresh processes per file (the best is printed)")
    ap.add_argument("--against", type=Path, help="a folder holding another version's sizing/, run alternately")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(measure(args.one)))
        return 0
    trees = [("this", ROOT)] + ([("against", args.against.resolve())] if args.against else [])
    print(f"{'configuration':32} {'tree':8} {'estimate cold':>14} {'warm':>8} {'fit_table cold':>15} {'warm':>8}"
          f"   cpu: {'est cold':>8} {'ft cold':>8} {'ft warm':>8} {'page peak':>9} {'table':>7}  (s, best of "
          f"{args.repeat})")
    for path in args.files:
        runs: dict[str, list[dict[str, float]]] = {name: [] for name, _ in trees}
        for _ in range(args.repeat):
            for name, src in trees:
                runs[name] += _runs(path, src, 1)
        for name, _ in trees:
            best = {k: min(r[k] for r in runs[name]) for k in runs[name][0]}
            b = best
            print(f"{Path(path).name:32} {name:8} {b['estimate_cold']:14.4f} {b['estimate_warm']:8.4f} "
                  f"{b['fit_table_cold']:15.4f} {b['fit_table_warm']:8.4f}   cpu: {b['estimate_cold_cpu']:8.4f} "
                  f"{b['fit_table_cold_cpu']:8.4f} {b['fit_table_warm_cpu']:8.4f} {b['page_peak_cpu']:9.4f} "
                  f"{b['page_table_cpu']:7.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
