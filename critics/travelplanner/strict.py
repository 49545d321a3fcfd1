"""The sound reading of TravelPlanner's constraints.

Where the official checks are lenient by accident, these are not:

* names match the database **exactly** (after trimming spaces) and in the stated city; a ``; Cost: 14``
  suffix, a prefix of a name or a changed case is not the listing;
* a flight must exist with that number, route **and the day's date**;
* ``Driving`` (any case) is self-driving: it conflicts with flights and taxis, breaks "no self-driving"
  and is checked against the distance table and priced;
* the route is read from whole city names: every day starts where the previous one ended, the trip
  starts and ends in the origin, visits each city in one stay, and only known cities (in the
  destination state, or the destination city itself);
* within-current-city compares whole city names on every day, not characters;
* attractions are split on every ``;``, the last one included, and repeats are found by the listing
  they name (a trailing space does not make a different restaurant);
* minimum nights apply to every listing the stay names, the cuisine check reads every meal outside
  the origin city, room rule and room type fail on a listing that cannot be found, and the budget
  fails when an item cannot be priced;
* a plan with extra filled days after the trip is incomplete.

Every check reads the plan through one shared reading (:mod:`critics.travelplanner.reading`): the
days, each field's text and ``current_city`` are read once per plan for the 13 checks, and the listings
an entry names once per entry text (kept in the store's memo).

**Invariant: whatever passes strict passes official.** Each check first applies its sound reading; a
plan that passes it is then also held to the official check, whose purely formal demands (such as
the transportation text of a stay day containing every letter of the city's name, or a ``City (State)``
written with a space) the sound reading does not make. Failing those is reported as such.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any, NamedTuple

from . import official
from .checks import (
    COMMONSENSE_KEYS,
    HARD_KEYS,
    HOUSE_RULE_TEXT,
    MEALS,
    CheckFn,
    CheckOutcome,
    CheckResult,
    ceil_div,
    describe_official,
    money,
    people,
    query_dates,
    run_check,
)
from .reading import DayReading, Malformed, PlanReading, by_fields, reading, unless_passed
from .store import Accommodation, Store
from .text import (
    PLACEHOLDER_DAY,
    CityDay,
    is_blank,
    normalise,
    split_attractions,
    strict_flight_number,
    strict_modes,
    strict_name_city,
    strict_route,
)

Query = Mapping[str, Any]
CONTENT_FIELDS = ("current_city", "transportation", "breakfast", "attraction", "lunch", "dinner", "accommodation")


def _fail(message: str, **details: Any) -> CheckOutcome:
    return False, message, details


# -- reading the plan: see :mod:`critics.travelplanner.reading` ------------------------------------
class Entity(NamedTuple):
    """What an entry names: a database listing when it resolves exactly, else its normalised text."""

    key: tuple[str, ...]
    resolved: bool


def _entity(kind: str, rows: tuple[Any, ...], value: str) -> Entity:
    """The entity of entry ``value`` whose exact listings are ``rows`` (a ``kind`` of the database)."""
    parsed = strict_name_city(value)
    if parsed and rows:
        return Entity((kind, parsed[0], parsed[1]), True)
    return Entity(("text", normalise(value)), False)


def _listing(r: PlanReading, d: DayReading, value: str) -> tuple[str, str, tuple[Accommodation, ...]]:
    name, city = d.entry(value, "accommodation")
    return name, city, r.accommodations(value)


def _states(store: Store) -> frozenset[str]:
    """The states of the database's cities (read once per store)."""
    return store._memoised(("states",), lambda: frozenset(store.city_state.values()))  # type: ignore[no-any-return]


# -- commonsense -------------------------------------------------------------------------------------------
def reasonable_city_route(query: Query, plan: Any, store: Store) -> CheckOutcome:
    days = reading(query, plan, store).days
    org, dest = query["org"], query["dest"]
    if len(days) < query["days"]:
        return _fail(
            f"The route is incomplete: the plan has {len(days)} of the trip's {query['days']} days.",
            reason="incomplete",
        )
    parsed = [(d.day, d.city()) for d in days]
    _first_day, first = parsed[0]
    if not first.travel or first.origin != org:
        return _fail(
            f"Day 1 must travel from {org}, but its current_city is {days[0].unit.get('current_city')!r}.",
            day=1,
            field="current_city",
            value=days[0].unit.get("current_city"),
            reason="wrong_origin",
            expected=f"from {org} to ...",
        )
    position = org
    visited: list[str] = []
    left: dict[str, int] = {}
    for day, cd in parsed:
        start = cd.origin if cd.travel else cd.city
        if start != position:
            what = f"departs from {start}" if cd.travel else f"stays in {start}"
            return _fail(
                f"Day {day} {what}, but the traveller is in {position} after day {day - 1}.",
                day=day,
                field="current_city",
                value=days[day - 1].unit.get("current_city"),
                reason="discontinuous",
                expected_city=position,
            )
        if cd.travel:
            arrive = cd.city
            if arrive == org and day != query["days"]:
                return _fail(
                    f"Day {day} returns to the origin {org} before the last day.",
                    day=day,
                    field="current_city",
                    value=days[day - 1].unit.get("current_city"),
                    reason="early_return",
                )
            if arrive != org:
                if arrive in left:
                    return _fail(
                        f"Day {day} comes back to {arrive}, which the trip left on day {left[arrive]}; "
                        "each city is visited in one stay.",
                        day=day,
                        field="current_city",
                        value=days[day - 1].unit.get("current_city"),
                        reason="revisit",
                        city=arrive,
                    )
                visited.append(arrive)
            left[position] = day
            position = arrive
    last_day, last = parsed[-1]
    if not (last.travel and last.city == org):
        return _fail(
            f"The trip must end with travel back to {org} on day {last_day}, but day {last_day}'s current_city "
            f"is {days[-1].unit.get('current_city')!r}.",
            day=last_day,
            field="current_city",
            value=days[-1].unit.get("current_city"),
            reason="open_loop",
        )
    # the destination is a city for one-city trips (even 'Washington'), else a state
    dest_is_state = dest in _states(store) and not (query["visiting_city_number"] == 1 and dest in store.city_state)
    for city in visited:
        if city not in store.city_state:
            return _fail(f"{city} is not a city of the database.", reason="unknown_city", city=city, cities=visited)
        if dest_is_state and store.city_state[city] != dest:
            return _fail(
                f"{city} is in {store.city_state[city]}, not in {dest}.",
                reason="wrong_state",
                city=city,
                state=store.city_state[city],
                cities=visited,
            )
        if not dest_is_state and dest in store.city_state and city != dest:
            return _fail(f"The trip visits {city} instead of {dest}.", reason="wrong_city", city=city, cities=visited)
    if org not in store.city_state:
        return _fail(f"{org} is not a city of the database.", reason="unknown_city", city=org)
    return True, None, {"cities": [org, *visited, org]}


def diverse_restaurants(query: Query, plan: Any, store: Store) -> CheckOutcome:
    seen: dict[tuple[str, ...], tuple[int, str, str]] = {}
    r = reading(query, plan, store)
    for d in r.days:
        day = d.day
        for meal in MEALS:
            value = d.filled(meal)
            if value is None:
                continue
            entity = _entity("restaurant", r.restaurants(value), value)
            if entity.key in seen:
                d0, m0, v0 = seen[entity.key]
                return _fail(
                    f"Day {day} {meal} {value!r} repeats the restaurant of day {d0} {m0} ({v0!r}); "
                    "every meal must be at a different restaurant.",
                    day=day,
                    field=meal,
                    value=value,
                    first={"day": d0, "field": m0, "value": v0},
                )
            seen[entity.key] = (day, meal, value)
    return True, None, {}


def diverse_attractions(query: Query, plan: Any, store: Store) -> CheckOutcome:
    seen: dict[tuple[str, ...], tuple[int, str]] = {}
    r = reading(query, plan, store)
    for d in r.days:
        day = d.day
        value = d.filled("attraction")
        if value is None:
            continue
        for piece in split_attractions(value):
            entity = _entity("attraction", r.attractions(piece), piece)
            if entity.key in seen:
                d0, v0 = seen[entity.key]
                where = "the same day" if d0 == day else f"day {d0}"
                return _fail(
                    f"Day {day} attraction {piece!r} was already visited on {where}; each attraction is visited once.",
                    day=day,
                    field="attraction",
                    value=piece,
                    first={"day": d0, "value": v0},
                )
            seen[entity.key] = (day, piece)
    return True, None, {}


def minimum_nights_stay(query: Query, plan: Any, store: Store) -> CheckOutcome:
    runs: list[tuple[Entity, str, int, int]] = []  # entity, first text, first day, nights
    r = reading(query, plan, store)
    for d in r.days:
        day = d.day
        if "accommodation" not in d.unit:
            return _fail(f"Day {day} has no accommodation field.", day=day, field="accommodation", reason="missing_key")
        value = d.filled("accommodation")
        if value is None:
            runs.append((Entity(("blank",), False), "-", day, 0))
            continue
        entity = _entity("accommodation", r.accommodations(value), value)
        if runs and runs[-1][0] == entity and entity.key != ("blank",):
            ent, text, start, nights = runs[-1]
            runs[-1] = (ent, text, start, nights + 1)
        else:
            runs.append((entity, value, day, 1))
    for entity, text, start, nights in runs:
        if not entity.resolved:
            continue  # unknown listings are the sandbox critic's business
        _, name, city = entity.key
        rows = store.exact_accommodations(name, city)
        need = max(r.minimum_nights for r in rows)
        if nights < need:
            span = f"day {start}" if nights == 1 else f"days {start}-{start + nights - 1}"
            return _fail(
                f"{text!r} is booked for {nights} night(s) ({span}) but requires a stay of at least {need:g} nights.",
                day=start,
                field="accommodation",
                value=text,
                nights=nights,
                minimum_nights=need,
                city=city,
            )
    return True, None, {}


def non_conflicting_transportation(query: Query, plan: Any, store: Store) -> CheckOutcome:
    days = reading(query, plan, store).days
    if not days or days[0].filled("transportation") is None:
        return _fail("Day 1 has no transportation: the trip must start by travelling.", day=1, field="transportation")
    used: dict[str, tuple[int, str]] = {}
    for d in days:
        day = d.day
        value = d.filled("transportation")
        if value is None:
            continue
        for mode in sorted(strict_modes(value)):
            used.setdefault(mode, (day, value))
    for a, b in (("self-driving", "flight"), ("self-driving", "taxi")):
        if a in used and b in used:
            (da, va), (db, vb) = used[a], used[b]
            return _fail(
                f"The plan mixes {a} (day {da}: {va!r}) with {b} (day {db}: {vb!r}); a self-driving trip cannot "
                "also take flights or taxis.",
                day=max(da, db),
                field="transportation",
                value=vb if db >= da else va,
                modes=sorted(used),
            )
    return True, None, {"modes": sorted(used)}


def within_current_city(query: Query, plan: Any, store: Store) -> CheckOutcome:
    r = reading(query, plan, store)
    for d in r.days:
        outcome = unless_passed(d.results, ("city", d.day), _within_current_city_day, d)
        if outcome is not None:
            return outcome
    return True, None, {}


def _within_current_city_day(d: DayReading) -> CheckOutcome | None:
    """Day ``d``'s part of :func:`within_current_city` (reads only the day); None when it passes."""
    day = d.day
    cd = d.city()
    allowed = cd.cities
    where = f"from {cd.origin} to {cd.city}" if cd.travel else cd.city
    transport = d.filled("transportation")
    if cd.travel and transport is not None:
        route = strict_route(transport)
        if route is not None and route != (cd.origin, cd.city):
            return _fail(
                f"Day {day} transportation goes from {route[0]} to {route[1]}, but the day travels {where}.",
                day=day,
                field="transportation",
                value=transport,
                current_city=where,
            )
        if route is None and not all(c in transport for c in allowed):
            return _fail(
                f"Day {day} transportation {transport!r} does not name the day's route {where}.",
                day=day,
                field="transportation",
                value=transport,
                current_city=where,
            )
    for field in (*MEALS, "attraction"):
        value = d.filled(field)
        if value is None:
            continue
        pieces = split_attractions(value) if field == "attraction" else (value,)
        for piece in pieces:
            _, city = d.entry(piece, field)
            if city not in allowed:
                return _fail(
                    f"Day {day} {field} {piece!r} is in {city}, but on day {day} the traveller is "
                    + (f"travelling {where}." if cd.travel else f"in {where}."),
                    day=day,
                    field=field,
                    value=piece,
                    city=city,
                    current_city=where,
                )
    stay = d.filled("accommodation")
    if stay is not None:
        _, city = d.entry(stay, "accommodation")
        if city != cd.city:
            return _fail(
                f"Day {day} accommodation {stay!r} is in {city}, but the night of day {day} is spent in {cd.city}.",
                day=day,
                field="accommodation",
                value=stay,
                city=city,
                current_city=where,
            )
    return None


def _leg_route(cd: CityDay | None, text: str) -> tuple[str, str] | None:
    route = strict_route(text)
    if route is not None:
        return route
    if cd is not None and cd.travel:
        assert cd.origin is not None
        return cd.origin, cd.city
    return None


def within_sandbox(query: Query, plan: Any, store: Store) -> CheckOutcome:
    dates = query_dates(query)
    r = reading(query, plan, store)
    for d in r.days:
        date = dates[d.day - 1] if d.day <= len(dates) else None
        outcome = unless_passed(d.results, ("sandbox", d.day, date), _within_sandbox_day, r, d, date)
        if outcome is not None:
            return outcome
    return True, None, {}


def _within_sandbox_day(r: PlanReading, d: DayReading, date: str | None) -> CheckOutcome | None:
    """Day ``d``'s part of :func:`within_sandbox` (reads the day, its date and the store); None when it passes."""
    day, store = d.day, r.store
    transport = d.filled("transportation")
    if transport is not None:
        outcome = _transport_in_sandbox(store, d, transport, date)
        if outcome is not None:
            return outcome
    for field in MEALS:
        value = d.filled(field)
        if value is None:
            continue
        name, city = d.entry(value, field)
        if not r.restaurants(value):
            return _not_found("restaurant", day, field, value, name, city)
    attractions = d.filled("attraction")
    if attractions is not None:
        for piece in split_attractions(attractions):
            name, city = d.entry(piece, "attraction")
            if not r.attractions(piece):
                return _not_found("attraction", day, "attraction", piece, name, city)
    stay = d.filled("accommodation")
    if stay is not None:
        name, city = d.entry(stay, "accommodation")
        if not r.accommodations(stay):
            return _not_found("accommodation", day, "accommodation", stay, name, city)
    return None


def _not_found(kind: str, day: int, field: str, value: str, name: str, city: str) -> CheckOutcome:
    """The entry names no row exactly. The listing whose name contains ``name`` is a database value the
    plan lacks: only a hint names it (:func:`critics.travelplanner.hints.near_name`)."""
    return _fail(
        f"Day {day} {field} {value!r}: there is no {kind} named exactly {name!r} in {city}.",
        day=day,
        field=field,
        value=value,
        kind=kind,
        name=name,
        city=city,
    )


def _transport_in_sandbox(store: Store, d: DayReading, text: str, date: str | None) -> CheckOutcome | None:
    day = d.day
    modes = strict_modes(text)
    cd = d.loose_city
    route = _leg_route(cd, text)
    travel = cd is not None and cd.travel
    if "flight" in modes:
        number = strict_flight_number(text)
        if number is None:
            return _fail(
                f"Day {day} transportation {text!r} is a flight without a 'Flight Number: F...'.",
                day=day,
                field="transportation",
                value=text,
                kind="flight",
            )
        if route is None:
            return _fail(
                f"Day {day} transportation {text!r}: the flight's route 'from A to B' is not stated.",
                day=day,
                field="transportation",
                value=text,
                kind="flight",
            )
        rows = store.flights_by_number(number)
        on_route = [f for f in rows if (f.origin, f.dest) == route]
        if not on_route:
            actual = f" ({number} flies {rows[0].origin} to {rows[0].dest} on {rows[0].date})" if rows else ""
            return _fail(
                f"Day {day}: there is no flight {number} from {route[0]} to {route[1]}{actual}.",
                day=day,
                field="transportation",
                value=text,
                kind="flight",
                number=number,
                origin=route[0],
                dest=route[1],
                date=date,
            )
        if date is not None and not any(f.date == date for f in on_route):
            return _fail(
                f"Day {day}: flight {number} from {route[0]} to {route[1]} flies on {on_route[0].date}, "
                f"not on the day's date {date}.",
                day=day,
                field="transportation",
                value=text,
                kind="flight",
                number=number,
                origin=route[0],
                dest=route[1],
                date=date,
                flight_date=on_route[0].date,
            )
        return None
    for mode in ("self-driving", "taxi"):
        if mode in modes:
            if route is None:
                return _fail(
                    f"Day {day} transportation {text!r}: {mode} needs a route 'from A to B' between two cities "
                    "of the database.",
                    day=day,
                    field="transportation",
                    value=text,
                    kind=mode,
                )
            road = store.road(*route)
            if road is None or road.cost(mode) is None:
                why = "no distance data" if road is None else "no drivable route within a day"
                return _fail(
                    f"Day {day}: {mode} from {route[0]} to {route[1]} is not possible ({why} in the database).",
                    day=day,
                    field="transportation",
                    value=text,
                    kind=mode,
                    origin=route[0],
                    dest=route[1],
                )
            return None
    if travel:
        return _fail(
            f"Day {day} transportation {text!r} is not a flight, taxi or self-driving trip from the database.",
            day=day,
            field="transportation",
            value=text,
            kind="unknown",
        )
    return None


def complete_information(query: Query, plan: Any, store: Store) -> CheckOutcome:
    if not isinstance(plan, list):
        raise Malformed(f"The plan must be a list of day objects, not {type(plan).__name__}.", field="plan")
    n = query["days"]
    filled = [
        i + 1
        for i, unit in enumerate(plan)
        if not (isinstance(unit, Mapping) and (not unit or unit.get("current_city") == PLACEHOLDER_DAY))
    ]
    if filled != list(range(1, n + 1)):
        extra = [d for d in filled if d > n]
        missing = [d for d in range(1, n + 1) if d not in filled]
        why = f"days {missing} are empty or missing" if missing else f"it has filled days after the trip ({extra})"
        return _fail(
            f"The plan must fill exactly the trip's {n} days: {why}.",
            reason="days",
            expected=n,
            filled_days=filled,
        )
    days = reading(query, plan, store).days
    cities: set[str] = set()
    for d in days:
        day, unit = d.day, d.unit
        missing_keys = [k for k in CONTENT_FIELDS if k not in unit]
        if missing_keys:
            return _fail(
                f"Day {day} lacks the field(s) {', '.join(missing_keys)}.",
                day=day,
                field=missing_keys[0],
                reason="missing_key",
            )
        cities.update(d.city().cities)
    cities.discard(query["org"])
    if len(cities) != query["visiting_city_number"]:
        return _fail(
            f"The query asks to visit {query['visiting_city_number']} city/cities, but the plan visits "
            f"{len(cities)}: {', '.join(sorted(cities)) or 'none'}.",
            reason="city_number",
            expected=query["visiting_city_number"],
            cities=sorted(cities),
        )
    for d in days:
        outcome = unless_passed(d.results, ("complete", d.day, d.day == n), _filled_in_day, d, n)
        if outcome is not None:
            return outcome
    return True, None, {}


def _filled_in_day(d: DayReading, n: int) -> CheckOutcome | None:
    """Day ``d``'s part of the last loop of :func:`complete_information` (reads the day and whether it is
    the last of the ``n``); None when it passes."""
    day, unit = d.day, d.unit
    cd = d.city()
    if cd.travel and d.filled("transportation") is None:
        return _fail(
            f"Day {day} travels from {cd.origin} to {cd.city} but gives no transportation.",
            day=day,
            field="transportation",
            value=unit.get("transportation"),
        )
    if not cd.travel:
        attraction = d.text("attraction")
        if is_blank(attraction) or not split_attractions(attraction or ""):
            return _fail(
                f"Day {day} is spent in {cd.city} but lists no attraction.",
                day=day,
                field="attraction",
                value=attraction,
            )
        for meal in MEALS:
            if d.filled(meal) is None:
                return _fail(
                    f"Day {day} is spent in {cd.city} but has no {meal}.", day=day, field=meal, value=unit.get(meal)
                )
    if day != n and d.filled("accommodation") is None:
        return _fail(
            f"Day {day} has no accommodation for the night (in {cd.city}).",
            day=day,
            field="accommodation",
            value=unit.get("accommodation"),
            city=cd.city,
        )
    return None


# -- hard ----------------------------------------------------------------------------------------------------
def cuisine(query: Query, plan: Any, store: Store) -> CheckOutcome:
    wanted = query["local_constraint"]["cuisine"]
    if not wanted:
        return None, None, {}
    served: dict[str, list[dict[str, Any]]] = {c: [] for c in wanted}
    r = reading(query, plan, store)
    for d in r.days:
        day = d.day
        for meal in MEALS:
            value = d.filled(meal)
            if value is None:
                continue
            parsed = strict_name_city(value)
            if parsed is None or parsed[1] == query["org"]:
                continue  # unreadable entries are the sandbox critic's business; origin meals do not count
            rows = r.restaurants(value)
            if not rows:
                continue
            kinds = _cuisine_kinds(rows[0].cuisines)
            for c in wanted:
                if c.strip().casefold() in kinds:
                    served[c].append({"day": day, "field": meal, "value": value})
    missing = [c for c in wanted if not served[c]]
    if missing:
        return _fail(
            f"The query asks for {', '.join(wanted)} cuisine; no meal outside {query['org']} is at a restaurant "
            f"serving {', '.join(missing)}.",
            missing=missing,
            wanted=list(wanted),
            served={c: v for c, v in served.items() if v},
        )
    return True, None, {"served": served}


@lru_cache(maxsize=4096)
def _cuisine_kinds(cuisines: str) -> frozenset[str]:
    """The cuisines a listing's ``cuisines`` text names, stripped and casefolded."""
    return frozenset(c.strip().casefold() for c in cuisines.split(","))


_ROOM_TYPES: dict[str, Callable[[str], bool]] = {
    "not shared room": lambda t: t in ("Private room", "Entire home/apt"),
    "shared room": lambda t: t == "Shared room",
    "private room": lambda t: t == "Private room",
    "entire room": lambda t: t == "Entire home/apt",
}


def _stays(r: PlanReading) -> list[tuple[DayReading, str]]:
    out = []
    for d in r.days:
        value = d.filled("accommodation")
        if value is not None:
            out.append((d, value))
    return out


def room_rule(query: Query, plan: Any, store: Store) -> CheckOutcome:
    rule = query["local_constraint"]["house rule"]
    if rule is None:
        return None, None, {}
    if rule not in HOUSE_RULE_TEXT:
        return None, f"unknown house rule {rule!r}", {}
    r = reading(query, plan, store)
    for d, value in _stays(r):
        day = d.day
        _name, city, rows = _listing(r, d, value)
        if not rows:
            return _fail(
                f"Day {day} accommodation {value!r} is not a listing in {city}, so its house rules "
                f"cannot be checked against the request for {rule}.",
                day=day,
                field="accommodation",
                value=value,
                city=city,
                reason="unknown_listing",
            )
        rules = {r.strip() for r in rows[0].house_rules.split("&")}
        if HOUSE_RULE_TEXT[rule] in rules:
            return _fail(
                f"Day {day} accommodation {value!r} has the house rules '{rows[0].house_rules}', but the query "
                f"needs {rule} to be allowed.",
                day=day,
                field="accommodation",
                value=value,
                city=city,
                house_rules=rows[0].house_rules,
            )
    return True, None, {}


def room_type(query: Query, plan: Any, store: Store) -> CheckOutcome:
    wanted = query["local_constraint"]["room type"]
    if wanted is None:
        return None, None, {}
    if wanted not in _ROOM_TYPES:
        return None, f"unknown room type {wanted!r}", {}
    r = reading(query, plan, store)
    for d, value in _stays(r):
        day = d.day
        _name, city, rows = _listing(r, d, value)
        if not rows:
            return _fail(
                f"Day {day} accommodation {value!r} is not a listing in {city}, so its room type cannot be checked.",
                day=day,
                field="accommodation",
                value=value,
                city=city,
                reason="unknown_listing",
            )
        if not _ROOM_TYPES[wanted](rows[0].room_type):
            return _fail(
                f"Day {day} accommodation {value!r} is listed as '{rows[0].room_type}', but the query asks for "
                f"a {wanted}.",
                day=day,
                field="accommodation",
                value=value,
                city=city,
                room_type=rows[0].room_type,
            )
    return True, None, {}


def transportation(query: Query, plan: Any, store: Store) -> CheckOutcome:
    rule = query["local_constraint"]["transportation"]
    if rule is None:
        return None, None, {}
    banned = {"no flight": "flight", "no self-driving": "self-driving"}.get(rule)
    if banned is None:
        return None, f"unknown transportation rule {rule!r}", {}
    r = reading(query, plan, store)
    for d in r.days:
        day = d.day
        value = d.filled("transportation")
        if value is not None and banned in strict_modes(value):
            return _fail(
                f"Day {day} transportation {value!r} uses {banned}, but the query asks for {rule}.",
                day=day,
                field="transportation",
                value=value,
                banned=banned,
            )
    return True, None, {}


Items = list[dict[str, Any]]


def cost_items(query: Query, plan: Any, store: Store) -> tuple[Items, Items]:
    """(priced items, items that cannot be priced) of the trip's days, read strictly (new lists of new
    dicts: the caller's to keep)."""
    people = query["people_number"]
    dates = query_dates(query)
    priced: Items = []
    unpriced: Items = []
    r = reading(query, plan, store)
    for d in r.days:
        date = dates[d.day - 1] if d.day <= len(dates) else None
        key = ("cost", d.day, people, date)
        kept: tuple[Items, Items] | None = d.results.get(key) if d.results is not None else None
        if kept is None:
            kept = _day_cost_items(r, d, people, date)
            if d.results is not None:
                d.results[key] = kept
        priced.extend(map(dict, kept[0]))  # copies: the kept ones are never handed out
        unpriced.extend(map(dict, kept[1]))
    return priced, unpriced


def _day_cost_items(r: PlanReading, d: DayReading, people: int, date: str | None) -> tuple[Items, Items]:
    """Day ``d``'s part of :func:`cost_items` (reads the day, the number of people, the day's date and the
    store)."""
    store = r.store
    day = d.day
    priced: Items = []
    unpriced: Items = []

    def add(field: str, value: str, cost: float | None, why: str = "", **extra: Any) -> None:
        if cost is None:
            unpriced.append({"day": day, "field": field, "value": value, **extra, "reason": why})
        else:
            priced.append({"day": day, "field": field, "value": value, **extra, "cost": cost})

    text = d.filled("transportation")
    cd = d.loose_city
    if text is not None:
        modes = strict_modes(text)
        route = _leg_route(cd, text)
        if "flight" in modes:
            number = strict_flight_number(text)
            rows = (
                [f for f in store.flights_by_number(number) if route is None or (f.origin, f.dest) == route]
                if number
                else []
            )
            rows.sort(key=lambda f: f.date != date)
            fare, cost = (rows[0].price, rows[0].price * people) if rows else (None, None)
            add("transportation", text, cost, "flight not found", unit_cost=fare)
        elif "self-driving" in modes or "taxi" in modes:
            mode = "self-driving" if "self-driving" in modes else "taxi"
            road = store.road(*route) if route else None
            unit_cost = road.cost(mode) if road else None
            per = ceil_div(people, 5 if mode == "self-driving" else 4)
            add(
                "transportation",
                text,
                unit_cost * per if unit_cost is not None else None,
                f"no {mode} route",
                unit_cost=unit_cost,
                vehicles=per,
            )
        elif cd is not None and cd.travel:
            add("transportation", text, None, "unknown mode of transport")
    for meal in MEALS:
        value = d.filled(meal)
        if value is None:
            continue
        rows_r = r.restaurants(value)
        each, cost = (rows_r[0].average_cost, rows_r[0].average_cost * people) if rows_r else (None, None)
        add(meal, value, cost, "restaurant not found", unit_cost=each)
    stay = d.filled("accommodation")
    if stay is not None:
        rows_a = r.accommodations(stay)
        rooms = ceil_div(people, rows_a[0].maximum_occupancy) if rows_a else 0
        add(
            "accommodation",
            stay,
            rows_a[0].price * rooms if rows_a else None,
            "listing not found",
            unit_cost=rows_a[0].price if rows_a else None,
            rooms=rooms,
        )
    return priced, unpriced


def total_cost(query: Query, plan: Any, store: Store) -> float:
    """The strict total of the items that can be priced."""
    return float(sum(item["cost"] for item in cost_items(query, plan, store)[0]))


def budget(query: Query, plan: Any, store: Store) -> CheckOutcome:
    priced, unpriced = cost_items(query, plan, store)
    total = float(sum(item["cost"] for item in priced))
    details = {"total_cost": total, "budget": query["budget"], "items": priced, "unpriced": unpriced}
    if unpriced:
        first = unpriced[0]
        return _fail(
            f"The cost cannot be checked: day {first['day']} {first['field']} {first['value']!r} cannot be priced "
            f"({first['reason']}).",
            day=first["day"],
            field=first["field"],
            value=first["value"],
            **details,
        )
    if total > query["budget"]:
        return _fail(
            f"The plan costs {money(total)} in total for {people(query['people_number'])}, which is "
            f"{money(total - query['budget'])} over the budget of {money(query['budget'])}.",
            **details,
        )
    return True, None, details


# -- the strict checks, each held to the official one as well ----------------------------------------------
def _guarded(key: str, sound: CheckFn) -> CheckFn:
    def check(query: Query, plan: Any, store: Store) -> CheckOutcome:
        try:
            value, message, details = sound(query, plan, store)
        except Malformed as exc:
            return False, str(exc), {**exc.details, "reason": "malformed"}
        if value is False:
            return value, message, details
        if not official.passes(key, query, plan, store):
            ref = official.check(key, query, plan, store)
            return (
                False,
                f"The official evaluator rejects this plan: {describe_official(key, ref)}",
                {**ref.details, "official": True, "official_message": ref.message, "official_error": ref.error},
            )
        return value, message, details

    check.__name__ = f"strict_{key}"
    check.__doc__ = sound.__doc__
    return check


SOUND_CHECKS: dict[str, CheckFn] = {
    "is_reasonable_visiting_city": reasonable_city_route,
    "is_valid_restaurants": diverse_restaurants,
    "is_valid_attractions": diverse_attractions,
    "is_valid_accommodation": minimum_nights_stay,
    "is_valid_transportation": non_conflicting_transportation,
    "is_valid_information_in_current_city": within_current_city,
    "is_valid_information_in_sandbox": within_sandbox,
    "is_not_absent": complete_information,
    "valid_cuisine": cuisine,
    "valid_room_rule": room_rule,
    "valid_transportation": transportation,
    "valid_room_type": room_type,
    "valid_cost": budget,
}
#: the checks that read (of each examined day, both soundly and officially) only these fields: their
#: outcomes are kept by those fields' values (:func:`~critics.travelplanner.reading.by_fields`)
READS_ONLY: dict[str, tuple[str, ...]] = {
    "is_reasonable_visiting_city": ("current_city",),
    "is_valid_transportation": ("transportation",),
    "valid_transportation": ("transportation",),
    "is_valid_accommodation": ("accommodation",),
    "valid_room_rule": ("accommodation",),
    "valid_room_type": ("accommodation",),
    "is_valid_attractions": ("attraction",),
    "is_valid_restaurants": MEALS,
    "valid_cuisine": MEALS,
}
CHECKS: dict[str, CheckFn] = {
    key: by_fields(key, READS_ONLY[key], _guarded(key, fn)) if key in READS_ONLY else _guarded(key, fn)
    for key, fn in SOUND_CHECKS.items()
}


def check(key: str, query: Query, plan: Any, store: Store) -> CheckResult:
    return run_check(CHECKS[key], query, plan, store)


def commonsense(query: Query, plan: Any, store: Store) -> dict[str, CheckResult]:
    return {key: check(key, query, plan, store) for key in COMMONSENSE_KEYS}


def hard(query: Query, plan: Any, store: Store) -> dict[str, CheckResult]:
    return {key: check(key, query, plan, store) for key in HARD_KEYS}
