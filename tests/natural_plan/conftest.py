"""Shared fixtures: the NATURAL PLAN data (skipped with a reason when absent) and loaded problems."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from critics.natural_plan.benchmark import CalendarScheduling, MeetingPlanning, TripPlanning
from modulo.types import Problem


def _np_dir() -> Path:
    env = os.environ.get("MODULO_DATA_DIR")
    if not env or not (Path(env) / "natural_plan").is_dir():
        pytest.skip("NATURAL PLAN data not found: set MODULO_DATA_DIR to the data directory (CI: ../shared/data)")
    return Path(env) / "natural_plan"


@pytest.fixture(scope="session")
def np_dir() -> Path:
    return _np_dir()


@pytest.fixture(scope="session")
def trip_raw(np_dir: Path) -> dict[str, dict[str, Any]]:
    path = np_dir / "trip_planning.json"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    data: dict[str, dict[str, Any]] = json.loads(path.read_text())
    return data


@pytest.fixture(scope="session")
def meeting_raw(np_dir: Path) -> dict[str, dict[str, Any]]:
    data: dict[str, dict[str, Any]] = json.loads((np_dir / "subsets_100" / "meeting_planning_100.json").read_text())
    return data


@pytest.fixture(scope="session")
def calendar_raw(np_dir: Path) -> dict[str, dict[str, Any]]:
    data: dict[str, dict[str, Any]] = json.loads((np_dir / "subsets_100" / "calendar_scheduling_100.json").read_text())
    return data


@pytest.fixture(scope="session")
def trip() -> TripPlanning:
    _np_dir()
    return TripPlanning()


@pytest.fixture(scope="session")
def meeting() -> MeetingPlanning:
    _np_dir()
    return MeetingPlanning()


@pytest.fixture(scope="session")
def calendar() -> CalendarScheduling:
    _np_dir()
    return CalendarScheduling()


@pytest.fixture(scope="session")
def trip_full(trip: TripPlanning, trip_raw: dict[str, Any]) -> list[Problem]:
    return trip.load("full")


@pytest.fixture(scope="session")
def meeting_subset(meeting: MeetingPlanning) -> list[Problem]:
    return meeting.load("subset100")


@pytest.fixture(scope="session")
def calendar_subset(calendar: CalendarScheduling) -> list[Problem]:
    return calendar.load("subset100")
