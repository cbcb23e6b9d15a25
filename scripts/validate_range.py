"""The printed range scored two ways: in sample (the committed residuals.json, built from every row) and
leave-one-source-out (each row's range rebuilt from the OTHER sources' rows only, as a new harness would see
it), per tier, single/multi-GPU and regime, with the sources behind each and why a few tiers cannot be measured.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from residual_bands import Residual, build_groups
from sizing.uncertainty import band, widen

if TYPE_CHECKING:
    from validate import Scored

MIN_SOURCES_MEASURABLE = 3  # fewer sources: leave-one-source-out coverage says little about a new one


def residuals(scored: Iterable[Scored]) -> list[Residual]:
    """The rows a band can learn from: a measured value of the allocated or reserved tier."""
    return [Residual(s.row_id, s.source, s.method, s.metric, s.gpus > 1, s.measured_gib / s.estimated_gib)
            for s in scored
            if s.measured_gib is not None and s.metric in ("allocated", "reserved") and s.estimated_gib > 0]


def row_range(s: Scored, groups: Mapping[str, Mapping[str, Any]]) -> tuple[float, float]:
    """The row's printed range (GiB) rebuilt from `groups`, tier by tier as sizing/estimate.py builds it."""
    multi = s.gpus > 1
    a_lo, a_hi = widen(*band(s.method, "allocated", multi, groups)[:2], s.gaps)
    r_lo, r_hi = widen(*band(s.method, "reserved", multi, groups)[:2], s.gaps)
    if s.metric == "allocated":
        return s.alloc_gib * a_lo, s.alloc_gib * a_hi
    res_lo, res_hi = s.reserved_gib * r_lo, s.reserved_gib * r_hi
    if s.wall_gib is not None:  # as estimate.py: a run that fits never reserves more than the card has
        res_hi = max(min(res_hi, s.wall_gib), s.reserved_gib)
        res_lo = min(res_lo, res_hi)
    if s.metric == "device":
        return res_lo + s.device_extra_gib[0], res_hi + s.device_extra_gib[1]
    if s.metric == "unstated":  # either of torch's counters
        return s.alloc_gib * a_lo, res_hi
    return res_lo, res_hi


def attach_loso(scored: list[Scored]) -> None:
    """Set every measured row's leave-one-source-out range."""
    res = residuals(scored)
    by_source: dict[str, dict[str, dict[str, float | int]]] = {}
    for s in scored:
        if s.measured_gib is None:
            continue
        if s.source not in by_source:
            by_source[s.source] = build_groups(r for r in res if r.source != s.source)
        s.loso_low_gib, s.loso_high_gib = row_range(s, by_source[s.source])


def _line(name: str, items: list[Scored]) -> str:
    n = len(items)
    cov_in = 100.0 * sum(s.covered for s in items) / n
    cov_out = 100.0 * sum(s.covered_loso for s in items) / n
    half_in = statistics.median(s.half_width_pct for s in items)
    half_out = statistics.median(s.half_width_loso_pct for s in items)
    n_src = len({s.source for s in items})
    note = "" if n_src >= MIN_SOURCES_MEASURABLE else "  (out-of-sample coverage not measurable)"
    return (f"  {name:<28} {n:>3} {n_src:>4} {cov_in:>7.0f}% {half_in:>8.1f} {cov_out:>9.0f}% {half_out:>8.1f}"
            f"{note}")


def _sources(items: list[Scored]) -> str:
    counts: dict[str, int] = {}
    for s in items:
        counts[s.source] = counts.get(s.source, 0) + 1
    return f"{len(counts)} source(s) (" + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + ")"


def range_report(measured: list[Scored]) -> list[str]:
    """Coverage and median half-width of the range, in sample and leave-one-source-out."""
    out = ["\nThe printed range: as printed (residuals.json, from every row as written) vs leave-one-source-out "
           "(each row's range from the other sources' rows)",
           f"  {'group':<28} {'n':>3} {'src':>4} {'in-smp':>8} {'half %':>8} {'out-smp':>10} {'half %':>8}"]
    groups: dict[str, list[Scored]] = {"all": measured}
    for key in ("metric", "single_multi", "method", "regime_served"):
        for s in measured:
            value = {"metric": s.metric, "single_multi": "multi" if s.gpus > 1 else "single", "method": s.method,
                     "regime_served": f"{s.method}/{s.metric}/{'multi' if s.gpus > 1 else 'single'}"}[key]
            groups.setdefault(value, []).append(s)
    out += [_line(name, items) for name, items in groups.items()]
    device = [s for s in measured if s.metric == "device"]
    multi = [s for s in measured if s.gpus > 1]
    out.append(f"  device (nvidia-smi): {len(device)} rows from {_sources(device)}. No band is learnt from them: the "
               "device range is the reserved band plus the CUDA context's spread (0.30-0.65 GiB) and the paged/NCCL "
               "bytes; with fewer than 3 sources its coverage on a new source is not measured, only shown.")
    learnt = [s for s in multi if s.metric in ("allocated", "reserved")]
    out.append(f"  multi-GPU: {len(multi)} rows from {_sources(multi)}; the multi-GPU bands learn from the "
               f"{len(learnt)} allocated/reserved rows of {len({s.source for s in learnt})} sources, so a regime "
               "with fewer than 3 rows or 2 sources prints its tier's multi-GPU band, as wide as those sources "
               "disagree.")
    return out
