"""The official mode reproduces every recorded verdict of the golden corpus and the submissions' figures."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from critics.travelplanner import official
from critics.travelplanner.benchmark import TravelPlanner
from critics.travelplanner.checks import COMMONSENSE_KEYS, HARD_KEYS
from critics.travelplanner.data import load_annotated_plans
from critics.travelplanner.evaluate import METRIC_KEYS, OFFICIAL_METRIC_NAMES, evaluate_plan
from critics.travelplanner.store import Store

pytestmark = pytest.mark.slow  # the fast lane (-m 'not slow') leaves this module out


def _same(recorded: Any, got: Any) -> bool:
    """A recorded value (True/False/None/"error: X") against a CheckResult."""
    if isinstance(recorded, str):
        return got.error == recorded.removeprefix("error: ") and got.verdict is False
    return got.error is None and got.value is recorded


def _delivered(golden: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The golden rows that hold a delivered plan."""
    return [row for row in golden if row["delivered"]]


def _mismatches(
    plan_id: str, keys: Iterable[str], recorded: Mapping[str, Any], got: Mapping[str, Any]
) -> list[tuple[Any, ...]]:
    """(plan id, key, recorded value, result) for each of ``keys`` whose recorded value the result misses."""
    return [(plan_id, key, recorded[key], got[key]) for key in keys if not _same(recorded[key], got[key])]


def test_every_golden_plan_every_key(golden: list[dict[str, Any]], store: Store) -> None:
    mismatches = []
    for row in golden:
        ev = evaluate_plan(row["_query"], row["plan"], store, mode="official", id=row["plan_id"])
        assert ev.delivered is row["delivered"], row["plan_id"]
        if not row["delivered"]:
            assert ev.commonsense is None and ev.hard is None
            continue
        assert ev.commonsense is not None
        mismatches += _mismatches(row["plan_id"], COMMONSENSE_KEYS, row["commonsense"], ev.commonsense)
        assert ev.raised is (row["commonsense_raised"] is not None), row["plan_id"]
        assert ev.hard_evaluated is row["hard_evaluated"], row["plan_id"]
        values = ev.values()
        for key in HARD_KEYS:
            expected = row["hard"][key] if row["hard"] is not None else None
            if values[key] is not expected:
                mismatches.append((row["plan_id"], key, expected, values[key]))
    assert not mismatches, mismatches[:10]


def test_hard_checks_ungated_and_total_cost(golden: list[dict[str, Any]], store: Store) -> None:
    mismatches = []
    for row in _delivered(golden):
        box = official.hard(row["_query"], row["plan"], store)
        mismatches += _mismatches(row["plan_id"], HARD_KEYS, row["hard_ungated"], box)
        recorded = row["total_cost"]
        try:
            cost: Any = official.total_cost(row["_query"], row["plan"], store)
        except Exception as exc:
            cost = f"error: {type(exc).__name__}"
        if isinstance(recorded, str) or isinstance(cost, str):
            ok = recorded == cost
        else:
            ok = cost == pytest.approx(recorded, abs=1e-9)
        if not ok:
            mismatches.append((row["plan_id"], "total_cost", recorded, cost))
    assert not mismatches, mismatches[:10]


def test_official_messages(golden: list[dict[str, Any]], store: Store) -> None:
    """The message of every check that did not crash is the official one, word for word."""
    mismatches = []
    for row in _delivered(golden):
        results = {
            **official.commonsense(row["_query"], row["plan"], store),
            **official.hard(row["_query"], row["plan"], store),
        }
        recorded = {**row["messages"]["commonsense"], **row["messages"]["hard_ungated"]}
        for key, result in results.items():
            if result.error is None and result.message != recorded[key]:
                mismatches.append((row["plan_id"], key, recorded[key], result.message))
    assert not mismatches, mismatches[:10]


def test_commonsense_raised_plans_report_each_key(golden: list[dict[str, Any]], store: Store) -> None:
    raised = [row for row in golden if row["commonsense_raised"]]
    assert raised, "the corpus has plans on which the official code crashes"
    for row in raised:
        box = official.commonsense(row["_query"], row["plan"], store)
        errors = {k: v.error for k, v in box.items() if v.error}
        assert row["commonsense_raised"] in errors.values(), row["plan_id"]
        for key in COMMONSENSE_KEYS:
            assert _same(row["commonsense"][key], box[key]), (row["plan_id"], key)
            if box[key].error:
                assert box[key].message and box[key].error in box[key].message


def _figures(metrics: dict[str, float]) -> dict[str, float]:
    return {OFFICIAL_METRIC_NAMES[k]: metrics[k] for k in METRIC_KEYS}


def test_train_annotated_submission(tp: TravelPlanner, tp_dir: Path, submissions: dict[str, Any]) -> None:
    problems = tp.load("train")
    plans = load_annotated_plans(tp_dir)
    result = tp.evaluate(problems, [plans[p.metadata["idx"]] for p in problems])
    assert _figures(result.metrics) == pytest.approx(submissions["train-annotated"]["metrics"], abs=1e-12)
    assert all(row["passed"] for row in result.per_problem)


def test_example_evaluation_submission(
    tp: TravelPlanner, example_lines: list[dict[str, Any]], submissions: dict[str, Any]
) -> None:
    problems = tp.load("validation")
    by_idx = {line["idx"]: line["plan"] for line in example_lines}
    result = tp.evaluate(problems, [by_idx.get(p.metadata["idx"]) for p in problems])
    expected = submissions["validation-example-evaluation"]["metrics"]
    assert _figures(result.metrics) == pytest.approx(expected, abs=1e-12)
    # 161/180 delivered, 860/1440 commonsense, 3 commonsense macro, 48/420 hard, 15 hard macro, 1 final
    assert round(result.metrics["commonsense_micro"] * 1440) == 860
    assert round(result.metrics["hard_micro"] * 420) == 48
    assert sum(row["passed"] for row in result.per_problem) == 1
    assert result.tables["denominators"][0]["hard_total"] == 420


def test_example_evaluation_through_the_command(tp: TravelPlanner, tp_dir: Path, submissions: dict[str, Any]) -> None:
    from tests.cli_support import run_command

    code, out = run_command(
        tp.evaluate_command(), tp_dir / "example_evaluation.jsonl", "--split", "validation", "--json"
    )
    assert code == 0
    printed = json.loads(out)
    assert list(printed) == list(METRIC_KEYS)
    assert _figures(printed) == pytest.approx(submissions["validation-example-evaluation"]["metrics"], abs=1e-12)


@pytest.mark.parametrize(
    "submission_id",
    [
        "golden-train-bases",
        "golden-train-mixed1",
        "golden-train-mixed2",
        "golden-validation-bases",
        "golden-validation-mixed1",
        "golden-validation-mixed2",
    ],
)
def test_synthetic_submissions(
    tp: TravelPlanner, golden: list[dict[str, Any]], submissions: dict[str, Any], submission_id: str
) -> None:
    sub = submissions[submission_id]
    by_id = {row["plan_id"]: row for row in golden}
    problems = tp.load(sub["split"])
    plans = [by_id[pid]["plan"] if pid is not None else None for pid in sub["plan_ids"]]
    result = tp.evaluate(problems, plans)
    assert _figures(result.metrics) == pytest.approx(sub["metrics"], abs=1e-12)


def test_hard_denominators_match_eval_py(tp: TravelPlanner) -> None:
    from critics.travelplanner.evaluate import OFFICIAL_DENOMINATORS, computed_denominators

    for split in ("train", "validation"):
        queries = [tp.query_of(p) for p in tp.load(split)]
        assert computed_denominators(queries) == OFFICIAL_DENOMINATORS[split]
