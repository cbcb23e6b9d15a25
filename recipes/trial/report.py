# The report (report.schema.json): created first, rewritten atomically after every step and phase.
from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from . import SCHEMA_VERSION
from .checks import EMPTY_CHECKS
from .env import now, rank, scrub, token

STATUSES = ("ok", "oom", "error", "interrupted", "check_failed")
EXIT = {"ok": 0, "error": 1, "bad_input": 2, "oom": 3, "check_failed": 4}
# what the trial writes into its output folder: removed when a folder is reused, so nothing stale remains
OUTPUTS = ("report.json", "error-traceback.txt", "adapter", "model", "checkpoints", "random-base")


def new_report(trial: Mapping[str, Any], config: Mapping[str, Any] | None) -> dict[str, Any]:
    """The report as the run starts: status error until a later rewrite says otherwise."""
    r, world, _ = rank()
    return {
        "schema_version": SCHEMA_VERSION, "status": "error", "message": "", "failure": None,
        "started_at": now(), "finished_at": None, "rank": r, "world_size": world, "trial": dict(trial),
        "config": dict(config) if config is not None else None, "config_as_given": None, "data": None,
        "model": None, "saved": None, "phase": "setup",
        "measurements": {"steps": [], "peaks": None, "before_train": None},
        "checks": {**EMPTY_CHECKS, "failed": []}, "versions": None, "hardware": None,
    }


def report_path(out: Path, r: int) -> Path:
    """report.json for rank 0, report.rankN.json for the others."""
    return out / ("report.json" if r == 0 else f"report.rank{r}.json")


def clean(out: Path, r: int) -> None:
    """Remove what an earlier trial left in a reused folder (rank 0 the shared parts, each rank its report)."""
    import shutil

    names = OUTPUTS if r == 0 else ()
    for name in (*names, report_path(out, r).name):
        path = out / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
    if r == 0:
        for stale in out.glob("report.rank*.json"):
            stale.unlink()


def sanitize(value: Any) -> Any:
    """JSON has no NaN / infinity: a non-finite number is written as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: sanitize(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [sanitize(v) for v in value]
    return value


def write(out: Path, report: Mapping[str, Any]) -> Path:
    """Write the report atomically (a reader sees the old or the new file, never half of one); the token is
    scrubbed from every string value before encoding, so the JSON stays valid whatever the token is."""
    path = report_path(out, int(report["rank"]))
    data = scrub(sanitize(json.loads(json.dumps(report, default=str))), token())
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        fh.write(json.dumps(data, indent=2, allow_nan=False) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    tmp.replace(path)
    return path
