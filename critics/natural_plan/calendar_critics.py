"""Critics of Calendar Scheduling plans (one proposed slot), read from the parsed prompt only."""

from __future__ import annotations

from typing import Literal

from modulo.critic import CriticFactory, critic
from modulo.types import PlanJSON, Problem, Verdict

from .calendar import earliest_slot, slot_issues, slot_of
from .common import minutes_to_hhmm

CALENDAR = ("natural_plan/calendar",)


SlotIssue = Literal["work_hours", "duration", "busy", "preferences"]


def _verdict(problem: Problem, plan: PlanJSON, kind: SlotIssue, lead: str) -> Verdict:
    day, start, end = slot_of(plan)
    issues = [i.message for i in slot_issues(day, start, end, problem.constraints) if i.kind == kind]
    if not issues:
        return Verdict.ok()
    return Verdict.fail(lead + " " + "; ".join(issues) + ".", count=len(issues))


def _slot_critic(name: str, kind: SlotIssue, priority: int, description: str, lead: str) -> CriticFactory:
    """The critic reporting the slot's issues of one ``kind``, after ``lead`` (``{task}``: the query's task)."""

    def check(problem: Problem, plan: PlanJSON) -> Verdict:
        said = lead.format(task=problem.constraints["task_text"]) if "{task}" in lead else lead
        return _verdict(problem, plan, kind, said)

    check.__name__ = check.__qualname__ = name
    check.__doc__ = description
    return critic(name, group="hard", benchmarks=CALENDAR, priority=priority, description=description)(check)


_TASK = 'The query says "{task}", but'
calendar_work_hours = _slot_critic(
    "calendar_work_hours", "work_hours", 10, "the slot is on one of the allowed days and within the work hours", _TASK
)
calendar_duration = _slot_critic(
    "calendar_duration", "duration", 20, "the slot lasts exactly the meeting duration", _TASK
)
calendar_busy = _slot_critic(
    "calendar_busy",
    "busy",
    30,
    "no participant is busy during the slot (a slot may start when a busy block ends)",
    "Everyone must be free for the whole meeting:",
)


@critic(
    "calendar_preferences",
    group="hard",
    benchmarks=CALENDAR,
    priority=40,
    description="the slot respects every stated day and time preference",
)
def calendar_preferences(problem: Problem, plan: PlanJSON) -> Verdict:
    if not problem.constraints["preferences"]:
        return Verdict.not_applicable("the query states no day or time preference")
    return _verdict(problem, plan, "preferences", "The slot must respect the stated preferences:")


@critic(
    "calendar_earliest",
    group="hard",
    benchmarks=CALENDAR,
    priority=50,
    description="when the query asks for the earliest availability, the slot is the earliest that fits",
    options=("hints",),
)
def calendar_earliest(problem: Problem, plan: PlanJSON, *, hints: bool = False) -> Verdict:
    """At feedback level ``hint`` (``hints=True``) it names the earliest slot that fits."""
    c = problem.constraints
    if not c["earliest"]:
        return Verdict.not_applicable("the query does not ask for the earliest availability")
    best = earliest_slot(c)
    day, start, end = slot_of(plan)
    if best is None or (day, start, end) == best:
        return Verdict.ok()
    bday, bstart, bend = best
    said = f"{day}, {minutes_to_hhmm(start)} - {minutes_to_hhmm(end)}"
    if slot_issues(day, start, end, c):
        why = "it does not fit every constraint, and the earliest time that does is another one"
    else:
        why = "an earlier time also works for everyone and meets every constraint"
    return Verdict.fail(
        f'The query says "{c["earliest_text"]}", but {said} is not the earliest availability: {why}.',
        hint=(
            f"The earliest time that fits everything is {bday}, {minutes_to_hhmm(bstart)} - {minutes_to_hhmm(bend)}."
            if hints
            else None
        ),
        earliest={"day": bday, "start": minutes_to_hhmm(bstart), "end": minutes_to_hhmm(bend)},
    )


CALENDAR_CRITICS = (
    calendar_work_hours,
    calendar_duration,
    calendar_busy,
    calendar_preferences,
    calendar_earliest,
)
