"""Meeting Planning: text constraints vs structured fields, the exact optimum, critics, official replay."""

from __future__ import annotations

from typing import Any

import pytest

from critics.natural_plan import meeting as mtg
from critics.natural_plan.benchmark import MeetingPlanning
from critics.natural_plan.meeting_critics import MEETING_CRITICS, meeting_optimal
from modulo.errors import CriticError, DataError, PlanFormatError
from modulo.types import Problem

from .conftest import failing, hand_made_problem

CRITICS = [f() for f in MEETING_CRITICS]


def _key(c: dict[str, Any]) -> tuple[Any, ...]:
    people = sorted((p["name"], p["location"], p["start"], p["end"], p["min_minutes"]) for p in c["people"])
    return c["start_location"], c["start_time"], people, c["distances"]


def test_text_constraints_agree_with_structured_fields(meeting_raw: dict[str, Any]) -> None:
    assert len(meeting_raw) == 100
    for key, item in meeting_raw.items():
        parsed = mtg.parse_meeting_constraints(item["prompt_0shot"])
        assert _key(parsed) == _key(mtg.constraints_from_fields(item)), key
        assert mtg.parse_meeting_constraints(item["prompt_5shot"]) == parsed, key
        assert len(parsed["people"]) == item["num_people"], key


def test_optimum_equals_gold_count_on_all_100(meeting: MeetingPlanning, meeting_subset: list[Problem]) -> None:
    for p in meeting_subset:
        best = mtg.max_meetings(p.constraints)
        assert best.count == p.metadata["gold_count"], p.id
        # the witness order is itself feasible: replaying it meets that many people
        assert len(set(best.order)) == best.count


def test_every_gold_plan_passes_every_critic(meeting: MeetingPlanning, meeting_subset: list[Problem]) -> None:
    for p in meeting_subset:
        gold = p.metadata["gold_plan"]
        assert meeting.validate_plan(gold) == gold
        assert failing(p, gold, CRITICS) == {}, p.id


def test_replay_official_38(meeting: MeetingPlanning, meeting_subset: list[Problem], meeting_raw: Any) -> None:
    result = meeting.evaluate(meeting_subset, [meeting_raw[p.id]["pred_5shot_pro"] for p in meeting_subset])
    assert sum(r["official"] for r in result.per_problem) == 38
    valid = {r["problem_id"] for r in result.per_problem if r["valid"]}
    official = {r["problem_id"] for r in result.per_problem if r["official"]}
    assert len(valid) == 32
    assert valid <= official  # the sound reading is stricter than the official one here
    assert sum(r["n"] for r in result.tables["cells"]) == 100


def test_golden_step_lists_score_as_the_gold(meeting: MeetingPlanning, meeting_subset: list[Problem]) -> None:
    """``--predictions golden_plan``: each answer is a list of step sentences, the format the official script
    scores the gold in; it is read as those sentences, not refused as a plan JSON."""
    result = meeting.evaluate(meeting_subset, [list(p.metadata["gold"]) for p in meeting_subset])
    assert sum(r["official"] for r in result.per_problem) == 100
    assert sum(r["valid"] for r in result.per_problem) == 100


def test_rendered_gold_scores_like_gold(meeting: MeetingPlanning, meeting_subset: list[Problem]) -> None:
    for p in meeting_subset:
        assert meeting.official_solved(p, meeting.render(p.metadata["gold_plan"]))


# -- hand-made instance --------------------------------------------------------------------------------

PROMPT = (
    "You are visiting San Francisco for the day and want to meet as many friends as possible. Solve the problem "
    "by considering various different schedules and picking the best one to optimize your goals.\n\n"
    "Travel distances (in minutes):\nNob Hill to Marina District: 11.\nNob Hill to Bayview: 19.\n"
    "Marina District to Nob Hill: 12.\nMarina District to Bayview: 27.\nBayview to Nob Hill: 20.\n"
    "Bayview to Marina District: 25.\n\n"
    "CONSTRAINTS: You arrive at Nob Hill at 9:00AM. Kenneth will be at Marina District from 2:15PM to 7:45PM. "
    "You'd like to meet Kenneth for a minimum of 90 minutes. Ann will be at Bayview from 9:00AM to 10:00AM. "
    "You'd like to meet Ann for a minimum of 30 minutes.\n\nYour response should start with 'SOLUTION:'."
)
GOOD = (
    "SOLUTION: You start at Nob Hill at 9:00AM. You travel to Bayview in 19 minutes and arrive at 9:19AM. "
    "You meet Ann for 30 minutes from 9:19AM to 9:49AM. You travel to Marina District in 25 minutes and arrive "
    "at 10:14AM. You wait until 2:15PM. You meet Kenneth for 90 minutes from 2:15PM to 3:45PM."
)


problem = hand_made_problem("natural_plan/meeting", PROMPT, mtg.parse_meeting_constraints, gold_count=2)


def _failing(problem: Problem, text: str) -> dict[str, str]:
    return failing(problem, mtg.parse_meeting(text), CRITICS)


def test_good_plan_passes(problem: Problem) -> None:
    assert _failing(problem, GOOD) == {}
    assert mtg.official_score(mtg.solution_steps(GOOD), problem.constraints).score == 2


def test_wrong_travel_time_quotes_the_matrix(problem: Problem) -> None:
    bad = GOOD.replace("Bayview in 19 minutes and arrive at 9:19AM", "Bayview in 15 minutes and arrive at 9:15AM")
    failing = _failing(problem, bad)
    assert '"Nob Hill to Bayview: 19."' in failing["meeting_travel_times"]
    # at the explain level the critic says what is wrong, never the corrected time
    assert "travelling 19 minutes, you do not arrive at 9:15AM" in failing["meeting_travel_times"]
    assert "9:19AM" not in failing["meeting_travel_times"]
    assert "meeting_time_forward" not in failing  # the clock follows the matrix: the meeting starts at 9:19AM
    # the official script ignores written minutes and still counts both meetings
    assert mtg.official_score(mtg.solution_steps(bad), problem.constraints).score == 2


def test_waiting_backwards_and_missing_wait(problem: Problem) -> None:
    back = GOOD.replace("You wait until 2:15PM.", "You wait until 10:00AM. You wait until 2:15PM.")
    assert "does not move time forward" in _failing(problem, back)["meeting_time_forward"]
    no_wait = GOOD.replace(" You wait until 2:15PM.", "")
    failing = _failing(problem, no_wait)
    assert "add 'You wait until 2:15PM.' before it" in failing["meeting_time_forward"]
    assert mtg.official_score(mtg.solution_steps(no_wait), problem.constraints).score == 1


def test_a_longer_meeting_then_no_wait_is_what_the_official_score_rejects() -> None:
    """The official script advances its clock by each meeting's minimum only: after a meeting longer than
    its minimum, a meeting whose window opens between its clock and the plan's needs a wait first."""
    prompt = PROMPT.replace("from 2:15PM to 7:45PM", "from 10:20AM to 7:45PM")
    p = Problem(
        id="hand-made",
        benchmark="natural_plan/meeting",
        query=prompt,
        constraints=mtg.parse_meeting_constraints(prompt),
        metadata={"gold_count": 2},
    )
    long_first = (
        "SOLUTION: You start at Nob Hill at 9:00AM. You travel to Bayview in 19 minutes and arrive at 9:19AM. "
        "You meet Ann for 41 minutes from 9:19AM to 10:00AM. You travel to Marina District in 25 minutes and "
        "arrive at 10:25AM. You meet Kenneth for 90 minutes from 10:25AM to 11:55AM."
    )
    assert mtg.official_score(mtg.solution_steps(long_first), p.constraints).score == 1
    assert not MeetingPlanning().official_solved(p, long_first)
    failing_now = _failing(p, long_first)
    assert list(failing_now) == ["meeting_time_forward"]
    assert "by its clock it is 10:14AM here" in failing_now["meeting_time_forward"]
    waited = long_first.replace(
        "You meet Kenneth for 90 minutes from 10:25AM to 11:55AM.",
        "You wait until 10:30AM. You meet Kenneth for 90 minutes from 10:30AM to 12:00PM.",
    )
    assert _failing(p, waited) == {}
    assert MeetingPlanning().official_solved(p, waited)


def test_window_duration_location_once(problem: Problem) -> None:
    late = GOOD.replace(
        "You wait until 2:15PM. You meet Kenneth for 90 minutes from 2:15PM to 3:45PM.",
        "You wait until 7:00PM. You meet Kenneth for 90 minutes from 7:00PM to 8:30PM.",
    )
    assert '"Kenneth will be at Marina District from 2:15PM to 7:45PM."' in _failing(problem, late)["meeting_window"]
    short = GOOD.replace("Kenneth for 90 minutes from 2:15PM to 3:45PM", "Kenneth for 60 minutes from 2:15PM to 3:15PM")
    assert '"You\'d like to meet Kenneth for a minimum of 90 minutes."' in _failing(problem, short)["meeting_duration"]
    wrong_place = GOOD.replace("You travel to Marina District in 25 minutes and arrive at 10:14AM. ", "")
    failing = _failing(problem, wrong_place)
    assert "happens at Bayview" in failing["meeting_location"]
    twice = GOOD + " You meet Kenneth for 90 minutes from 3:45PM to 5:15PM."
    assert "meets Kenneth a second time" in _failing(problem, twice)["meeting_once"]


def test_optimality_critic_counts_and_hints(problem: Problem) -> None:
    one = GOOD.split(" You travel to Marina")[0]
    plan = mtg.parse_meeting(one)
    v = next(c for c in CRITICS if c.name == "meeting_optimal")(problem, plan)
    assert not v.passed
    assert "2 of the 2 friends can be met" in v.feedback and "meets only 1 (Ann)" in v.feedback
    assert v.hint is None and v.details["max_people"] == 2
    assert meeting_optimal(feedback="hint")(problem, plan).hint == "One order that works: Ann, then Kenneth."
    assert mtg.max_meetings(problem.constraints) == mtg.Optimum(2, ("Ann", "Kenneth"))


def test_official_crash_on_unknown_place_is_unsolved(problem: Problem) -> None:
    text = GOOD.replace("You travel to Marina District", "You travel to Atlantis")
    score = mtg.official_score(mtg.solution_steps(text), problem.constraints)
    assert score.crashed and score.score == 1 and "KeyError" in (score.reason or "")
    bench = MeetingPlanning()
    assert not bench.official_solved(problem, text)
    assert bench.official_solved(problem, GOOD)
    unknown_person = GOOD.replace("meet Kenneth", "meet Zed")
    assert mtg.official_score(mtg.solution_steps(unknown_person), problem.constraints).crashed
    failing = _failing(problem, unknown_person)
    assert "Zed, who is not one of the friends" in failing["meeting_location"]


def test_parser_conventions() -> None:
    # trailing remarks after the last step are ignored, as the official script stops there anyway
    assert len(mtg.parse_meeting(GOOD + " This plan meets both friends.")["steps"]) == 6
    with pytest.raises(PlanFormatError, match="not one of the four allowed sentences"):
        mtg.parse_meeting("SOLUTION: Let us go. " + GOOD.removeprefix("SOLUTION: "))
    with pytest.raises(PlanFormatError, match="no plan found"):
        mtg.parse_meeting("I would stay home.")
    # the official reader cannot read a wait time with a space before PM: neither can the parser
    with pytest.raises(PlanFormatError):
        mtg.parse_meeting(GOOD.replace("wait until 2:15PM", "wait until 2:15 PM"))
    with pytest.raises(PlanFormatError, match="not a valid clock time"):
        mtg.parse_meeting(GOOD.replace("to 3:45PM", "to 3:65PM"))
    # times elsewhere are normalised
    plan = mtg.parse_meeting(GOOD.replace("arrive at 9:19AM", "arrive at 09:19 am"))
    assert plan["steps"][1]["arrival"] == "9:19AM"
    assert mtg.render_meeting(mtg.parse_meeting(GOOD)) == GOOD


def test_bad_prompt_is_a_data_error() -> None:
    with pytest.raises(DataError, match="Travel distances"):
        mtg.parse_meeting_constraints("Meet people.")
    with pytest.raises(DataError, match="unrecognised constraint"):
        mtg.parse_meeting_constraints(PROMPT.replace("Ann will be at", "Ann might be at"))


def test_start_step_only_first(problem: Problem) -> None:
    bench = MeetingPlanning()
    plan = mtg.parse_meeting(GOOD + " You start at Nob Hill at 9:00AM.")
    assert bench.check_format(problem, plan) == ["step 7 is a 'start' step, which may only come first"]


def test_official_mode_reads_like_the_official_script(problem: Problem) -> None:
    official = [f(mode="official") for f in MEETING_CRITICS]

    def failing(text: str) -> set[str]:
        plan = mtg.parse_meeting(text)
        return {v.critic for v in (c(problem, plan) for c in official) if not v.accepts}

    # written minutes and times are not checked in official mode, as the official script ignores them
    sloppy = GOOD.replace("in 19 minutes and arrive at 9:19AM", "in 15 minutes and arrive at 9:15AM")
    sloppy = sloppy.replace("for 90 minutes from 2:15PM to 3:45PM", "for 60 minutes from 2:15PM to 3:00PM")
    assert failing(sloppy) == set()
    assert mtg.official_score(mtg.solution_steps(sloppy), problem.constraints).score == 2
    # what the official script rejects, official mode rejects too
    assert "meeting_time_forward" in failing(GOOD.replace("You wait until 2:15PM.", "You wait until 9:00AM."))
    with pytest.raises(CriticError, match="mode must be"):
        meeting_optimal(mode="lenient")(problem, mtg.parse_meeting(GOOD))


def test_official_mode_agrees_with_the_official_score(meeting_subset: list[Problem], meeting_raw: Any) -> None:
    critics = [f(mode="official") for f in MEETING_CRITICS]
    for p in meeting_subset:
        text = meeting_raw[p.id]["pred_5shot_pro"]
        try:
            plan = mtg.parse_meeting(text)
        except PlanFormatError:
            continue
        # (the plan as read: closing remarks after the last step, where the official script stops, are left out)
        score = mtg.official_score(mtg.solution_steps(mtg.render_meeting(plan)), p.constraints)
        all_pass = all(c(p, plan).accepts for c in critics)
        # every critic passes in official mode exactly when the official script reads the whole plan
        # without an error and counts the maximum
        assert all_pass == (score.stopped_at is None and score.score == p.metadata["gold_count"]), p.id
