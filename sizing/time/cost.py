# Cost of a run from the user's own GPU-hour prices, and the fit table ranked by cost under a deadline.
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..errors import SizingError

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(h|hours?|m|min|minutes?|d|days?)?\s*$", re.IGNORECASE)


def parse_deadline(text: str) -> float:
    """Hours from "24h", "90m", "2d" or a bare number of hours."""
    m = _DURATION.match(text)
    if not m:
        raise SizingError("invalid_value", f"deadline must look like 24h, 90m or 2d, not {text!r}", field="deadline",
                          value=text)
    value, unit = float(m.group(1)), (m.group(2) or "h").lower()
    return value / 60 if unit.startswith("m") else value * 24 if unit.startswith("d") else value


def parse_prices(items: list[str] | None) -> dict[str, float]:
    """GPU-hour prices from GPU_ID=PRICE entries (the user's tariff; none is ever assumed)."""
    prices: dict[str, float] = {}
    for item in items or []:
        gpu, _, value = item.partition("=")
        try:
            price = float(value)
        except ValueError:
            price = -1.0
        if not gpu or price < 0:
            raise SizingError("invalid_value", f"price must look like GPU_ID=2.5, not {item!r}", field="price",
                              value=item)
        prices[gpu.strip()] = price
    return prices


def priced(row: dict[str, Any], price: float | None) -> dict[str, Any]:
    """The fit row's time with cost, cost per million tokens and their ranges at `price` per GPU-hour."""
    t = row.get("time")
    if not t or price is None:
        return row
    n = row.get("fewest_gpus") or 1
    rng = dict(t.get("range") or {})
    per_million = 1e6 / t["tokens_per_second"] / 3600 * n * price
    cost = t["total_hours"] * n * price if t.get("total_hours") is not None else None
    low_high = rng.get("step_seconds")
    if low_high:
        lo, hi = low_high[0] / t["step_seconds"], low_high[1] / t["step_seconds"]
        rng["cost"] = None if cost is None else [cost * lo, cost * hi]
        rng["cost_per_million_tokens"] = [per_million * lo, per_million * hi]
    return {**row, "price_per_gpu_hour": price,
            "time": {**t, "cost": cost, "cost_per_million_tokens": per_million, "range": rng}}


def rank(rows: list[dict[str, Any]], by: str, prices: Mapping[str, float] | None = None,
         default_price: float | None = None, deadline_hours: float | None = None) -> list[dict[str, Any]]:
    """Rows priced per GPU, kept when they fit and finish within the deadline, sorted by cost, hours or catalog order.

    Rows without a price (by cost) or without hours (by hours or under a deadline) go last, unranked."""
    out = [priced(r, (prices or {}).get(r["gpu"], default_price)) for r in rows]
    if deadline_hours is not None:
        out = [r for r in out if (r.get("time") or {}).get("total_hours") is not None
               and r["time"]["total_hours"] <= deadline_hours]
    if by == "gpu":
        return out
    key = {"cost": "cost", "hours": "total_hours"}.get(by)
    if key is None:
        raise SizingError("invalid_value", "--by must be gpu, cost or hours", field="by", value=by)
    known = [r for r in out if r.get("fewest_gpus") and (r.get("time") or {}).get(key) is not None]
    rest = [r for r in out if r not in known]
    return sorted(known, key=lambda r: float(r["time"][key])) + rest
