"""Accuracy benchmark: score the estimate against every published measurement in validation/.

Like is compared with like: max_memory_allocated (and torchtune's "active") with the estimated
allocated peak, max_memory_reserved with reserved, nvidia-smi with device memory. An out-of-memory
row counts as right when the estimate exceeds the card. Rows that cannot be modelled are listed
with the reason. Usage: python scripts/validate.py [--rows] [--summary]
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sizing import SizingError, estimate
from sizing.catalog import find_gpu
from sizing.estimate import usable_bytes

ROOT = Path(__file__).resolve().parent.parent

GiB = 2**30
# The measurement harnesses that are plain PyTorch loops over a transformers model.
FRAMEWORK_ALIASES = {"peft_harness": "custom", "answerai_fsdp_qlora": "custom"}
METRIC_FIELD = {"allocated": "allocated_bytes", "active": "allocated_bytes", "reserved": "reserved_bytes",
                "device": "device_bytes"}


@dataclass
class Speed:
    row_id: str
    source: str
    measured_tps: float
    estimated_tps: float
    utilization: float

    @property
    def error_pct(self) -> float:
        return 100.0 * (self.estimated_tps - self.measured_tps) / self.measured_tps

    @property
    def implied_utilization(self) -> float:
        """The utilization that would have reproduced the measured throughput."""
        return self.utilization * self.measured_tps / self.estimated_tps


@dataclass
class Scored:
    row_id: str
    source: str
    method: str
    metric: str
    gpus: int
    measured_gib: float | None
    estimated_gib: float
    oom_capacity_gib: float | None = None

    @property
    def error_pct(self) -> float:
        if self.measured_gib is None:  # OOM row: right (0) when the estimate exceeds the card
            assert self.oom_capacity_gib is not None
            return 0.0 if self.estimated_gib > self.oom_capacity_gib else \
                100.0 * (self.oom_capacity_gib - self.estimated_gib) / self.oom_capacity_gib
        return 100.0 * (self.estimated_gib - self.measured_gib) / self.measured_gib


def load_cases() -> tuple[list[dict[str, Any]], dict[str, dict[str, str]]]:
    cases = json.loads((ROOT / "validation" / "cases.json").read_text(encoding="utf-8"))["cases"]
    with open(ROOT / "validation" / "measurements.csv", encoding="utf-8", newline="") as fh:
        rows = {r["row_id"]: r for r in csv.DictReader(fh)}
    return cases, rows


def to_config(case: dict[str, Any]) -> dict[str, Any]:
    cfg = {k: v for k, v in case["config"].items() if k != "eval_generation"}
    cfg["framework"] = FRAMEWORK_ALIASES.get(cfg.get("framework", "transformers"), cfg.get("framework"))
    if case.get("effective_max_seq_length"):
        cfg["max_seq_length"] = case["effective_max_seq_length"]  # the longest batch actually seen
    if not cfg.get("gpu"):
        cfg["gpu"] = "H100-SXM-80GB"  # unknown card: only the cuBLAS workspace size depends on it
    return cfg


def measured_tps(row: dict[str, str]) -> float | None:
    try:
        value = float(row["tokens_per_s"])
    except ValueError:
        return None
    return value if value > 0 else None


def score(cases: list[dict[str, Any]], rows: dict[str, dict[str, str]],
          speeds: list[Speed] | None = None) -> tuple[list[Scored], list[tuple[str, str]]]:
    scored: list[Scored] = []
    unmodelled: list[tuple[str, str]] = []
    for case in cases:
        rid = case["row_id"]
        if case["status"] != "scored":
            unmodelled.append((rid, case["skip_reason"] or "skipped"))
            continue
        try:
            est = estimate(to_config(case))
        except SizingError as exc:
            unmodelled.append((rid, f"engine refuses it: {exc}"))
            continue
        tps = measured_tps(rows[rid])
        if speeds is not None and tps and est.time and case["config"].get("gpu"):
            speeds.append(Speed(rid, rows[rid]["source_id"].split("_")[0], tps, est.time["tokens_per_second"],
                                est.time["utilization"]))
        value = getattr(est, METRIC_FIELD[case["metric"]])
        oom = None
        if case.get("oom_capacity_gpu"):
            oom = usable_bytes(find_gpu(case["oom_capacity_gpu"])) / GiB
            value = est.reserved_bytes
        scored.append(Scored(rid, rows[rid]["source_id"].split("_")[0], case["config"].get("method", "?"),
                             case["metric"], int(case["config"].get("num_gpus", 1)), case["measured_gib"],
                             value / GiB, oom))
    return scored, unmodelled


def stats(errors: Iterable[float]) -> tuple[int, float, float, float]:
    abs_err = sorted(abs(e) for e in errors)
    if not abs_err:
        return 0, float("nan"), float("nan"), float("nan")
    p90 = abs_err[min(len(abs_err) - 1, round(0.9 * (len(abs_err) - 1)))]
    return len(abs_err), statistics.median(abs_err), p90, abs_err[-1]


def table(title: str, groups: dict[str, list[Scored]]) -> list[str]:
    lines = [f"\n{title}", f"  {'group':<22} {'n':>3} {'median %':>9} {'p90 %':>7} {'worst %':>8}"]
    for name, items in groups.items():
        n, med, p90, worst = stats(s.error_pct for s in items)
        lines.append(f"  {name:<22} {n:>3} {med:>9.1f} {p90:>7.1f} {worst:>8.1f}")
    return lines


def speed_table(speeds: list[Speed]) -> list[str]:
    lines = ["\nTokens per second (all GPUs of the run), estimated vs published, by source",
             f"  {'source':<8} {'n':>3} {'median %':>9} {'worst %':>8} {'assumed util':>13}"
             f" {'implied util (median)':>22}"]
    by_source: dict[str, list[Speed]] = {}
    for sp in speeds:
        by_source.setdefault(sp.source, []).append(sp)
    for name, items in sorted(by_source.items()):
        errs = sorted(abs(x.error_pct) for x in items)
        implied = statistics.median(x.implied_utilization for x in items)
        lines.append(f"  {name:<8} {len(items):>3} {statistics.median(errs):>9.1f} {errs[-1]:>8.1f} "
                     f"{items[0].utilization:>13.2f} {implied:>22.2f}")
    return lines


def group(items: list[Scored], key: str) -> dict[str, list[Scored]]:
    out: dict[str, list[Scored]] = {}
    for s in items:
        out.setdefault(str(getattr(s, key)), []).append(s)
    return dict(sorted(out.items()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", action="store_true", help="print every scored row")
    parser.add_argument("--summary", action="store_true", help="summary tables only")
    args = parser.parse_args()
    cases, rows = load_cases()
    speeds: list[Speed] = []
    scored, unmodelled = score(cases, rows, speeds)
    single = [s for s in scored if s.gpus == 1]
    multi = [s for s in scored if s.gpus > 1]
    out = [f"Scored {len(scored)} rows ({len(single)} single-GPU, {len(multi)} multi-GPU); "
           f"{len(unmodelled)} not modelled. Absolute percentage error of the estimate."]
    out += table("Single GPU, by source", group(single, "source"))
    out += table("Single GPU, by method", group(single, "method"))
    out += table("Single GPU, by metric", group(single, "metric"))
    out += table("Single GPU, overall", {"all": single})
    out += table("Multi-GPU (per GPU: DDP, FSDP, ZeRO)", {"all": multi})
    out += speed_table(speeds)
    if args.rows:
        head = f"{'row':<6}{'src':<5}{'method':<7}{'metric':<10}{'gpus':>4}{'measured':>10}{'estimate':>10}"
        out.append(f"\n  {head}{'err %':>8}")
        for s in scored:
            meas = f"{s.measured_gib:.2f}" if s.measured_gib is not None else f">{s.oom_capacity_gib:.1f}"
            out.append(f"  {s.row_id:<6}{s.source:<5}{s.method:<7}{s.metric:<10}{s.gpus:>4}{meas:>10}"
                       f"{s.estimated_gib:>10.2f}{s.error_pct:>8.1f}")
    if not args.summary:
        out.append("\nRows not modelled:")
        out += [f"  {rid}: {why}" for rid, why in unmodelled]
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
