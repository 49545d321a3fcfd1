"""What ``modulo critics extract natural_plan/TASK`` needs: each critic's constraint in words, and gate sets
labelled from gold answers and perturbations of them.

The gate set of one constraint (one built-in critic: ``calendar_busy``, ``trip_direct_flights``, ...)
holds, for problems of the ``subset100`` split, the gold answer and perturbations of it. The labels
never come from a critic; the rule is:

* the **gold answer** is valid for every constraint of its task;
* a **perturbation** is made by an operator aimed at one stated requirement, and the operator's guard
  proves by construction that the requirement is broken (the slot is moved onto a busy block; two
  cities are swapped where the list has no direct flight for a new hop; a meeting is moved past the end
  of the friend's window): it is labelled **invalid** for that constraint;
* it is labelled **valid** for another constraint only where the construction proves that constraint
  untouched: the part of the plan the constraint reads is the gold's (trip: the same city order, the
  same stay lengths, ...), or a monotone argument holds (a slot shortened inside the gold slot still
  misses every busy block), or the query states no requirement of that kind;
* otherwise the perturbation is **left out** of that constraint's gate set: nothing is labelled that
  the construction does not prove.

Perturbations the format check refuses are left out (the format critic gates every other critic). A
plan that two operators build with contradictory labels would be a bug in this module: it raises.
"""

from __future__ import annotations

import hashlib
import itertools
import random
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from modulo.benchmark import ConstraintInfo, GateCase
from modulo.errors import ConfigError, DataError, PlanFormatError
from modulo.types import PlanJSON, Problem

from .calendar import WEEKDAYS
from .common import SPLIT_SUBSET, ampm_to_minutes, minutes_to_ampm, minutes_to_hhmm
from .trip import plan_from_sequence, stays_of

if TYPE_CHECKING:
    from .benchmark import NaturalPlanBenchmark

#: how each task's problem (``problem['constraints']``) and plan encode the requirements
NOTES: dict[str, str] = {
    "calendar": (
        "problem['constraints'] is parsed from the query: participants; duration (minutes); work_start and "
        "work_end (minutes after midnight, 540 is 9:00); days (the allowed weekdays, in order); busy {person: "
        "{day: [[start, end], ...]}} in minutes (a person is busy from start up to end: a meeting that ends "
        "exactly at start or starts exactly at end does not overlap); busy_texts {person: the query's line}; "
        "preferences: a list of {person, day, kind, time, text} where kind 'day' rules the day out, 'before' "
        "means the meeting must not start before time on that day and 'after' that it must not end after time "
        "on that day; earliest (bool: the slot must be the earliest one that fits every other constraint, days "
        "in the given order, then the earliest start) and earliest_text; task_text. The plan is {'day': weekday, "
        "'start': 'H:MM', 'end': 'H:MM'} on a 24-hour clock."
    ),
    "trip": (
        "problem['constraints'] is parsed from the query: num_cities; total_days; total_text; stays {city: "
        "days} (each city's required stay length); stay_texts; events: a list of {kind, city, start_day, "
        "end_day, text} (the whole window must lie inside the stay in that city); flights: a list of [from, to] "
        "direct flights, one pair per direction that exists ('A and B' in the query gives both directions, "
        "'from A to B' only one); flight_items (the query's items). The plan is {'stays': [{'city', 'start_day', "
        "'end_day'}, ...]} in visiting order: days are numbered from 1, a stay from start_day to end_day counts "
        "end_day - start_day + 1 days, and you fly to the next city on the day a stay ends, that day counting "
        "for both cities (the next stay's start_day is that day)."
    ),
    "meeting": (
        "problem['constraints'] is parsed from the query: start_location and start_time (where and when the day "
        "begins); start_text; people: a list of {name, location, start, end, min_minutes, text, minimum_text} "
        "(the friend is at location from start to end; meet them for at least min_minutes); distances {from: "
        "{to: minutes}} (travel times, not symmetric). Clock times are strings like '9:00AM' or '2:15PM'. The "
        "plan is {'steps': [...]}, each step one of {'action': 'start', 'location', 'time'}, {'action': "
        "'travel', 'destination', 'minutes', 'arrival'}, {'action': 'wait', 'until'}, {'action': 'meet', "
        "'person', 'minutes', 'start', 'end'}. Walk the steps with a clock that starts at start_time at "
        "start_location: travel takes distances[here][destination] minutes, a wait moves the clock to its time "
        "(a wait to a time that is not later does not move it), and a meeting starts at the clock and lasts its "
        "minutes, at the place you are at."
    ),
}

GOLD = "gold"
#: constraints with parts that different perturbations break (a preference of each kind, each side of a
#: friend's window): a gate set holds a plan of each of these origins, or a critic that ignored that part
#: would pass it
PARTS: dict[str, tuple[str, ...]] = {
    "calendar_preferences": ("against_before_preference", "against_after_preference", "against_day_preference"),
    "meeting_window": ("meeting_before_window", "meeting_past_window"),
}


@dataclass
class Variant:
    """A plan built from the gold answer, with the labels its construction proves: constraint -> (valid, why)."""

    origin: str
    plan: PlanJSON
    labels: dict[str, tuple[bool, str]] = field(default_factory=dict)

    def breaks(self, constraint: str, why: str) -> Variant:
        self.labels[constraint] = (False, f"construction ({self.origin}): {why}")
        return self

    def keeps(self, constraints: Iterable[str], why: str) -> Variant:
        for name in constraints:
            self.labels.setdefault(name, (True, f"construction ({self.origin}): {why}"))
        return self


def extraction_constraints(bench: NaturalPlanBenchmark) -> list[ConstraintInfo]:
    return [
        ConstraintInfo(name=f.name, description=f.description, notes=NOTES[bench.task], reference=f.name)
        for f in bench.critic_factories
    ]


def gate_cases(bench: NaturalPlanBenchmark, constraint: str, *, problems: int, seed: int) -> list[GateCase]:
    """Gold answers and their perturbations, labelled by construction (see the module's rule).

    ``problems`` problems of ``subset100`` (in an order fixed by a hash of the seed) that have a plan
    invalid for ``constraint``, plus up to a quarter as many met on the way that have none (a critic must
    accept every plan of those). For a constraint with several parts (:data:`PARTS`), more problems are
    added, only ones with a plan that breaks a part no plan has broken yet, until each part is broken:
    otherwise a critic that ignored that part would pass every case. A part no problem of the subset breaks
    is a ConfigError."""
    names = [f.name for f in bench.critic_factories]
    if constraint not in names:
        raise ConfigError(f"{bench.name} has no constraint {constraint!r}; its constraints: {', '.join(names)}")
    pool = sorted(bench.select(SPLIT_SUBSET), key=lambda p: hashlib.sha256(f"{seed}:{p.id}".encode()).hexdigest())
    cases: list[GateCase] = []
    relevant = others = 0
    unbroken = set(PARTS.get(constraint, ()))
    for problem in pool:
        if relevant >= problems and not unbroken:
            break
        labelled = [
            (v.origin, plan, *v.labels[constraint])
            for v, plan in labelled_variants(bench, problem, seed)
            if constraint in v.labels
        ]
        breaking = {origin for origin, _, valid, _ in labelled if not valid}
        if breaking:
            if relevant >= problems and not breaking & unbroken:
                continue
            relevant += 1
        elif labelled and others < problems // 4:
            others += 1
        else:
            continue
        unbroken -= breaking
        cases += [
            GateCase(problem=problem, plan=plan, valid=valid, origin=origin, oracle=why)
            for origin, plan, valid, why in labelled
        ]
    if unbroken:
        raise ConfigError(
            f"{bench.name}: no plan of the gate set of {constraint} (seed {seed}) is a {', '.join(sorted(unbroken))} "
            "perturbation, so a critic that ignores that part of the constraint would be admitted"
        )
    return cases


def labelled_variants(bench: NaturalPlanBenchmark, problem: Problem, seed: int) -> list[tuple[Variant, PlanJSON]]:
    """The gold answer and every perturbation of ``problem`` that passes the format check, each with its
    validated plan, one per distinct plan (labels of a plan built twice are merged; a contradiction raises)."""
    gold = problem.metadata.get("gold_plan")
    if gold is None:
        return []
    variants = [Variant(GOLD, gold).keeps([f.name for f in bench.critic_factories], "the gold answer")]
    rng = random.Random(f"natural_plan-gate:{seed}:{problem.id}")
    variants += PERTURB[bench.task](problem.constraints, gold, rng)
    out: dict[str, tuple[Variant, PlanJSON]] = {}
    for v in variants:
        try:
            plan = bench.validate_plan(v.plan)
        except PlanFormatError:
            continue
        if bench.check_format(problem, plan):
            continue
        key = repr(plan)
        if key not in out:
            out[key] = (v, plan)
            continue
        first = out[key][0]
        for name, (valid, why) in v.labels.items():
            if name in first.labels and first.labels[name][0] != valid:
                raise DataError(
                    f"{bench.name} gate set: {problem.id}: the plan {plan} is labelled both ways for {name} "
                    f"({first.labels[name][1]} / {why})"
                )
            first.labels.setdefault(name, (valid, why))
    return list(out.values())


# -- calendar --------------------------------------------------------------------------------------

_CAL = "calendar_"


def _slot(day: str, start: int, end: int) -> dict[str, Any]:
    return {"day": day, "start": minutes_to_hhmm(start), "end": minutes_to_hhmm(end)}


def calendar_variants(c: dict[str, Any], gold: PlanJSON, rng: random.Random) -> list[Variant]:
    """Slots that break one requirement of a calendar query, each labelled as its construction proves.

    Two rules hold for every perturbation: with no preference stated, ``calendar_preferences`` is valid;
    with an earliest-availability requirement, ``calendar_earliest`` is invalid for any slot but the gold
    one (the gold slot is the earliest that fits, and a different slot is either later or does not fit),
    and without one it is valid."""
    day = str(gold["day"])
    start, end = _minutes(gold["start"]), _minutes(gold["end"])
    d, ws, we, days = int(c["duration"]), int(c["work_start"]), int(c["work_end"]), list(c["days"])
    inside = f"inside the work hours {minutes_to_hhmm(ws)}-{minutes_to_hhmm(we)} on an allowed day"
    length = f"it lasts {d} minutes, as required"

    def within(s: int, e: int, on: str) -> bool:
        return on in days and ws <= s < e <= we

    out: list[Variant] = []
    # duration: a slot shortened inside the gold slot (the same day, start, and an earlier end)
    out.append(
        Variant("shortened", _slot(day, start, end - 15))
        .breaks(_CAL + "duration", f"it lasts {d - 15} minutes, the meeting must last {d}")
        .keeps(
            [_CAL + "work_hours", _CAL + "busy", _CAL + "preferences"],
            "the slot lies inside the gold slot (same day and start, earlier end), which keeps them",
        )
    )
    if end + 30 <= we:
        out.append(
            Variant("lengthened", _slot(day, start, end + 30))
            .breaks(_CAL + "duration", f"it lasts {d + 30} minutes, the meeting must last {d}")
            .keeps([_CAL + "work_hours"], inside)
        )
    # work hours: a day that is not allowed, or an hour outside the work hours
    other_days = [w for w in WEEKDAYS if w not in days]
    if other_days:
        off = other_days[0]
        out.append(
            Variant("off_day", _slot(off, start, end))
            .breaks(_CAL + "work_hours", f"{off} is not one of the allowed days {', '.join(days)}")
            .keeps([_CAL + "duration"], length)
        )
    out.append(
        Variant("after_hours", _slot(day, we - d + 30, we + 30))
        .breaks(_CAL + "work_hours", f"it ends at {minutes_to_hhmm(we + 30)}, after the work hours end")
        .keeps([_CAL + "duration"], length)
    )
    if ws - 30 >= 0:
        out.append(
            Variant("before_hours", _slot(day, ws - 30, ws - 30 + d))
            .breaks(_CAL + "work_hours", f"it starts at {minutes_to_hhmm(ws - 30)}, before the work hours start")
            .keeps([_CAL + "duration"], length)
        )
    # busy: onto a busy block, starting with it, running into it from before, starting inside it
    blocks = [(p, bd, bs, be) for p, by_day in c["busy"].items() for bd, spans in by_day.items() for bs, be in spans]
    for person, bd, bs, be in rng.sample(blocks, min(3, len(blocks))):
        for origin, s in (("busy_same_start", bs), ("busy_run_into", bs - d + 15), ("busy_start_inside", be - 15)):
            if not within(s, s + d, bd) or not (s < be and bs < s + d):
                continue
            out.append(
                Variant(origin, _slot(bd, s, s + d))
                .breaks(
                    _CAL + "busy",
                    f"{bd} {minutes_to_hhmm(s)}-{minutes_to_hhmm(s + d)} overlaps {person}'s busy time "
                    f"{minutes_to_hhmm(bs)}-{minutes_to_hhmm(be)}",
                )
                .keeps([_CAL + "duration", _CAL + "work_hours"], f"{length}, {inside}")
            )
    # preferences: a slot on a ruled-out day, starting before a 'before' time, ending after an 'after' time
    for pref in c["preferences"]:
        kind, t, pd = pref["kind"], pref["time"], pref["day"]
        s = ws if kind == "day" else t - 30 if kind == "before" else t + 30 - d
        if within(s, s + d, pd):
            out.append(
                Variant(f"against_{kind}_preference", _slot(pd, s, s + d))
                .breaks(
                    _CAL + "preferences",
                    f'{pd} {minutes_to_hhmm(s)}-{minutes_to_hhmm(s + d)} goes against "{pref["text"]}"',
                )
                .keeps([_CAL + "duration", _CAL + "work_hours"], f"{length}, {inside}")
            )
    # earliest: the gold slot moved by half an hour (a different slot, not the earliest that fits)
    for origin, shift in (("later", 30), ("earlier", -30)):
        if within(start + shift, end + shift, day):
            out.append(
                Variant(origin, _slot(day, start + shift, end + shift)).keeps(
                    [_CAL + "duration", _CAL + "work_hours"], f"{length}, {inside}"
                )
            )
    for v in out:
        if not c["preferences"]:
            v.keeps([_CAL + "preferences"], "the query states no day or time preference")
        if c["earliest"]:
            v.breaks(
                _CAL + "earliest",
                f'the query says "{c["earliest_text"]}"; the gold slot {day}, {gold["start"]} - {gold["end"]} is the '
                "earliest that fits, and this slot is another one",
            )
        else:
            v.keeps([_CAL + "earliest"], "the query does not ask for the earliest availability")
    return out


def _minutes(hhmm: str) -> int:
    hours, minutes = hhmm.split(":")
    return int(hours) * 60 + int(minutes)


# -- trip ------------------------------------------------------------------------------------------

_TRIP = "trip_"

Stays = list[tuple[str, int, int]]


def _trip_features(stays: Stays, event_cities: set[str]) -> dict[str, Any]:
    """What each trip constraint reads of a plan: equal features, equal verdicts."""
    return {
        _TRIP + "each_city_once": sorted(c for c, _, _ in stays),
        _TRIP + "total_days": (stays[0][1], stays[-1][2]),
        _TRIP + "flight_days": [b[1] - a[2] for a, b in itertools.pairwise(stays)],
        _TRIP + "stay_lengths": sorted((c, e - s) for c, s, e in stays),
        _TRIP + "direct_flights": [c for c, _, _ in stays],
        _TRIP + "event_windows": sorted(x for x in stays if x[0] in event_cities),
    }


def _trip_plan(stays: Stays) -> dict[str, Any]:
    return {"stays": [{"city": c, "start_day": s, "end_day": e} for c, s, e in stays]}


def trip_variants(c: dict[str, Any], gold: PlanJSON, rng: random.Random) -> list[Variant]:
    """Trips that break one requirement, each labelled invalid for it by its guard and valid for every
    constraint whose features (:func:`_trip_features`) are the gold's."""
    stays = stays_of(gold)
    n = len(stays)
    flights = {(a, b) for a, b in c["flights"]}
    event_cities = {ev["city"] for ev in c["events"]}
    out: list[tuple[str, Stays, str, str]] = []  # (origin, stays, broken constraint, why)
    # total days: the whole trip a day later
    out.append(
        ("shifted_trip", [(x, s + 1, e + 1) for x, s, e in stays], _TRIP + "total_days", "the trip starts on day 2")
    )
    # stay lengths: a flight day moved one day earlier or later
    for i in range(n - 1):
        (a, sa, ea), (b, sb, eb) = stays[i], stays[i + 1]
        if ea > sa:
            moved = [*stays[:i], (a, sa, ea - 1), (b, sb - 1, eb), *stays[i + 2 :]]
            out.append(("flight_day_earlier", moved, _TRIP + "stay_lengths", f"the stay in {a} is one day short"))
        if eb > sb:
            moved = [*stays[:i], (a, sa, ea + 1), (b, sb + 1, eb), *stays[i + 2 :]]
            out.append(("flight_day_later", moved, _TRIP + "stay_lengths", f"the stay in {a} is one day long"))
    # flight days: a gap after stay i and an overlap after stay j (lengths and the last day unchanged)
    for i in range(n - 2):
        j = rng.randrange(i + 1, n - 1)
        moved = [*stays[: i + 1], *((x, s + 1, e + 1) for x, s, e in stays[i + 1 : j + 1]), *stays[j + 1 :]]
        why = f"the stay in {stays[i + 1][0]} starts on day {stays[i][2] + 1}, a day after the flight day {stays[i][2]}"
        out.append(("gap_and_overlap", moved, _TRIP + "flight_days", why))
    # direct flights: two neighbours swapped (each city keeps its stay length) where a new hop has no flight
    for i in range(n - 1):
        order = [x for x, _, _ in stays]
        lengths = [e - s + 1 for _, s, e in stays]
        order[i], order[i + 1] = order[i + 1], order[i]
        lengths[i], lengths[i + 1] = lengths[i + 1], lengths[i]
        missing = [(a, b) for a, b in itertools.pairwise(order) if (a, b) not in flights]
        if missing:
            a, b = missing[0]
            swapped = stays_of(plan_from_sequence(order, lengths))
            out.append(
                ("swapped_cities", swapped, _TRIP + "direct_flights", f"no direct flight from {a} to {b} is listed")
            )
    # each city once: one city's name written on another city's stay
    if n >= 2:
        i, j = rng.sample(range(n), 2)
        renamed = [(stays[i][0] if k == j else x, s, e) for k, (x, s, e) in enumerate(stays)]
        why = f"it visits {stays[i][0]} twice and never visits {stays[j][0]}"
        out.append(("repeated_city", renamed, _TRIP + "each_city_once", why))
    # events: the stay in an event's city cut so that it misses the first or the last day of the window
    index = {x: k for k, (x, _, _) in enumerate(stays)}
    for ev in c["events"]:
        k, first, last = index[ev["city"]], int(ev["start_day"]), int(ev["end_day"])
        x, s, e = stays[k]
        if k > 0 and first + 1 <= e:
            p = stays[k - 1]
            cut = [*stays[: k - 1], (p[0], p[1], first + 1), (x, first + 1, e), *stays[k + 1 :]]
            why = f'the stay in {x} starts on day {first + 1}, but "{ev["text"]}"'
        elif k < n - 1 and last - 1 >= s:
            q = stays[k + 1]
            cut = [*stays[:k], (x, s, last - 1), (q[0], last - 1, q[2]), *stays[k + 2 :]]
            why = f'the stay in {x} ends on day {last - 1}, but "{ev["text"]}"'
        else:
            continue
        out.append(("event_missed", cut, _TRIP + "event_windows", why))
    gold_features = _trip_features(stays, event_cities)
    variants = []
    for origin, new, broken, why in out:
        features = _trip_features(new, event_cities)
        same = [name for name, value in features.items() if value == gold_features[name] and name != broken]
        v = Variant(origin, _trip_plan(new)).breaks(broken, why)
        variants.append(v.keeps(same, "the part of the plan this constraint reads is the gold answer's"))
    return variants


# -- meeting ---------------------------------------------------------------------------------------

_MTG = "meeting_"
_MTG_ALL = ("travel_times", "time_forward", "location", "window", "duration", "once", "optimal")


def _mtg(*names: str) -> list[str]:
    return [_MTG + n for n in names]


def meeting_variants(c: dict[str, Any], gold: PlanJSON, rng: random.Random) -> list[Variant]:
    """Days that break one requirement of a meeting query, each labelled as its construction proves."""
    steps: list[dict[str, Any]] = [dict(s) for s in gold["steps"]]
    people = {p["name"]: p for p in c["people"]}
    meets = [i for i, s in enumerate(steps) if s["action"] == "meet"]
    out: list[Variant] = []

    def plan(new: list[dict[str, Any]]) -> dict[str, Any]:
        return {"steps": new}

    travels = [i for i, s in enumerate(steps) if s["action"] == "travel"]
    if travels:
        i = rng.choice(travels)
        t = steps[i]
        wrong = {**t, "minutes": int(t["minutes"]) + 5}
        out.append(
            Variant("wrong_travel_minutes", plan([*steps[:i], wrong, *steps[i + 1 :]]))
            .breaks(
                _MTG + "travel_times",
                f"travel to {t['destination']} written as {wrong['minutes']} minutes; the list says {t['minutes']}",
            )
            .keeps(
                _mtg(*_MTG_ALL[1:]),
                "only the written minutes of one travel step changed (its arrival and every other step are the gold's)",
            )
        )
    start_time = ampm_to_minutes(c["start_time"])
    if steps and steps[0]["action"] == "start" and start_time >= 30:
        back = {"action": "wait", "until": minutes_to_ampm(start_time - 30)}
        out.append(
            Variant("wait_backwards", plan([steps[0], back, *steps[1:]]))
            .breaks(_MTG + "time_forward", f"it waits until {back['until']} right after starting at {c['start_time']}")
            .keeps(
                _mtg("travel_times", "location", "window", "duration", "once", "optimal"),
                "a wait into the past cannot move the clock; every other step is the gold's",
            )
        )
        places = sorted(p for p in c["distances"] if p != c["start_location"])
        if places:
            elsewhere = {**steps[0], "location": rng.choice(places)}
            out.append(
                Variant("wrong_start_place", plan([elsewhere, *steps[1:]]))
                .breaks(_MTG + "location", f'it starts at {elsewhere["location"]}, but "{c["start_text"]}"')
                .keeps(_mtg("duration", "once"), "the meet steps are the gold's")
            )
    if not meets:
        return out
    last = meets[-1]
    m = steps[last]
    person = people[m["person"]]
    begin, minutes = ampm_to_minutes(m["start"]), int(m["minutes"])
    w_start, w_end = ampm_to_minutes(person["start"]), ampm_to_minutes(person["end"])
    if last == len(steps) - 1:
        # window: the last meeting put off until it runs past the end of the window (a wait before it)
        later = w_end - minutes + 15
        if later > begin and later + minutes < 24 * 60:
            moved = {**m, "start": minutes_to_ampm(later), "end": minutes_to_ampm(later + minutes)}
            wait = {"action": "wait", "until": minutes_to_ampm(later)}
            head = steps[: last - 1] if steps[last - 1]["action"] == "wait" else steps[:last]
            out.append(
                Variant("meeting_past_window", plan([*head, wait, moved]))
                .breaks(
                    _MTG + "window", f'the meeting with {m["person"]} ends at {moved["end"]}, but "{person["text"]}"'
                )
                .keeps(
                    _mtg("travel_times", "time_forward", "location", "duration", "once"),
                    "the same steps up to a later wait, then the gold's meeting moved to that later time",
                )
            )
        # window: the wait before the last meeting dropped, so it starts before the window opens
        if steps[last - 1]["action"] == "wait":
            arrival = _clock_before(steps, last - 1)
            if arrival is not None and arrival < w_start:
                early = {**m, "start": minutes_to_ampm(arrival), "end": minutes_to_ampm(arrival + minutes)}
                out.append(
                    Variant("meeting_before_window", plan([*steps[: last - 1], early]))
                    .breaks(
                        _MTG + "window",
                        f'the meeting with {m["person"]} starts at {early["start"]}, but "{person["text"]}"',
                    )
                    .keeps(
                        _mtg("travel_times", "time_forward", "location", "duration", "once"),
                        "the gold's steps without its last wait, the last meeting starting when it is reached",
                    )
                )
        # duration: the last meeting cut short of the minimum
        short = int(person["min_minutes"]) - 15
        if short >= 1:
            cut = {**m, "minutes": short, "end": minutes_to_ampm(begin + short)}
            out.append(
                Variant("meeting_too_short", plan([*steps[:last], cut]))
                .breaks(
                    _MTG + "duration",
                    f'the meeting with {m["person"]} lasts {short} minutes, but "{person["minimum_text"]}"',
                )
                .keeps(
                    _mtg("travel_times", "time_forward", "location", "window", "once"),
                    "the gold's steps, the last meeting ending earlier",
                )
            )
        # once: the last friend met a second time, straight after
        again_end = ampm_to_minutes(m["end"]) + int(person["min_minutes"])
        if again_end < 24 * 60:
            again = {**m, "minutes": int(person["min_minutes"]), "start": m["end"], "end": minutes_to_ampm(again_end)}
            out.append(
                Variant("met_twice", plan([*steps, again]))
                .breaks(_MTG + "once", f"{m['person']} is met a second time")
                .keeps(
                    _mtg("travel_times", "time_forward", "location", "duration", "optimal"),
                    "the gold's steps, then the same friend again at their place, right after, for the minimum",
                )
            )
    # optimal: the last meeting dropped (the gold meets the most friends possible; this meets one fewer)
    cut_at = meets[-2] + 1 if len(meets) > 1 else 1
    out.append(
        Variant("last_meeting_dropped", plan(steps[:cut_at]))
        .breaks(
            _MTG + "optimal",
            f"it meets {len(meets) - 1} friends; the gold answer meets {len(meets)}, the most possible",
        )
        .keeps(_mtg(*_MTG_ALL[:-1]), "a prefix of the gold answer")
    )
    return out


def _clock_before(steps: list[dict[str, Any]], i: int) -> int | None:
    """The written time at which step ``i`` of the gold answer begins (the end of the step before it)."""
    prev = steps[i - 1] if i > 0 else None
    if prev is None:
        return None
    written = {"start": "time", "travel": "arrival", "wait": "until", "meet": "end"}[prev["action"]]
    return ampm_to_minutes(prev[written])


PERTURB: dict[str, Callable[[dict[str, Any], PlanJSON, random.Random], list[Variant]]] = {
    "calendar": calendar_variants,
    "trip": trip_variants,
    "meeting": meeting_variants,
}


def label_counts(bench: NaturalPlanBenchmark, problems: list[Problem], seed: int = 0) -> Counter[tuple[str, bool]]:
    """How many (constraint, label) pairs the perturbations of ``problems`` give (for reports and tests)."""
    counts: Counter[tuple[str, bool]] = Counter()
    for problem in problems:
        for v, _ in labelled_variants(bench, problem, seed):
            counts.update((name, valid) for name, (valid, _) in v.labels.items())
    return counts
