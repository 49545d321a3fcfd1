"""Strict mode: the sound reading. Whatever passes strict passes official, on every plan we have."""

from __future__ import annotations

from typing import Any

import pytest

from critics.travelplanner import official, strict
from critics.travelplanner.benchmark import TravelPlanner
from critics.travelplanner.checks import ALL_KEYS
from critics.travelplanner.evaluate import evaluate_plan
from critics.travelplanner.store import Store


def _violations(query: dict[str, Any], plan: Any, store: Store, label: str) -> list[tuple[str, str]]:
    out = []
    for key in ALL_KEYS:
        s = strict.check(key, query, plan, store)
        assert s.error is None, (label, key, s.message)  # strict never crashes
        if s.passed and not official.check(key, query, plan, store).passed:
            out.append((label, key))
    return out


@pytest.mark.slow
def test_strict_passes_imply_official_passes_on_golden(golden: list[dict[str, Any]], store: Store) -> None:
    bad: list[tuple[str, str]] = []
    for row in golden:
        if row["delivered"]:
            bad += _violations(row["_query"], row["plan"], store, row["plan_id"])
    assert not bad, bad[:10]


def test_strict_passes_imply_official_passes_on_example_submission(
    tp: TravelPlanner, example_lines: list[dict[str, Any]], store: Store
) -> None:
    problems = {p.metadata["idx"]: p for p in tp.load("validation")}
    bad: list[tuple[str, str]] = []
    for line in example_lines:
        if line["plan"]:
            bad += _violations(tp.query_of(problems[line["idx"]]), line["plan"], store, f"example-{line['idx']}")
    assert not bad, bad[:10]


@pytest.mark.slow
def test_strict_final_pass_implies_official_final_pass(golden: list[dict[str, Any]], store: Store) -> None:
    strict_passed = 0
    for row in golden:
        s = evaluate_plan(row["_query"], row["plan"], store, mode="strict")
        if s.passed:
            strict_passed += 1
            assert evaluate_plan(row["_query"], row["plan"], store, mode="official").passed, row["plan_id"]
    assert strict_passed > 0


def _base(golden: list[dict[str, Any]], plan_id: str) -> dict[str, Any]:
    return next(row for row in golden if row["plan_id"] == plan_id)


@pytest.mark.parametrize(
    ("label", "key"),
    [
        ("sandbox.flight_same_route_other_date", "is_valid_information_in_sandbox"),
        ("transport.driving_word_with_flight", "is_valid_transportation"),
        ("transport_rule.no_self_driving_driving_word", "valid_transportation"),
        ("transport_rule.no_self_driving_lowercase_loophole", "valid_transportation"),
        ("restaurants.duplicate_with_trailing_space", "is_valid_restaurants"),
        ("restaurants.duplicate_as_name_prefix", "is_valid_information_in_sandbox"),
        ("attractions.duplicate_hidden_by_missing_semicolon", "is_valid_attractions"),
        ("attractions.hallucination_hidden_after_last_semicolon", "is_valid_information_in_sandbox"),
        ("accommodation.ambiguous_name_skips_minimum_nights", "is_valid_information_in_sandbox"),
        ("current_city.meal_in_other_city_on_stay_day", "is_valid_information_in_current_city"),
        ("current_city.accommodation_other_city_on_stay_day_has_last_letter", "is_valid_information_in_current_city"),
        ("absent.extra_days_after_trip", "is_not_absent"),
    ],
)
def test_strict_catches_what_official_lets_through(
    golden: list[dict[str, Any]], store: Store, label: str, key: str
) -> None:
    rows = [
        r for r in golden if r["mutations"] == [label] and official.check(key, r["_query"], r["plan"], store).passed
    ]
    assert rows, label  # the quirk lets these through officially
    for row in rows:
        result = strict.check(key, row["_query"], row["plan"], store)
        if result.passed:  # a garbled entry (no separator) is not a repeat, but it is not in the sandbox either
            result = strict.check("is_valid_information_in_sandbox", row["_query"], row["plan"], store)
        assert not result.passed and result.message, (row["plan_id"], key)


def test_strict_flight_date_and_messages(golden: list[dict[str, Any]], store: Store) -> None:
    row = next(r for r in golden if r["mutations"] == ["sandbox.flight_same_route_other_date"])
    result = strict.check("is_valid_information_in_sandbox", row["_query"], row["plan"], store)
    assert not result.passed
    assert "not on the day's date" in (result.message or "")
    assert result.details["day"] >= 1 and result.details["field"] == "transportation"


def test_train_annotated_plans_pass_strict_but_two(tp: TravelPlanner, tp_dir: Any, store: Store) -> None:
    """The human plans pass strict except two real slips: San Angelo sights on a San Antonio day (train-42)."""
    from critics.travelplanner.data import load_annotated_plans

    plans = load_annotated_plans(tp_dir)
    failing = {}
    for p in tp.load("train"):
        ev = evaluate_plan(tp.query_of(p), plans[p.metadata["idx"]], store, mode="strict")
        if not ev.passed:
            failing[p.id] = ev.reasons()
    assert set(failing) == {"train-42"}, failing
    assert "San Angelo" in failing["train-42"]["is_valid_information_in_current_city"]


def test_malformed_plans_fail_without_crashing(store: Store, tp: TravelPlanner) -> None:
    query = tp.query_of(tp.load("train")[0])
    for plan in (["day one", "day two", "day three"], {"days": 1}, [{"current_city": 3}] * 3, [[], [], []]):
        for key in ALL_KEYS:
            assert strict.check(key, query, plan, store).error is None, (plan, key)
        absent = strict.check("is_not_absent", query, plan, store)
        assert absent.verdict is False and absent.message, plan
