"""Critics of Trip Planning plans. They read ``problem.constraints`` (parsed from the prompt) only.

Each feedback quotes the query sentence it enforces and the part of the plan that breaks it.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable
from typing import Any

from modulo.critic import CheckFn, CriticFactory, critic
from modulo.types import PlanJSON, Problem, Verdict

from .trip import stays_of

TRIP = ("natural_plan/trip",)


def _trip(name: str, group: str, priority: int, description: str, **options: Any) -> Callable[[CheckFn], CriticFactory]:
    """``@critic`` for a Trip Planning critic."""
    return critic(name, group=group, benchmarks=TRIP, priority=priority, description=description, **options)


def _span(start: int, end: int) -> str:
    return f"day {start}" if start == end else f"day {start} to day {end}"


def _verdict(issues: list[str], before: str, after: str, *, hint: str | None = None, **details: Any) -> Verdict:
    """Pass when there is no issue; else fail with ``before``, the issues joined by "; ", then ``after``."""
    if not issues:
        return Verdict.ok()
    return Verdict.fail(before + "; ".join(issues) + after, hint=hint, **details)


@_trip(
    "trip_each_city_once", "commonsense", 10, "the trip visits every city of the query exactly once and no other city"
)
def trip_each_city_once(problem: Problem, plan: PlanJSON) -> Verdict:
    required: dict[str, int] = problem.constraints["stays"]
    stays = stays_of(plan)
    seen = Counter(city for city, _, _ in stays)
    issues: list[str] = []
    for city, n in seen.items():
        if n > 1:
            spans = ", ".join(_span(s, e) for c, s, e in stays if c == city)
            issues.append(f"it visits {city} {n} times ({spans})")
    extra = [city for city in seen if city not in required]
    if extra:
        issues.append(f"{', '.join(extra)} {'is' if len(extra) == 1 else 'are'} not among the cities of the query")
    missing = [city for city in required if city not in seen]
    if missing:
        issues.append(f"it never visits {', '.join(missing)}")
    if not issues:
        return Verdict.ok()
    names = ", ".join(required)
    return Verdict.fail(
        f"The trip must visit each of the {len(required)} cities of the query ({names}) exactly once, "
        f"but your plan does not: {'; '.join(issues)}.",
        repeated=[c for c, n in seen.items() if n > 1],
        extra=extra,
        missing=missing,
    )


@_trip("trip_total_days", "hard", 20, "the trip starts on day 1 and ends on the last day of the stated total")
def trip_total_days(problem: Problem, plan: PlanJSON) -> Verdict:
    total: int = problem.constraints["total_days"]
    quote = problem.constraints["total_text"]
    stays = stays_of(plan)
    first, last = stays[0], stays[-1]
    issues = []
    if first[1] != 1:
        issues.append(f"it starts on day {first[1]} (in {first[0]}) instead of day 1")
    if last[2] != total:
        issues.append(f"it ends on day {last[2]} (in {last[0]}) instead of day {total}")
    if not issues:
        return Verdict.ok()
    return Verdict.fail(
        f'The query says "{quote}", so the plan must run from day 1 to day {total}, but {" and ".join(issues)}.',
        first_day=first[1],
        last_day=last[2],
        total_days=total,
    )


@_trip(
    "trip_flight_days",
    "commonsense",
    30,
    "each stay starts on the day the previous one ends (the flight day counts for both cities)",
)
def trip_flight_days(problem: Problem, plan: PlanJSON) -> Verdict:
    stays = stays_of(plan)
    issues = []
    bad: list[dict[str, Any]] = []
    for (c1, _, e1), (c2, s2, _) in itertools.pairwise(stays):
        if s2 != e1:
            gap = "leaving days unaccounted for" if s2 > e1 else "so the two stays overlap"
            issues.append(
                f"you are in {c1} until day {e1} but in {c2} from day {s2} ({gap}); "
                f"flying from {c1} to {c2} on day {e1} means the stay in {c2} starts on day {e1}"
            )
            bad.append({"from": c1, "to": c2, "end_day": e1, "start_day": s2})
    return _verdict(
        issues,
        "You fly to the next city on the last day of a stay, and that flight day counts for both cities, but ",
        ".",
        hops=bad,
    )


@_trip(
    "trip_stay_lengths",
    "hard",
    40,
    "each city is stayed in for the number of days the query asks (flight days count for both)",
    options=("hints",),
)
def trip_stay_lengths(problem: Problem, plan: PlanJSON, *, hints: bool = False) -> Verdict:
    """At feedback level ``hint`` it adds the day arithmetic of a stay."""
    required: dict[str, int] = problem.constraints["stays"]
    texts: dict[str, str] = problem.constraints["stay_texts"]
    issues = []
    bad: list[dict[str, Any]] = []
    for city, start, end in stays_of(plan):
        want = required.get(city)
        if want is None:
            continue
        have = end - start + 1
        if have != want:
            issues.append(
                f'the query says "{texts[city]}" but your plan stays in {city} from day {start} to day {end}, '
                f"which is {have} day{'s' if have != 1 else ''}"
            )
            bad.append({"city": city, "required": want, "planned": have, "start_day": start, "end_day": end})
    return _verdict(
        issues,
        "Wrong stay length: ",
        " (a flight day counts for both cities).",
        hint="A stay of N days from day a ends on day a + N - 1, and the next stay starts on that same day."
        if hints
        else None,
        stays=bad,
    )


@_trip(
    "trip_direct_flights",
    "hard",
    50,
    "every hop between consecutive cities is a listed direct flight, in the listed direction",
)
def trip_direct_flights(problem: Problem, plan: PlanJSON) -> Verdict:
    flights = {(a, b) for a, b in problem.constraints["flights"]}
    stays = stays_of(plan)
    issues = []
    bad: list[dict[str, Any]] = []
    for (c1, _, e1), (c2, _, _) in itertools.pairwise(stays):
        if c1 == c2 or (c1, c2) in flights:
            continue
        if (c2, c1) in flights:
            issues.append(
                f'your plan flies from {c1} to {c2} on day {e1}, but the list only has "from {c2} to {c1}" (one way)'
            )
        else:
            issues.append(f"your plan flies from {c1} to {c2} on day {e1}, but there is no direct flight between them")
        bad.append({"from": c1, "to": c2, "day": e1})
    return _verdict(
        issues,
        'The query says "You only take direct flights to commute between cities." and lists the direct flights; ',
        ".",
        hops=bad,
    )


@_trip("trip_event_windows", "hard", 60, "each fixed-day event lies inside the stay in its city")
def trip_event_windows(problem: Problem, plan: PlanJSON) -> Verdict:
    events: list[dict[str, Any]] = problem.constraints["events"]
    if not events:
        return Verdict.not_applicable("the query fixes no event to given days")
    stays = stays_of(plan)
    issues = []
    bad: list[dict[str, Any]] = []
    for ev in events:
        city, a, b = ev["city"], ev["start_day"], ev["end_day"]
        spans = [(s, e) for c, s, e in stays if c == city]
        if any(s <= a and b <= e for s, e in spans):
            continue
        if spans:
            where = " and ".join(_span(s, e) for s, e in spans)
            issues.append(f'the query says "{ev["text"]}" but your plan is in {city} only from {where}')
        else:
            issues.append(f'the query says "{ev["text"]}" but your plan never visits {city}')
        bad.append({"city": city, "start_day": a, "end_day": b, "kind": ev["kind"]})
    return _verdict(
        issues,
        "An event falls outside the stay in its city: ",
        ". The whole window of each event must lie inside the stay in its city.",
        events=bad,
    )


TRIP_CRITICS = (
    trip_each_city_once,
    trip_total_days,
    trip_flight_days,
    trip_stay_lengths,
    trip_direct_flights,
    trip_event_windows,
)
