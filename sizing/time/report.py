# Plain-text lines of the time estimate (CLI): step, throughput, hours and cost, each with its range.
from __future__ import annotations

from typing import Any


def _range(t: dict[str, Any], key: str, fmt: str) -> str:
    span = (t.get("range") or {}).get(key)
    return f" ({format(span[0], fmt)}-{format(span[1], fmt)})" if span else ""


def time_lines(t: dict[str, Any], dataset_tokens: int | None, epochs: float, gpus: int) -> list[str]:
    """The `time` object of an estimate as text; ranges in brackets come from the timed runs' residuals
    and the spans of the unfitted inputs (sizing/throughput.py step_bounds)."""
    dtype = t["matmul_dtype"]
    lines = [f"Time: {t['step_seconds']:.3g} s{_range(t, 'step_seconds', '.3g')} per optimizer step, "
             f"{t['tokens_per_second']:,.0f}{_range(t, 'tokens_per_second', ',.0f')} tokens/s",
             f"  matmuls in {dtype} ({t['peak_tflops']:g} TFLOPS peak{'' if dtype != 'fp32' else ', TF32 off'}), "
             f"attention kernel {t['attention_kernel']}, {'GPU' if t['bound'] == 'gpu' else 'host (kernel launch)'}"
             f"-bound, model FLOPs utilization {t['utilization']:.2f}"]
    if t.get("total_hours") is not None:
        evaluation = t.get("evaluation_hours")
        lines.append(f"  {dataset_tokens:,} tokens x {epochs:g} epochs: {t['total_hours']:.3g} h"
                     f"{_range(t, 'total_hours', '.3g')} on {gpus} GPU(s)"
                     + ("" if evaluation is None else f", of which the evaluation passes {evaluation:.3g} h"))
    if t.get("cost") is not None:
        lines.append(f"  cost {t['cost']:,.2f}{_range(t, 'cost', ',.2f')} at your price per GPU-hour")
    if t.get("cost_per_million_tokens") is not None:
        lines.append(f"  {t['cost_per_million_tokens']:,.3f}{_range(t, 'cost_per_million_tokens', ',.3f')} "
                     "per million training tokens")
    return lines
