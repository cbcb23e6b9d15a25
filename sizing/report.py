# A trial report (docs/recipes/trial.py, schema docs/recipes/report.schema.json) against the estimate of its run.
# Standard library only: this also runs in the browser (Pyodide), where the page imports a report.
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .catalog import gpus
from .estimate import Estimate, estimate

# Reading a report lives in report_parse.py; its names stay importable from here.
from .report_parse import FIGURES as FIGURES
from .report_parse import SCHEMA_VERSION as SCHEMA_VERSION
from .report_parse import STATUSES as STATUSES
from .report_parse import TrialReport as TrialReport
from .report_parse import load_report as load_report
from .report_parse import parse_report as parse_report
from .report_parse import read_report as read_report


def _measured(rep: TrialReport, key: str) -> tuple[int | None, int | None, str | None]:
    """(value, step, reason): the peak over steps; a null peak keeps the report's reason."""
    peak = rep.peaks.get(key)
    if isinstance(peak, Mapping) and peak.get("value") is not None:
        return int(peak["value"]), peak.get("step"), None
    values = [(int(s[key]), s.get("step")) for s in rep.steps if s.get(key) is not None]
    if values:
        value, step = max(values, key=lambda v: v[0])
        return value, step, None
    reason = peak.get("reason") if isinstance(peak, Mapping) else None
    if reason is None:
        reason = next((s.get("reason") for s in rep.steps if s.get("reason")), None)
    return None, None, str(reason) if reason else "not measured"


def _number(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and value >= 0
    return float(value) if ok else None


def _median(values: list[float]) -> float:
    # not statistics.median: that module pulls fractions, decimal and random into the browser's heap
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _time(rep: TrialReport, est: Estimate, refused: str | None) -> dict[str, Any]:
    """Measured step time and throughput next to the estimate's. The first optimizer step builds the
    optimizer states and warms up kernels, so the median leaves it out when later steps exist. `refused`
    names why the measured time is not comparable with the estimate (then no difference is given)."""
    done = [s for s in rep.steps if s.get("completed", True) and _number(s.get("seconds"))]
    timed = done[1:] if len(done) > 1 else done
    seconds = _median([float(s["seconds"]) for s in timed]) if timed else None
    tps = _number(rep.peaks.get("steady_tokens_per_second")) or _number(rep.peaks.get("tokens_per_second"))
    if tps is None and timed:
        spent = sum(float(s["seconds"]) for s in timed)
        tps = sum(_number(s.get("tokens")) or 0 for s in timed) / spent if spent else None
    t = est.time or {}

    def diff(estimated: Any, measured: float | None) -> float | None:
        if refused or estimated is None or not measured:
            return None
        return round((float(estimated) - measured) / measured * 100, 2)

    return {"measured_step_seconds": seconds, "estimated_step_seconds": t.get("step_seconds"),
            "step_difference_percent": diff(t.get("step_seconds"), seconds),
            "measured_tokens_per_second": tps, "estimated_tokens_per_second": t.get("tokens_per_second"),
            "tokens_difference_percent": diff(t.get("tokens_per_second"), tps), "steps_timed": len(timed),
            "not_compared": refused}


def _hardware(rep: TrialReport) -> dict[str, Any]:
    """The report's GPU and process count against its configuration's `gpu` and `num_gpus`."""
    hw = rep.hardware
    cfg = rep.config
    configured = cfg.get("gpu") if isinstance(cfg.get("gpu"), str) else None
    num_gpus = cfg.get("num_gpus") if isinstance(cfg.get("num_gpus"), int) else 1
    record = gpus().get(configured.lower()) if configured else None
    expected = str(record.record.get("reported_name") or "") if record else ""
    out: dict[str, Any] = {"configured_gpu": configured, "expected_name": expected or None, "measured_name": None,
                           "gpu_matches": None, "num_gpus": num_gpus, "world_size": rep.world_size,
                           "world_size_matches": rep.world_size == num_gpus, "timing": None, "memory": None}
    if rep.world_size != num_gpus:
        out["memory"] = (f"the trial ran {rep.world_size} process(es) but the configuration says num_gpus "
                         f"{num_gpus}: the per-GPU figures are not comparable")
    if hw is None:
        return out  # an older report: nothing to check against
    names = [g.get("name") for g in hw.get("gpus") or [] if isinstance(g, Mapping)]
    raw_local = hw.get("local_rank")
    local = raw_local if isinstance(raw_local, int) else 0
    measured = hw.get("device_name") or (names[local] if 0 <= local < len(names) else None)
    out["measured_name"] = measured
    if not names:
        out["timing"] = ("the trial ran without a GPU (CPU run): its step time is not comparable with the "
                         "estimate for a GPU")
        return out
    if expected and measured:
        out["gpu_matches"] = str(measured).strip().lower() == expected.strip().lower()
        if not out["gpu_matches"]:
            out["timing"] = (f"the trial ran on {measured}, the configuration names {configured} ({expected}): "
                             "step times are not comparable")
    return out


def _before_train(rep: TrialReport, reserved_peak: int | None) -> dict[str, Any] | None:
    """What was reserved as training began. The caching allocator keeps what loading and the first
    evaluation freed, and a step's reserved peak does not read below it unless memory runs short: when the
    measured peak is that floor, the step's own need is what `allocated` shows, not reserved."""
    b = rep.before_train
    if b is None:
        return None
    reserved = b.get("reserved_bytes")
    floor = reserved is not None and reserved_peak is not None and reserved_peak <= reserved
    return {"allocated_bytes": b.get("allocated_bytes"), "reserved_bytes": reserved,
            "reserved_peak_is_this_floor": floor}


def compare(rep: TrialReport, est: Estimate | None = None) -> dict[str, Any]:
    """Measured peaks against the estimate of the report's configuration.

    `difference_percent` is (estimate - measured) / measured * 100: positive when the estimate is above
    what the trial measured. `within_range` says whether the measurement lies in the estimate's range.
    """
    if est is None:
        est = estimate(rep.config)
    ranges = est.range_bytes
    hw = _hardware(rep)
    figures: dict[str, Any] = {}
    for name, key, what in FIGURES:
        estimated = int(getattr(est, f"{name}_bytes"))
        low, high = ranges[name]
        measured, step, reason = _measured(rep, key)
        if hw["memory"] and measured is not None:
            reason = hw["memory"]
        diff = None if not measured or hw["memory"] else round((estimated - measured) / measured * 100, 2)
        figures[name] = {"what": what, "estimated_bytes": estimated, "range_bytes": [low, high],
                         "measured_bytes": measured, "measured_step": step, "difference_bytes":
                         None if measured is None else estimated - measured, "difference_percent": diff,
                         "within_range": None if measured is None or hw["memory"] else low <= measured <= high,
                         "reason": reason}
    checks = rep.checks
    return {
        "before_train": _before_train(rep, figures["reserved"]["measured_bytes"]),
        "status": rep.status, "message": rep.message, "rank": rep.rank, "world_size": rep.world_size,
        "failure": dict(rep.failure) if rep.failure is not None else None,
        "steps": len(rep.steps), "peak_phase": est.peak_moment.phase, "confidence": est.confidence,
        "confidence_reasons": [str(r["message"]) for r in est.confidence_reasons],
        "figures": figures, "time": _time(rep, est, hw["timing"]), "hardware": hw,
        "checks": {k: checks.get(k) for k in ("reload_matches", "eval_loss_before", "eval_loss_after")},
        "failed_checks": [str(f) for f in checks.get("failed") or []],
    }


def _gib(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**30:.2f}"


def format_comparison(cmp: Mapping[str, Any]) -> str:
    """The comparison of `compare` as the command line's text table."""
    where = f" (rank {cmp['rank']} of {cmp['world_size']})" if cmp["world_size"] > 1 else ""
    lines = [f"Trial{where}: {cmp['status']}, {cmp['steps']} step(s) recorded: {cmp['message']}"]
    failure = cmp.get("failure")
    if cmp["status"] == "oom" and failure:
        lines.append(f"  out of memory at step {failure.get('step') or '-'} ({failure.get('phase')}); "
                     f"peak allocated in that step {_gib(failure.get('peak_allocated_bytes'))} GiB")
    lines += [f"  check failed: {f}" for f in cmp.get("failed_checks") or []]
    hw = cmp.get("hardware") or {}
    lines += [f"  not compared: {hw[k]}" for k in ("memory",) if hw.get(k)]
    lines += ["", f"{'GiB':<10} {'estimate':>9} {'range':>15} {'measured':>9} {'diff %':>8}  comparable with"]
    notes: list[str] = []
    for name, fig in cmp["figures"].items():
        low, high = fig["range_bytes"]
        diff = "-" if fig["difference_percent"] is None else f"{fig['difference_percent']:+.1f}"
        lines.append(f"{name:<10} {_gib(fig['estimated_bytes']):>9} {_gib(low) + '-' + _gib(high):>15} "
                     f"{_gib(fig['measured_bytes']):>9} {diff:>8}  {fig['what']}")
        if fig["reason"] and fig["reason"] not in notes:
            notes.append(fig["reason"])
    lines.append(f"\ndiff % = (estimate - measured) / measured; estimated peak in the {cmp['peak_phase']} phase, "
                 f"confidence {cmp['confidence']}" + "".join(f"; {r}" for r in cmp.get("confidence_reasons", [])))
    lines += [f"not measured: {n}" for n in notes]
    c = cmp["checks"]

    def num(v: Any) -> str:
        return "-" if v is None else f"{v:.4f}"

    before = cmp.get("before_train")
    if before and before["reserved_bytes"] is not None:
        lines.append(f"reserved when training began: {_gib(before['reserved_bytes'])} GiB (left by loading and the "
                     "first evaluation)" + ("; the reserved peak is that floor: compare allocated"
                                            if before["reserved_peak_is_this_floor"] else ""))
    t = cmp["time"]

    def sec(v: Any) -> str:
        return "-" if v is None else f"{v:.2f}"

    lines.append(f"step time: measured {sec(t['measured_step_seconds'])} s (median of {t['steps_timed']} step(s)), "
                 f"estimated {sec(t['estimated_step_seconds'])} s; tokens/s measured "
                 f"{sec(t['measured_tokens_per_second'])}, estimated {sec(t['estimated_tokens_per_second'])}")
    if t.get("not_compared"):
        lines.append(f"step time not compared: {t['not_compared']}")
    lines.append(f"checks: reload matches {c['reload_matches'] if c['reload_matches'] is not None else '-'}, "
                 f"eval loss {num(c['eval_loss_before'])} -> {num(c['eval_loss_after'])}")
    return "\n".join(lines)
