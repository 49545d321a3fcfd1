"""The six TravelPlanner tools over the SQLite store, with the official tools' semantics.

========================  ==============================  =============================================
tool                      arguments                       rows (official columns) / message
========================  ==============================  =============================================
``FlightSearch``          origin, destination, date       the flights of that route on that date;
                                                          "There is no flight from A to B on D."
``AccommodationSearch``   city                            the accommodations of the city;
                                                          "There is no attraction in this city." (sic)
``RestaurantSearch``      city                            "There is no restaurant in this city."
``AttractionSearch``      city                            "There is no attraction in this city."
``GoogleDistanceMatrix``  origin, destination, mode       one sentence: "<mode>, from A to B, duration:
 (alias DistanceMatrix)                                   ..., distance: ..., cost: N", or "No valid
                                                          information." (empty or multi-day row), or
                                                          "<mode>, from A to B, no valid information."
``CitySearch``            state                           the cities of the state; "Invalid State"
========================  ==============================  =============================================

As in the official agent, the city arguments of the city tools and of FlightSearch must be in
``citySet.txt`` ("X is not valid city in [...]") and a FlightSearch date must look like YYYY-MM-DD;
such calls are invalid (``ok`` False). Row order is table order after ``dropna``, as the official
pandas filters return it (with the partial flights table: ascending flight number, see ``rows``).
Observation texts are what the official tools print: ``to_string(index=False)``
of the rows, except RestaurantSearch, whose official ``run`` prints the table *with* its CSV index.

Lookups are keyed SQLite queries memoised in process: a cold call takes tens of microseconds, a warm
one a few (``benchmarks/tp_tools_latency.py``). Only the observation text needs pandas, and only
when someone reads it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from modulo.tools import Toolbox, ToolResult, ToolSpec

from .store import _TABLES, PARTIAL_FLIGHTS, Store

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_PAREN = re.compile(r"^(.*?)\([^)]*\)")


SPECS: list[ToolSpec] = [
    ToolSpec.strings(
        "FlightSearch",
        "Flights from a departure city to a destination city on a date (YYYY-MM-DD).",
        origin="departure city",
        destination="destination city",
        date="departure date, YYYY-MM-DD",
    ),
    ToolSpec.strings("AccommodationSearch", "Accommodations in a city.", city="city name"),
    ToolSpec.strings("RestaurantSearch", "Restaurants in a city.", city="city name"),
    ToolSpec.strings("AttractionSearch", "Attractions in a city.", city="city name"),
    ToolSpec.strings(
        "GoogleDistanceMatrix",
        "Duration, distance and cost of driving between two cities; mode is 'self-driving' or 'taxi'.",
        aliases=("DistanceMatrix",),
        origin="origin city",
        destination="destination city",
        mode="'self-driving' or 'taxi'",
    ),
    ToolSpec.strings("CitySearch", "The cities of a US state (that the database knows).", state="state name"),
]

_TABLE_OF = {
    "FlightSearch": "flights",
    "AccommodationSearch": "accommodations",
    "RestaurantSearch": "restaurants",
    "AttractionSearch": "attractions",
}
_NONE = {
    "AccommodationSearch": "There is no attraction in this city.",  # the official message, sic
    "RestaurantSearch": "There is no restaurant in this city.",
    "AttractionSearch": "There is no attraction in this city.",
}


def before_parenthesis(text: str) -> str:
    """The official ``extract_before_parenthesis``: what precedes a '(...)' group, else the text."""
    m = _PAREN.search(text)
    return m.group(1) if m else text


def render_table(columns: list[str], rows: list[dict[str, Any]], *, index: list[int] | None = None) -> str:
    """Rows as pandas prints them (``to_string``; with ``index`` labels when given, else ``index=False``)."""
    import pandas as pd

    frame = pd.DataFrame(rows, columns=columns, index=index)
    return str(frame.to_string(index=index is not None))


def city_list(store: Store) -> list[str]:
    """The official agent's valid cities, in file order: ``background/citySet.txt`` beside the state map."""
    path = Path(store.sources.get("cities", "")).with_name("citySet.txt")
    if path.is_file():
        return path.read_text(encoding="utf-8").strip().split("\n")
    return list(store.city_state)


class TravelPlannerTools(Toolbox):
    """The six official tools over a :class:`~critics.travelplanner.store.Store`."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._cities: list[str] | None = None
        self._city_set: frozenset[str] = frozenset()
        self._states: dict[str, list[str]] | None = None
        self._rows: dict[tuple[str, ...], tuple[list[int], list[dict[str, Any]]]] = {}

    @property
    def cities(self) -> list[str]:
        if self._cities is None:
            self._cities = city_list(self.store)
            self._city_set = frozenset(self._cities)
        return self._cities

    def specs(self) -> list[ToolSpec]:
        return list(SPECS)

    # -- rows ------------------------------------------------------------------------------------
    def rows(self, tool: str, *args: str) -> tuple[list[int], list[dict[str, Any]]]:
        """(table ids, rows as dicts with the official column names) of a table tool (memoised; callers
        get copies of the row dicts)."""
        key = (tool, *args)
        if key not in self._rows:
            self._rows[key] = self._fetch_rows(tool, *args)
        ids, rows = self._rows[key]
        return ids, [dict(r) for r in rows]

    def _fetch_rows(self, tool: str, *args: str) -> tuple[list[int], list[dict[str, Any]]]:
        table = _TABLE_OF[tool]
        columns = _TABLES[table][1]
        ints = set(self.store.int_columns.get(table, ()))
        records = self.store.table_rows(table, *args)
        if table == "flights" and Path(self.store.sources.get("flights", "")).name == PARTIAL_FLIGHTS:
            # the partial table was assembled from several sources, so its row order is not the official
            # table's; every route-date table of the official reference information (197 of them) lists
            # its flights in ascending flight-number order, which is what the full table gives
            records = tuple(sorted(records, key=lambda r: str(r[1])))
        out = []
        for record in records:
            values = record[1:]
            out.append(
                {c: (int(v) if c in ints and v is not None else v) for c, v in zip(columns, values, strict=True)}
            )
        return [int(r[0]) for r in records], out

    def _invalid(self, tool: str, arguments: dict[str, Any], message: str) -> ToolResult:
        return ToolResult(tool, arguments, message=message, ok=False)

    def _check_city(self, city: str) -> str | None:
        cities = self.cities
        if city in self._city_set:
            return None
        return f"{city} is not valid city in {cities!s}."

    def _call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        if name == "CitySearch":
            return self._city_search(arguments)
        if name == "GoogleDistanceMatrix":
            return self._distance(arguments)
        if name == "FlightSearch":
            origin, dest, date = arguments["origin"], arguments["destination"], arguments["date"]
            if not _DATE.match(date):
                return self._invalid(name, arguments, f"'{date}' is not in the format YYYY-MM-DD")
            for city in (origin, dest):
                if (problem := self._check_city(city)) is not None:
                    return self._invalid(name, arguments, problem)
            ids, rows = self.rows(name, origin, dest, date)
            if not rows:
                return ToolResult(
                    name, arguments, rows=[], message=f"There is no flight from {origin} to {dest} on {date}."
                )
            return ToolResult(name, arguments, rows=rows, render=self._renderer(name, rows, ids))
        city = arguments["city"]
        if (problem := self._check_city(city)) is not None:
            return self._invalid(name, arguments, problem)
        ids, rows = self.rows(name, city)
        if not rows:
            return ToolResult(name, arguments, rows=[], message=_NONE[name])
        return ToolResult(name, arguments, rows=rows, render=self._renderer(name, rows, ids))

    def _renderer(self, tool: str, rows: list[dict[str, Any]], ids: list[int]) -> Callable[[], str]:
        columns = _TABLES[_TABLE_OF[tool]][1]
        index = ids if tool == "RestaurantSearch" else None
        if tool == "FlightSearch":
            return lambda: render_table(columns, rows, index=index)
        # the official agent strips the city tables' observation (the header's leading spaces go)
        return lambda: render_table(columns, rows, index=index).strip()

    def _city_search(self, arguments: dict[str, Any]) -> ToolResult:
        if self._states is None:
            states: dict[str, list[str]] = {}
            for city, state in self.store.city_pairs():
                states.setdefault(state, []).append(city)
            self._states = states
        state = arguments["state"]
        if state not in self._states:
            return self._invalid("CitySearch", arguments, "Invalid State")
        cities = list(self._states[state])
        return ToolResult(
            "CitySearch", arguments, rows=[{"city": c, "state": state} for c in cities], render=lambda: str(cities)
        )

    def distance_text(self, origin: str, destination: str, mode: str) -> str:
        """The official ``GoogleDistanceMatrix.run`` sentence."""
        origin, destination = before_parenthesis(origin), before_parenthesis(destination)
        road = self.store.road(origin, destination)
        if road is None:
            return f"{mode}, from {origin} to {destination}, no valid information."
        if road.duration is None or road.distance is None or "day" in road.duration:
            return "No valid information."
        return (
            f"{mode}, from {origin} to {destination}, duration: {road.duration}, distance: {road.distance}, "
            f"cost: {road.cost(mode)}"
        )

    def _distance(self, arguments: dict[str, Any]) -> ToolResult:
        origin, destination, mode = arguments["origin"], arguments["destination"], arguments["mode"]
        road = self.store.road(before_parenthesis(origin), before_parenthesis(destination))
        text = self.distance_text(origin, destination, mode)
        rows = None
        if road is not None and road.duration is not None and road.distance is not None and "day" not in road.duration:
            rows = [
                {
                    "origin": road.origin,
                    "destination": road.destination,
                    "duration": road.duration,
                    "distance": road.distance,
                    "cost": road.cost(mode),
                }
            ]
        return ToolResult(
            "GoogleDistanceMatrix",
            arguments,
            rows=rows if rows is not None else [],
            message=None if rows else text,
            render=lambda: text,
        )
