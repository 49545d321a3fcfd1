"""The benchmark data the tests read: a test that needs a benchmark's data is skipped, with the reason, without it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def data_root(name: str, marker: str) -> Path:
    """``$MODULO_DATA_DIR`` when ``marker`` (a path under it) exists there; otherwise the test is skipped,
    naming the ``name`` data as missing."""
    env = os.environ.get("MODULO_DATA_DIR")
    if not env or not (Path(env) / marker).exists():
        pytest.skip(f"{name} data not found: set MODULO_DATA_DIR to the data directory (CI: ../shared/data)")
    return Path(env)
