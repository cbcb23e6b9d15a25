"""The accuracy benchmark's printed tables (scripts/validate.py): error, coverage and range width of scored rows
per source, tier, method, single/multi-GPU, confidence label and regime."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import TYPE_CHECKING

from validate_range import attach_loso, range_report

if TYPE_CHECKING:
    from validate import Scored


def stats(errors: Iterable[float]) -> tuple[int, float, float, float]:
    """(n, median, p90, worst) of the absolute errors in percent (NaN when there are none)."""
    abs_err = sorted(abs(e) for e in errors)
    if not abs_err:
        return 0, float("nan"), float("nan"), float("nan")
    p90 = abs_err[min(len(abs_err) - 1, round(0.9 * (len(abs_err) - 1)))]
    return len(abs_err), statistics.median(abs_err), p90, abs_err[-1]


def table(title: str, groups: dict[str, list[Scored]]) -> list[str]:
    """One printed table: a line per group with its error, coverage and median half-width."""
    lines = [f"\n{title}", f"  {'group':<34} {'n':>3} {'median %':>9} {'p90 %':>7} {'worst %':>8}"
                            f" {'in range':>9} {'half-width %':>13}"]
    for name, items in groups.items():
        n, med, p90, worst = stats(s.error_pct for s in items)
        cov = 100.0 * sum(s.covered for s in items) / len(items) if items else float("nan")
        half = statistics.median(s.half_width_pct for s in items) if items else float("nan")
        lines.append(f"  {name:<34} {n:>3} {med:>9.1f} {p90:>7.1f} {worst:>8.1f} {cov:>8.0f}% {half:>13.1f}")
    return lines


def report(title: str, scored: list[Scored], refused: list[tuple[str, str]], n_usable: int | None,
           show_rows: bool) -> list[str]:
    """Every table of one scoring mode: by source, tier, method, single/multi-GPU and regime."""
    measured = [s for s in scored if s.measured_gib is not None]
    ooms = [s for s in scored if s.measured_gib is None]
    single = [s for s in measured if s.gpus == 1]
    multi = [s for s in measured if s.gpus > 1]
    usable_txt = f"{n_usable} usable rows, " if n_usable is not None else ""
    share = f" ({100.0 * len(measured) / n_usable:.0f} %)" if n_usable else ""
    out = [f"\n=== {title} ===",
           f"{usable_txt}{len(measured)} scored{share} ({len(single)} single-GPU, {len(multi)} multi-GPU), "
           f"{len(refused)} refused; out-of-memory rows: {sum(s.error_pct == 0 for s in ooms)} of {len(ooms)} "
           "estimated over the card. Absolute percentage error of the estimate; 'in range': share of rows whose "
           "measured value lies in the printed low-high range."]
    codes: dict[str, int] = {}
    for _, why in refused:
        code = why.split(":")[0].split(" [")[0]
        codes[code] = codes.get(code, 0) + 1
    if codes:
        out.append("Refusals by code: " + ", ".join(f"{c} {n}" for c, n in sorted(codes.items())))
    out += table("By source", group(measured, "source"))
    out += table("By tier (allocated includes torch 'active'; unstated is scored against reserved)",
                 group(measured, "metric"))
    out += table("By method", group(measured, "method"))
    out += table("Single vs multi-GPU (per GPU: DDP, FSDP, ZeRO)", {"single": single, "multi": multi})
    out += table("All rows", {"all": measured})
    attach_loso(measured)
    out += range_report(measured)
    out += table("By the printed confidence label (should be monotone: high errs least)",
                 group(measured, "confidence"))
    out += table("By regime (method/tier/framework/single-multi)", group(measured, "regime"))
    if show_rows:
        head = f"{'row':<6}{'src':<5}{'method':<7}{'tier':<10}{'gpus':>4}{'measured':>10}{'estimate':>10}"
        out.append(f"\n  {head}{'err %':>8}{'low':>8}{'high':>8}")
        for s in scored:
            meas = f"{s.measured_gib:.2f}" if s.measured_gib is not None else f">{s.oom_capacity_gib:.1f}"
            out.append(f"  {s.row_id:<6}{s.source:<5}{s.method:<7}{s.metric:<10}{s.gpus:>4}{meas:>10}"
                       f"{s.estimated_gib:>10.2f}{s.error_pct:>8.1f}{s.low_gib:>8.2f}{s.high_gib:>8.2f}")
    return out


def group(items: list[Scored], key: str) -> dict[str, list[Scored]]:
    """The rows by the value of their attribute `key`, in sorted order."""
    out: dict[str, list[Scored]] = {}
    for s in items:
        out.setdefault(str(getattr(s, key)), []).append(s)
    return dict(sorted(out.items()))
