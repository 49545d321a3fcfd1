"""Benchmark.validate_plan: a memoised validation hands out a fresh plan each time, in its own key order, and
explains a rejection in jsonschema's words."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from modulo.benchmark import Benchmark
from modulo.errors import PlanFormatError
from modulo.types import Problem, canonical_json


class Stop(BaseModel):
    city: str
    days: int
    notes: list[str] = []


class Trip(BaseModel):
    title: str
    stops: list[Stop]


class TripBench(Benchmark):
    name = "trip_validate"
    plan_model = Trip

    def splits(self) -> list[str]:
        return ["dev"]

    def load(self, split: str) -> list[Problem]:
        return []


def test_each_validated_plan_is_a_fresh_copy_in_the_model_order() -> None:
    bench = TripBench(None)
    raw = {"stops": [{"days": 2, "city": "Oslo"}], "title": "north"}
    first = bench.validate_plan(raw)
    assert first == {"title": "north", "stops": [{"city": "Oslo", "days": 2, "notes": []}]}
    assert list(first) == ["title", "stops"] and list(first["stops"][0]) == ["city", "days", "notes"]
    first["stops"][0]["notes"].append("changed by a caller")  # the memoised result must not see this
    again = bench.validate_plan(raw)
    assert again == {"title": "north", "stops": [{"city": "Oslo", "days": 2, "notes": []}]}
    assert again is not first and again["stops"] is not first["stops"]
    # a plan seen before is normalised again (the memo keeps its canonical text only): the same plan, text
    plan, canonical = bench.checked_plan(raw)
    assert (plan, canonical) == (again, canonical_json(again)) and list(plan) == ["title", "stops"]


def test_a_rejection_is_explained_in_jsonschemas_words() -> None:
    """The fast schema check (modulo.schemacheck) passes valid plans; jsonschema still words a rejection."""
    bench = TripBench(None)
    with pytest.raises(PlanFormatError, match="at stops/0/days: 'two' is not of type 'integer'"):
        bench.validate_plan({"title": "north", "stops": [{"city": "Oslo", "days": "two"}]})
    with pytest.raises(PlanFormatError, match="'title' is a required property"):
        bench.validate_plan({"stops": []})


class StrictTripBench(TripBench):
    """A benchmark with a validation of its own on top of the schema."""

    name = "trip_validate_own"

    def validate_plan(self, value: object) -> object:
        plan = super().validate_plan(value)
        if isinstance(plan, dict) and not plan["stops"]:
            raise PlanFormatError("a trip needs a stop")
        return plan


@pytest.mark.parametrize("bench", [TripBench(None), StrictTripBench(None)], ids=["schema", "own validation"])
def test_plan_error_is_what_validate_plan_says(bench: Benchmark) -> None:
    """The format critic asks plan_error (no copy made): None where validate_plan accepts, its message where
    it raises, for the schema's validation, a benchmark's own, and a plan that is not JSON data."""
    plans = [
        {"title": "north", "stops": [{"city": "Oslo", "days": 2}]},
        {"title": "north", "stops": [{"city": "Oslo", "days": "two"}]},
        {"stops": []},
        {"title": "north", "stops": []},
        {"title": {1, 2}, "stops": []},
    ]
    for plan in plans:
        try:
            bench.validate_plan(plan)
        except PlanFormatError as exc:
            assert bench.plan_error(plan) == str(exc)
        else:
            assert bench.plan_error(plan) is None
    assert bench.plan_error(plans[0]) is None and bench.plan_error(plans[1]) is not None
    assert (bench.plan_error(plans[3]) is None) is (type(bench) is TripBench)
