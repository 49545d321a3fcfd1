"""``modulo evaluate travelplanner``: submission mode, corpus mode, per-plan output, bad input."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import click
import pytest

from critics.travelplanner.benchmark import TravelPlanner
from critics.travelplanner.checks import ALL_KEYS
from critics.travelplanner.data import load_annotated_plans
from modulo.errors import DataError
from tests.cli_support import run_command


def _run(tp: TravelPlanner, argv: list[str]) -> tuple[int, str]:
    return run_command(tp.evaluate_command(), *argv)


def test_train_submission_text_report(tp: TravelPlanner, tp_dir: Path, tmp_path: Path) -> None:
    plans = load_annotated_plans(tp_dir)
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps({"idx": i, "plan": plans[i]}) + "\n" for i in sorted(plans)))
    code, text = _run(tp, [str(path), "--split", "train"])
    assert code == 0
    assert "Final Pass Rate: 100.00%" in text and "N = 45 (eval.py (train))" in text
    code, text = _run(tp, [str(path), "--split", "train", "--mode", "strict", "--json"])
    figures = json.loads(text)
    assert figures["final_pass_rate"] == pytest.approx(44 / 45)  # train-42's San Angelo slip


def test_missing_lines_are_undelivered(tp: TravelPlanner, tp_dir: Path, tmp_path: Path) -> None:
    plans = load_annotated_plans(tp_dir)
    path = tmp_path / "half.jsonl"
    path.write_text("".join(json.dumps({"idx": i, "plan": plans[i]}) + "\n" for i in range(1, 10)))
    code, text = _run(tp, [str(path), "--split", "train", "--json"])
    assert code == 0 and json.loads(text)["delivery_rate"] == pytest.approx(9 / 45)


@pytest.mark.slow
def test_corpus_mode_per_plan_matches_golden(
    tp: TravelPlanner, tp_dir: Path, golden: list[dict[str, Any]], tmp_path: Path
) -> None:
    """The golden corpus file itself (query_idx, plan_id, own query) goes straight in."""
    source = tp_dir / "golden" / "plans.jsonl"
    out = tmp_path / "per_plan.jsonl"
    code, text = _run(tp, [str(source), "--per-plan", str(out), "--json"])
    assert code == 0 and set(json.loads(text)) == {
        "delivery_rate", "commonsense_micro", "commonsense_macro", "hard_micro", "hard_macro", "final_pass_rate"
    }  # fmt: skip
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == len(golden)
    for record, row in zip(records, golden, strict=True):
        assert record["id"] == row["plan_id"] and record["idx"] == row["query_idx"]
        for key in ALL_KEYS:
            box = row["commonsense"] if key.startswith("is_") else row["hard"]
            expected = None if box is None else box[key]
            if isinstance(expected, str):
                expected = False  # a recorded crash reads as failed
            assert record[key] is expected, (row["plan_id"], key)


def test_corpus_lines_with_id_and_own_query(tp: TravelPlanner, tp_dir: Path, tmp_path: Path) -> None:
    plans = load_annotated_plans(tp_dir)
    problem = tp.load("train")[0]
    query = dict(problem.constraints, budget=10)  # nobody can travel on $10
    lines = [
        {"idx": 1, "id": "as-is", "plan": plans[1]},
        {"idx": 1, "id": "poor", "plan": plans[1], "query": query},
        {"idx": 1, "id": "empty", "plan": []},
        {"idx": 1, "id": "no-plan-key"},
    ]
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = tmp_path / "out.jsonl"
    code, text = _run(tp, [str(path), "--split", "train", "--per-plan", str(out)])
    assert code == 0 and "4 plan line(s), N = 4 (computed from the queries)" in text
    records = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert records["as-is"]["valid_cost"] is True
    assert records["poor"]["valid_cost"] is False and "valid_cost" in records["poor"]["reasons"]
    assert records["empty"]["delivered"] is False and records["empty"]["is_not_absent"] is None
    assert records["no-plan-key"]["delivered"] is False


def test_crashing_entries_are_reported_failed(tp: TravelPlanner, tmp_path: Path) -> None:
    path = tmp_path / "crash.jsonl"
    path.write_text(json.dumps({"idx": 1, "plan": [{"days": 1}, {"days": 2}, {"days": 3}]}) + "\n")
    out = tmp_path / "out.jsonl"
    code, _ = _run(tp, [str(path), "--split", "train", "--per-plan", str(out)])
    record = json.loads(out.read_text())
    assert code == 0 and record["is_reasonable_visiting_city"] is False
    assert "KeyError" in record["reasons"]["is_reasonable_visiting_city"]
    assert record["valid_cost"] is None  # the hard gate stays closed


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"idx": 1, "plan": []}\n[1, 2]\n', "line 2: expected a JSON object"),
        ('{"idx": 1, "plan": \n', "line 1: not valid JSON"),
        ('{"idx": 999, "plan": []}\n', "idx 999 is not a query of the train split"),
        ('{"idx": "one", "plan": []}\n', "'idx' must be an integer"),
        # a submission with a query twice (two files joined) was scored as a corpus of 2 plans, N = 2
        ('{"idx": 1, "plan": []}\n{"idx": 2, "plan": []}\n{"idx": 1, "plan": []}\n', "idx 1 is on lines 1 and 3"),
    ],
)
def test_bad_input_is_a_clear_error(tp: TravelPlanner, tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(DataError, match=re.escape(message)):
        _run(tp, [str(path), "--split", "train"])


def test_missing_file_and_bad_mode(tp: TravelPlanner, tmp_path: Path) -> None:
    with pytest.raises(DataError, match="does not exist"):
        _run(tp, [str(tmp_path / "nope.jsonl")])
    with pytest.raises(click.BadParameter, match="'lenient' is not one of 'official', 'strict'"):
        _run(tp, [str(tmp_path / "nope.jsonl"), "--mode", "lenient"])


def test_evaluate_command_method(tp: TravelPlanner, tp_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _run(tp, [str(tp_dir / "example_evaluation.jsonl"), "--json"])
    assert code == 0 and json.loads(out)["delivery_rate"] == pytest.approx(161 / 180)


def test_input_eval_py_would_stop_on_is_named_on_stderr(tp: TravelPlanner, tp_dir: Path, tmp_path: Path) -> None:
    """A misspelt 'plan' key scored the whole submission 0% with exit code 0 and not a word (eval.py
    stops with a KeyError): the figures stay, and stderr says which lines and queries gave no plan."""
    from click.testing import CliRunner

    plans = load_annotated_plans(tp_dir)
    path = tmp_path / "typo.jsonl"
    path.write_text("".join(json.dumps({"idx": i, "Plan": plans[i]}) + "\n" for i in range(1, 44)))
    result = CliRunner().invoke(tp.evaluate_command(), [str(path), "--split", "train", "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout)["delivery_rate"] == 0.0
    assert "43 of 43 line(s) have no 'plan' key (train-1, train-2" in result.stderr
    assert "2 of 45 queries have no line (train-44, train-45)" in result.stderr
    good = tmp_path / "good.jsonl"
    good.write_text("".join(json.dumps({"idx": i, "plan": plans[i]}) + "\n" for i in sorted(plans)))
    result = CliRunner().invoke(tp.evaluate_command(), [str(good), "--split", "train", "--json"])
    assert result.exit_code == 0 and result.stderr == ""
