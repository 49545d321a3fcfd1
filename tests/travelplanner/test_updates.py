"""TravelPlanner updates mid-loop: a budget or a house rule changes, critics and the official evaluator follow."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from critics.travelplanner.benchmark import TravelPlanner
from critics.travelplanner.data import load_annotated_plans
from modulo.binding import bind_critics
from modulo.errors import ConfigError
from modulo.types import Problem, ProblemUpdate


@pytest.fixture(scope="module")
def annotated(tp: TravelPlanner, tp_dir: Path) -> list[tuple[Problem, list[dict[str, Any]]]]:
    """Train problems with their human-annotated plans (each passes every official check)."""
    plans = load_annotated_plans(tp_dir)
    return [(p, [d for d in plans[p.metadata["idx"]] if d]) for p in tp.load("train")]


def _row(tp: TravelPlanner, p: Problem, plan: Any) -> dict[str, Any]:
    return tp.evaluate([p], [plan], mode="official").per_problem[0]


def test_a_lower_budget_is_read_by_the_critic_and_the_official_evaluator(
    tp: TravelPlanner, annotated: list[tuple[Problem, list[dict[str, Any]]]]
) -> None:
    p, plan = annotated[0]
    assert _row(tp, p, plan)["passed"] is True
    q = tp.apply_update(p, ProblemUpdate(add={"budget": "-60%"}, after=1))
    assert q.constraints["budget"] == round(p.constraints["budget"] * 0.4)
    assert p.constraints["budget"] == 1700  # the problem the update came from is left as it was
    assert q.query.startswith(p.query) and q.query.endswith(f"Update: The budget is now ${q.constraints['budget']:,}.")
    row = _row(tp, q, plan)
    assert row["valid_cost"] is False and row["passed"] is False
    assert all(row[k] is not False for k in row if k.startswith("is_"))  # only the budget check changed
    for mode in ("official", "strict"):
        (critic,) = bind_critics(["budget"], tp, {"mode": mode})
        assert critic(p, plan).accepts, mode
        verdict = critic(q, plan)
        assert not verdict.accepts and verdict.details["key"] == "valid_cost", mode
    # a higher budget keeps the plan valid; an absolute figure is taken as given
    assert _row(tp, tp.apply_update(p, ProblemUpdate(add={"budget": "+10%"})), plan)["passed"] is True
    assert tp.apply_update(p, ProblemUpdate(add={"budget": 900})).constraints["budget"] == 900


def test_a_new_house_rule_applies_to_the_accommodation_from_then_on(
    tp: TravelPlanner, annotated: list[tuple[Problem, list[dict[str, Any]]]]
) -> None:
    (room_rule,) = bind_critics(["room_rule"], tp, {"mode": "official"})
    seen: dict[bool, int] = {True: 0, False: 0}
    for p, plan in annotated[:15]:  # no house rule stated in these
        assert not room_rule(p, plan).applicable
        for rule in ("pets", "parties", "smoking"):
            q = tp.apply_update(p, ProblemUpdate(add={"house_rule": rule}))
            assert tp.query_of(q)["local_constraint"]["house rule"] == rule
            assert f"Update: The accommodation must allow {rule}." in q.query
            verdict = room_rule(q, plan)
            row = _row(tp, q, plan)
            assert verdict.applicable and row["valid_room_rule"] is verdict.passed  # critic and evaluator agree
            assert row["passed"] is verdict.passed
            seen[verdict.passed] += 1
    assert seen[False] > 0 and seen[True] > 0  # some annotated stays break a new rule, some do not
    # dropping a rule again: not applicable any more
    p, plan = next((p, plan) for p, plan in annotated if tp.query_of(p)["local_constraint"]["house rule"])
    dropped = tp.apply_update(p, ProblemUpdate(add={"house rule": None}, text="Forget the house rule."))
    assert not room_rule(dropped, plan).applicable
    assert dropped.query.endswith("Update: Forget the house rule.")


def test_updates_that_would_change_the_trip_or_are_malformed_are_refused(
    tp: TravelPlanner, annotated: list[tuple[Problem, list[dict[str, Any]]]]
) -> None:
    p, _plan = annotated[0]
    for add, match in (
        ({"dest": "Paris"}, "may change budget, house_rule"),
        ({"days": 5}, "reference information"),
        ({"budget": "cheaper"}, "like '-20%'"),
        ({"budget": -5}, "non-negative"),
        ({"house_rule": "dragons"}, "house_rule must be one of"),
        ({"room_type": "castle"}, "room_type must be one of"),
        ({"transportation": "no walking"}, "transportation must be one of"),
        ({"cuisine": "Thai"}, "cuisine must be a list"),
    ):
        with pytest.raises(ConfigError, match=match):
            tp.apply_update(p, ProblemUpdate(add=add))
    q = tp.apply_update(p, ProblemUpdate(add={"transportation": "no flight", "cuisine": ["Chinese"]}))
    local = tp.query_of(q)["local_constraint"]
    assert local["transportation"] == "no flight" and local["cuisine"] == ["Chinese"]
    assert "The trip must not use flights." in q.query


@pytest.mark.slow
def test_a_budget_cut_mid_loop_end_to_end_with_a_scripted_model(
    tp: TravelPlanner, annotated: list[tuple[Problem, list[dict[str, Any]]]], tmp_path: Path
) -> None:
    """Turn 0 proposes the annotated plan ($1,608, certified under the $1,700 budget); the budget drops to
    $1,500 after turn 0, the plan is judged again and rejected by the budget critic, and the next plan
    (the optional travel-day meals dropped, $1,411) is certified. A second run that keeps proposing the
    first plan ends exhausted, and the official evaluator fails it on the final budget."""
    import json

    from click.testing import CliRunner

    from modulo.cli.main import cli
    from modulo.types import ProblemResult

    p, plan = annotated[0]
    cheaper = [dict(day) for day in plan]
    cheaper[0]["dinner"] = "-"
    for meal in ("breakfast", "lunch", "dinner"):
        cheaper[2][meal] = "-"

    def run(name: str, replies: list[Any]) -> tuple[ProblemResult, dict[str, Any]]:
        script = tmp_path / f"{name}.json"
        script.write_text(json.dumps({p.id: [tp.render_plan(r) for r in replies]}))
        run_dir = tmp_path / name
        result = CliRunner().invoke(
            cli,
            [
                "run",
                "benchmark=travelplanner",
                "benchmark.split=train",
                f"benchmark.ids=[{p.id}]",
                "llm=scripted",
                f"llm.script={script}",
                "reformulator=parser",
                "cache.mode=off",
                "metacontroller.max_iterations=2",
                "user.updates=[{after: 0, add: {budget: 1500}}]",
                f"run.dir={run_dir}",
                f"hydra.run.dir={run_dir}",
                "run.progress=false",
            ],
        )
        assert result.exit_code == 0, result.output
        record = ProblemResult.model_validate_json((run_dir / "records.jsonl").read_text().splitlines()[0])
        return record, json.loads((run_dir / "evaluation.json").read_text())["per_problem"][0]

    record, row = run("recovers", [plan, cheaper])
    first, second = record.iterations
    assert first.all_accept and first.rejudged is not None and not first.rejudged.accepts
    assert [v.critic for v in first.rejudged.verdicts if not v.accepts] == ["budget"]
    assert [u.add for u in first.updates] == [{"budget": 1500}]
    assert "The budget is now $1,500." in second.prompt[-1].content
    assert record.outcome == "certified" and record.best_plan == cheaper
    assert row["valid_cost"] is True and row["passed"] is True

    record, row = run("stuck", [plan, plan])
    assert record.outcome == "exhausted" and record.best_rejected_by == ["budget"]
    assert row["valid_cost"] is False and row["passed"] is False  # judged against $1,500, not $1,700


@pytest.mark.slow
def test_published_figures_are_left_out_when_the_problems_change(tp: TravelPlanner, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from modulo.cli.main import cli

    run_dir = tmp_path / "run"
    args = [
        "run",
        "benchmark=travelplanner",
        "benchmark.split=validation",
        "benchmark.limit=1",
        "generator=greedy",
        f"run.dir={run_dir}",
        f"hydra.run.dir={run_dir}",
        "run.progress=false",
    ]
    result = CliRunner().invoke(cli, [*args, "user.updates=[{after: 0, add: {budget: '-30%'}}]"])
    assert result.exit_code == 0, result.output
    assert "(published)" not in result.output and "published figures left out" in result.output


def test_a_local_constraint_added_to_an_easy_query_is_in_the_hard_micro_denominator(
    tp: TravelPlanner, annotated: list[tuple[Problem, list[dict[str, Any]]]]
) -> None:
    """An update that gives an easy query a house rule makes the room-rule check count in the hard
    micro numerator; the denominator must count it too, or the rate goes past 100%."""
    easy = [(p, plan) for p, plan in annotated if p.metadata["level"] == "easy"][:3]
    updated = [tp.apply_update(p, ProblemUpdate(add={"house_rule": "pets"})) for p, _ in easy]
    result = tp.evaluate(updated, [plan for _, plan in easy], mode="official")
    counted = [row["hard_micro"] for row in result.per_problem]
    assert all(passes <= total for passes, total in counted), counted
    assert sum(total for _, total in counted) == 2 * len(easy)  # the budget and the house rule of each
    assert 0.0 <= result.metrics["hard_micro"] <= 1.0
    assert result.metrics["hard_micro"] == sum(p for p, _ in counted) / (2 * len(easy))


def test_a_whole_split_with_an_added_constraint_is_not_scored_over_eval_pys_total(
    tp: TravelPlanner, annotated: list[tuple[Problem, list[dict[str, Any]]]]
) -> None:
    """The whole train split with a house rule and a room type added to every query: eval.py's hard-coded
    105 counts the official rows' constraints only, so the hard micro rate would read 113%."""
    add = {"house_rule": "pets", "room_type": "entire room"}
    updated = [tp.apply_update(p, ProblemUpdate(add=add)) for p, _ in annotated]
    result = tp.evaluate(updated, [plan for _, plan in annotated], mode="official")
    counted = [row["hard_micro"] for row in result.per_problem]
    total = sum(t for _, t in counted)
    assert total > 105
    assert result.tables["denominators"][0]["hard_total"] == total
    assert result.metrics["hard_micro"] == sum(p for p, _ in counted) / total <= 1.0
    assert "computed from the queries" in result.tables["denominators"][0]["source"]
    # the official rows themselves keep eval.py's figures
    plain = tp.evaluate([p for p, _ in annotated], [plan for _, plan in annotated], mode="official")
    assert plain.tables["denominators"][0] == {
        "n": 45,
        "commonsense_total": 360,
        "hard_total": 105,
        "source": "eval.py (train)",
    }
