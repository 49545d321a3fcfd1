"""Shared fixtures: the TravelBench data directory (skipped with a reason when absent) and a run helper."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from modulo.recordformat import expand_record
from tests.data_support import data_root

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "experiments" / "scripts"


@pytest.fixture(scope="session")
def tb_data() -> Path:
    return data_root("TravelBench", "travelbench/unsolve.jsonl")


def run(tmp_path: Path, name: str, overrides: list[str]) -> Path:
    """``modulo run OVERRIDES`` in-process into ``tmp_path/name``; the run directory."""
    from modulo.cli.hydra_app import run_hydra

    run_dir = tmp_path / name
    argv = [*overrides, f"run.dir={run_dir}", f"cache.dir={tmp_path / 'cache'}"]
    try:
        run_hydra(argv)
    except SystemExit as exc:  # a run exits non-zero only when something went wrong
        assert not exc.code, f"modulo run {' '.join(argv)} exited {exc.code}"
    return run_dir


def records(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / "records.jsonl").read_text(encoding="utf-8").splitlines()
    return [expand_record(json.loads(line)) for line in lines]


def summary(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    return data
