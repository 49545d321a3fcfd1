"""Shared fixtures: the TravelPlanner data (skipped with a reason when absent), one benchmark per session.

The SQLite store is built once per test session in the session's cache directory
(``MODULO_CACHE_DIR``, set by the top-level conftest to a temporary folder).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from critics.travelplanner.benchmark import TravelPlanner
from critics.travelplanner.data import structured_query
from critics.travelplanner.store import Store
from tests.data_support import data_root


@pytest.fixture(scope="session")
def tp_dir() -> Path:
    return data_root("TravelPlanner", "travelplanner/database") / "travelplanner"


@pytest.fixture(scope="session")
def tp(tp_dir: Path, _cache_dir: Path) -> TravelPlanner:
    return TravelPlanner(tp_dir.parent, store_dir=_cache_dir)


@pytest.fixture(scope="session")
def store(tp: TravelPlanner) -> Store:
    return tp.store


@pytest.fixture(scope="session")
def golden(tp_dir: Path) -> list[dict[str, Any]]:
    path = tp_dir / "golden" / "plans.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    for row in rows:
        row["_query"] = structured_query(row["query"], row["plan_id"])
    return rows


@pytest.fixture(scope="session")
def submissions(tp_dir: Path) -> dict[str, dict[str, Any]]:
    path = tp_dir / "golden" / "submissions.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {row["submission_id"]: row for row in rows}


@pytest.fixture(scope="session")
def example_lines(tp_dir: Path) -> list[dict[str, Any]]:
    path = tp_dir / "example_evaluation.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
