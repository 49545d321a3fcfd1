"""Fixtures for the sweep tests: the offline TravelPlanner scenario and the fake provider that serves it.

The scenario lives in ``experiments/offline.py`` (a runnable demo of the same path), loaded here by
file path so the tests and the demo cannot drift apart. Sweeps run in a child process
(``python -m modulo.cli.main run -m ...``), as a user would start them; launchers start their own
worker processes from there, and those reach the fake provider on 127.0.0.1.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from modulo.testing.fake_server import FakeProvider
from tests.data_support import data_root

ROOT = Path(__file__).resolve().parents[2]


def _load_offline() -> ModuleType:
    path = ROOT / "experiments" / "offline.py"
    spec = importlib.util.spec_from_file_location("modulo_experiments_offline", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look the module up while the class is built
    spec.loader.exec_module(module)
    return module


offline = _load_offline()


@pytest.fixture(scope="session")
def tp_data() -> Path:
    return data_root("TravelPlanner", "travelplanner/database")


@pytest.fixture(scope="session")
def scenario(tp_data: Path) -> object:
    return offline.Scenario(tp_data)


@pytest.fixture
def fake(scenario: object) -> Iterator[FakeProvider]:
    with FakeProvider(scenario.reply) as provider:  # type: ignore[attr-defined]
        yield provider
