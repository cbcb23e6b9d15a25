"""The printed range's statistics, from measured/estimated ratios of published rows (scripts/residuals.py).

A regime's distribution is SOURCE-BALANCED (each source weighs one, its rows share it: a 30-row harness must
not outvote three others) and POOLED hierarchically from the tier down to method x tier x single/multi-GPU:
each level mixes its own sources with its parent's distribution, the parent weighing PRIOR_SOURCES sources; a
level under MIN_ROWS rows or MIN_SOURCES sources is no group, its runs print the parent's band: never a +-40 %
band from 2 rows, nor a +-1 % band from one harness. The band is centred on the distribution's median log ratio,
shrunk by (S - 1) / (S + 1) for S sources at the regime's own level (one source's bias cannot be told from the
engine's), and holds COVERAGE of the weight on both sides of that centre.
COVERAGE is the narrowest level that still holds >= 80 % of each tier's rows (issue 11) when every row's band is
built without its own source (leave-one-source-out, scripts/validate.py prints it), with a margin: on the public
rows as written, 0.70 holds 87 % of all rows that way (reserved 86 %, allocated 87 %; half-width 11.9 %), 0.80
held 90 % at 13.2 %, and 0.68 already drops reserved to 80 %. The previous per-row 5-95 % quantiles (regime with
framework, 6 rows at least) held 75 % of all rows and 67 % of reserved ones that way.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from sizing.uncertainty import regime_keys

COVERAGE = 0.70  # share of a regime's source-balanced weight inside its band (the docstring says why this level)
PRIOR_SOURCES = 1.0  # weight of the parent distribution, in sources, when mixed into a child level
# A level with fewer rows or sources is no group of its own: its runs take the parent's band. Two sources at
# least, or one harness's bias is the band; three rows, or one outlier of two is half the weight.
MIN_ROWS, MIN_SOURCES = 3, 2
TIERS = ("allocated", "reserved")  # the tiers with their own band (device = reserved + the CUDA context)

Dist = list[tuple[float, float]]  # (log of measured/estimated, weight); weights sum to 1


@dataclass(frozen=True)
class Residual:
    """One scored row's measured/estimated ratio and its regime."""

    row_id: str
    source: str
    method: str
    tier: str
    multi: bool
    ratio: float


def weighted_quantile(dist: Dist, q: float) -> float:
    """The smallest value whose cumulative weight reaches q (nearest rank, weighted)."""
    items = sorted(dist)
    total = math.fsum(w for _, w in items)
    acc: list[float] = []
    for value, w in items:
        acc.append(w)
        if math.fsum(acc) >= q * total - 1e-12:
            return value
    return items[-1][0]


def _own(by_source: dict[str, list[float]]) -> Dist:
    """Each source weighs 1 / (number of sources); its rows share that weight equally."""
    n_src = len(by_source)
    return [(math.log(r), 1.0 / n_src / len(vals)) for vals in by_source.values() for r in vals]


def _mix(child: Dist, n_child: int, parent: Dist | None) -> Dist:
    """Child's own sources mixed with the parent distribution weighing PRIOR_SOURCES sources."""
    if parent is None:
        return child
    wc = n_child / (n_child + PRIOR_SOURCES)
    return [(x, w * wc) for x, w in child] + [(x, w * (1.0 - wc)) for x, w in parent]


def band_of(dist: Dist, n_sources: int) -> tuple[float, float, float]:
    """(low, high, typical error) of one pooled distribution: the band always holds the estimate itself."""
    centre = weighted_quantile(dist, 0.5) * (n_sources - 1) / (n_sources + 1)
    half = weighted_quantile([(abs(x - centre), w) for x, w in dist], COVERAGE)
    # typical |estimate - measured| / measured of a row of this regime (validate.py's error), from the same weights
    error = weighted_quantile([(abs(math.exp(-x) - 1.0), w) for x, w in dist], 0.5)
    return min(math.exp(centre - half), 1.0), max(math.exp(centre + half), 1.0), error


def build_groups(residuals: Iterable[Residual]) -> dict[str, dict[str, float | int]]:
    """Every regime key with rows -> its band, row and source counts and typical error."""
    rows: dict[str, dict[str, list[float]]] = {}
    chains: dict[str, tuple[str, ...]] = {}
    for r in residuals:
        if r.tier not in TIERS or not r.ratio > 0:
            continue
        keys = tuple(reversed(regime_keys(r.method, r.tier, r.multi)))  # broadest first
        for i, key in enumerate(keys):
            rows.setdefault(key, {}).setdefault(r.source, []).append(r.ratio)
            chains[key] = keys[: i + 1]
    out: dict[str, dict[str, float | int]] = {}
    for key in sorted(rows):
        if any(sum(map(len, rows[level].values())) < MIN_ROWS or len(rows[level]) < MIN_SOURCES
               for level in chains[key]):
            continue  # this level (or a broader one) says too little: the broader group serves its runs
        dist: Dist | None = None
        for level in chains[key]:
            dist = _mix(_own(rows[level]), len(rows[level]), dist)
        assert dist is not None
        low, high, error = band_of(dist, len(rows[key]))
        # rounded outwards: the row a quantile lands on stays inside its own band
        out[key] = {"n": sum(len(v) for v in rows[key].values()), "sources": len(rows[key]),
                    "low": math.floor(low * 1e4) / 1e4, "high": math.ceil(high * 1e4) / 1e4, "error": round(error, 4)}
    return out
