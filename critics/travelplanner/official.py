"""The official TravelPlanner checks, bug for bug.

Each function reproduces one check of the published evaluation (OSU-NLP-Group/TravelPlanner,
``evaluation/commonsense_constraint.py`` and ``hard_constraint.py`` at da7c1d4) on our store:
the same parsing, the same substring matching, the same "first matching row", the same messages, and
the same crashes on odd input (a missing key raises ``KeyError``, an unparseable flight route
``ValueError``, ...). The quirks are kept on purpose; see ``docs/travelplanner-evaluation.md`` and
:mod:`critics.travelplanner.strict` for the sound reading.

Each check takes ``(query, plan, store)``: ``query`` is the structured query (``org``, ``dest``, ``days``,
``visiting_city_number``, ``people_number``, ``local_constraint``, ``budget``), ``plan`` the submitted
value. It returns ``(value, message, details)`` and may raise exactly where the official code raises;
:func:`commonsense` and :func:`hard` turn such a crash into a failed :class:`CheckResult` naming it.

Only days ``0 .. min(days, len(plan)) - 1`` are examined, as officially.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any

from .checks import (
    COMMONSENSE_KEYS,
    HARD_KEYS,
    HOUSE_RULE_TEXT,
    CheckFn,
    CheckOutcome,
    CheckResult,
    ceil_div,
    run_check,
)
from .reading import kept_days, results_of, unless_passed
from .store import Accommodation, Store
from .text import PLACEHOLDER_DAY, before_parenthesis, flight_number_official, from_to, name_city

Query = Mapping[str, Any]


def _examined(query: Query, plan: Any) -> range:
    return range(min(query["days"], len(plan)))


def _days(query: Query, plan: Any) -> Iterator[tuple[int, Any]]:
    """(day number, the plan's entry) for each day the official checks examine."""
    n = query["days"]
    if type(plan) is list and type(n) is int and n >= 0:  # the usual case: the examined days in one step
        return enumerate(plan[:n], 1)
    return _indexed(query, plan)


def _indexed(query: Query, plan: Any) -> Iterator[tuple[int, Any]]:
    """:func:`_days` of any value, indexed as the official code indexes it (and failing where it fails)."""
    for i in _examined(query, plan):
        yield i + 1, plan[i]


def _where(day: int, field: str, value: Any, **extra: Any) -> dict[str, Any]:
    return {"day": day, "field": field, "value": value, **extra}


# -- helpers of the official code ------------------------------------------------------------------
def transportation_match(text: str) -> str | None:
    """The mode of a transportation text: the first of taxi, self-driving, flight found (any case)."""
    low = text.lower()
    if "taxi" in low:
        return "Taxi"
    if "self-driving" in low:
        return "Self-driving"
    if "flight" in low:
        return "Flight"
    return None


def consecutive_runs(values: list[Any]) -> list[tuple[Any, int]]:
    """Runs of equal consecutive values: ``[(value, length), ...]``."""
    runs: list[tuple[Any, int]] = []
    for value in values:
        if runs and runs[-1][0] == value:
            runs[-1] = (value, runs[-1][1] + 1)
        else:
            runs.append((value, 1))
    return runs


def valid_city_sequence(cities: list[Any]) -> bool:
    """At least 3 entries; each inner city forms one block of length >= 2 and never comes back."""
    if len(cities) < 3:
        return False
    visited: set[Any] = set()
    i = 0
    while i < len(cities):
        city = cities[i]
        if city in visited and i != 0 and i != len(cities) - 1:
            return False
        count = 0
        while i < len(cities) and cities[i] == city:
            count += 1
            i += 1
        if count == 1 and 0 < i - 1 < len(cities) - 1:
            return False
        visited.add(city)
    return True


def road_cost(store: Store, origin: str, dest: str, mode: str) -> int | None:
    """``GoogleDistanceMatrix.run_for_evaluation(origin, dest, mode)['cost']``."""
    road = store.road(before_parenthesis(origin), before_parenthesis(dest))
    return None if road is None else road.cost(mode)


def _day_cities(query: Query, plan: Any) -> Iterator[tuple[int, Any, list[Any]]]:
    """(day, current_city, the cities it names) for each examined day: "from A to B" names A and B,
    anything else one city (each before any parenthesis)."""
    for day, unit in _days(query, plan):
        value = unit["current_city"]
        if "from" in value:
            a, b = from_to(value)
            yield day, value, [before_parenthesis(a), before_parenthesis(b)]
        else:
            yield day, value, [before_parenthesis(value)]


def _route(unit: Any) -> tuple[Any, Any]:
    """A day's (origin, destination): read from its transportation, else from its current_city."""
    org, dest = from_to(unit["transportation"])
    if org is None or dest is None:
        org, dest = from_to(unit["current_city"])
    return org, dest


# -- commonsense ---------------------------------------------------------------------------------------
def is_reasonable_visiting_city(query: Query, plan: Any, store: Store) -> CheckOutcome:
    cities: list[Any] = []
    for day, value, named in _day_cities(query, plan):
        if day == 1 and "from" in value and named[0] != query["org"]:
            return (
                False,
                f"The first day's city should be {query['org']}.",
                _where(1, "current_city", value, reason="wrong_origin", expected=query["org"]),
            )
        cities += named
    if cities[0] != cities[-1]:
        return False, "The trip should be a closed circle.", {"reason": "open_loop", "cities": cities}
    if not valid_city_sequence(cities):
        return False, "The city sequence is invalid.", {"reason": "invalid_sequence", "cities": cities}
    for n, city in enumerate(cities):
        if city not in store.city_state:
            return False, f"{city} is not a valid city.", {"reason": "unknown_city", "city": city, "cities": cities}
        if n not in (0, len(cities) - 1) and query["days"] > 3 and store.city_state[city] != query["dest"]:
            return (
                False,
                f"{city} is not in {query['dest']}.",
                {"reason": "wrong_state", "city": city, "state": store.city_state[city], "cities": cities},
            )
    return True, None, {"cities": cities}


def is_valid_restaurants(query: Query, plan: Any, store: Store) -> CheckOutcome:
    seen: list[Any] = []
    where: dict[Any, tuple[int, str]] = {}
    for day, unit in _days(query, plan):
        for meal in ("breakfast", "lunch", "dinner"):
            if meal in unit and unit[meal] and unit[meal] != "-":
                value = unit[meal]
                if value not in seen:
                    seen.append(value)
                    try:
                        where[value] = (day, meal)
                    except TypeError:
                        pass
                    continue
                message = (
                    f"The restaurant in day {day} lunch {value} is repeated."
                    if meal == "lunch"
                    else f"The restaurant in day {day} {meal} is repeated."
                )
                first = where.get(value) if isinstance(value, str) else None
                return False, message, _where(day, meal, value, first=first)
    return True, None, {}


def is_valid_attractions(query: Query, plan: Any, store: Store) -> CheckOutcome:
    seen: list[str] = []
    for day, unit in _days(query, plan):
        if "attraction" in unit and unit["attraction"] and unit["attraction"] != "-":
            for attraction in unit["attraction"].split(";")[:-1]:
                if attraction not in seen:
                    seen.append(attraction)
                else:
                    return (
                        False,
                        f"The attraction '{attraction}' in day {day} is repeated.",
                        _where(day, "attraction", attraction),
                    )
    return True, None, {}


def is_valid_accommodation(query: Query, plan: Any, store: Store) -> CheckOutcome:
    values: list[Any] = []
    for day, unit in _days(query, plan):
        if "accommodation" not in unit:
            return False, "No Accommodation Info.", _where(day, "accommodation", None, reason="missing_key")
        values.append(unit["accommodation"])
    start = 0
    for value, length in consecutive_runs(values):
        start += length
        if value not in ("-", ""):
            name, city = name_city(value)
            rows = store.match_accommodations(name, city)
            if len(rows) == 1 and length < rows[0].minimum_nights:
                return (
                    False,
                    f"The accommodation {value} do not obey the minumum nights rule.",
                    _where(
                        start - length + 1,
                        "accommodation",
                        value,
                        nights=length,
                        minimum_nights=rows[0].minimum_nights,
                        city=city,
                        listing=rows[0]._asdict(),
                    ),
                )
    return True, None, {}


def is_valid_transportation(query: Query, plan: Any, store: Store) -> CheckOutcome:
    first = plan[0]["transportation"]
    if not (first and first != "-"):
        return False, "The transportation in day 1 should not be empty.", _where(1, "transportation", first)
    modes = [transportation_match(first)]
    legs: list[tuple[int, Any, str | None]] = []
    for day, unit in _days(query, plan):
        if "transportation" in unit and unit["transportation"] and unit["transportation"] != "-":
            mode = transportation_match(unit["transportation"])
            modes.append(mode)
            legs.append((day, unit["transportation"], mode))
    if ("Self-driving" in modes and "Flight" in modes) or ("Taxi" in modes and "Self-driving" in modes):
        return False, "The transportation is conflicting.", {"legs": legs, "modes": sorted({m for m in modes if m})}
    return True, None, {}


def is_valid_information_in_current_city(query: Query, plan: Any, store: Store) -> CheckOutcome:
    kept = kept_days(plan, store)
    for day, unit in _days(query, plan):
        outcome = unless_passed(results_of(kept, day), "official city", _current_city_day, day, unit)
        if outcome is not None:
            return outcome
    return True, None, {}


def _current_city_day(day: int, unit: Any) -> CheckOutcome | None:
    """Day ``day``'s part of :func:`is_valid_information_in_current_city` (reads only the day's entry; the
    day's number only names it); None when it passes."""
    current = unit["current_city"]
    cities: Any
    if "from" in current:
        a, b = from_to(current)
        cities = [before_parenthesis(a), before_parenthesis(b)]
    else:
        cities = before_parenthesis(current)  # a string: the loops below go over its characters
    if "transportation" in unit and unit["transportation"] and unit["transportation"] != "-":
        for city in cities:
            if city not in unit["transportation"]:
                return (
                    False,
                    f"The transportation in day {day} is invalid city choice.",
                    _where(day, "transportation", unit["transportation"], city=city, current_city=current),
                )
    for meal in ("breakfast", "lunch", "dinner"):
        if meal in unit and unit[meal] and unit[meal] != "-":
            if not any(city in unit[meal] for city in list(cities)):
                return (
                    False,
                    f"The {meal} in day {day} is invalid city choice.",
                    _where(day, meal, unit[meal], current_city=current),
                )
    if "attraction" in unit and unit["attraction"] and unit["attraction"] != "-":
        for attraction in unit["attraction"].split(";")[:-1]:
            if not any(city in attraction for city in list(cities)):
                return (
                    False,
                    f"The attraction in day {day} is invalid city choice.",
                    _where(day, "attraction", attraction, current_city=current),
                )
    if "accommodation" in unit and unit["accommodation"] and unit["accommodation"] != "-":
        if cities[-1] not in unit["accommodation"]:
            return (
                False,
                f"The accommodation in day {day} is invalid city choice.",
                _where(day, "accommodation", unit["accommodation"], current_city=current),
            )
    return None


def is_valid_information_in_sandbox(query: Query, plan: Any, store: Store) -> CheckOutcome:
    kept = kept_days(plan, store)
    for day, unit in _days(query, plan):
        outcome = unless_passed(results_of(kept, day), "official sandbox", _sandbox_day, store, day, unit)
        if outcome is not None:
            return outcome
    return True, None, {}


def _sandbox_day(store: Store, day: int, unit: Any) -> CheckOutcome | None:
    """Day ``day``'s part of :func:`is_valid_information_in_sandbox` (reads the day's entry and the store;
    the day's number only names it); None when it passes."""
    if unit["transportation"] and unit["transportation"] != "-":
        value = unit["transportation"]
        org, dest = _route(unit)
        if "flight number" in value.lower():
            try:
                org, dest = before_parenthesis(org), before_parenthesis(dest)
            except TypeError:
                raise ValueError(f"The transportation {value} in day {day} can not be parsed.") from None
            number = flight_number_official(value)
            if not any(f.origin == org and f.dest == dest for f in store.flights_by_number(number)):
                return (
                    False,
                    f"The flight number in day {day} is invalid in the sandbox.",
                    _where(day, "transportation", value, kind="flight", number=number, origin=org, dest=dest),
                )
        elif "self-driving" in value.lower() or "taxi" in value.lower():
            try:
                org, dest = before_parenthesis(org), before_parenthesis(dest)
            except TypeError:
                org, dest = "-", "-"
            mode = "self-driving" if "self-driving" in value.lower() else "taxi"
            if road_cost(store, org, dest, mode) is None:
                return (
                    False,
                    f"The {mode} in day {day} is invalid in the sandbox.",
                    _where(day, "transportation", value, kind=mode, origin=org, dest=dest),
                )
    for meal in ("breakfast", "lunch", "dinner"):
        if meal in unit and unit[meal] and unit[meal] != "-":
            name, city = name_city(unit[meal])
            if not store.match_restaurants(name, city):
                return (
                    False,
                    f"The {meal} in day {day} is invalid in the sandbox.",
                    _where(day, meal, unit[meal], kind="restaurant", name=name, city=city),
                )
    if "attraction" in unit and unit["attraction"] and unit["attraction"] != "-":
        for attraction in unit["attraction"].split(";")[:-1]:
            name, city = name_city(attraction)
            if not store.match_attractions(name, city):
                return (
                    False,
                    f"The attraction {attraction} in day {day} is invalid in the sandbox.",
                    _where(day, "attraction", attraction, kind="attraction", name=name, city=city),
                )
    if "accommodation" in unit and unit["accommodation"] and unit["accommodation"] != "-":
        name, city = name_city(unit["accommodation"])
        if not store.match_accommodations(name, city):
            return (
                False,
                f"The accommodation in day {day} is invalid in the sandbox.",
                _where(day, "accommodation", unit["accommodation"], kind="accommodation", name=name, city=city),
            )
    return None


def is_valid_days(query: Query, plan: Any) -> bool:
    filled = 0
    for i in _examined(query, plan):
        if plan[i] != {} and plan[i]["current_city"] != PLACEHOLDER_DAY:
            filled += 1
    return bool(filled == query["days"])


def visiting_city_number(query: Query, plan: Any) -> tuple[bool, set[Any]]:
    cities: set[Any] = set()
    for day, value, named in _day_cities(query, plan):
        if day == 1 and "from" in value and named[0] != query["org"]:
            return False, cities
        cities.update(named)
    cities.discard(query["org"])
    return len(cities) == query["visiting_city_number"], cities


def is_not_absent(query: Query, plan: Any, store: Store) -> CheckOutcome:
    needed = 6 * query["days"]
    if not is_valid_days(query, plan):
        filled = [i + 1 for i in _examined(query, plan) if plan[i] != {}]
        return False, "Invalid Days", {"reason": "days", "expected": query["days"], "filled_days": filled}
    ok, cities = visiting_city_number(query, plan)
    if not ok:
        return (
            False,
            "Invalid City Number",
            {"reason": "city_number", "expected": query["visiting_city_number"], "cities": sorted(map(str, cities))},
        )
    total = 0
    kept = kept_days(plan, store)
    last = query["days"]
    for day, unit in _days(query, plan):
        results = results_of(kept, day)
        key = ("official absent", day == last)
        counted = results.get(key) if results is not None else None
        if counted is None:
            counted = _absent_day(day, unit, last)
            if isinstance(counted, tuple):
                return counted
            if results is not None:
                results[key] = counted
        total += counted
    if total * 1.0 / needed < 0.5:
        return (
            False,
            "The absent information is more than 50%.",
            {"reason": "sparse", "filled": total, "needed": needed},
        )
    return True, None, {}


def _absent_day(day: int, unit: Any, last: int) -> CheckOutcome | int:
    """Day ``day``'s part of :func:`is_not_absent` (reads the day's entry and whether it is the ``last``;
    its number only names it): the failure, else how many of its values are filled in."""
    for key, label in (
        ("transportation", "Transportation"),
        ("breakfast", "Breakfast"),
        ("lunch", "Lunch"),
        ("dinner", "Dinner"),
        ("attraction", "Attraction"),
        ("accommodation", "Accommodation"),
    ):
        if key not in unit:
            return False, f"No {label} Info.", _where(day, key, None, reason="missing_key")
    current = unit["current_city"]
    if ("from " in current or "to " in current) and unit["transportation"] in ("", "-"):
        return False, f"No transportation in day {day} is not allowed.", _where(day, "transportation", "-")
    if ("from " not in current and " to " not in current) and unit["attraction"] in ("", "-"):
        return False, f"No attaction in day {day} is not allowed.", _where(day, "attraction", "-")
    if day != last and unit["accommodation"] in ("", "-"):
        return False, f"No accommodation in day {day} is not allowed.", _where(day, "accommodation", "-")
    if (
        unit["breakfast"] in ("", "-") or unit["lunch"] in ("", "-") or unit["dinner"] in ("", "-")
    ) and "from " not in current:
        missing = [m for m in ("breakfast", "lunch", "dinner") if unit[m] in ("", "-")]
        return False, f"No meal in day {day} is not allowed.", _where(day, missing[0], "-", missing=missing)
    filled = 0
    for key in unit:
        if unit[key] and unit[key] != "-":
            filled += 1
    return filled


# -- hard ------------------------------------------------------------------------------------------------
def _meal_cost_items(query: Query, plan: Any, store: Store) -> list[dict[str, Any]]:
    """Every priced item the official ``get_total_cost`` adds, in order (raises where it raises; new dicts,
    the caller's to keep)."""
    return list(map(dict, itertools.chain.from_iterable(_kept_cost_items(query, plan, store))))


def _kept_cost_items(query: Query, plan: Any, store: Store) -> list[list[dict[str, Any]]]:
    """The priced items of each examined day (raises where the official code raises), as kept in the
    store's day memo: read them, never hand them out."""
    people = query["people_number"]
    out: list[list[dict[str, Any]]] = []
    kept = kept_days(plan, store)
    for day, unit in _days(query, plan):
        results = results_of(kept, day)
        key = ("official cost", day, people)
        items: list[dict[str, Any]] | None = results.get(key) if results is not None else None
        if items is None:
            items = _day_cost_items(store, people, day, unit)
            if results is not None:
                results[key] = items
        out.append(items)
    return out


def _day_cost_items(store: Store, people: int, day: int, unit: Any) -> list[dict[str, Any]]:
    """Day ``day``'s part of :func:`_meal_cost_items` (reads the day's entry, the number of people and the
    store)."""
    items: list[dict[str, Any]] = []
    if unit["transportation"] and unit["transportation"] != "-":
        value = unit["transportation"]
        org, dest = _route(unit)
        if org is not None and dest is not None:
            if "flight number" in value.lower():
                rows = store.flights_by_number(flight_number_official(value))
                if rows:
                    items.append(_item(day, "transportation", value, rows[0].price * people, unit=rows[0].price))
            elif "self-driving" in value.lower() or "taxi" in value.lower():
                if "self-driving" in value.lower():
                    cost = road_cost(store, org, dest, "self-driving")
                    items.append(_item(day, "transportation", value, cost * ceil_div(people, 5), unit=cost))  # type: ignore[operator]
                else:
                    cost = road_cost(store, org, dest, "taxi")
                    items.append(_item(day, "transportation", value, cost * ceil_div(people, 4), unit=cost))  # type: ignore[operator]
    for meal in ("breakfast", "lunch", "dinner"):
        if unit[meal] and unit[meal] != "-":
            name, city = name_city(unit[meal])
            found = store.match_restaurants(name, city)
            if found:
                items.append(_item(day, meal, unit[meal], found[0].average_cost * people, unit=found[0].average_cost))
    if unit["accommodation"] and unit["accommodation"] != "-":
        name, city = name_city(unit["accommodation"])
        rooms = store.match_accommodations(name, city)
        if rooms:
            n = ceil_div(people, rooms[0].maximum_occupancy)
            items.append(_item(day, "accommodation", unit["accommodation"], rooms[0].price * n, unit=rooms[0].price))
    return items


def _item(day: int, field: str, value: Any, cost: float, *, unit: float | None) -> dict[str, Any]:
    return {"day": day, "field": field, "value": value, "cost": cost, "unit_cost": unit}


def total_cost(query: Query, plan: Any, store: Store) -> float:
    """``get_total_cost``: what the official budget check adds up (unknown items add 0)."""
    return float(sum(item["cost"] for item in _meal_cost_items(query, plan, store)))


def states(key: str, query: Query) -> bool:
    """Whether ``query`` states the hard constraint ``key`` (a commonsense one: always): where it does not,
    the official check answers None (not applicable) whatever the plan, and reads nothing else. (Raises
    where the check raises on such a query.)"""
    if key == "valid_cost" or key in COMMONSENSE_CHECKS:
        return True
    wanted = query["local_constraint"][_LOCAL_KEYS[key]]
    return bool(wanted) if key == "valid_cuisine" else wanted is not None


#: the hard checks' local constraint (the query's ``local_constraint`` key), each stated when it is set
#: (the cuisine: when it is a non-empty list)
_LOCAL_KEYS = {
    "valid_cuisine": "cuisine",
    "valid_room_rule": "house rule",
    "valid_transportation": "transportation",
    "valid_room_type": "room type",
}


def valid_cuisine(query: Query, plan: Any, store: Store) -> CheckOutcome:
    if not states("valid_cuisine", query):
        return None, None, {}
    wanted = query["local_constraint"]["cuisine"]
    covered: set[str] = set()
    counted: list[dict[str, Any]] = []
    for day, unit in _days(query, plan):
        for meal in ("breakfast", "lunch", "dinner"):
            if unit[meal] and unit[meal] != "-":
                name, city = name_city(unit[meal])
                if city == query["org"]:
                    break  # the official `continue` leaves the day's loop: later meals of the day are skipped
                rows = store.match_restaurants(name, city)
                if rows:
                    served = [c for c in wanted if c in rows[0].cuisines]
                    covered.update(served)
                    counted.append({"day": day, "field": meal, "value": unit[meal], "serves": served})
    if len(covered) == len(wanted):
        return True, None, {"meals": counted}
    missing = [c for c in wanted if c not in covered]
    if not missing:  # duplicates in the request: the official function returns None and eval.py crashes
        raise TypeError("'NoneType' object is not subscriptable")
    return False, f"The cuisine {missing[0]} is not satisfied.", {"missing": missing, "meals": counted}


def valid_room_rule(query: Query, plan: Any, store: Store) -> CheckOutcome:
    return _room_check(
        query, plan, store, "valid_room_rule", _breaks_rule, "The house rule should be {}.", "house_rules"
    )


def _breaks_rule(rule: str, room: Accommodation) -> bool:
    return rule in HOUSE_RULE_TEXT and HOUSE_RULE_TEXT[rule] in str(room.house_rules)


def valid_transportation(query: Query, plan: Any, store: Store) -> CheckOutcome:
    if not states("valid_transportation", query):
        return None, None, {}
    rule = query["local_constraint"]["transportation"]
    for day, unit in _days(query, plan):
        if unit["transportation"] and unit["transportation"] != "-":
            value = unit["transportation"]
            if (rule == "no flight" and "Flight" in value) or (rule == "no self-driving" and "Self-driving" in value):
                return False, f"The transportation should not be {rule}.", _where(day, "transportation", value)
    return True, None, {}


_ROOM_TYPE_OK = {
    "not shared room": lambda t: t != "Shared room",
    "shared room": lambda t: t == "Shared room",
    "private room": lambda t: t == "Private room",
    "entire room": lambda t: t == "Entire home/apt",
}


def valid_room_type(query: Query, plan: Any, store: Store) -> CheckOutcome:
    return _room_check(query, plan, store, "valid_room_type", _wrong_type, "The room type should be {}.", "room_type")


def _wrong_type(wanted: str, room: Accommodation) -> bool:
    return wanted in _ROOM_TYPE_OK and not _ROOM_TYPE_OK[wanted](room.room_type)


def _room_check(
    query: Query,
    plan: Any,
    store: Store,
    key: str,
    broken: Callable[[str, Accommodation], bool],
    message: str,
    shown: str,
) -> CheckOutcome:
    """The official room checks: with the local constraint of the check ``key`` set (None: not applicable), a
    day whose accommodation's first matching row is ``broken`` fails with ``message`` (the row's ``shown``
    field in the details); a day with no row found passes."""
    if not states(key, query):
        return None, None, {}
    wanted = query["local_constraint"][_LOCAL_KEYS[key]]
    for day, unit in _days(query, plan):
        if unit["accommodation"] and unit["accommodation"] != "-":
            name, city = name_city(unit["accommodation"])
            rows = store.match_accommodations(name, city)
            if rows and broken(wanted, rows[0]):
                found = {shown: getattr(rows[0], shown), "city": city}
                return False, message.format(wanted), _where(day, "accommodation", unit["accommodation"], **found)
    return True, None, {}


def valid_cost(query: Query, plan: Any, store: Store) -> CheckOutcome:
    items = _meal_cost_items(query, plan, store)
    total = float(sum(item["cost"] for item in items))
    details = {"total_cost": total, "budget": query["budget"], "items": items}
    return bool(total <= query["budget"]), None, details


def _valid_cost_passes(query: Query, plan: Any, store: Store) -> bool:
    """``valid_cost(...)[0]``: the same sum of the same items, without copying them."""
    total = float(sum([item["cost"] for items in _kept_cost_items(query, plan, store) for item in items]))
    return bool(total <= query["budget"])


COMMONSENSE_CHECKS: dict[str, CheckFn] = {
    "is_reasonable_visiting_city": is_reasonable_visiting_city,
    "is_valid_restaurants": is_valid_restaurants,
    "is_valid_attractions": is_valid_attractions,
    "is_valid_accommodation": is_valid_accommodation,
    "is_valid_transportation": is_valid_transportation,
    "is_valid_information_in_current_city": is_valid_information_in_current_city,
    "is_valid_information_in_sandbox": is_valid_information_in_sandbox,
    "is_not_absent": is_not_absent,
}
HARD_CHECKS: dict[str, CheckFn] = {
    "valid_cuisine": valid_cuisine,
    "valid_room_rule": valid_room_rule,
    "valid_transportation": valid_transportation,
    "valid_room_type": valid_room_type,
    "valid_cost": valid_cost,
}
CHECKS: dict[str, CheckFn] = {**COMMONSENSE_CHECKS, **HARD_CHECKS}
assert tuple(COMMONSENSE_CHECKS) == COMMONSENSE_KEYS and tuple(HARD_CHECKS) == HARD_KEYS


def check(key: str, query: Query, plan: Any, store: Store) -> CheckResult:
    """One official check, a crash turned into a failed result."""
    return run_check(CHECKS[key], query, plan, store)


def passes(key: str, query: Query, plan: Any, store: Store) -> bool:
    """``check(key, ...).passed``: the check neither fails nor crashes (its result is not built)."""
    try:
        if key == "valid_cost":
            return _valid_cost_passes(query, plan, store)
        return CHECKS[key](query, plan, store)[0] is not False
    except Exception:
        return False


#: the result of a check known to pass on a plan whose query states its constraint (see :func:`commonsense`),
#: shared by every such result: never changed
PASSED = CheckResult(True)


def commonsense(query: Query, plan: Any, store: Store, passing: Collection[str] = ()) -> dict[str, CheckResult]:
    """The 8 commonsense results. ``passing``: the keys whose check is known to pass on this very plan and
    query (with this store): each is the result of a pass, ``True`` (a commonsense check answers True or
    False), without running it; its message and details (None and evidence nothing reads) are left out."""
    return {
        key: PASSED if key in passing else run_check(fn, query, plan, store) for key, fn in COMMONSENSE_CHECKS.items()
    }


def hard(query: Query, plan: Any, store: Store, passing: Collection[str] = ()) -> dict[str, CheckResult]:
    """The 5 hard results; ``passing`` as in :func:`commonsense`: a check known to pass answers True where
    the query :func:`states` its constraint (and is run where it does not: it answers None at once)."""
    return {key: _result(key, fn, query, plan, store, passing) for key, fn in HARD_CHECKS.items()}


def _result(key: str, fn: CheckFn, query: Query, plan: Any, store: Store, passing: Collection[str]) -> CheckResult:
    if key in passing:
        try:
            if states(key, query):
                return PASSED
        except Exception:  # a query the check itself would crash on: run it, and report its crash
            pass
    return run_check(fn, query, plan, store)
