"""The three benchmarks as framework components: registry, splits, data errors, evaluation, the command."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import pytest

from critics.natural_plan.benchmark import CalendarScheduling, MeetingPlanning, NaturalPlanBenchmark, TripPlanning
from critics.natural_plan.common import TASK_FILES
from critics.natural_plan.replay import replay_report, stored_predictions
from modulo.components import benchmarks, critics
from modulo.errors import DataError, ModuloError
from modulo.prompts import load_template, resolve
from modulo.types import Problem
from tests.cli_support import run_command

ALL = (TripPlanning, MeetingPlanning, CalendarScheduling)


def test_registered_under_their_names() -> None:
    for cls in ALL:
        assert benchmarks.get(cls.name) is cls
        for name in cls().critic_names():
            factory = critics.get(name)
            assert name == "format" or cls.name in factory.benchmarks
    names = [n for cls in ALL for n in cls().critic_names() if n != "format"]
    assert len(names) == len(set(names)) == 18


@pytest.mark.parametrize("cls", [MeetingPlanning, CalendarScheduling])
def test_missing_full_file_is_a_clear_data_error(cls: type[NaturalPlanBenchmark], tmp_path: Path) -> None:
    (tmp_path / "natural_plan").mkdir()
    with pytest.raises(DataError) as err:
        cls(data_dir=tmp_path).load("full")
    text = str(err.value)
    assert "missing" in text and "google-deepmind/natural-plan" in text and "git hash-object" in text
    assert "subset100" in text
    report = cls(data_dir=tmp_path).data_check()
    assert not report.ok and any("MISSING" in line for line in report.lines)


def test_data_check_verifies_the_trip_file(trip: TripPlanning) -> None:
    report = trip.data_check()
    assert report.ok, report.lines
    assert any("matches the official file" in line for line in report.lines)


def test_evaluate_plans_texts_and_nothing(meeting: MeetingPlanning, meeting_subset: list[Problem]) -> None:
    problems = meeting_subset[:4]
    gold_plan = problems[0].metadata["gold_plan"]
    answers: list[Any] = [gold_plan, " ".join(problems[1].metadata["gold"]), None, {"steps": [{"action": "fly"}]}]
    result = meeting.evaluate(problems, answers)
    rows = result.per_problem
    assert [r["official"] for r in rows] == [True, True, False, False]
    assert [r["valid"] for r in rows] == [True, True, False, False]
    assert [r["format"] for r in rows] == [True, True, None, False]
    assert rows[3]["failing"] == ["format"] and rows[2]["meeting_optimal"] is None
    assert result.metrics == {"official": 0.5, "valid": 0.5, "delivery": 0.5}
    assert meeting.primary_metric == "valid"


@pytest.mark.parametrize("cls", ALL)
def test_critics_never_read_metadata(cls: type[NaturalPlanBenchmark], np_dir: Path) -> None:
    bench = cls()
    problems = bench.load("subset100")[:40]
    texts = stored_predictions(np_dir / TASK_FILES[cls.task].subset)
    for p in problems:
        stripped = p.model_copy(update={"metadata": {}})
        for answer in (p.metadata["gold_plan"], texts[p.id]):
            _, plan, _ = bench.read_answer(p, answer)
            if plan is None:
                continue
            with_gold = [v.model_dump() for v in bench.check(p, plan)[1]]
            without = [v.model_dump() for v in bench.check(stripped, plan)[1]]
            assert with_gold == without


def _run(bench: NaturalPlanBenchmark, argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    return run_command(bench.evaluate_command(), *argv)


def test_evaluate_command_json_counts(capsys: pytest.CaptureFixture[str]) -> None:
    expected: dict[type[NaturalPlanBenchmark], tuple[int, int]] = {
        TripPlanning: (33, 33),
        MeetingPlanning: (38, 32),
        CalendarScheduling: (56, 63),
    }
    for cls, (official, valid) in expected.items():
        code, out = _run(cls(), ["--split", "subset100", "--predictions", "pred_5shot_pro", "--json"], capsys)
        assert code == 0
        data = json.loads(out)
        assert (data["n"], data["official"], data["valid"]) == (100, official, valid)


def test_evaluate_command_text_and_jsonl(
    calendar: CalendarScheduling, calendar_subset: list[Problem], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "preds.jsonl"
    lines = [json.dumps({"problem_id": p.id, "best_plan": p.metadata["gold_plan"]}) for p in calendar_subset[:60]]
    lines.append(json.dumps({"id": "calendar_scheduling_example_999999", "text": "Monday, 9:00 - 9:30"}))
    path.write_text("\n".join(lines) + "\n")
    code, out = _run(CalendarScheduling(), ["--split", "subset100", "--predictions", str(path), "--json"], capsys)
    data = json.loads(out)
    assert code == 0 and (data["n"], data["official"], data["valid"]) == (100, 60, 60)
    assert "40 problem(s) have no prediction" in data["note"] and "1 prediction(s)" in data["note"]
    code, out = _run(CalendarScheduling(), ["--split", "subset100"], capsys)
    assert code == 0 and "official=56/100" in out and "valid=63/100" in out and "calendar_busy" in out


def test_evaluate_command_errors(tmp_path: Path) -> None:
    # bad input is raised (the CLI prints it the one way and exits 2), never printed by the hook itself
    with pytest.raises(ModuloError, match="no field 'pred_nope'"):
        run_command(MeetingPlanning().evaluate_command(), "--split", "subset100", "--predictions", "pred_nope")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"problem_id": "x"}\n')
    with pytest.raises(ModuloError, match="no answer field"):
        run_command(MeetingPlanning().evaluate_command(), "--split", "subset100", "--predictions", bad)
    with pytest.raises(ModuloError, match="missing"):
        run_command(MeetingPlanning().evaluate_command(), "--split", "full")
    with pytest.raises(click.UsageError, match="'--split' requires an argument"):
        run_command(MeetingPlanning().evaluate_command(), "--split")


@pytest.mark.parametrize("cls", ALL)
def test_prompts_render_for_every_role(cls: type[NaturalPlanBenchmark], np_dir: Path) -> None:
    bench = cls()
    problem = bench.load("subset100")[0]
    variables = {**bench.prompt_variables(problem), "problem": problem, "reply": "an answer"}
    for role, template_id in cls.prompts.items():
        template = load_template(template_id)
        assert template.version == "1"
        assert resolve(cls.name, role).id == template_id
        text = template.render(**variables)
        assert problem.query.strip()[:60] in text or role == "reformulate"
    assert load_template(cls.prompts["direct"]).render(**variables).strip() == problem.query.strip()
    example = bench.example_plan()
    assert bench.validate_plan(example) == example
    assert bench.parse(bench.render(example), problem) == example
    assert bench.render_plan(example) == bench.render(example)


def test_replay_report_as_iteration_zero(trip: TripPlanning, meeting: MeetingPlanning) -> None:
    report = replay_report(trip, trip.load("subset100"))
    assert (report.certified, report.official, len(report.rows)) == (33, 33, 100)
    rejected = [r for r in report.rows if not r.certified]
    assert all(r.feedback and r.failing for r in rejected)
    assert report.firing()["trip_direct_flights"] > 0
    assert "certified 33/100" in report.summary()
    m = replay_report(meeting, meeting.load("subset100"))
    assert (m.certified, m.official) == (32, 38)
    unparsed = [r for r in m.rows if not r.parsed]
    assert len(unparsed) == 3 and all(r.failing == ["format"] for r in unparsed)


def test_stored_predictions(np_dir: Path, tmp_path: Path) -> None:
    texts = stored_predictions(np_dir / "subsets_100" / "meeting_planning_100.json")
    assert len(texts) == 100 and all(isinstance(t, str) for t in texts.values())
    with pytest.raises(DataError, match="no text field"):
        stored_predictions(np_dir / "subsets_100" / "meeting_planning_100.json", field="nope")
    with pytest.raises(DataError, match="no such data file"):
        stored_predictions(tmp_path / "none.json")
