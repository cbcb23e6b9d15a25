"""Site tests: one strict build of the real docs/ at a sub-path of a local server, shared by every test (and
by tests/browser: tests/sharedsite.py)."""

from __future__ import annotations

import pytest

from tests import sharedsite
from tests.site.builtsite import BuiltSite


@pytest.fixture(scope="session")
def built_site() -> BuiltSite:
    """`mkdocs build --strict` of the repository's site, once per run."""
    build = sharedsite.build()
    return BuiltSite(build.root, build.url, build.log)
