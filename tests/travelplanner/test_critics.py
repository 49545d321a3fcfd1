"""The 13 critics: registration, feedback content, hints, not-applicable handling, both modes."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from critics.travelplanner.benchmark import TravelPlanner
from critics.travelplanner.critics import ALL_CRITICS, COMMONSENSE_CRITICS, HARD_CRITICS
from critics.travelplanner.data import load_annotated_plans
from modulo.components import critics as registry
from modulo.critic import Critic
from modulo.errors import ArgumentError, CriticError
from modulo.registry import bind_arguments
from modulo.types import Problem, Verdict


def bound(name: str, tp: TravelPlanner, *, feedback: str = "explain", **args: Any) -> Critic:
    factory = registry.get(name)
    critic: Critic = factory(feedback=feedback, **bind_arguments("critic", name, factory, args, {"benchmark": tp}))
    return critic


def golden_problem(row: dict[str, Any]) -> Problem:
    return Problem(
        id=row["plan_id"],
        benchmark="travelplanner",
        query=row["query"].get("query", ""),
        constraints=row["_query"],
        metadata={"level": row["level"]},
    )


@pytest.fixture(scope="module")
def train1(tp: TravelPlanner, tp_dir: Any) -> tuple[Problem, list[dict[str, Any]]]:
    problem = tp.load("train")[0]
    plan = [d for d in load_annotated_plans(tp_dir)[1] if d]
    return problem, plan


def test_registered_names_groups_and_benchmark_list(tp: TravelPlanner) -> None:
    assert tp.critic_names() == ["format", *COMMONSENSE_CRITICS, *HARD_CRITICS]
    assert len(COMMONSENSE_CRITICS) == 8 and len(HARD_CRITICS) == 5
    for name in ALL_CRITICS:
        factory = registry.get(name)
        assert factory.name == name and factory.benchmarks == ("travelplanner",)
        assert factory.group == ("commonsense" if name in COMMONSENSE_CRITICS else "hard")
        assert factory.source == "oracle"


def test_annotated_plan_passes_every_critic_in_both_modes(
    tp: TravelPlanner, train1: tuple[Problem, list[dict[str, Any]]]
) -> None:
    problem, plan = train1
    for mode in ("strict", "official"):
        for name in ALL_CRITICS:
            verdict = bound(name, tp, mode=mode)(problem, plan)
            assert verdict.accepts, (mode, name, verdict.feedback)
            assert verdict.critic == name


def test_hard_critics_not_applicable_when_not_asked(
    tp: TravelPlanner, train1: tuple[Problem, list[dict[str, Any]]]
) -> None:
    problem, plan = train1  # an easy query: budget only
    for name in ("room_rule", "room_type", "cuisine", "transportation"):
        verdict = bound(name, tp)(problem, plan)
        assert verdict.applicable is False and verdict.accepts
    budget = bound("budget", tp)(problem, plan)
    assert budget.applicable and budget.passed and budget.details["total_cost"] <= problem.constraints["budget"]


def test_minimum_nights_feedback_and_hint(tp: TravelPlanner, train1: tuple[Problem, list[dict[str, Any]]]) -> None:
    problem, plan = train1
    first = plan[0]["accommodation"]
    name = first.rsplit(",", 1)[0]
    need = tp.store.exact_accommodations(name, "Rockford")[0].minimum_nights
    assert need >= 2
    other = next(r for r in tp.store.accommodations_in("Rockford") if r.minimum_nights <= 1 and r.name != name)
    changed = copy.deepcopy(plan)
    changed[1]["accommodation"] = f"{other.name}, Rockford"  # the first listing keeps one night only
    verdict = bound("minimum_nights_stay", tp, feedback="hint")(problem, changed)
    assert not verdict.passed
    assert "1 night" in verdict.feedback and f"at least {need:g} nights" in verdict.feedback
    assert name in verdict.feedback and "day 1" in verdict.feedback
    assert verdict.details["day"] == 1 and verdict.details["field"] == "accommodation"
    assert verdict.details["nights"] == 1 and verdict.details["minimum_nights"] == need
    assert verdict.hint and "Cheapest suitable accommodation in Rockford" in verdict.hint
    for row in tp.store.accommodations_in("Rockford"):
        if row.name in verdict.hint.split("'")[1]:
            assert row.minimum_nights <= 1  # the suggestion fits a one-night stay
    official = bound("minimum_nights_stay", tp, mode="official")(problem, changed)
    assert not official.passed and "minumum nights rule" in official.feedback
    assert f"requires at least {need:g}" in official.feedback
    assert official.details["source"] == "oracle" and verdict.details["source"] == "reimplemented"


def test_sandbox_feedback_names_the_made_up_restaurant(
    tp: TravelPlanner, train1: tuple[Problem, list[dict[str, Any]]]
) -> None:
    problem, plan = train1
    changed = copy.deepcopy(plan)
    changed[1]["lunch"] = "Imaginary Diner, Rockford"
    for mode in ("strict", "official"):
        verdict = bound("within_sandbox", tp, mode=mode, feedback="hint")(problem, changed)
        assert not verdict.passed
        assert "Imaginary Diner" in verdict.feedback and "Day 2" in verdict.feedback
        assert verdict.details["field"] == "lunch" and verdict.details["day"] == 2
        assert verdict.hint and "Restaurants in Rockford" in verdict.hint


def test_explain_feedback_names_no_listing_the_plan_lacks(
    tp: TravelPlanner, train1: tuple[Problem, list[dict[str, Any]]]
) -> None:
    """A strict sandbox failure on a part of a name ('a, Rockford') must not complete it from the database
    ("Did you mean 'Coco Bambu'?") at the explain level: that is a restaurant the plan does not name."""
    problem, plan = train1
    changed = copy.deepcopy(plan)
    changed[1]["breakfast"] = "a, Rockford"
    near = tp.store.match_restaurants("a", "Rockford")[0].name
    explained = bound("within_sandbox", tp)(problem, changed)
    assert not explained.passed and explained.hint is None
    assert near not in explained.feedback and "Did you mean" not in explained.feedback
    hinted = bound("within_sandbox", tp, feedback="hint")(problem, changed)
    assert hinted.feedback == explained.feedback
    assert (
        hinted.hint and hinted.hint.startswith(f"Did you mean {near!r}?") and "Restaurants in Rockford" in hinted.hint
    )


def test_flight_on_the_wrong_date_strict_only(tp: TravelPlanner, golden: list[dict[str, Any]]) -> None:
    row = next(r for r in golden if r["mutations"] == ["sandbox.flight_same_route_other_date"])
    problem = golden_problem(row)
    strict = bound("within_sandbox", tp, feedback="hint")(problem, row["plan"])
    assert not strict.passed and "not on the day's date" in strict.feedback
    assert strict.hint and "Options from" in strict.hint
    assert bound("within_sandbox", tp, mode="official")(problem, row["plan"]).passed


def test_room_rule_feedback(tp: TravelPlanner, golden: list[dict[str, Any]]) -> None:
    row = next(
        r for r in golden if r["mutations"] == ["room_rule.plan_books_forbidding_listing"] and r["split"] == "train"
    )
    problem = golden_problem(row)
    rule = row["_query"]["local_constraint"]["house rule"]
    for mode in ("strict", "official"):
        verdict = bound("room_rule", tp, mode=mode, feedback="hint")(problem, row["plan"])
        assert verdict.applicable and not verdict.passed
        assert "house rules" in verdict.feedback and verdict.details["house_rules"]
        assert verdict.hint and "Cheapest suitable accommodation" in verdict.hint
        assert f"No {rule}" not in verdict.hint


def test_budget_feedback_over_budget(tp: TravelPlanner, golden: list[dict[str, Any]]) -> None:
    row = next(r for r in golden if r["mutations"] == ["budget.one_below_total_cost"])
    problem = golden_problem(row)
    verdict = bound("budget", tp, mode="official", feedback="hint")(problem, row["plan"])
    assert not verdict.passed
    assert "over the budget" in verdict.feedback and "$1" in verdict.feedback
    assert verdict.details["total_cost"] == row["total_cost"]
    assert verdict.hint and verdict.hint.startswith("Cut at least $1")


def test_transportation_rule_and_conflict(tp: TravelPlanner, golden: list[dict[str, Any]]) -> None:
    row = next(r for r in golden if r["mutations"] == ["transport_rule.no_self_driving_driving_word"])
    problem = golden_problem(row)
    assert bound("transportation", tp, mode="official")(problem, row["plan"]).passed
    strict = bound("transportation", tp, feedback="hint")(problem, row["plan"])
    assert not strict.passed and "self-driving" in strict.feedback and strict.details["field"] == "transportation"
    row = next(r for r in golden if r["mutations"] == ["transport.self_driving_with_flight"])
    verdict = bound("non_conflicting_transportation", tp, mode="official", feedback="hint")(
        golden_problem(row), row["plan"]
    )
    assert not verdict.passed and "conflicting" in verdict.feedback and verdict.hint


def test_official_crash_is_a_failed_verdict(tp: TravelPlanner, golden: list[dict[str, Any]]) -> None:
    row = next(r for r in golden if r["mutations"] == ["error.transportation_key_missing"])
    verdict = bound("within_sandbox", tp, mode="official")(golden_problem(row), row["plan"])
    assert isinstance(verdict, Verdict) and not verdict.passed
    assert "crashes" in verdict.feedback and verdict.details["error"] == "KeyError"


def test_bad_mode_and_missing_plan(tp: TravelPlanner, train1: tuple[Problem, list[dict[str, Any]]]) -> None:
    problem, plan = train1
    with pytest.raises(ArgumentError, match="mode='lenient' is not allowed"):
        bound("budget", tp, mode="lenient")
    with pytest.raises(CriticError, match="mode must be one of"):  # called without binding
        registry.get("budget")(benchmark=tp, mode="lenient")(problem, plan)
    assert not bound("budget", tp)(problem, None).passed
