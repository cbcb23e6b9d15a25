# Reading a trial report (docs/recipes/trial.py, schema docs/recipes/report.schema.json): its structure, checked.
# Standard library only: this also runs in the browser (Pyodide), where the page imports a report.
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import SizingError
from .jsontext import read_json

SCHEMA_VERSION = 1
# interrupted: SIGTERM / SIGINT (the steps measured so far are kept); check_failed: the reload check failed
STATUSES = ("ok", "oom", "error", "interrupted", "check_failed")
# report peak key -> (estimate attribute, what it is comparable with)
FIGURES = (
    ("allocated", "max_memory_allocated_bytes", "torch.cuda.max_memory_allocated"),
    ("reserved", "max_memory_reserved_bytes", "torch.cuda.max_memory_reserved"),
    ("device", "device_used_bytes", "nvidia-smi / pynvml"),
)
_REQUIRED: dict[str, type | tuple[type, ...]] = {
    "schema_version": int, "status": str, "message": str, "config": dict, "measurements": dict, "checks": dict,
    "rank": int, "world_size": int,
}


@dataclass(frozen=True)
class TrialReport:
    """The parts of a trial report the comparison needs; `data` keeps the whole document."""

    status: str
    message: str
    config: Mapping[str, Any]
    peaks: Mapping[str, Any]
    steps: list[Mapping[str, Any]]
    checks: Mapping[str, Any]
    rank: int
    world_size: int
    failure: Mapping[str, Any] | None
    before_train: Mapping[str, Any] | None  # memory as training started (reports since it was added)
    data: Mapping[str, Any]

    @property
    def hardware(self) -> Mapping[str, Any] | None:
        """The report's hardware section (None in reports that have none)."""
        hw = self.data.get("hardware")
        return hw if isinstance(hw, Mapping) else None


def _malformed(message: str, field: str | None) -> SizingError:
    return SizingError("report_malformed", message, field=field)


def _is_bytes(value: Any) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0)


def parse_report(data: Any) -> TrialReport:
    """Check the structure a comparison relies on; refuse anything else with code `report_malformed`."""
    if not isinstance(data, Mapping):
        raise _malformed("a trial report must be a JSON object", None)
    for key, kind in _REQUIRED.items():
        if key not in data:
            raise _malformed(f"the report lacks '{key}'", key)
        value = data[key]
        if not isinstance(value, kind) or isinstance(value, bool):
            raise _malformed(f"'{key}' has the wrong type", key)
    if data["schema_version"] != SCHEMA_VERSION:
        raise SizingError("report_version", f"report schema_version {data['schema_version']} is not supported "
                          f"(this version reads {SCHEMA_VERSION})", field="schema_version",
                          version=data["schema_version"])
    if data["status"] not in STATUSES:
        raise _malformed(f"status must be one of {', '.join(STATUSES)}", "status")
    meas = data["measurements"]
    steps = meas.get("steps")
    if not isinstance(steps, list) or not all(isinstance(s, Mapping) for s in steps):
        raise _malformed("measurements.steps must be a list of objects", "measurements.steps")
    peaks = meas.get("peaks")
    if peaks is None:
        peaks = {}
    if not isinstance(peaks, Mapping):
        raise _malformed("measurements.peaks must be an object or null", "measurements.peaks")
    for _, key, _ in FIGURES:
        peak = peaks.get(key)
        if peak is None:
            continue
        if not isinstance(peak, Mapping) or not _is_bytes(peak.get("value")):
            raise _malformed(f"measurements.peaks.{key} must be an object with a byte count or null 'value'",
                             f"measurements.peaks.{key}")
    for i, step in enumerate(steps):
        for _, key, _ in FIGURES:
            if not _is_bytes(step.get(key)):
                raise _malformed(f"measurements.steps[{i}].{key} must be a byte count or null",
                                 f"measurements.steps.{key}")
    failure = data.get("failure")
    if failure is not None and not isinstance(failure, Mapping):
        raise _malformed("failure must be an object or null", "failure")
    before = meas.get("before_train")
    if before is not None and (not isinstance(before, Mapping)
                               or not all(_is_bytes(before.get(k)) for k in ("allocated_bytes", "reserved_bytes"))):
        raise _malformed("measurements.before_train must be an object with byte counts or null",
                         "measurements.before_train")
    return TrialReport(status=data["status"], message=data["message"], config=data["config"], peaks=peaks,
                       steps=list(steps), checks=data["checks"], rank=data["rank"], world_size=data["world_size"],
                       failure=failure, before_train=before, data=data)


def load_report(source: str | bytes | Mapping[str, Any]) -> TrialReport:
    """A report from its JSON text (or the decoded object), read as strictly as `sizing report` reads the file:
    deep nesting, 4300+ digit numbers, NaN and infinities are refused with bad_json (jsontext.read_json)."""
    if isinstance(source, str | bytes):
        return parse_report(read_json(source, "the report"))
    return parse_report(source)


def read_report(path: str) -> TrialReport:
    """A report from the file at `path`."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise SizingError("report_unreadable", f"cannot read {path}: {exc.strerror}", field=None, path=path) from None
    return load_report(raw)
