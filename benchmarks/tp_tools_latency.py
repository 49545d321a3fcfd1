"""Per-call latency of the six TravelPlanner tools (microseconds), cold and warm.

    python benchmarks/tp_tools_latency.py               # the store of $MODULO_DATA_DIR's database
    python benchmarks/tp_tools_latency.py --pandas      # also time the official pandas filters once
    python benchmarks/tp_tools_latency.py --json out.json

The calls are the ones sole planning needs for all 180 validation queries (their cities, routes and
dates, from the reference information: official or derived), plus CitySearch for every state. "cold"
opens a fresh store (no in-process memo) and times each distinct call once; "warm" repeats them.
The time is the lookup that produces the rows (``ToolResult.micros``), not the rendering of the
observation text with pandas, which only an agent reading the text pays for.

The official tools filter whole pandas DataFrames per call (``--pandas`` times FlightSearch and
RestaurantSearch that way on the same calls; with the 3.8M-row flights table a flight filter takes
hundreds of milliseconds). Goal: a median under 100 µs cold and under 10 µs warm.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from critics.travelplanner.benchmark import TravelPlanner
from critics.travelplanner.data import reference_entries
from critics.travelplanner.derive import official_route
from critics.travelplanner.store import Store
from critics.travelplanner.tools import TravelPlannerTools


def calls(tp: TravelPlanner) -> list[tuple[str, list[str]]]:
    out: dict[tuple[str, tuple[str, ...]], None] = {}
    for p in tp.load("validation"):
        cities, hops = official_route(reference_entries(p.context, p.id))
        for city in cities:
            for tool in ("AccommodationSearch", "RestaurantSearch", "AttractionSearch"):
                out[(tool, (city,))] = None
        for a, b, date in hops:
            out[("FlightSearch", (a, b, date))] = None
            out[("GoogleDistanceMatrix", (a, b, "self-driving"))] = None
            out[("GoogleDistanceMatrix", (a, b, "taxi"))] = None
    for state in sorted(set(tp.store.city_state.values())):
        out[("CitySearch", (state,))] = None
    return [(tool, list(args)) for tool, args in out]


def time_pass(tools: TravelPlannerTools, todo: list[tuple[str, list[str]]]) -> dict[str, list[float]]:
    micros: dict[str, list[float]] = defaultdict(list)
    for tool, args in todo:
        micros[tool].append(tools.call(tool, args).micros)
    return micros


def summary(micros: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    return {
        tool: {"calls": len(v), "median_us": statistics.median(v), "p95_us": sorted(v)[int(0.95 * (len(v) - 1))]}
        for tool, v in sorted(micros.items())
    }


def pandas_pass(tp: TravelPlanner, todo: list[tuple[str, list[str]]]) -> dict[str, dict[str, float]]:
    import pandas as pd

    sources = tp.sources
    flights = pd.read_csv(sources.flights).dropna()
    restaurants = pd.read_csv(sources.restaurants).dropna()
    micros: dict[str, list[float]] = defaultdict(list)
    for tool, args in todo:
        start = time.perf_counter()
        if tool == "FlightSearch":
            r = flights[flights["OriginCityName"] == args[0]]
            r = r[r["DestCityName"] == args[1]]
            r = r[r["FlightDate"] == args[2]]
        elif tool == "RestaurantSearch":
            r = restaurants[restaurants["City"] == args[0]]
        else:
            continue
        len(r)
        micros[tool + " (pandas)"].append((time.perf_counter() - start) * 1e6)
    return summary(micros)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pandas", action="store_true", help="also time the official pandas filters")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    tp = TravelPlanner()
    todo = calls(tp)
    store = Store(tp.store.path)  # a fresh handle: nothing memoised yet
    tools = TravelPlannerTools(store)
    tools.cities  # noqa: B018 -- read the city list once, outside the timing (as the official agent does)
    cold = summary(time_pass(tools, todo))
    warm = summary(time_pass(tools, todo))
    result: dict[str, Any] = {"calls": len(todo), "flights_rows": store.counts.get("flights"), "cold": cold, "warm": warm}
    if args.pandas:
        result["pandas"] = pandas_pass(tp, todo)
    for label in ("cold", "warm", "pandas"):
        if label not in result:
            continue
        print(f"{label}:")
        for tool, row in result[label].items():
            print(f"  {tool:<28} {row['calls']:>5} calls  median {row['median_us']:>9.1f} µs  p95 {row['p95_us']:>9.1f} µs")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
