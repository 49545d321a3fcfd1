"""Critics of Meeting Planning plans, all built on one sound simulation of the day.

Each critic reports the problems of its own kind, quoting the step and the query sentence. The
optimality critic compares the number of people the plan meets with the exact maximum.

Options (the run's ``critic_options``): ``mode="strict"`` (default) checks every written number;
``mode="official"`` reads the plan as the official script does (written minutes and times are not
checked, each meeting lasts exactly the required minimum). At the feedback level ``hint`` the
optimality critic can name an order of friends that reaches the maximum.
"""

from __future__ import annotations

from modulo.critic import CriticFactory, critic
from modulo.types import PlanJSON, Problem, Verdict

from .meeting import IssueKind, max_meetings, simulate

MEETING = ("natural_plan/meeting",)
_MAX_LISTED = 4


def _official(mode: str) -> bool:
    if mode not in ("strict", "official"):
        raise ValueError(f"mode must be 'strict' or 'official', not {mode!r}")
    return mode == "official"


def _verdict(problem: Problem, plan: PlanJSON, kind: IssueKind, lead: str, mode: str) -> Verdict:
    sim = simulate(plan, problem.constraints, official=_official(mode))
    issues = [i for i in sim.issues if i.kind == kind]
    if not issues:
        if sim.stopped:
            return Verdict.ok("the plan could only be checked up to an unknown place")
        return Verdict.ok()
    shown = [i.message for i in issues[:_MAX_LISTED]]
    more = len(issues) - len(shown)
    text = lead + " " + "; ".join(shown) + (f"; and {more} more" if more > 0 else "") + "."
    return Verdict.fail(text, steps=[i.step + 1 for i in issues], first=issues[0].details)


def _issue_critic(name: str, kind: IssueKind, group: str, priority: int, description: str, lead: str) -> CriticFactory:
    """The critic reporting the simulation's issues of one ``kind``, after the sentence ``lead``."""

    def check(problem: Problem, plan: PlanJSON, *, mode: str = "strict") -> Verdict:
        return _verdict(problem, plan, kind, lead, mode)

    check.__name__ = check.__qualname__ = name
    check.__doc__ = description
    return critic(name, group=group, benchmarks=MEETING, priority=priority, description=description, options=("mode",))(
        check
    )


_SPECS: list[tuple[str, IssueKind, str, int, str, str]] = [
    # name, issue kind, group, priority, description, the feedback's first sentence
    ("meeting_travel_times", "travel", "commonsense", 10,
     "every travel step takes the listed travel time and arrives when that time says",
     "Travel times must come from the travel-time list:"),
    ("meeting_time_forward", "forward", "commonsense", 20,
     "time only moves forward: waits go to a later time and meetings start when you are free",
     "Time must only move forward, and each meeting starts when the previous step ends (wait first to start later):"),
    ("meeting_location", "location", "commonsense", 30,
     "the day starts at the arrival place; each friend is met at their place; places and friends exist",
     "Each meeting must happen where that friend is:"),
    ("meeting_window", "window", "hard", 40, "each meeting lies inside the friend's availability window",
     "Each meeting must lie inside the time the friend is there:"),
    ("meeting_duration", "duration", "hard", 50,
     "each meeting lasts at least the required minutes, and its times add up",
     "Each meeting must last at least the minimum the query asks for:"),
    ("meeting_once", "once", "commonsense", 60, "nobody is met twice",
     "Each friend counts once, so meet nobody twice:"),
]  # fmt: skip
_ISSUE_CRITICS = {spec[0]: _issue_critic(*spec) for spec in _SPECS}

meeting_travel_times = _ISSUE_CRITICS["meeting_travel_times"]
meeting_time_forward = _ISSUE_CRITICS["meeting_time_forward"]
meeting_location = _ISSUE_CRITICS["meeting_location"]
meeting_window = _ISSUE_CRITICS["meeting_window"]
meeting_duration = _ISSUE_CRITICS["meeting_duration"]
meeting_once = _ISSUE_CRITICS["meeting_once"]


@critic(
    "meeting_optimal",
    group="hard",
    benchmarks=MEETING,
    priority=70,
    description="the plan meets as many friends as can possibly be met (exact maximum by dynamic programming)",
    options=("mode", "hints"),
)
def meeting_optimal(problem: Problem, plan: PlanJSON, *, mode: str = "strict", hints: bool = False) -> Verdict:
    """At feedback level ``hint`` it adds one order of friends that reaches the maximum (exact search)."""
    best = max_meetings(problem.constraints)
    met = simulate(plan, problem.constraints, official=_official(mode)).met
    if len(met) >= best.count:
        return Verdict.ok(max_people=best.count, met=len(met))
    names = ", ".join(met) if met else "nobody"
    return Verdict.fail(
        f"The goal is to meet as many friends as possible: {best.count} of the "
        f"{len(problem.constraints['people'])} friends can be met within their windows and minimum times, "
        f"but your plan meets only {len(met)} ({names}).",
        hint=("One order that works: " + ", then ".join(best.order) + ".") if hints else None,
        max_people=best.count,
        met=len(met),
        order=list(best.order),
    )


MEETING_CRITICS = (
    meeting_travel_times,
    meeting_time_forward,
    meeting_location,
    meeting_window,
    meeting_duration,
    meeting_once,
    meeting_optimal,
)
