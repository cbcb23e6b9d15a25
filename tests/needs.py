"""A suite that cannot run here skips with its reason, except under CI=true, where it fails the run."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import NoReturn

import pytest

# The values CI services set (GitHub Actions, GitLab, Forgejo: "true"; some runners "1").
_CI_ON = {"1", "true", "yes", "on"}


def in_ci(env: Mapping[str, str] | None = None) -> bool:
    """True when the environment says this is a CI run (CI=true/1/yes/on, any case)."""
    return (os.environ if env is None else env).get("CI", "").strip().lower() in _CI_ON


def cannot_run(reason: str, env: Mapping[str, str] | None = None) -> NoReturn:
    """Skip with `reason` on a developer's machine; fail under CI, so a green CI run means the suite ran."""
    if in_ci(env):
        pytest.fail(f"CI=true, but this suite cannot run: {reason}", pytrace=False)
    print(f"SKIP: {reason}")
    pytest.skip(reason)
