"""Export to the official submission JSONL, scored by ``modulo evaluate travelplanner``: the run's own figures."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pytest

from critics.travelplanner.benchmark import TravelPlanner, evaluate_file
from modulo.build import build_session
from modulo.cli.hydra_app import config_yaml
from modulo.errors import ConfigError
from modulo.runner import run_session
from modulo.runs import RunDir
from modulo.testing.drills import compose
from tests.cli_support import modulo


def _greedy_run(tp: TravelPlanner, split: str, run_dir: Path) -> dict[str, float]:
    cfg = compose(
        [
            "benchmark=travelplanner",
            f"benchmark.split={split}",
            "generator=greedy",
            "run.progress=false",
            "run.report=false",
        ]
    )
    session = build_session(cfg)
    try:
        asyncio.run(run_session(session, RunDir(run_dir), config_yaml=config_yaml(cfg)))
    finally:
        asyncio.run(session.aclose())
    metrics: dict[str, float] = json.loads((run_dir / "summary.json").read_text())["metrics"]
    return metrics


def _evaluate(tp: TravelPlanner, path: Path, split: str) -> dict[str, float]:
    out = io.StringIO()
    evaluate_file(tp, path, split=split, mode="official", as_json=True, per_plan=None, out=out)
    figures: dict[str, float] = json.loads(out.getvalue())
    return figures


@pytest.mark.slow
@pytest.mark.parametrize(("split", "n"), [("validation", 180), ("validation-ref", 129)])
def test_export_of_a_greedy_run_scores_as_the_run(tp: TravelPlanner, tmp_path: Path, split: str, n: int) -> None:
    run = tmp_path / "run"
    metrics = _greedy_run(tp, split, run)
    out = tmp_path / "submission.jsonl"
    assert modulo("export", run, "--format", "travelplanner-submission", "--out", out).exit_code == 0
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == n and all(set(line) == {"idx", "query", "plan"} for line in lines)
    assert [line["idx"] for line in lines] == [p.metadata["idx"] for p in tp.load(split)]
    assert _evaluate(tp, out, split) == metrics  # exactly the run's figures
    if split == "validation":
        info = json.loads((run / "run.json").read_text())
        assert len(info["derived_problems"]) == 51


def test_problems_without_a_plan_get_an_empty_plan(tp: TravelPlanner, tmp_path: Path) -> None:
    problems = tp.load("train")
    out = tmp_path / "sub.jsonl"
    assert tp.write_submission("travelplanner-submission", problems, {problems[0].id: [{"days": 1}]}, out) == 45
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines[0]["plan"] == [{"days": 1}] and all(line["plan"] == [] for line in lines[1:])
    assert _evaluate(tp, out, "train")["delivery_rate"] == pytest.approx(1 / 45)
    with pytest.raises(ConfigError, match="no submission format 'csv'"):
        tp.write_submission("csv", problems, {}, out)


def test_a_run_whose_requests_changed_is_not_exported_as_an_official_submission(tmp_path: Path) -> None:
    """A run with a budget cut and a house rule added mid-loop exported its plans under the original queries:
    `modulo evaluate` then scored them against requests they were not made for (the room rule 'not
    applicable', the old budget) while the README said it prints the run's own figures. Refused, naming why."""
    from click.testing import CliRunner

    from modulo.cli.main import cli

    run = tmp_path / "run"
    args = ["run", "benchmark=travelplanner", "benchmark.split=validation", "benchmark.limit=2", "generator=greedy"]
    updates = "user.updates=[{after: 0, add: {budget: '-30%', house_rule: pets}}]"
    result = CliRunner().invoke(cli, [*args, updates, f"run.dir={run}", f"hydra.run.dir={run}", "run.progress=false"])
    assert result.exit_code == 0, result.output
    out = tmp_path / "submission.jsonl"
    exported = modulo("export", run, "--format", "travelplanner-submission", "--out", out)
    assert exported.exit_code != 0 and not out.exists()
    assert "2 problem(s) changed during the loop" in " ".join(exported.output.split())
