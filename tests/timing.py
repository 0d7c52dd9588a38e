"""The one timing setting of the whole test suite: ``EAGLE3LAB_TEST_PATIENCE`` scales every wait a test allows.

Why: a test's timeout (a child process, a server's answer, a signal taking effect) is a bound on a slow or shared
machine, not a measurement; one factor lets CI or a loaded 2-core box give all of them room without editing a
test. Importable as ``timing`` from every test folder (pytest puts ``tests/`` on the path for ``conftest``), and
re-exported by ``tests/faults/faultkit.py``.
"""

from __future__ import annotations

import os

import pytest

PATIENCE_ENV = "EAGLE3LAB_TEST_PATIENCE"


def patience(seconds: float) -> float:
    """A test's wait, scaled by ``EAGLE3LAB_TEST_PATIENCE`` (default 1; e.g. 3 on a loaded 2-core machine).

    Never below the test's own number: the factor only gives a slow machine more room."""
    try:
        factor = float(os.environ.get(PATIENCE_ENV, "1"))
    except ValueError:
        raise pytest.UsageError(f"{PATIENCE_ENV} must be a number, got {os.environ[PATIENCE_ENV]!r}") from None
    return seconds * max(factor, 1.0)
