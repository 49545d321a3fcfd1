"""Reference information derived with the tools, for validation rows that have none.

The official reference information of a query lists, in this order, ``Attractions in X``,
``Restaurants in X`` and ``Accommodations in X`` for each visited city, then ``Flight from A to B on D``,
``Self-driving from A to B`` and ``Taxi from A to B`` for each hop of the route; each ``Content`` is what
the tool returns (a table printed by pandas ``to_string(index=False)``, or the tool's sentence).

:func:`reference_for_route` rebuilds that list for a given route; on the 129 validation rows that have
official reference information it reproduces every entry exactly when given the official route (the
test ``tests/travelplanner/test_derive.py`` checks all 129). :func:`choose_route` picks the route for a
query that names no cities: one city is the destination itself; for a state, the first ordered choice
of distinct cities of ``CitySearch[state]`` (in its order) where every city has an accommodation, a
restaurant and an attraction and every hop has a flight on its date or a road, with hops on days
1, 1 + (days-1)/k, ..., days. The official annotators chose the cities of multi-city queries by hand
and sometimes moved a hop by a day, so on such rows a derived route can differ from the official one:
:func:`compare_with_official` lists each difference.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from typing import Any

from modulo.errors import DataError
from modulo.types import Problem

from .tools import TravelPlannerTools

_FLIGHT = re.compile(r"^Flight from (.+) to (.+) on (\d{4}-\d{2}-\d{2})$")
_CITY = re.compile(r"^(?:Attractions|Restaurants|Accommodations) in (.+)$")
#: bumped when the derivation changes (derived reference information is cached under this version)
DERIVE_VERSION = 1
#: how many ordered city choices the route search tries before giving up (24 cities, 3 stops: 12,144)
_MAX_TRIES = 20_000


def hop_days(days: int, k: int) -> list[int]:
    """The days (1-based) of the k+1 hops of a k-city trip: first and last day, the rest evenly between."""
    return [1 + round(j * (days - 1) / k) for j in range(k + 1)]


def reference_for_route(
    tools: TravelPlannerTools, cities: Sequence[str], hops: Sequence[tuple[str, str, str]]
) -> list[dict[str, Any]]:
    """The reference-information entries for ``cities`` and ``hops`` as (from, to, date)."""
    entries: list[dict[str, Any]] = []
    for city in cities:
        for label, tool in (
            ("Attractions", "AttractionSearch"),
            ("Restaurants", "RestaurantSearch"),
            ("Accommodations", "AccommodationSearch"),
        ):
            entries.append({"Description": f"{label} in {city}", "Content": _content(tools, tool, [city])})
    for a, b, date in hops:
        entries.append(
            {
                "Description": f"Flight from {a} to {b} on {date}",
                "Content": _content(tools, "FlightSearch", [a, b, date]),
            }
        )
        entries.append(
            {"Description": f"Self-driving from {a} to {b}", "Content": tools.distance_text(a, b, "self-driving")}
        )
        entries.append({"Description": f"Taxi from {a} to {b}", "Content": tools.distance_text(a, b, "taxi")})
    return entries


def _content(tools: TravelPlannerTools, tool: str, args: list[str]) -> str:
    """What the reference information holds for one search: the table without its index, or the sentence."""
    from .store import _TABLES
    from .tools import _TABLE_OF, render_table

    result = tools.call(tool, args)
    if not result.rows:
        return result.text
    return render_table(_TABLES[_TABLE_OF[tool]][1], result.rows)


def _feasible_hop(tools: TravelPlannerTools, a: str, b: str, date: str) -> bool:
    if tools.store.flights_on(a, b, date):
        return True
    road = tools.store.road(a, b)
    return road is not None and road.valid


def _city_ok(tools: TravelPlannerTools, city: str) -> bool:
    store = tools.store
    return bool(store.accommodations_in(city) and store.restaurants_in(city) and store.attractions_in(city))


def choose_route(tools: TravelPlannerTools, query: dict[str, Any]) -> tuple[list[str], list[tuple[str, str, str]]]:
    """(cities, hops) for a query (see the module doc); DataError when no route fits."""
    org, dest, days, k = query["org"], query["dest"], int(query["days"]), int(query["visiting_city_number"])
    dates = list(query["date"])
    on = [dates[d - 1] for d in hop_days(days, k)]
    if k == 1:
        candidates: Sequence[tuple[str, ...]] = [(dest,)]
    else:
        result = tools.call("CitySearch", [dest])
        if not result.ok or not result.rows:
            raise DataError(f"cannot derive a route: {dest!r} is not a state CitySearch knows")
        names = [r["city"] for r in result.rows if r["city"] != org]
        names = [c for c in dict.fromkeys(names) if _city_ok(tools, c)]
        candidates = itertools.islice(itertools.permutations(names, k), _MAX_TRIES)  # type: ignore[assignment]
    fallback: tuple[str, ...] | None = None
    for choice in candidates:
        chain = [org, *choice, org]
        if fallback is None:
            fallback = choice
        if all(_feasible_hop(tools, a, b, on[j]) for j, (a, b) in enumerate(itertools.pairwise(chain))):
            return list(choice), [(a, b, on[j]) for j, (a, b) in enumerate(itertools.pairwise(chain))]
    if fallback is None:
        raise DataError(f"cannot derive a route: no city of {dest!r} has accommodations, restaurants and attractions")
    chain = [org, *fallback, org]  # nothing fits: the first choice, whose reference information says so
    return list(fallback), [(a, b, on[j]) for j, (a, b) in enumerate(itertools.pairwise(chain))]


def derive_reference(tools: TravelPlannerTools, query: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """(reference entries, the cities chosen) for a query."""
    cities, hops = choose_route(tools, query)
    return reference_for_route(tools, cities, hops), cities


def official_route(entries: list[dict[str, Any]]) -> tuple[list[str], list[tuple[str, str, str]]]:
    """(cities, dated hops) named by official reference entries, in their order."""
    cities: list[str] = []
    hops: list[tuple[str, str, str]] = []
    for entry in entries:
        desc = str(entry["Description"])
        if (m := _FLIGHT.match(desc)) is not None:
            hops.append((m.group(1), m.group(2), m.group(3)))
        elif (m := _CITY.match(desc)) is not None and m.group(1) not in cities:
            cities.append(m.group(1))
    return cities, hops


def compare_with_official(tools: TravelPlannerTools, problem: Problem, entries: list[dict[str, Any]]) -> list[str]:
    """How the derivation differs from a row's official reference information (empty: identical).

    Two checks: the tools on the official route must reproduce every official entry; the route chosen
    from the query alone is compared with the official route (cities, then hop dates).
    """
    differences: list[str] = []
    cities, hops = official_route(entries)
    rebuilt = reference_for_route(tools, cities, hops)
    if [e["Description"] for e in rebuilt] != [e["Description"] for e in entries]:
        differences.append("entry order: " + str([e["Description"] for e in entries]))
    for ours, theirs in zip(rebuilt, entries, strict=False):
        if ours["Description"] == theirs["Description"] and ours["Content"] != theirs["Content"]:
            differences.append(f"content of {theirs['Description']!r}")
    chosen, chosen_hops = choose_route(tools, problem.constraints)
    if chosen != cities:
        differences.append(f"cities: derived {chosen}, official {cities}")
    elif [h[2] for h in chosen_hops] != [h[2] for h in hops]:
        differences.append(f"hop dates: derived {[h[2] for h in chosen_hops]}, official {[h[2] for h in hops]}")
    return differences
