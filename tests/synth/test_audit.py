"""Critic mutation testing: the real critics agree with Z3 on every mutant; a broken one is caught."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import click
import pytest

from critics.synth.audit import ALL, audit_main, audit_synth, load_critics
from critics.synth.benchmark import SynthCalendar
from critics.synth.common import parse_time
from critics.travelplanner.audit import audit_golden, golden_rows
from critics.travelplanner.critics import OFFICIAL_KEYS
from modulo import components
from modulo.critic import critic
from modulo.errors import ModuloError
from modulo.types import PlanJSON, Problem, Verdict
from tests.cli_support import run_command

from .conftest import FAMILIES, bench

pytestmark = pytest.mark.slow  # the fast lane (-m 'not slow') leaves this module out


@pytest.mark.parametrize("family", FAMILIES)
def test_registered_critics_agree_with_z3_on_every_mutant(family: str) -> None:
    b = bench(family, n=8, seed=9, difficulty="medium")
    report = audit_synth(b)
    assert report.plans > 8 * 5
    assert report.clean, report.render()
    kinds = report.kinds()
    assert {"identity", "shift", "boundary_out", "boundary_in"} <= set(kinds)
    # boundary mutants exist for every family and are mostly invalid
    t = report.tally(ALL, "boundary_out")
    assert t.invalid > 0 and t.caught == t.invalid


@critic("broken_window", group="hard", benchmarks=("synth/tasks",))
def broken_window(problem: Problem, plan: PlanJSON) -> Verdict:
    """A seeded bug: time windows are checked on the start only (the end of the window is ignored)."""
    for c in problem.constraints["constraints"]:
        for item in plan["schedule"]:
            if c["kind"] not in ("not_before", "deadline", "window") or item["task"] != c["action"]:
                continue
            start = parse_time(item["start"])
            if c["kind"] == "not_before" and start < c["time"]:
                return Verdict.fail(f"{c['text']}")
            if c["kind"] == "deadline" and start >= c["time"]:
                return Verdict.fail(f"{c['text']}")
            if c["kind"] == "window" and not c["start"] <= start < c["end"]:
                return Verdict.fail(f"{c['text']}")
    return Verdict.ok()


def test_boundary_mutants_expose_a_window_check_that_ignores_the_window_end() -> None:
    b = bench("tasks", n=20, seed=4, difficulty="medium")
    critics = load_critics(b)
    critics["synth_window"] = broken_window()
    report = audit_synth(b, critics)
    boundary = report.tally("synth_window", "boundary_out")
    assert boundary.missed > 0, report.render()
    generic = sum(report.tally("synth_window", k).missed for k in ("swap", "shift", "collide", "drop", "duplicate"))
    assert boundary.missed > generic
    # every other critic is still clean, and the bug never causes a false reject
    assert report.tally("synth_window").false_rejects == 0
    for name in critics:
        if name != "synth_window":
            t = report.tally(name)
            assert t.missed == 0 and t.false_rejects == 0, name
    assert any(ex["critic"] == "synth_window" and ex["expected_reject"] for ex in report.examples)
    assert not report.clean


def test_audit_main_prints_a_table_and_writes_json(tmp_path: Path) -> None:
    command = SynthCalendar().audit_command()
    rc, text = run_command(command, "--n", "4", "--difficulty", "easy", "--json", tmp_path / "a.json")
    assert rc == 0
    assert "| synth_busy |" in text and "boundary_out" in text
    data = json.loads((tmp_path / "a.json").read_text())
    assert data["clean"] is True and data["rows"]


def test_audit_main_unknown_benchmark_is_a_clear_error() -> None:
    with pytest.raises(ModuloError):
        components.benchmarks.get("synth/nope")
    with pytest.raises(ModuloError):
        audit_main("synth/nope", out=io.StringIO())
    with pytest.raises(click.BadParameter, match="'four' is not a valid integer"):
        run_command(SynthCalendar().audit_command(), "--n", "four")


def _golden_path() -> Path:
    env = os.environ.get("MODULO_DATA_DIR")
    if not env:
        pytest.skip("MODULO_DATA_DIR is not set (CI points it at the shared data folder)")
    path = Path(env) / "travelplanner" / "golden" / "plans.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    return path


def test_travelplanner_critics_agree_with_the_golden_verdicts(_cache_dir: Any) -> None:
    path = _golden_path()
    if "within_sandbox" not in components.critics:
        pytest.skip("the TravelPlanner critics are not registered yet")
    tp = components.benchmarks.get("travelplanner")(Path(os.environ["MODULO_DATA_DIR"]))
    critics = load_critics(tp, options={"mode": "official"})
    assert set(critics) == set(OFFICIAL_KEYS)
    report = audit_golden(tp, critics, golden_rows(path, limit=600), keys=OFFICIAL_KEYS)
    assert report.plans > 500
    assert report.clean, report.render()
    # the mutation labels of the corpus are the mutation kinds of the report
    assert {"budget", "sandbox", "base"} <= set(report.kinds())
    assert report.tally("budget").invalid > 0
