"""Project-wide pytest hooks: under CI=true the CPU training stack must be importable.

The physics and recipe tests skip module by module when torch & co are missing, so a developer without
them can still run the engine's tests; in CI such a skip would hide that those suites never ran.
"""

from __future__ import annotations

import importlib.util

import pytest

from tests import sharedsite
from tests.needs import in_ci

# What requirements-physics.txt installs for tests/physics and tests/recipes (the trial recipe's stack).
STACK = ("torch", "transformers", "peft", "accelerate", "bitsandbytes", "trl", "datasets")


def missing_stack(find: object = importlib.util.find_spec) -> list[str]:
    """The packages of STACK that cannot be imported here."""
    return [name for name in STACK if find(name) is None]  # type: ignore[operator]


def pytest_sessionstart(session: pytest.Session) -> None:
    missing = missing_stack()
    if missing and in_ci():
        raise pytest.UsageError(f"CI=true, but the physics and recipe suites cannot run: missing {', '.join(missing)} "
                                "(pip install -r requirements-physics.txt)")


# Under pytest-xdist (scripts/test.sh: -n 2 --dist loadgroup) each test file is one unit of work, so its module
# fixtures are built once. The physics files that read one session cache of CPU measurements (harness.measure,
# most of tests/physics' time) are cut by case instead: every test of one case on one worker, so each case is
# still measured once while the cases spread over both workers.
BY_CASE = ("tests/physics/test_activations.py", "tests/physics/test_weights_grads_optimizer.py")
# The units that take longest (--durations, 2-core machine), started first so that no long one starts last
# while the other worker has nothing left: the trials in subprocesses, the page loads in Chromium.
LONGEST_FIRST = ("tests/recipes/test_trial.py", "tests/browser/test_calculator.py", "tests/browser/test_loading.py",
                 "tests/recipes/test_trial_faults.py", "tests/recipes/test_device_trials.py",
                 "tests/browser/test_status.py", "tests/browser/test_results_view.py",
                 "tests/recipes/test_trial_trl.py")


def pytest_configure(config: pytest.Config) -> None:
    sharedsite.start(config)  # the folder and server of the one site build tests/site and tests/browser share
    config.addinivalue_line("markers", "xdist_group(name): tests that pytest-xdist's loadgroup runs on one worker")


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            path = item.nodeid.split("::")[0]
            case = getattr(item, "callspec", None) and item.callspec.params.get("case")
            group = "tests/physics:measure:" + "-".join(map(str, case)) if path in BY_CASE and case else path
            item.add_marker(pytest.mark.xdist_group(group))
    if hasattr(config, "workerinput"):  # an xdist worker: the order its controller hands the units out in
        rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
        items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))  # stable: files keep order


def pytest_unconfigure(config: pytest.Config) -> None:
    sharedsite.stop(config)
