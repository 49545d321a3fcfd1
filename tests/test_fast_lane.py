"""The fast lane (``python -m pytest -m "not slow"``) depends on the ``slow`` marker being spelled right.

``--strict-markers`` makes an unregistered marker a collection error, so ``@pytest.mark.slwo`` cannot
quietly leave a slow test in the fast lane.
"""

from __future__ import annotations

import pytest


def test_slow_is_a_registered_marker_and_markers_are_strict(pytestconfig: pytest.Config) -> None:
    registered = {line.split(":", 1)[0].strip() for line in pytestconfig.getini("markers")}
    assert {"slow", "live", "local_model"} <= registered
    assert pytestconfig.getoption("strict_markers"), "pyproject's addopts must keep --strict-markers"

