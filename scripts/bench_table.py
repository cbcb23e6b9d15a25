"""fit_table's speed in CPython after a rank change: one warm-up table, then a table at each rank not computed
before in the process (the page's recompute after an edit), per configuration; prints CPU milliseconds and the
counts of allocator replays and _step calls (asserts nothing about time).

    PYTHONPATH=. python3 scripts/bench_table.py
    PYTHONPATH=. python3 scripts/bench_table.py --ranks 32 64 --profile
    PYTHONPATH=. python3 scripts/bench_table.py --cards hopper   # then --cards pre-hopper

--cards keeps one GPU class in the table (the engine's caches are keyed by it: Sizer._memory), what one of two
workers would compute if the page split the table between them; compare the slower half with --cards all.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from sizing import solve, step
from sizing.catalog import Gpu
from sizing.config import RunConfig, parse_config
from sizing.memory import replay

ROOT = Path(__file__).resolve().parents[1]
CONFIGS: dict[str, dict[str, Any]] = {
    "qlora-8b": json.loads((ROOT / "examples/qlora-llama31-8b.json").read_text()),
    "full-tiny": json.loads((ROOT / "examples/full-tiny-model-config.json").read_text()),
    "lora-70b": {"model": "meta-llama/Llama-2-70b-hf", "method": "lora", "gpu": "H100-SXM-80GB",
                 "max_seq_length": 2048, "per_device_train_batch_size": 1, "gradient_checkpointing": True},
}


class Counter:
    """Counts calls of a module-level function and their CPU seconds (its module's own name is rebound)."""

    def __init__(self, module: Any, name: str) -> None:
        self.module, self.name, self.calls, self.seconds = module, name, 0, 0.0
        original = getattr(module, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            t = time.process_time()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds += time.process_time() - t

        setattr(module, name, counted)


def keep_cards(which: str) -> None:
    """Rebinds solve's catalog to one GPU class (`which`: all, hopper = sm 9.0 and later, pre-hopper)."""
    if which == "all":
        return
    every = getattr(solve, "gpus")  # solve's own binding of catalog.gpus, which fit_table calls  # noqa: B009

    def kept() -> dict[str, Gpu]:
        return {k: g for k, g in every().items() if (g.sm >= (9, 0)) == (which == "hopper")}

    setattr(solve, "gpus", kept)  # noqa: B010


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, nargs="*", default=[32, 33, 64, 132, 164])
    ap.add_argument("--configs", nargs="*", default=list(CONFIGS))
    ap.add_argument("--profile", action="store_true", help="cProfile the last table of each configuration")
    ap.add_argument("--cards", choices=("all", "hopper", "pre-hopper"), default="all",
                    help="only the GPUs of one class in the table (see the module's docstring)")
    args = ap.parse_args()
    keep_cards(args.cards)
    replays, steps = Counter(replay, "_replay"), Counter(step, "_step")
    for name in args.configs:
        cfg: RunConfig = parse_config(CONFIGS[name])
        solve.fit_table(replace(cfg, r=8))  # warm-up at a rank not measured
        for r in args.ranks:
            c = replace(cfg, r=r)
            replays.calls = steps.calls = 0
            replays.seconds = steps.seconds = 0.0
            if args.profile and r == args.ranks[-1]:
                prof = cProfile.Profile()
                t = time.perf_counter()
                prof.runcall(solve.fit_table, c)
                ms = 1e3 * (time.perf_counter() - t)
                pstats.Stats(prof).sort_stats("tottime").print_stats(25)
            else:
                t = time.process_time()
                solve.fit_table(c)
                ms = 1e3 * (time.process_time() - t)
            print(f"{name:10s} r={r:4d} {ms:6.1f} ms  replays {replays.calls:3d} ({1e3 * replays.seconds:5.1f} ms)  "
                  f"_step {steps.calls:4d} ({1e3 * steps.seconds:5.1f} ms)", flush=True)


if __name__ == "__main__":
    main()
