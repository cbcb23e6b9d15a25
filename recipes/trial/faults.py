# Faults injected by the tests (TRIAL_TEST_FAULT, TRIAL_SIMULATE_OOM_AT_STEP): the real handling paths, on demand.
from __future__ import annotations

import os
import signal


class SimulatedOOM(Exception):
    """Raised where a test asks for it; handled exactly like torch.OutOfMemoryError."""


def inject(phase: str, step: int | None = None) -> None:
    """TRIAL_TEST_FAULT=PHASE[@STEP]:KIND (KIND error, oom, sigterm or sigint) fires here when it names this
    phase (and step); a signal is sent to this very process, so the real handler runs."""
    spec = os.environ.get("TRIAL_TEST_FAULT", "")
    if phase == "train" and step is not None and os.environ.get("TRIAL_SIMULATE_OOM_AT_STEP", "") == str(step):
        raise SimulatedOOM(f"simulated out-of-memory at step {step} (TRIAL_SIMULATE_OOM_AT_STEP)")
    if ":" not in spec:
        return
    where, kind = spec.rsplit(":", 1)
    name, _, at = where.partition("@")
    if name != phase or (at and str(step) != at):
        return
    if kind == "error":
        raise RuntimeError(f"injected error in the {phase} phase (TRIAL_TEST_FAULT)")
    if kind == "oom":
        raise SimulatedOOM(f"injected out-of-memory in the {phase} phase (TRIAL_TEST_FAULT)")
    if kind in ("sigterm", "sigint"):
        os.kill(os.getpid(), signal.SIGTERM if kind == "sigterm" else signal.SIGINT)
