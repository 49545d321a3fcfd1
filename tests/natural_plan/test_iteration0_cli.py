"""``modulo evaluate natural_plan/<task> --iteration0``: the stored answers as iteration 0 of the loop."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modulo import components
from tests.cli_support import run_command


def test_calendar_iteration0_counts_and_backprompts(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bench = components.benchmarks.get("natural_plan/calendar")(data_dir=data_dir)
    code, printed = run_command(bench.evaluate_command(), "--split", "subset100", "--iteration0", "--json")
    assert code == 0
    out = json.loads(printed)
    assert (out["n"], out["official"], out["valid"]) == (100, 56, 63)
    loop0 = out["iteration0"]
    assert loop0["certified"] == 63  # certified at iteration 0 == constraint-valid
    assert len(loop0["first_backprompts"]) == 100 - 63
    assert all(fb for fb in loop0["first_backprompts"].values())  # every rejected answer gets feedback
