"""Physics tests: the `sizing` engine against tensor bytes measured on CPU (harness.py).

They need the pinned stack of requirements-physics.txt (torch, transformers, peft, accelerate,
bitsandbytes). Each test module skips, with the reason printed, when torch/transformers/peft are
missing, so the engine's own unit tests run without torch; under CI=true such a module fails the run
instead (tests/needs.py: a green CI run means the suite ran). `sizing` itself is never skipped: if it
does not import or lacks the API, every physics test fails.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from tests.needs import in_ci

_HERE = Path(__file__).resolve().parent
_ROOT = _HERE.parents[1]

if str(_HERE) not in sys.path:  # `import harness`
    sys.path.insert(0, str(_HERE))
if importlib.util.find_spec("sizing") is None and str(_ROOT) not in sys.path:  # `import sizing` from the checkout
    sys.path.insert(0, str(_ROOT))


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    """Under CI=true a physics module that skips as it is imported (its pytest.importorskip found the pinned stack
    missing) is a failure, not a skip; test-level opt-in skips (SIZING_FULLSCALE, SIZING_DEEPSPEED) stay skips."""
    rep = yield
    if rep.skipped and isinstance(collector, pytest.Module) and in_ci():
        why = (rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)).removeprefix("Skipped: ")
        rep.outcome = "failed"
        rep.longrepr = f"CI=true, but this physics module cannot run: {why}"
    return rep


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "physics: compares the engine with tensor bytes measured on CPU by torch/transformers/peft "
        "(about a minute on 2 cores; needs requirements-physics.txt)",
    )


@pytest.fixture(scope="session")
def engine():
    """The `sizing` package; a failure (not a skip) when it is missing or incomplete."""
    try:
        import sizing
    except Exception as e:
        pytest.fail(f"`import sizing` failed: {type(e).__name__}: {e}", pytrace=False)
    for name in ("load_config", "estimate"):
        if not hasattr(sizing, name):
            pytest.fail(
                f"sizing.{name} is missing (sizing imported from {getattr(sizing, '__path__', '?')})", pytrace=False
            )
    return sizing


@pytest.fixture(scope="session")
def estimated(engine):
    """estimated(case) -> est.detail of the engine for the case (computed once per case)."""
    cache = {}

    def get(case):
        if case not in cache:
            import harness

            cfg = engine.load_config(harness.engine_config(*case))
            est = engine.estimate(cfg, backend="cpu")
            cache[case] = dict(est.detail)
        return cache[case]

    return get


@pytest.fixture(scope="session")
def measure():
    """measure(case) -> the harness measurement of case (style, regime, lora_dropout, checkpointing);
    each case is built and stepped once per session (kept in memory, nothing on disk)."""
    import harness

    return lambda case: harness.measure(*case)
