"""Accuracy benchmark: score the estimate against every published measurement in validation/.

Like is compared with like: max_memory_allocated (and torchtune's "active") with the estimated
allocated peak, max_memory_reserved with reserved, nvidia-smi with device memory. An out-of-memory
row counts as right when the estimate exceeds the card. Rows that cannot be modelled are listed
with the reason. By default the CSV rows are scored AS WRITTEN, through one generic mapping of the
columns (scripts/validate_rows.py); --curated scores the per-row cases of validation/cases.json instead.
Usage: python scripts/validate.py [--csv PATH] [--curated | --both] [--rows] [--summary]
"""

from __future__ import annotations

import argparse
import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sizing import SizingError, estimate
from sizing.catalog import find_gpu
from sizing.estimate import ALLOC_ROUND, gaps, usable_bytes
from validate_rows import RowRefused, row_case, usable
from validate_tables import group as group  # the printed tables; group and stats stay importable from here
from validate_tables import report
from validate_tables import stats as stats
from validate_time import speed_lines

ROOT = Path(__file__).resolve().parent.parent


GiB = 2**30
# The measurement harnesses that are plain PyTorch loops over a transformers model.
FRAMEWORK_ALIASES = {"peft_harness": "custom", "answerai_fsdp_qlora": "custom"}
# The estimate's tier each measured statistic is compared with (unstated: reserved, what the card must hold).
TIER = {"allocated": "allocated", "active": "allocated", "reserved": "reserved", "device": "device",
        "unstated": "reserved"}
DEFAULT_GPU = "H100-SXM-80GB"  # card not stated: only the cuBLAS workspace size depends on it


@dataclass
class Speed:
    """A timed row: measured and estimated tokens per second, and the utilization the estimate assumed."""

    row_id: str
    source: str
    measured_tps: float
    estimated_tps: float
    utilization: float

    @property
    def error_pct(self) -> float:
        """(estimated - measured) / measured throughput, in percent."""
        return 100.0 * (self.estimated_tps - self.measured_tps) / self.measured_tps

    @property
    def implied_utilization(self) -> float:
        """The utilization that would have reproduced the measured throughput."""
        return self.utilization * self.measured_tps / self.estimated_tps


@dataclass
class Scored:
    """A scored row: the measured peak, the estimate of the tier it is compared with, its range and regime."""

    row_id: str
    source: str
    method: str
    metric: str  # the tier scored: allocated | reserved | device | unstated (against reserved)
    gpus: int
    measured_gib: float | None
    estimated_gib: float
    oom_capacity_gib: float | None = None
    framework: str = "?"
    low_gib: float = 0.0
    high_gib: float = 0.0
    confidence: str = "?"  # the estimate's printed label
    alloc_gib: float = 0.0  # the estimate's allocated and reserved peaks, and what the device tier adds to
    reserved_gib: float = 0.0  # reserved's low and high (CUDA context, paged and NCCL bytes): to rebuild
    device_extra_gib: tuple[float, float] = (0.0, 0.0)  # the range from other residuals (validate_range.py)
    gaps: tuple[str, ...] = ()
    loso_low_gib: float = 0.0  # the range built without the row's own source (leave-one-source-out)
    loso_high_gib: float = 0.0
    wall_gib: float | None = None  # a run that fits the named card: reserved's high stops at its usable memory

    @property
    def error_pct(self) -> float:
        """(estimate - measured) / measured in percent; an out-of-memory row errs only by how far it fits."""
        if self.measured_gib is None:  # OOM row: right (0) when the estimate exceeds the card
            assert self.oom_capacity_gib is not None
            return 0.0 if self.estimated_gib > self.oom_capacity_gib else \
                100.0 * (self.oom_capacity_gib - self.estimated_gib) / self.oom_capacity_gib
        return 100.0 * (self.estimated_gib - self.measured_gib) / self.measured_gib

    def _holds(self, low: float, high: float) -> bool:
        return self.measured_gib is not None and low <= self.measured_gib <= high

    def _half_width(self, low: float, high: float) -> float:
        return 100.0 * (high - low) / 2 / self.estimated_gib if self.estimated_gib else 0.0

    @property
    def covered(self) -> bool:
        """The printed range holds the measured value."""
        return self._holds(self.low_gib, self.high_gib)

    @property
    def half_width_pct(self) -> float:
        """Half the printed range's width, in percent of the estimate."""
        return self._half_width(self.low_gib, self.high_gib)

    @property
    def covered_loso(self) -> bool:
        """The range built from the other sources' rows holds the measured value."""
        return self._holds(self.loso_low_gib, self.loso_high_gib)

    @property
    def half_width_loso_pct(self) -> float:
        """Half the leave-one-source-out range's width, in percent of the estimate."""
        return self._half_width(self.loso_low_gib, self.loso_high_gib)

    @property
    def regime(self) -> str:
        """method/tier/framework/single-or-multi: the group the residual bands are built per."""
        return f"{self.method}/{self.metric}/{self.framework}/{'multi' if self.gpus > 1 else 'single'}"


def load_cases() -> tuple[list[dict[str, Any]], dict[str, dict[str, str]]]:
    """The curated cases of validation/cases.json and the CSV rows they fix, by row id."""
    cases = json.loads((ROOT / "validation" / "cases.json").read_text(encoding="utf-8"))["cases"]
    return cases, {r["row_id"]: r for r in load_csv(ROOT / "validation" / "measurements.csv")}


def load_csv(path: Path) -> list[dict[str, str]]:
    """The rows of a measurements CSV as dicts of column -> text."""
    with open(path, encoding="utf-8-sig", newline="") as fh:  # -sig: a spreadsheet's byte-order mark
        return list(csv.DictReader(fh))


def to_config(case: dict[str, Any]) -> dict[str, Any]:
    """A curated case's run configuration, with the harness aliases, the longest batch seen and a default GPU."""
    cfg = {k: v for k, v in case["config"].items() if k != "eval_generation"}
    cfg["framework"] = FRAMEWORK_ALIASES.get(cfg.get("framework", "transformers"), cfg.get("framework"))
    if case.get("effective_max_seq_length"):
        cfg["max_seq_length"] = case["effective_max_seq_length"]  # the longest batch actually seen
    if not cfg.get("gpu"):
        cfg["gpu"] = DEFAULT_GPU
    return cfg


def measured_tps(row: dict[str, str]) -> float | None:
    """The row's measured tokens per second (None when not stated or not positive)."""
    try:
        value = float(row["tokens_per_s"])
    except ValueError:
        return None
    return value if value > 0 else None


def _scored(rid: str, source: str, cfg: dict[str, Any], metric: str, measured: float | None,
            oom_gpu: str | None, speeds: list[Speed] | None = None, tps: float | None = None) -> Scored:
    """Estimate one run and pair it with its measurement (raises SizingError)."""
    est = estimate(cfg)
    if speeds is not None and tps and est.time and cfg.get("gpu") != DEFAULT_GPU:
        speeds.append(Speed(rid, source, tps, est.time["tokens_per_second"], est.time["utilization"]))
    tier = TIER[metric]
    value = {"allocated": est.allocated_bytes, "reserved": est.reserved_bytes, "device": est.device_bytes}[tier]
    low, high = est.range_bytes[tier]
    if metric == "unstated":  # the statistic is not named: any of torch's two counters
        low = est.range_bytes["allocated"][0]
    oom = None
    if oom_gpu:
        oom = usable_bytes(find_gpu(oom_gpu)) / GiB
        value = est.reserved_bytes
    res_lo, res_hi = est.range_bytes["reserved"]
    dev_lo, dev_hi = est.range_bytes["device"]
    return Scored(rid, source, str(cfg.get("method", "lora")), "allocated" if metric == "active" else metric,
                  int(cfg.get("num_gpus", 1)), measured, value / GiB, oom, str(est.config.framework),
                  low / GiB, high / GiB, est.confidence, est.allocated_bytes / GiB, est.reserved_bytes / GiB,
                  ((dev_lo - res_lo) / GiB, (dev_hi - res_hi) / GiB), gaps(est.config, est.arch, est.regime),
                  wall_gib=usable_bytes(find_gpu(est.config.gpu)) // ALLOC_ROUND * ALLOC_ROUND / GiB
                  if est.fits and est.fits[0]["fits"] and est.config.gpu else None)


def score(cases: list[dict[str, Any]], rows: dict[str, dict[str, str]],
          speeds: list[Speed] | None = None) -> tuple[list[Scored], list[tuple[str, str]]]:
    """Curated mode: each row through its hand-written case in validation/cases.json."""
    scored: list[Scored] = []
    unmodelled: list[tuple[str, str]] = []
    for case in cases:
        rid = case["row_id"]
        if case["status"] != "scored":
            unmodelled.append((rid, f"curated_skip: {case['skip_reason'] or 'skipped'}"))
            continue
        try:
            cfg = to_config(case)
            cfg["method"] = case["config"].get("method", "?")
            scored.append(_scored(rid, rows[rid]["source_id"].split("_")[0], cfg, case["metric"],
                                  case["measured_gib"], case.get("oom_capacity_gpu"), speeds, measured_tps(rows[rid])))
        except SizingError as exc:
            unmodelled.append((rid, str(exc)))
    return scored, unmodelled


def score_as_written(csv_rows: list[dict[str, str]]) -> tuple[list[Scored], list[tuple[str, str]], int]:
    """Rows as written: every usable row through the one generic mapping (scripts/validate_rows.py).
    Returns the scored rows (out-of-memory rows included), the refused usable rows, the usable count."""
    scored: list[Scored] = []
    refused: list[tuple[str, str]] = []
    n_usable = 0
    for row in csv_rows:
        oom = row.get("usable_for_scoring", "").strip().lower() == "oom"
        if not (usable(row) or oom):
            continue
        n_usable += 0 if oom else 1
        rid = row.get("row_id", "?")
        try:
            case = row_case(row)
            cfg = dict(case.config)
            cfg["gpu"] = cfg.get("gpu") or DEFAULT_GPU
            scored.append(_scored(rid, case.source, cfg, case.metric, case.measured_gib, case.oom_gpu))
        except RowRefused as exc:
            refused.append((rid, f"{exc.code}: {exc.message}"))
        except SizingError as exc:
            refused.append((rid, str(exc)))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            # A text the mapping cannot read must not stop the benchmark; the refusal names the error.
            refused.append((rid, f"row_unreadable: {type(exc).__name__}: {exc}"))
    return scored, refused, n_usable


def main() -> int:
    """Score the rows, print the tables (and the refusals unless --summary)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", action="store_true", help="print every scored row")
    parser.add_argument("--summary", action="store_true", help="summary tables only (no refusal list)")
    parser.add_argument("--csv", type=Path, default=ROOT / "validation" / "measurements.csv",
                        help="score the rows of this CSV as written (same columns as validation/measurements.csv)")
    parser.add_argument("--curated", action="store_true", help="score validation/cases.json (per-row curation)")
    parser.add_argument("--both", action="store_true", help="both modes, as written first")
    args = parser.parse_args()
    out: list[str] = []
    refusals: list[tuple[str, str]] = []
    if not args.curated or args.both:
        scored, refused, n_usable = score_as_written(load_csv(args.csv))
        out += report(f"Rows as written: {args.csv.name} (generic mapping, scripts/validate_rows.py)",
                      scored, refused, n_usable, args.rows)
        refusals += refused
    if args.curated or args.both:
        cases, rows = load_cases()
        speeds: list[Speed] = []
        scored, unmodelled = score(cases, rows, speeds)
        out += report("Curated: validation/cases.json (settings fixed per row)", scored, unmodelled, None, args.rows)
        refusals += unmodelled
    out += speed_lines()  # the step-time roofline's report (scripts/validate_time.py)
    if not args.summary:
        out.append("\nRows refused or not modelled:")
        out += [f"  {rid}: {why}" for rid, why in refusals]
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
