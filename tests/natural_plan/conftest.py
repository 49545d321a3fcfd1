"""Shared fixtures: the NATURAL PLAN data (skipped with a reason when absent), loaded problems, critic feedback."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from critics.natural_plan.benchmark import CalendarScheduling, MeetingPlanning, TripPlanning
from modulo.critic import Critic
from modulo.types import Problem
from tests.data_support import data_root


def hand_made_problem(benchmark: str, prompt: str, parse: Callable[[str], dict[str, Any]], **metadata: Any) -> Any:
    """A ``problem`` fixture (assign it in the test module): a hand-made problem of ``benchmark`` whose
    constraints ``parse`` reads from its ``prompt``, made afresh for each test."""

    @pytest.fixture(name="problem")
    def fixture() -> Problem:
        constraints = parse(prompt)
        return Problem(
            id="hand-made", benchmark=benchmark, query=prompt, constraints=constraints, metadata={**metadata}
        )

    return fixture


def failing(problem: Problem, plan: Any, critics: Sequence[Critic]) -> dict[str, str]:
    """The feedback of each critic that does not accept ``plan``, by critic name."""
    return {v.critic: v.feedback for v in (c(problem, plan) for c in critics) if not v.accepts}


def _np_dir() -> Path:
    return data_root("NATURAL PLAN", "natural_plan") / "natural_plan"


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
