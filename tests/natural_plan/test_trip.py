"""Trip Planning: constraint extraction on every instance, critics, text <-> plan, the official score."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from critics.natural_plan import trip as trp
from critics.natural_plan.benchmark import TripPlanning
from critics.natural_plan.trip_critics import TRIP_CRITICS
from modulo.errors import ConfigError, DataError, PlanFormatError
from modulo.types import Problem

from .conftest import failing, hand_made_problem

CRITICS = [f() for f in TRIP_CRITICS]


def _gold(item: dict[str, Any]) -> tuple[list[str], list[int]]:
    return item["cities"].split("**"), [int(d) for d in item["durations"].split("**")]


def test_every_prompt_parses_and_agrees_with_gold(trip_raw: dict[str, dict[str, Any]]) -> None:
    assert len(trip_raw) == 1600
    kinds: Counter[str] = Counter()
    one_way = both = 0
    for key, item in trip_raw.items():
        c0 = trp.parse_trip_constraints(item["prompt_0shot"])
        c5 = trp.parse_trip_constraints(item["prompt_5shot"])
        assert c0 == c5, key
        cities, durations = _gold(item)
        assert c0["num_cities"] == int(item["num_cities"]) == len(cities), key
        assert c0["stays"] == dict(zip(cities, durations, strict=True)), key
        assert sum(durations) - (len(cities) - 1) == c0["total_days"], key
        kinds.update(e["kind"] for e in c0["events"])
        one_way += sum(not i["both_ways"] for i in c0["flight_items"])
        both += sum(i["both_ways"] for i in c0["flight_items"])
    assert set(kinds) == {"wedding", "friend", "workshop", "relatives", "show", "tour", "conference"}
    assert (both, one_way) == (20710, 880)


def test_every_gold_plan_passes_every_critic(trip: TripPlanning, trip_full: list[Problem]) -> None:
    for p in trip_full:
        gold = p.metadata["gold_plan"]
        assert trip.validate_plan(gold) == gold
        assert failing(p, gold, CRITICS) == {}, p.id


def test_gold_text_parses_to_gold_plan_and_renders_back(trip: TripPlanning, trip_full: list[Problem]) -> None:
    for p in trip_full[::7]:
        plan = trip.parse(p.metadata["gold"], p)
        assert plan == p.metadata["gold_plan"]
        assert trip.official_solved(p, trip.render(plan, p))
        assert trp.parse_trip(trip.render(plan, p)) == plan


def test_replay_full_official_556_valid_558(trip: TripPlanning, trip_full: list[Problem], trip_raw: Any) -> None:
    result = trip.evaluate(trip_full, [trip_raw[p.id]["pred_5shot_pro"] for p in trip_full])
    official = sum(r["official"] for r in result.per_problem)
    valid = sum(r["valid"] for r in result.per_problem)
    assert (official, valid) == (556, 558)
    assert result.metrics["official"] == pytest.approx(0.3475)
    # the two valid non-matches are alternative valid plans; every official match is valid
    valid_not_official = {r["problem_id"] for r in result.per_problem if r["valid"] and not r["official"]}
    assert valid_not_official == {"trip_planning_example_982", "trip_planning_example_1443"}
    assert all(r["valid"] for r in result.per_problem if r["official"])
    assert [row["n"] for row in result.tables["cells"]] == [200] * 8
    assert result.tables["cells"][0]["cell"] == "num_cities=3"


def test_replay_subset_33(trip: TripPlanning) -> None:
    problems = trip.load("subset100")
    raw = {p.id: p for p in problems}
    assert len(raw) == 100
    from critics.natural_plan.common import read_instances

    texts = read_instances("trip", "subset100")
    result = trip.evaluate(problems, [texts[p.id]["pred_5shot_pro"] for p in problems])
    assert sum(r["official"] for r in result.per_problem) == 33
    assert sum(r["valid"] for r in result.per_problem) == 33


def test_validation_and_test_splits(trip: TripPlanning, trip_full: list[Problem]) -> None:
    val, test = trip.load("validation"), trip.load("test")
    assert (len(val), len(test)) == (320, 1280)
    assert Counter(p.metadata["num_cities"] for p in val) == dict.fromkeys(range(3, 11), 40)
    assert {p.id for p in val} | {p.id for p in test} == {p.id for p in trip_full}
    assert not {p.id for p in val} & {p.id for p in test}
    # the first 40 of each cell in example order
    first3 = [p.id for p in trip_full if p.metadata["num_cities"] == 3][:40]
    assert [p.id for p in val if p.metadata["num_cities"] == 3] == first3
    assert "test" in trip.test_splits


def test_problem_fields_and_shots(trip_raw: dict[str, Any], trip_full: list[Problem]) -> None:
    p = trip_full[0]
    assert p.id == "trip_planning_example_0"
    assert p.query == trip_raw[p.id]["prompt_0shot"]
    assert "Helsinki**Barcelona" not in str(p.constraints)
    assert p.metadata["gold_cities"] == ["Helsinki", "Barcelona", "Florence"]
    five = TripPlanning(shots=5).load("subset100")[0]
    assert five.query == trip_raw[five.id]["prompt_5shot"]
    assert five.constraints == next(q for q in trip_full if q.id == five.id).constraints
    with pytest.raises(ConfigError):
        TripPlanning(shots=3)
    with pytest.raises(DataError, match="unknown split"):
        TripPlanning().load("train")


# -- critics on hand-made plans ----------------------------------------------------------------------

PROMPT = (
    "You plan to visit 3 European cities for 14 days in total. You only take direct flights to commute between "
    "cities. You would like to visit Florence for 6 days. You want to meet a friend in Florence between day 9 and "
    "day 14. You would like to visit Barcelona for 5 days. You would like to visit Helsinki for 5 days.\n\n"
    "Here are the cities that have direct flights:\nBarcelona and Florence, from Helsinki to Barcelona.\n\n"
    "Find a trip plan of visiting the cities for 14 days by taking direct flights to commute between them."
)


problem = hand_made_problem("natural_plan/trip", PROMPT, trp.parse_trip_constraints)


def _plan(*stays: tuple[str, int, int]) -> dict[str, Any]:
    return {"stays": [{"city": c, "start_day": a, "end_day": b} for c, a, b in stays]}


GOOD = (("Helsinki", 1, 5), ("Barcelona", 5, 9), ("Florence", 9, 14))


def _verdicts(problem: Problem, plan: dict[str, Any]) -> dict[str, Any]:
    return {c.name: c(problem, plan) for c in CRITICS}


def test_good_plan_passes(problem: Problem) -> None:
    assert all(v.accepts for v in _verdicts(problem, _plan(*GOOD)).values())


def test_one_way_flight_in_the_wrong_direction(problem: Problem) -> None:
    plan = _plan(("Barcelona", 1, 5), ("Helsinki", 5, 9), ("Florence", 9, 14))
    v = _verdicts(problem, plan)["trip_direct_flights"]
    assert not v.passed
    assert '"from Helsinki to Barcelona" (one way)' in v.feedback
    assert "no direct flight between them" in v.feedback  # Helsinki -> Florence
    assert v.details["hops"][0] == {"from": "Barcelona", "to": "Helsinki", "day": 5}


@pytest.mark.parametrize(
    ("stays", "critic", "quoted"),
    [
        pytest.param(
            (("Helsinki", 1, 4), ("Barcelona", 4, 9), ("Florence", 9, 14)),
            "trip_stay_lengths",
            [
                '"You would like to visit Helsinki for 5 days."',
                "from day 1 to day 4, which is 4 days",
                "Barcelona",  # 6 days instead of 5
            ],
            id="stay_length_quotes_the_sentence",
        ),
        pytest.param(
            (("Helsinki", 1, 5), ("Barcelona", 5, 10), ("Florence", 10, 14)),
            "trip_event_windows",
            ['"You want to meet a friend in Florence between day 9 and day 14."', "only from day 10 to day 14"],
            id="event_window_must_lie_inside_the_stay",
        ),
    ],
)
def test_a_broken_stay_is_quoted_in_the_feedback(
    problem: Problem, stays: tuple[tuple[str, int, int], ...], critic: str, quoted: list[str]
) -> None:
    v = _verdicts(problem, _plan(*stays))[critic]
    assert not v.passed
    for text in quoted:
        assert text in v.feedback


def test_total_days_and_flight_days(problem: Problem) -> None:
    v = _verdicts(problem, _plan(("Helsinki", 2, 5), ("Barcelona", 6, 9), ("Florence", 9, 13)))
    assert not v["trip_total_days"].passed
    assert "starts on day 2" in v["trip_total_days"].feedback and "ends on day 13" in v["trip_total_days"].feedback
    assert "14 days in total" in v["trip_total_days"].feedback
    assert not v["trip_flight_days"].passed
    assert "in Helsinki until day 5 but in Barcelona from day 6" in v["trip_flight_days"].feedback


def test_each_city_once(problem: Problem) -> None:
    plan = _plan(("Helsinki", 1, 5), ("Barcelona", 5, 9), ("Helsinki", 9, 11), ("Paris", 11, 14))
    v = _verdicts(problem, plan)["trip_each_city_once"]
    assert not v.passed
    assert "visits Helsinki 2 times" in v.feedback
    assert "Paris is not among the cities" in v.feedback
    assert "never visits Florence" in v.feedback


def test_event_critic_not_applicable_without_events() -> None:
    prompt = PROMPT.replace(" You want to meet a friend in Florence between day 9 and day 14.", "")
    p = Problem(id="t", benchmark="natural_plan/trip", query=prompt, constraints=trp.parse_trip_constraints(prompt))
    v = _verdicts(p, _plan(*GOOD))["trip_event_windows"]
    assert v.passed and not v.applicable


def test_unrecognised_sentence_is_a_data_error() -> None:
    with pytest.raises(DataError, match="unrecognised sentence"):
        trp.parse_trip_constraints(PROMPT.replace("You would like to visit Helsinki", "You may see Helsinki"))
    with pytest.raises(DataError, match="direct flights"):
        trp.parse_trip_constraints("You plan to visit 3 European cities for 14 days in total.")


# -- reading text answers and the official quirks ----------------------------------------------------

CANON = (
    "Here is the trip plan for visiting the 3 European cities for 14 days:\n\n"
    "**Day 1-5:** Arriving in Helsinki and visit Helsinki for 5 days.\n"
    "**Day 5:** Fly from Helsinki to Barcelona.\n"
    "**Day 5-9:** Visit Barcelona for 5 days.\n"
    "**Day 9:** Fly from Barcelona to Florence.\n"
    "**Day 9-14:** Visit Florence for 6 days."
)
GOLD_C, GOLD_D = ["Helsinki", "Barcelona", "Florence"], [5, 5, 6]


def test_render_is_the_golden_format() -> None:
    assert trp.render_trip(_plan(*GOOD), 14) == CANON
    assert trp.parse_trip(CANON) == _plan(*GOOD)


def test_official_reads_stays_from_flight_days_only() -> None:
    # the stated ranges say 5 days in Barcelona, but the flight leaves on day 10: the official reading is 6
    text = CANON.replace("**Day 9:** Fly from Barcelona", "**Day 10:** Fly from Barcelona")
    assert trp.official_sequence(text) == [("Helsinki", 5), ("Barcelona", 6), ("Florence", 5)]
    assert not trp.official_solved(text, GOLD_C, GOLD_D)


def test_official_stops_at_the_range_ending_on_the_total() -> None:
    alternative = "\n\nAlternatively:\n**Day 1-3:** Visit Oslo.\n**Day 3:** Fly from Oslo to Rome.\n"
    assert trp.official_solved(CANON + alternative, GOLD_C, GOLD_D)
    assert trp.parse_trip(CANON + alternative) == _plan(*GOOD)


def test_official_ignores_extra_trailing_cities() -> None:
    text = CANON.replace("**Day 9-14:** Visit Florence for 6 days.", "**Day 14:** Fly from Florence to Rome.")
    text += "\n**Day 14-14:** Visit Rome."
    assert trp.official_sequence(text)[:3] == [("Helsinki", 5), ("Barcelona", 5), ("Florence", 6)]
    assert trp.official_solved(text, GOLD_C, GOLD_D)
    assert not trp.official_solved("no plan here", GOLD_C, GOLD_D)


def test_parse_rejects_inconsistent_flights_and_empty_answers() -> None:
    text = CANON.replace("Fly from Barcelona to Florence", "Fly from Rome to Florence")
    with pytest.raises(PlanFormatError, match="leaves from Rome"):
        trp.parse_trip(text)
    with pytest.raises(PlanFormatError, match="empty"):
        trp.parse_trip("  ")
    with pytest.raises(PlanFormatError, match="no plan found"):
        trp.parse_trip("I cannot find a plan.")


def test_parse_reads_range_only_answers() -> None:
    text = "**Day 1-5:** Helsinki\n**Day 5-9:** Visit Barcelona\n**Day 9-14:** Stay in Florence"
    assert trp.parse_trip(text) == _plan(*GOOD)


def test_benchmark_parse_reads_after_the_last_solution_marker(problem: Problem) -> None:
    bench = TripPlanning()
    reasoning = "Let me think. **Day 1-3:** maybe Oslo first? Fly from Oslo to Rome on Day 3.\nSOLUTION:\n"
    assert bench.parse(reasoning + CANON, problem) == _plan(*GOOD)


def test_exhaustive_search_and_unsolvable(trip: TripPlanning, problem: Problem) -> None:
    assert trp.solve_trip(problem.constraints, limit=5) == [_plan(*GOOD)]
    assert trip.prove_unsolvable(problem) is None
    no_flight = PROMPT.replace("Barcelona and Florence, ", "Helsinki and Florence, ")
    p = Problem(
        id="u", benchmark="natural_plan/trip", query=no_flight, constraints=trp.parse_trip_constraints(no_flight)
    )
    reason = trip.prove_unsolvable(p)
    assert reason is not None and "No order of the 3 cities works" in reason


def test_search_finds_the_gold_plan_on_the_subset(trip: TripPlanning) -> None:
    counts: Counter[int] = Counter()
    for p in trip.load("subset100"):
        plans = trp.solve_trip(p.constraints, limit=10)
        assert p.metadata["gold_plan"] in plans, p.id
        counts[len(plans)] += 1
    assert counts[1] >= 90
