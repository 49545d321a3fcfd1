"""modulo export: frames as parquet/csv/jsonl (read back with their dtypes) and benchmark submissions."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
import pytest
from click.testing import CliRunner

import modulo.analysis as a
from modulo import components, settings
from modulo.types import PlanJSON, Problem
from tests.cli_support import modulo
from tests.reports.conftest import TOY, ToyBench


def test_export_frames_in_each_format(tmp_path: Path, make_run: Any, run_a_plans: Any) -> None:
    pytest.importorskip("pyarrow", reason="pyarrow (in the dev extra) writes parquet")
    run = make_run(tmp_path / "a", run_a_plans)
    expected = a.load(run)
    for fmt in ("parquet", "csv", "jsonl"):
        assert modulo("export", run, "--format", fmt, "--out", tmp_path / fmt).exit_code == 0
        for grain in ("runs", "problems", "iterations", "verdicts", "calls"):
            assert (tmp_path / fmt / f"{grain}.{fmt}").is_file()
    back = pd.read_parquet(tmp_path / "parquet" / "iterations.parquet")
    pd.testing.assert_frame_equal(back, expected.iterations(), check_categorical=False)
    assert back["flips"].dtype == "Int64" and back["critic.c_even"].dtype == "category"
    csv = pd.read_csv(tmp_path / "csv" / "problems.csv")
    assert csv["problem_id"].tolist() == [f"p{i}" for i in range(6)]
    lines = (tmp_path / "jsonl" / "verdicts.jsonl").read_text().splitlines()
    assert len(lines) == len(expected.verdicts()) and json.loads(lines[0])["critic"] == "format"
    # default --out: RUN_DIR/export; --grains picks frames
    assert modulo("export", run, "--format", "csv", "--grains", "problems").exit_code == 0
    assert sorted(p.name for p in (run / "export").iterdir()) == ["problems.csv"]


def test_frames_of_a_run_with_an_unreadable_record_are_written_and_exit_1(
    tmp_path: Path, make_run: Any, run_a_plans: Any
) -> None:
    run = make_run(tmp_path / "a", run_a_plans)
    with (run / "records.jsonl").open("ab") as fh:
        fh.write(b'{"problem_id": "p9", torn')  # a killed run's last line
    result = modulo("export", run, "--format", "csv", "--out", tmp_path / "csv")
    assert result.exit_code == 1, result.output
    assert "1 record(s) could not be read" in result.stderr and "truncated last line" in result.stderr
    assert pd.read_csv(tmp_path / "csv" / "problems.csv")["problem_id"].tolist() == [f"p{i}" for i in range(6)]


def test_export_refuses_unknown_formats_and_grains(tmp_path: Path, make_run: Any, run_a_plans: Any) -> None:
    run = make_run(tmp_path / "a", run_a_plans)
    refused = modulo("export", run, "--format", "xlsx", "--out", tmp_path / "x")
    assert refused.exit_code == 2
    err = refused.stderr
    assert "unknown export format 'xlsx'" in err and "parquet, csv, jsonl" in err
    assert "its submission formats: none" in err
    grain = modulo("export", run, "--format", "csv", "--grains", "problem", "--out", tmp_path / "y")
    assert grain.exit_code == 2 and "unknown grain(s) ['problem']" in grain.stderr
    nothing = modulo("export", tmp_path / "nothing", "--format", "csv")
    assert nothing.exit_code == 2 and "no such file or directory" in nothing.stderr


class SubmittingToy(ToyBench):
    submission_formats: ClassVar[tuple[str, ...]] = ("toy-lines",)

    def write_submission(
        self, fmt: str, problems: Sequence[Problem], plans: Mapping[str, PlanJSON | None], out: Path
    ) -> int:
        with out.open("w") as fh:
            for p in problems:
                fh.write(json.dumps({"id": p.id, "plan": plans.get(p.id)}) + "\n")
        return len(problems)


def test_submission_formats_dispatch_to_the_benchmark(tmp_path: Path, make_run: Any, toy_bench: Any) -> None:
    components.benchmarks.register(TOY, SubmittingToy, replace=True)
    # the run finished 3 of the split's 6 problems (out of order): all 6 are written, in split order
    run = make_run(tmp_path / "a", {"p3": [{"x": 8}], "p0": [{"x": 3}, {"x": 2}], "p1": [None]})
    out = tmp_path / "sub" / "submission.jsonl"
    written = modulo("export", run, "--format", "toy-lines", "--out", out)
    assert written.exit_code == 0
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == [f"p{i}" for i in range(6)]
    assert rows[0]["plan"] == {"x": 2} and rows[3]["plan"] == {"x": 8} and rows[1]["plan"] is None
    assert rows[5]["plan"] is None
    said = written.stdout
    assert "6 lines" in said and "2 with a plan from this run, 4 written as no plan" in said
    # a sweep holds several runs: a submission needs one; a file format needs --out
    make_run(tmp_path / "sweep" / "0", {"p0": [{"x": 2}]})
    make_run(tmp_path / "sweep" / "1", {"p0": [{"x": 2}]})
    several = modulo("export", tmp_path / "sweep", "--format", "toy-lines", "--out", out)
    assert several.exit_code == 2 and "2 runs found" in several.stderr
    no_out = modulo("export", run, "--format", "toy-lines")
    assert no_out.exit_code == 2 and "--out FILE" in no_out.stderr


@pytest.mark.slow
def test_counts_of_a_finished_scripted_travelplanner_run(tmp_path: Path) -> None:
    """The issue's check: load a real (scripted) TravelPlanner run; the frames hold what records.jsonl holds."""
    if not (settings.data_dir() / "travelplanner").is_dir():
        pytest.skip(f"TravelPlanner data not found under {settings.data_dir()} (set MODULO_DATA_DIR)")
    from modulo.cli.main import cli

    run_dir = tmp_path / "run"
    result = CliRunner().invoke(
        cli,
        [
            "run",
            "benchmark=travelplanner",
            "benchmark.split=train",
            "benchmark.limit=2",
            "llm=scripted",
            "cache.mode=off",
            "metacontroller.max_iterations=3",
            f"run.dir={run_dir}",
            f"hydra.run.dir={run_dir}",
            "run.progress=false",
        ],
    )
    assert result.exit_code == 0, result.output
    records = [json.loads(x) for x in (run_dir / "records.jsonl").read_text().splitlines()]
    r = a.load(run_dir)
    assert len(r.problems()) == len(records) == 2
    assert len(r.iterations()) == sum(len(x["iterations"]) for x in records) == 6
    n_verdicts = sum(len(it["verdicts"]) + len(it["gated"]) for x in records for it in x["iterations"])
    assert len(r.verdicts()) == n_verdicts
    assert len(r.calls()) == sum(len(it["calls"]) for x in records for it in x["iterations"]) > 0
    assert r.calls()["stage"].isin(["generate", "reformulate"]).all()
    assert r.problems()["eval.passed"].dtype == "boolean"
    assert set(r.problems()["benchmark"]) == {"travelplanner"} and set(r.problems()["critics"]) == {"[All]"}
