"""Constructive hints from the database for failed checks (what a critic says with ``hints=True``).

Each hint names concrete alternatives: the cheapest accommodation in the city that satisfies the
query's house rule, room type and the stay's length; restaurants not yet used (serving a missing
cuisine); attractions not yet visited; the flights of a route on the day's date; ground transport costs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .checks import HOUSE_RULE_TEXT, MEALS, CheckResult, ceil_div, money, query_dates
from .checks import people as people_text
from .store import Accommodation, Attraction, Restaurant, Store
from .text import is_blank, normalise, split_attractions, strict_current_city, strict_name_city

Query = Mapping[str, Any]
_ROOM_TYPES = {
    "not shared room": ("Private room", "Entire home/apt"),
    "shared room": ("Shared room",),
    "private room": ("Private room",),
    "entire room": ("Entire home/apt",),
}


def _days(plan: Any, n: int) -> list[tuple[int, Mapping[str, Any]]]:
    if not isinstance(plan, list):
        return []
    return [(i + 1, d) for i, d in enumerate(plan[:n]) if isinstance(d, Mapping)]


def _texts(plan: Any, n: int, fields: Sequence[str]) -> list[str]:
    out = []
    for _, unit in _days(plan, n):
        for field in fields:
            value = unit.get(field)
            if isinstance(value, str) and not is_blank(value):
                out.append(value)
    return out


def nights_in(plan: Any, n: int, city: str) -> int:
    """How many nights the plan spends in ``city`` (accommodation entries located there)."""
    count = 0
    for value in _texts(plan, n, ("accommodation",)):
        parsed = strict_name_city(value)
        if parsed and parsed[1] == city:
            count += 1
    return count


def suitable_accommodations(store: Store, query: Query, city: str, nights: int | None) -> list[Accommodation]:
    """Listings of ``city`` meeting the house rule, room type and (when given) the stay length, cheapest first."""
    local = query.get("local_constraint") or {}
    rule, kind = local.get("house rule"), local.get("room type")
    people = int(query.get("people_number") or 1)
    out = []
    for row in store.accommodations_in(city):
        if rule in HOUSE_RULE_TEXT and HOUSE_RULE_TEXT[rule] in {r.strip() for r in row.house_rules.split("&")}:
            continue
        if kind in _ROOM_TYPES and row.room_type not in _ROOM_TYPES[kind]:
            continue
        if nights is not None and row.minimum_nights > nights:
            continue
        out.append(row)
    out.sort(key=lambda r: r.price * ceil_div(people, r.maximum_occupancy))
    return out


def _listing_text(row: Accommodation, people: int) -> str:
    rooms = ceil_div(people, row.maximum_occupancy)
    per = f"{money(row.price)}/night" + (f" x {rooms} rooms" if rooms > 1 else "")
    return f"'{row.name}, {row.city}' ({per}, {row.room_type}, minimum {row.minimum_nights:g} nights)"


def accommodation_hint(store: Store, query: Query, plan: Any, city: str, nights: int | None = None) -> str | None:
    if nights is None:
        nights = nights_in(plan, query["days"], city) or None
    rows = suitable_accommodations(store, query, city, nights)
    if not rows:
        rows = suitable_accommodations(store, query, city, None)
        if not rows:
            return f"No listing in {city} meets the query's requirements; consider another city."
        return (
            f"No listing in {city} accepts a stay of {nights} night(s) with the query's requirements; the shortest "
            f"minimum stay among suitable ones is {min(r.minimum_nights for r in rows):g} nights, e.g. "
            + _listing_text(min(rows, key=lambda r: r.minimum_nights), int(query["people_number"]))
            + "."
        )
    people = int(query["people_number"])
    shown = ", ".join(_listing_text(r, people) for r in rows[:3])
    return f"Cheapest suitable accommodation in {city}" + (f" for {nights} night(s)" if nights else "") + f": {shown}."


def restaurant_hint(
    store: Store, query: Query, plan: Any, city: str, *, cuisines: Sequence[str] = (), limit: int = 3
) -> str | None:
    used = {normalise(v) for v in _texts(plan, query["days"], MEALS)}
    wanted = [c.casefold() for c in cuisines]

    def serves(row: Restaurant) -> bool:
        kinds = {c.strip().casefold() for c in row.cuisines.split(",")}
        return not wanted or any(c in kinds for c in wanted)

    rows = [r for r in store.restaurants_in(city) if normalise(f"{r.name}, {r.city}") not in used and serves(r)]
    if not rows:
        return None
    rows.sort(key=lambda r: r.average_cost)
    shown = ", ".join(f"'{r.name}, {r.city}' ({money(r.average_cost)}, {r.cuisines})" for r in rows[:limit])
    what = f"serving {', '.join(cuisines)} " if cuisines else ""
    return f"Restaurants in {city} {what}not used yet (cheapest first): {shown}."


def attraction_hint(store: Store, query: Query, plan: Any, city: str, limit: int = 4) -> str | None:
    used: set[str] = set()
    for value in _texts(plan, query["days"], ("attraction",)):
        used.update(normalise(p) for p in split_attractions(value))
    rows = [r for r in store.attractions_in(city) if normalise(f"{r.name}, {r.city}") not in used]
    if not rows:
        return None
    return f"Attractions in {city} not visited yet: " + "; ".join(f"{r.name}, {r.city}" for r in rows[:limit]) + "."


def transport_hint(store: Store, query: Query, origin: str, dest: str, date: str | None, *, avoid: str = "") -> str:
    n = int(query.get("people_number") or 1)
    options = []
    if avoid != "flight" and date:
        flights = sorted(store.flights_on(origin, dest, date), key=lambda f: f.price)
        for f in flights[:3]:
            options.append(
                f"'Flight Number: {f.number}, from {origin} to {dest}, Departure Time: {f.dep_time}, "
                f"Arrival Time: {f.arr_time}' ({money(f.price * n)} for {people_text(n)})"
            )
    road = store.road(origin, dest)
    if road is not None:
        for mode, seats in (("self-driving", 5), ("taxi", 4)):
            if mode == avoid:
                continue
            cost = road.cost(mode)
            if cost is not None:
                label = "Self-driving" if mode == "self-driving" else "Taxi"
                options.append(
                    f"'{label}, from {origin} to {dest}, duration: {road.duration}, distance: {road.distance}, "
                    f"cost: {cost}' ({money(cost * ceil_div(n, seats))} for {people_text(n)})"
                )
    on = f" on {date}" if date else ""
    if not options:
        return f"The database has no usable transport from {origin} to {dest}{on}" + (
            f" other than {avoid}." if avoid else "."
        )
    return f"Options from {origin} to {dest}{on}: " + "; ".join(options) + "."


def _route_of(plan: Any, day: int) -> tuple[str, str] | None:
    days = dict(_days(plan, day))
    unit = days.get(day)
    if unit is None:
        return None
    cd = strict_current_city(unit.get("current_city"))
    if cd is None or not cd.travel or cd.origin is None:
        return None
    return cd.origin, cd.city


def _city_of_day(plan: Any, day: int) -> str | None:
    unit = dict(_days(plan, day)).get(day)
    cd = strict_current_city(unit.get("current_city")) if unit is not None else None
    return cd.city if cd is not None else None


def _date(query: Query, day: int) -> str | None:
    dates = query_dates(query)
    return dates[day - 1] if 0 < day <= len(dates) else None


def _entry_city(value: Any) -> str | None:
    parsed = strict_name_city(value) if isinstance(value, str) else None
    return parsed[1] if parsed else None


HintFn = Callable[[Store, Query, Any, CheckResult], "str | None"]


def _sandbox(store: Store, query: Query, plan: Any, result: CheckResult) -> str | None:
    d = result.details
    day = int(d.get("day") or 0)
    kind, city = d.get("kind"), d.get("city") or _entry_city(d.get("value"))
    if kind in ("flight", "self-driving", "taxi", "unknown"):
        route = (d["origin"], d["dest"]) if d.get("origin") and d.get("dest") else _route_of(plan, day)
        if route is None:
            return "Write each travel leg as 'from <city> to <city>' with a flight number, or as self-driving or taxi."
        return transport_hint(store, query, route[0], route[1], _date(query, day))
    if not city or city not in store.city_state:
        return (
            "Write every entry as '<name>, <city>' exactly as the reference information lists it, with nothing "
            "after the city (no cost or notes)."
        )
    hint: str | None = None
    if kind == "restaurant" or d.get("field") in MEALS:
        hint = restaurant_hint(store, query, plan, city)
    elif kind == "attraction" or d.get("field") == "attraction":
        hint = attraction_hint(store, query, plan, city)
    elif kind == "accommodation" or d.get("field") == "accommodation":
        hint = accommodation_hint(store, query, plan, city)
    near = near_name(store, kind, d.get("name"), city)
    return " ".join(filter(None, (near, hint))) or None


def near_name(store: Store, kind: Any, name: Any, city: str) -> str | None:
    """The "Did you mean ...?" of the first listing of ``city`` whose name contains ``name`` (which names no
    listing exactly), for an entry of a restaurant, an attraction or an accommodation."""
    if not isinstance(name, str) or not name:
        return None
    rows: tuple[Restaurant | Attraction | Accommodation, ...] = ()
    if kind == "restaurant":
        rows = store.match_restaurants(name, city)
    elif kind == "attraction":
        rows = store.match_attractions(name, city)
    elif kind == "accommodation":
        rows = store.match_accommodations(name, city)
    return f"Did you mean {rows[0].name!r}?" if rows else None


def _minimum_nights(store: Store, query: Query, plan: Any, result: CheckResult) -> str | None:
    d = result.details
    city = d.get("city") or _entry_city(d.get("value"))
    if not city:
        return None
    nights = d.get("nights")
    return accommodation_hint(store, query, plan, city, int(nights) if nights else None)


def _accommodation_constraint(store: Store, query: Query, plan: Any, result: CheckResult) -> str | None:
    city = result.details.get("city") or _entry_city(result.details.get("value"))
    return accommodation_hint(store, query, plan, city) if city else None


def _restaurants(store: Store, query: Query, plan: Any, result: CheckResult) -> str | None:
    city = _entry_city(result.details.get("value")) or _city_of_day(plan, int(result.details.get("day") or 0))
    return restaurant_hint(store, query, plan, city) if city else None


def _attractions(store: Store, query: Query, plan: Any, result: CheckResult) -> str | None:
    city = _entry_city(result.details.get("value")) or _city_of_day(plan, int(result.details.get("day") or 0))
    return attraction_hint(store, query, plan, city) if city else None


def _visited(query: Query, plan: Any) -> list[str]:
    out: list[str] = []
    for _, unit in _days(plan, query["days"]):
        cd = strict_current_city(unit.get("current_city"))
        if cd is not None and cd.city != query["org"] and cd.city not in out:
            out.append(cd.city)
    return out


def _cuisine(store: Store, query: Query, plan: Any, result: CheckResult) -> str | None:
    missing = result.details.get("missing") or []
    hints = []
    for city in _visited(query, plan):
        text = restaurant_hint(store, query, plan, city, cuisines=missing, limit=2)
        if text:
            hints.append(text)
    return " ".join(hints) or None


def _legs(query: Query, plan: Any) -> list[tuple[int, str, str]]:
    out = []
    for day, unit in _days(plan, query["days"]):
        cd = strict_current_city(unit.get("current_city"))
        if cd is not None and cd.travel and cd.origin is not None:
            out.append((day, cd.origin, cd.city))
    return out


def _transport_rule(store: Store, query: Query, plan: Any, result: CheckResult) -> str | None:
    rule = (query.get("local_constraint") or {}).get("transportation")
    avoid = {"no flight": "flight", "no self-driving": "self-driving"}.get(str(rule), "")
    parts = [transport_hint(store, query, a, b, _date(query, day), avoid=avoid) for day, a, b in _legs(query, plan)]
    return " ".join(parts) or None


def _conflict(store: Store, query: Query, plan: Any, result: CheckResult) -> str | None:
    legs = _legs(query, plan)
    drivable = all((r := store.road(a, b)) is not None and r.cost("self-driving") is not None for _, a, b in legs)
    base = "Use flights and taxis only, or self-driving for every leg (a car cannot be left behind)."
    if legs and drivable:
        return base + " Every leg of this route can be driven."
    if legs:
        return base + " Not every leg can be driven here, so prefer flights and taxis."
    return base


def _route(store: Store, query: Query, plan: Any, result: CheckResult) -> str | None:
    org, dest = query["org"], query["dest"]
    if query.get("visiting_city_number", 1) > 1 or query.get("days", 3) > 3:
        cities = [c for c in store.cities_in_state(str(dest)) if c != org]
        shown = ", ".join(cities[:8])
        return (
            f"Start on day 1 with 'from {org} to <city>', stay in each city for consecutive days, move on with "
            f"'from <city> to <next city>', and end on day {query['days']} with 'from <city> to {org}'. "
            f"Cities in {dest} include: {shown}."
        )
    return (
        f"Write day 1 as 'from {org} to {dest}', the middle days as '{dest}', and day {query['days']} as "
        f"'from {dest} to {org}'."
    )


def _current_city(store: Store, query: Query, plan: Any, result: CheckResult) -> str | None:
    d = result.details
    day, field = int(d.get("day") or 0), str(d.get("field") or "")
    where = d.get("current_city") or _city_of_day(plan, day)
    city = _city_of_day(plan, day)
    if not city:
        return None
    if field in MEALS:
        alt = restaurant_hint(store, query, plan, city)
    elif field == "attraction":
        alt = attraction_hint(store, query, plan, city)
    elif field == "accommodation":
        alt = accommodation_hint(store, query, plan, city)
    else:
        route = _route_of(plan, day)
        alt = f"Write it as '... from {route[0]} to {route[1]} ...'." if route else None
    return f"On day {day} ({where}) choose places in {city}." + (f" {alt}" if alt else "")


def _absent(store: Store, query: Query, plan: Any, result: CheckResult) -> str | None:
    d = result.details
    if d.get("reason") == "days":
        return f"Give exactly {query['days']} filled day objects, day 1 to day {query['days']}, and nothing after."
    if d.get("reason") == "city_number":
        return _route(store, query, plan, result)
    day, field = d.get("day"), d.get("field")
    if day and field:
        city = _city_of_day(plan, int(day))
        if field in MEALS and city:
            return restaurant_hint(store, query, plan, city)
        if field == "attraction" and city:
            return attraction_hint(store, query, plan, city)
        if field == "accommodation" and city:
            return accommodation_hint(store, query, plan, city)
        return f"Fill in day {day}'s {field}."
    return "Fill in every field of every day; use '-' only where nothing is needed."


def _budget(store: Store, query: Query, plan: Any, result: CheckResult) -> str | None:
    items = sorted(result.details.get("items") or [], key=lambda i: -float(i.get("cost") or 0))
    n = int(query["people_number"])
    saves: list[str] = []
    seen_cities: set[str] = set()
    for item in items:
        field, value = item["field"], item["value"]
        if field == "accommodation":
            city = _entry_city(value)
            if city and city not in seen_cities:
                seen_cities.add(city)
                rows = suitable_accommodations(store, query, city, nights_in(plan, query["days"], city) or None)
                if rows and rows[0].price * ceil_div(n, rows[0].maximum_occupancy) < float(item["cost"]):
                    saves.append(f"In {city}, stay at {_listing_text(rows[0], n)}.")
        elif field == "transportation":
            route = _route_of(plan, int(item["day"]))
            if route:
                saves.append(transport_hint(store, query, route[0], route[1], _date(query, int(item["day"]))))
        if len(saves) >= 3:
            break
    over = float(result.details.get("total_cost") or 0) - float(query["budget"])
    head = f"Cut at least {money(over)}." if over > 0 else "Replace the items that cannot be priced."
    return head + (" Cheaper choices. " + " ".join(saves) if saves else "")


HINTS: dict[str, HintFn] = {
    "is_valid_information_in_sandbox": _sandbox,
    "is_valid_accommodation": _minimum_nights,
    "is_valid_restaurants": _restaurants,
    "is_valid_attractions": _attractions,
    "is_valid_transportation": _conflict,
    "is_reasonable_visiting_city": _route,
    "is_valid_information_in_current_city": _current_city,
    "is_not_absent": _absent,
    "valid_cuisine": _cuisine,
    "valid_room_rule": _accommodation_constraint,
    "valid_room_type": _accommodation_constraint,
    "valid_transportation": _transport_rule,
    "valid_cost": _budget,
}


def hint_for(key: str, store: Store, query: Query, plan: Any, result: CheckResult) -> str | None:
    """A constructive suggestion for a failed check, or None when there is nothing concrete to say."""
    fn = HINTS.get(key)
    if fn is None:
        return None
    try:
        return fn(store, query, plan, result)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError):
        return None  # a hint is a courtesy: odd plans get none rather than a crash
