"""Critics of Meeting Planning plans, all built on one sound simulation of the day.

Each critic reports the problems of its own kind, quoting the step and the query sentence. The
optimality critic compares the number of people the plan meets with the exact maximum.

Options (the run's ``critic_options``): ``mode="strict"`` (default) checks every written number;
``mode="official"`` reads the plan as the official script does (written minutes and times are not
checked, each meeting lasts exactly the required minimum). At the feedback level ``hint`` the
optimality critic can name an order of friends that reaches the maximum.
"""

from __future__ import annotations

from modulo.critic import critic
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


@critic(
    "meeting_travel_times",
    group="commonsense",
    benchmarks=MEETING,
    priority=10,
    description="every travel step takes the listed travel time and arrives when that time says",
    options=("mode",),
)
def meeting_travel_times(problem: Problem, plan: PlanJSON, *, mode: str = "strict") -> Verdict:
    return _verdict(problem, plan, "travel", "Travel times must come from the travel-time list:", mode)


@critic(
    "meeting_time_forward",
    group="commonsense",
    benchmarks=MEETING,
    priority=20,
    description="time only moves forward: waits go to a later time and meetings start when you are free",
    options=("mode",),
)
def meeting_time_forward(problem: Problem, plan: PlanJSON, *, mode: str = "strict") -> Verdict:
    return _verdict(
        problem,
        plan,
        "forward",
        "Time must only move forward, and each meeting starts when the previous step ends (wait first to start later):",
        mode,
    )


@critic(
    "meeting_location",
    group="commonsense",
    benchmarks=MEETING,
    priority=30,
    description="the day starts at the arrival place; each friend is met at their place; places and friends exist",
    options=("mode",),
)
def meeting_location(problem: Problem, plan: PlanJSON, *, mode: str = "strict") -> Verdict:
    return _verdict(problem, plan, "location", "Each meeting must happen where that friend is:", mode)


@critic(
    "meeting_window",
    group="hard",
    benchmarks=MEETING,
    priority=40,
    description="each meeting lies inside the friend's availability window",
    options=("mode",),
)
def meeting_window(problem: Problem, plan: PlanJSON, *, mode: str = "strict") -> Verdict:
    return _verdict(problem, plan, "window", "Each meeting must lie inside the time the friend is there:", mode)


@critic(
    "meeting_duration",
    group="hard",
    benchmarks=MEETING,
    priority=50,
    description="each meeting lasts at least the required minutes, and its times add up",
    options=("mode",),
)
def meeting_duration(problem: Problem, plan: PlanJSON, *, mode: str = "strict") -> Verdict:
    return _verdict(problem, plan, "duration", "Each meeting must last at least the minimum the query asks for:", mode)


@critic(
    "meeting_once",
    group="commonsense",
    benchmarks=MEETING,
    priority=60,
    description="nobody is met twice",
    options=("mode",),
)
def meeting_once(problem: Problem, plan: PlanJSON, *, mode: str = "strict") -> Verdict:
    return _verdict(problem, plan, "once", "Each friend counts once, so meet nobody twice:", mode)


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
