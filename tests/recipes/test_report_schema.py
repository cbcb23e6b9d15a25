"""The report format is written down twice: docs/recipes/report.schema.json (what the trial writes) and
sizing/report_parse.py (what a comparison relies on). The reader must take every report the schema takes, and
refuse, as the schema does, a report whose fields it reads are malformed."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from sizing import SizingError
from sizing.report import parse_report

GiB = 2**30


def _step(n: int, alloc: int | None) -> dict[str, Any]:
    return {"step": n, "completed": True, "seconds": 1.5, "tokens": 2048, "micro_batches": 1, "loss": 1.0,
            "host_max_rss_bytes": GiB, "max_memory_allocated_bytes": alloc, "max_memory_reserved_bytes": alloc,
            "device_used_bytes": None, "device_source": None, "reason": None if alloc else "CPU run"}


def _peak(value: int | None) -> dict[str, Any]:
    return {"value": value, "step": 2 if value else None, "reason": None if value else "CPU run"}


def report() -> dict[str, Any]:
    """A report with every field the schema requires (nulls where the schema allows them)."""
    return {
        "schema_version": 1, "status": "ok", "message": "trial completed", "failure": None,
        "started_at": "2026-12-01T21:00:00Z", "finished_at": "2026-12-01T21:05:00Z", "rank": 0, "world_size": 1,
        "trial": {"max_steps": 2, "eval_fraction": 0.1, "seed": 0, "random_weights": True, "learning_rate": None},
        "config": {"model": "meta-llama/Llama-3.1-8B", "method": "lora"}, "data": None, "model": None, "saved": None,
        "phase": "done",
        "measurements": {
            "steps": [_step(1, GiB), _step(2, 2 * GiB)],
            "peaks": {"max_memory_allocated_bytes": _peak(2 * GiB), "max_memory_reserved_bytes": _peak(2 * GiB),
                      "device_used_bytes": _peak(None), "host_max_rss_bytes": GiB, "tokens_per_second": 1365.3,
                      "steady_tokens_per_second": None},
            "before_train": {"allocated_bytes": GiB, "reserved_bytes": GiB, "reason": None},
        },
        "checks": {"reload_matches": True, "reload_weights_equal": True, "reload_max_abs_diff": 0.0,
                   "reload_atol": 1e-4, "reload_rtol": 1e-3, "reload_reason": None, "eval_loss_before": 2.0,
                   "eval_loss_after": 1.5, "reload_weights_compared": 4, "reload_weights_differing": None,
                   "base_differs": True, "base_max_abs_diff": 0.02, "failed": []},
        "versions": None, "hardware": None, "config_as_given": None,
    }


def test_a_report_the_schema_takes_is_read(schema: Any) -> None:
    data = report()
    schema.validate(data)
    rep = parse_report(data)
    assert rep.status == "ok" and len(rep.steps) == 2 and rep.before_train == data["measurements"]["before_train"]


# Each sets a field the reader relies on to what the schema refuses.
MALFORMED: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
    ("no schema_version", lambda r: r.pop("schema_version")),
    ("no status", lambda r: r.pop("status")),
    ("unknown status", lambda r: r.update(status="fine")),
    ("message not text", lambda r: r.update(message=3)),
    ("no config", lambda r: r.pop("config")),
    ("rank not a number", lambda r: r.update(rank="0")),
    ("world_size a boolean", lambda r: r.update(world_size=True)),
    ("no measurements", lambda r: r.pop("measurements")),
    ("no checks", lambda r: r.pop("checks")),
    ("failure not an object", lambda r: r.update(failure="oom")),
    ("steps not a list", lambda r: r["measurements"].update(steps={})),
    ("a step not an object", lambda r: r["measurements"]["steps"].append(3)),
    ("negative allocated bytes", lambda r: r["measurements"]["steps"][0].update(max_memory_allocated_bytes=-5)),
    ("reserved bytes as text", lambda r: r["measurements"]["steps"][1].update(max_memory_reserved_bytes="2G")),
    ("fractional device bytes", lambda r: r["measurements"]["steps"][1].update(device_used_bytes=1.5)),
    ("peaks not an object", lambda r: r["measurements"].update(peaks=[])),
    ("a peak value as text", lambda r: r["measurements"]["peaks"]["max_memory_allocated_bytes"].update(value="big")),
    ("a peak not an object", lambda r: r["measurements"]["peaks"].update(max_memory_reserved_bytes=GiB)),
    ("before_train not an object", lambda r: r["measurements"].update(before_train=GiB)),
    ("before_train bytes negative", lambda r: r["measurements"]["before_train"].update(reserved_bytes=-1)),
]


@pytest.mark.parametrize("mutate", [m for _, m in MALFORMED], ids=[name for name, _ in MALFORMED])
def test_what_the_schema_refuses_in_the_fields_read_the_reader_refuses(schema: Any, mutate: Any) -> None:
    data = copy.deepcopy(report())
    mutate(data)
    assert list(schema.iter_errors(data)), "the schema takes it: not a malformed report"
    with pytest.raises(SizingError) as err:
        parse_report(data)
    assert err.value.code == "report_malformed"
