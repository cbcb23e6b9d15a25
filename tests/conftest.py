"""Project-wide pytest hooks: under CI=true the CPU training stack must be importable.

The physics and recipe tests skip module by module when torch & co are missing, so a developer without
them can still run the engine's tests; in CI such a skip would hide that those suites never ran.
"""

from __future__ import annotations

import importlib.util

import pytest

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
