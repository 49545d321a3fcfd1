"""Calendar Scheduling: constraint extraction, feasibility of every gold slot, critics, official replay."""

from __future__ import annotations

from typing import Any

import pytest

from critics.natural_plan import calendar as cal
from critics.natural_plan.benchmark import CalendarScheduling
from critics.natural_plan.calendar_critics import CALENDAR_CRITICS, calendar_earliest
from modulo.errors import DataError, PlanFormatError
from modulo.types import Problem

from .conftest import failing, hand_made_problem

CRITICS = [f() for f in CALENDAR_CRITICS]


def test_constraints_agree_with_the_count_fields(calendar_raw: dict[str, Any]) -> None:
    assert len(calendar_raw) == 100
    for key, item in calendar_raw.items():
        c = cal.parse_calendar_constraints(item["prompt_0shot"])
        assert cal.parse_calendar_constraints(item["prompt_5shot"]) == c, key
        assert len(c["participants"]) == int(item["num_people"]), key
        assert len(c["days"]) == int(item["num_days"]), key
        assert c["duration"] == round(float(item["duration"]) * 60), key
        assert (c["work_start"], c["work_end"]) == (540, 1020), key


def test_every_gold_slot_is_feasible_and_passes_every_critic(
    calendar: CalendarScheduling, calendar_subset: list[Problem]
) -> None:
    several = earliest_is_gold = ambiguous = 0
    for p in calendar_subset:
        gold = p.metadata["gold_plan"]
        day, start, end = cal.slot_of(gold)
        assert cal.slot_issues(day, start, end, p.constraints) == [], p.id
        assert failing(p, gold, CRITICS) == {}, p.id
        slots = cal.feasible_slots(p.constraints)
        assert (day, start, end) in slots
        several += len(slots) > 1
        earliest_is_gold += cal.earliest_slot(p.constraints) == (day, start, end)
        ambiguous += len(slots) > 1 and not p.constraints["earliest"]
    assert (several, earliest_is_gold, ambiguous) == (36, 91, 18)


def test_replay_official_56_valid_63(
    calendar: CalendarScheduling, calendar_subset: list[Problem], calendar_raw: Any
) -> None:
    result = calendar.evaluate(calendar_subset, [calendar_raw[p.id]["pred_5shot_pro"] for p in calendar_subset])
    assert sum(r["official"] for r in result.per_problem) == 56
    assert sum(r["valid"] for r in result.per_problem) == 63
    assert result.metrics["valid"] == pytest.approx(0.63)
    assert all(r["valid"] for r in result.per_problem if r["official"])
    cells = {row["cell"]: row["n"] for row in result.tables["cells"]}
    assert len(cells) == 10 and sum(cells.values()) == 100
    assert "num_people=2 num_days=1" in cells


# -- hand-made instance --------------------------------------------------------------------------------

PROMPT = (
    "You are an expert at scheduling meetings. Here are a few example tasks and solutions:\n\n"
    "TASK: You need to schedule a meeting for Jeffrey, Ann and Harold for half an hour between the work hours of "
    "9:00 to 17:00 on either Monday or Tuesday. \n\n"
    "Here are the existing schedules for everyone during the days: \n"
    "Jeffrey is free the entire week.\n"
    "Ann's calendar is wide open the entire week.\n"
    "Harold has blocked their calendar on Monday during 9:00 to 10:00, 10:30 to 17:00, Tuesday during 9:00 to 9:30, "
    "10:30 to 11:30, 12:30 to 13:30, 14:30 to 15:30, 16:00 to 17:00; \n\n"
    "Harold would like to avoid more meetings on Monday. Tuesday before 14:30. "
    "The group would like to meet at their earlist availability.\n"
    "Find a time that works for everyone's schedule and constraints. \nSOLUTION: "
)


problem = hand_made_problem("natural_plan/calendar", PROMPT, cal.parse_calendar_constraints)


def _failing(problem: Problem, text: str) -> dict[str, str]:
    return failing(problem, cal.parse_calendar(text), CRITICS)


def test_parsed_constraints(problem: Problem) -> None:
    c = problem.constraints
    assert c["participants"] == ["Jeffrey", "Ann", "Harold"]
    assert c["days"] == ["Monday", "Tuesday"] and c["duration"] == 30
    assert c["busy"]["Jeffrey"] == {} and c["busy"]["Harold"]["Monday"] == [[540, 600], [630, 1020]]
    assert [(p["day"], p["kind"], p["time"]) for p in c["preferences"]] == [
        ("Monday", "day", None),
        ("Tuesday", "before", 870),
    ]
    assert c["preferences"][1]["text"] == "Harold would like to avoid more meetings on Monday. Tuesday before 14:30."
    assert c["earliest"]
    assert cal.earliest_slot(c) == ("Tuesday", 930, 960)


def test_good_slot_passes(problem: Problem) -> None:
    assert _failing(problem, "Here is the proposed time: Tuesday, 15:30 - 16:00 ") == {}


def test_each_critic_quotes_what_breaks(problem: Problem) -> None:
    busy = _failing(problem, "Tuesday, 16:00 - 16:30")
    assert "overlaps Harold's busy time Tuesday 16:00 to 17:00" in busy["calendar_busy"]
    assert "Harold has blocked their calendar" in busy["calendar_busy"]
    pref = _failing(problem, "Tuesday, 11:30 - 12:00")
    assert '"Harold would like to avoid more meetings on Monday. Tuesday before 14:30."' in pref["calendar_preferences"]
    assert "earlist availability" in pref["calendar_earliest"]
    day = _failing(problem, "Wednesday, 15:30 - 16:00")
    assert "must be on Monday or Tuesday" in day["calendar_work_hours"]
    hours = _failing(problem, "Tuesday, 16:30 - 17:30")
    assert "not within the work hours of 9:00 to 17:00" in hours["calendar_work_hours"]
    long = _failing(problem, "Tuesday, 15:30 - 16:30")
    assert "lasts 60 minutes, but the meeting must last 30 minutes" in long["calendar_duration"]


def test_earliest_hint_names_the_earliest_slot(problem: Problem) -> None:
    c = problem.constraints
    plan = cal.parse_calendar("Tuesday, 13:30 - 14:00")
    v = next(k for k in CRITICS if k.name == "calendar_earliest")(problem, plan)
    assert not v.passed and v.hint is None  # constructive hints are opt-in
    v = calendar_earliest(feedback="hint")(problem, plan)
    assert not v.passed and v.hint == "The earliest time that fits everything is Tuesday, 15:30 - 16:00."
    no_earliest = dict(c, earliest=False, earliest_text=None)
    p2 = problem.model_copy(update={"constraints": no_earliest})
    v2 = next(k for k in CRITICS if k.name == "calendar_earliest")(p2, plan)
    assert v2.passed and not v2.applicable


def test_official_reads_the_first_slot_and_rounds_minutes() -> None:
    assert cal.official_slot("SOLUTION: Monday, 9:30 - 10:00 or Tuesday, 9:00 - 9:30") == ("Monday", 9.5, 10.0)
    # any minutes other than :30 count as :00
    assert cal.official_solved("Monday, 14:45 - 15:15", "Here is the proposed time: Monday, 14:00 - 15:00 ")
    assert not cal.official_solved("no time", "Monday, 14:00 - 15:00")
    assert cal.official_slot("nothing") == ("", -1.0, -1.0)


def test_parser() -> None:
    assert cal.parse_calendar("Here is the proposed time: Monday, 09:30 - 10:00 ") == {
        "day": "Monday",
        "start": "9:30",
        "end": "10:00",
    }
    with pytest.raises(PlanFormatError, match="weekday"):
        cal.parse_calendar("Proposed time, 9:30 - 10:00")
    with pytest.raises(PlanFormatError, match="valid clock time"):
        cal.parse_calendar("Monday, 9:75 - 10:00")
    with pytest.raises(PlanFormatError, match="no proposed time"):
        cal.parse_calendar("Let us meet next week.")
    assert cal.render_calendar({"day": "Monday", "start": "14:30", "end": "15:00"}) == (
        "Here is the proposed time: Monday, 14:30 - 15:00 "
    )


def test_bad_prompt_is_a_data_error() -> None:
    with pytest.raises(DataError, match="unrecognised sentence"):
        cal.parse_calendar_constraints(PROMPT.replace("Harold would like to avoid", "Harold hopes to skip"))
    with pytest.raises(DataError, match="names none of"):
        cal.parse_calendar_constraints(PROMPT.replace("Jeffrey is free", "Zoe is free"))


def test_prove_unsolvable(calendar: CalendarScheduling, calendar_subset: list[Problem], problem: Problem) -> None:
    assert all(calendar.prove_unsolvable(p) is None for p in calendar_subset)
    blocked = PROMPT.replace("Jeffrey is free the entire week.", "Jeffrey is busy on Tuesday during 15:30 to 17:00;")
    p = Problem(
        id="u", benchmark="natural_plan/calendar", query=blocked, constraints=cal.parse_calendar_constraints(blocked)
    )
    reason = calendar.prove_unsolvable(p)
    assert reason is not None and "No 30-minute slot on Monday, Tuesday" in reason
