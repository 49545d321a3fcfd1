"""The TravelPlanner paper's greedy-search baseline (sole-planning): cost is the only objective.

From the reference information of a query it reads the route (the cities and, from the flight
entries, the day of each hop); for every hop it takes the cheapest of the cheapest flight that day,
self-driving and a taxi (for the whole group); for every meal the cheapest restaurant of the city; for
every night the cheapest accommodation of the city (for the whole group); and on the days spent in a
city two attractions drawn at random (seeded by ``seed`` and the problem id). It looks at no
constraint besides the route, so it shows what ignoring the commonsense and hard rules costs.

As in the paper, the cheapest restaurant is chosen for every meal, so a city's meals repeat one
restaurant; ``distinct_meals=True`` takes the cheapest restaurant not used yet instead.
"""

from __future__ import annotations

import itertools
import random
import re
from typing import TYPE_CHECKING, Any, ClassVar

from modulo.errors import DataError
from modulo.generators import Generation, GenerationContext, Generator
from modulo.types import Message, Problem

from .checks import ceil_div, query_dates
from .data import reference_entries, require_reference
from .store import Store

if TYPE_CHECKING:
    from .benchmark import TravelPlanner

_FLIGHT = re.compile(r"^Flight from (.+) to (.+) on (\d{4}-\d{2}-\d{2})$")
_GROUND = re.compile(r"^(?:Self-driving|Taxi) from (.+) to (.+)$")
_CITY_TABLE = re.compile(r"^(?:Attractions|Restaurants|Accommodations) in (.+)$")


def route_of(problem: Problem) -> tuple[list[str], list[tuple[str, str, int]]]:
    """(visited cities in order, hops as (from, to, day)) read from the reference information."""
    entries = reference_entries(problem.context, f"problem {problem.id}")
    query = problem.constraints
    org, days, k = query["org"], int(query["days"]), int(query["visiting_city_number"])
    dates = query_dates(query)
    hops: list[tuple[str, str, str | None]] = []
    cities: list[str] = []
    for entry in entries:
        desc = entry["Description"].strip()
        if m := _FLIGHT.match(desc):
            hops.append((m.group(1), m.group(2), m.group(3)))
        elif (m := _GROUND.match(desc)) and not any((a, b) == (m.group(1), m.group(2)) for a, b, _ in hops):
            hops.append((m.group(1), m.group(2), None))
        elif (m := _CITY_TABLE.match(desc)) and m.group(1) not in cities:
            cities.append(m.group(1))
    chain = _chain(org, hops) or [org, *cities, org]
    if len(chain) != k + 2:
        raise DataError(f"problem {problem.id}: cannot read a route of {k} cities from the reference information")
    dated = {(a, b): d for a, b, d in hops if d}
    out = []
    for j, (a, b) in enumerate(itertools.pairwise(chain)):
        date = dated.get((a, b))
        day = dates.index(date) + 1 if date in dates else 1 + round(j * (days - 1) / (k or 1))
        out.append((a, b, day))
    return chain[1:-1], out


def _chain(org: str, hops: list[tuple[str, str, str | None]]) -> list[str] | None:
    nxt: dict[str, str] = {}
    for a, b, _ in hops:
        nxt.setdefault(a, b)
    chain, seen = [org], {org}
    while chain[-1] in nxt:
        city = nxt[chain[-1]]
        chain.append(city)
        if city in seen:
            break
        seen.add(city)
    return chain if len(chain) >= 3 and chain[-1] == org else None


def cheapest_leg(store: Store, a: str, b: str, date: str | None, people: int) -> str:
    """The cheapest transport text for a hop, or '-' when the database offers none."""
    options: list[tuple[float, str]] = []
    if date:
        for f in store.flights_on(a, b, date):
            text = (
                f"Flight Number: {f.number}, from {a} to {b}, Departure Time: {f.dep_time}, Arrival Time: {f.arr_time}"
            )
            options.append((f.price * people, text))
    road = store.road(a, b)
    if road is not None:
        for mode, seats, label in (("self-driving", 5, "Self-driving"), ("taxi", 4, "Taxi")):
            cost = road.cost(mode)
            if cost is not None:
                text = f"{label}, from {a} to {b}, duration: {road.duration}, distance: {road.distance}, cost: {cost}"
                options.append((cost * ceil_div(people, seats), text))
    return min(options)[1] if options else "-"


def greedy_plan(
    store: Store, problem: Problem, rng: random.Random, *, distinct_meals: bool = False
) -> list[dict[str, Any]]:
    """The greedy plan of ``problem`` (see the module doc)."""
    query = problem.constraints
    org, n, people = query["org"], int(query["days"]), int(query["people_number"])
    dates = query_dates(query)
    _, hops = route_of(problem)
    travel = {day: (a, b) for a, b, day in hops}
    used_restaurants: set[tuple[str, str]] = set()
    used_attractions: set[tuple[str, str]] = set()
    plan: list[dict[str, Any]] = []
    city = org
    for day in range(1, n + 1):
        unit: dict[str, Any] = {"days": day}
        if day in travel:
            a, b = travel[day]
            unit["current_city"] = f"from {a} to {b}"
            unit["transportation"] = cheapest_leg(store, a, b, dates[day - 1] if day <= len(dates) else None, people)
            meal_city, city = (b if b != org else a), b
        else:
            unit["current_city"] = city
            unit["transportation"] = "-"
            meal_city = city
        for meal in ("breakfast", "attraction", "lunch", "dinner"):
            if meal == "attraction":
                unit[meal] = "-" if day in travel else _attractions(store, meal_city, used_attractions, rng)
                continue
            options = sorted(
                (r for r in store.restaurants_in(meal_city) if (r.name, r.city) not in used_restaurants),
                key=lambda r: r.average_cost,
            )
            if options:
                if distinct_meals:
                    used_restaurants.add((options[0].name, options[0].city))
                unit[meal] = f"{options[0].name}, {options[0].city}"
            else:
                unit[meal] = "-"
        if day == n or city == org:
            unit["accommodation"] = "-"
        else:
            rooms = sorted(store.accommodations_in(city), key=lambda r: r.price * ceil_div(people, r.maximum_occupancy))
            unit["accommodation"] = f"{rooms[0].name}, {rooms[0].city}" if rooms else "-"
        plan.append(unit)
    return plan


def _attractions(store: Store, city: str, used: set[tuple[str, str]], rng: random.Random, k: int = 2) -> str:
    pool = [a for a in store.attractions_in(city) if (a.name, a.city) not in used]
    picked = rng.sample(pool, min(k, len(pool)))
    used.update((a.name, a.city) for a in picked)
    return "".join(f"{a.name}, {a.city};" for a in picked) or "-"


class GreedyGenerator(Generator):
    """``generator=greedy``: the paper's cost-greedy search; needs no model."""

    needs_llm: ClassVar[bool] = False
    uses_feedback: ClassVar[bool] = False
    benchmarks: ClassVar[tuple[str, ...]] = ("travelplanner",)

    def __init__(self, *, benchmark: TravelPlanner, seed: int = 0, distinct_meals: bool = False) -> None:
        self.benchmark = benchmark
        self.seed = seed
        self.distinct_meals = distinct_meals

    def plan(self, problem: Problem) -> list[dict[str, Any]]:
        """The greedy plan (deterministic for a seed and problem)."""
        require_reference([problem])
        rng = random.Random(f"{self.seed}:{problem.id}")
        return greedy_plan(self.benchmark.store, problem, rng, distinct_meals=self.distinct_meals)

    async def generate(self, problem: Problem, messages: list[Message], ctx: GenerationContext) -> Generation:
        return Generation(plan=self.plan(problem))
