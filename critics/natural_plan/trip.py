"""Trip Planning: constraints from the prompt, the plan schema, text <-> plan, and the official scoring.

A plan is an ordered list of stays ``{city, start_day, end_day}``. You fly from one stay's city to
the next one's on the day the first stay ends, and that flight day counts for both cities, so
``stays[i + 1].start_day == stays[i].end_day`` and the stay lengths sum to the trip length plus the
number of flights.

Every constraint is in the templated prompt text (the structured ``cities``/``durations`` fields
*are* the answer and are only used by the evaluator, from ``Problem.metadata``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from modulo.errors import DataError, PlanFormatError

# -- constraints ---------------------------------------------------------------------------------

_CITY = r"([A-Z][\w'\-]*)"
_TOTAL = re.compile(r"You plan to visit (\d+) European cities for (\d+) days in total\.")
_STAY_PATTERNS = (
    re.compile(rf"You would like to visit {_CITY} for (\d+) days?\."),
    re.compile(rf"You plan to stay in {_CITY} for (\d+) days?\."),
    re.compile(rf"You want to spend (\d+) days? in {_CITY}\."),
)
#: the seven fixed-day event sentences; {city}, {a} and {b} become named groups
_EVENT_TEMPLATES = (
    ("wedding", "You are going to attend a wedding in {city} between day {a} and day {b}."),
    ("friend", "You want to meet a friend in {city} between day {a} and day {b}."),
    ("workshop", "You have to attend a workshop in {city} between day {a} and day {b}."),
    ("relatives", "You plan to visit relatives in {city} between day {a} and day {b}."),
    ("show", "From day {a} to day {b}, there is a annual show you want to attend in {city}."),
    ("tour", "You would like to meet your friends at {city} between day {a} and day {b} to tour together."),
    ("conference", "During day {a} and day {b}, you have to attend a conference in {city}."),
)


def _event_pattern(template: str) -> re.Pattern[str]:
    text = re.escape(template)
    for name, group in (("city", _CITY[1:-1]), ("a", r"\d+"), ("b", r"\d+")):
        text = text.replace(re.escape("{" + name + "}"), f"(?P<{name}>{group})")
    return re.compile(text)


_EVENT_PATTERNS = tuple((kind, _event_pattern(t)) for kind, t in _EVENT_TEMPLATES)
_FIXED = ("You only take direct flights to commute between cities.",)
_FLIGHTS = re.compile(r"Here are the cities that have direct flights:\s*\n(.*?)\n\s*\nFind a trip plan", re.DOTALL)
_ONE_WAY = re.compile(rf"^from {_CITY} to {_CITY}$")
_BOTH_WAYS = re.compile(rf"^{_CITY} and {_CITY}$")


def _target_task(prompt: str) -> str:
    """The last TASK of a prompt (the 5-shot prompt holds five solved ones before it)."""
    parts = prompt.split("TASK:")
    return parts[-1]


def parse_trip_constraints(prompt: str) -> dict[str, Any]:
    """Every constraint of a trip prompt (0-shot or 5-shot) as JSON-ready data.

    Keys: ``num_cities``, ``total_days``; ``stays`` (city -> days, in the order the prompt names them)
    and ``stay_texts`` (city -> the sentence); ``events`` (kind, city, start_day, end_day, text);
    ``flights`` (directed [from, to] pairs) and ``flight_items`` (each listed item, its text and
    whether it goes both ways). Raises DataError when a sentence is not recognised.
    """
    task = _target_task(prompt)
    m_flights = _FLIGHTS.search(task)
    if m_flights is None:
        raise DataError("trip prompt: no 'Here are the cities that have direct flights:' list")
    head = task[: m_flights.start()]
    m_total = _TOTAL.search(head)
    if m_total is None:
        raise DataError("trip prompt: no 'You plan to visit N European cities for D days in total.'")
    stays: dict[str, int] = {}
    stay_texts: dict[str, str] = {}
    events: list[dict[str, Any]] = []
    unknown: list[str] = []
    for sentence in _sentences(head[m_total.end() :]):
        if sentence in _FIXED:
            continue
        city_days = _match_stay(sentence)
        if city_days is not None:
            city, days = city_days
            if city in stays:
                raise DataError(f"trip prompt: {city} is given two stay lengths")
            stays[city] = days
            stay_texts[city] = sentence
            continue
        event = _match_event(sentence)
        if event is not None:
            events.append(event)
            continue
        unknown.append(sentence)
    if unknown:
        raise DataError(f"trip prompt: unrecognised sentence(s): {unknown}")
    flights, items = _parse_flight_list(m_flights.group(1))
    num_cities, total_days = int(m_total.group(1)), int(m_total.group(2))
    if len(stays) != num_cities:
        raise DataError(f"trip prompt: {num_cities} cities announced but {len(stays)} stay lengths given")
    for ev in events:
        if ev["city"] not in stays:
            raise DataError(f"trip prompt: the event city {ev['city']} has no stay length")
    return {
        "num_cities": num_cities,
        "total_days": total_days,
        "total_text": m_total.group(0),
        "stays": stays,
        "stay_texts": stay_texts,
        "events": events,
        "flights": flights,
        "flight_items": items,
    }


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=\.)\s+", text.strip()) if s.strip()]


def _match_stay(sentence: str) -> tuple[str, int] | None:
    for i, pat in enumerate(_STAY_PATTERNS):
        m = pat.fullmatch(sentence)
        if m:
            if i == 2:
                return m.group(2), int(m.group(1))
            return m.group(1), int(m.group(2))
    return None


def _match_event(sentence: str) -> dict[str, Any] | None:
    for kind, pat in _EVENT_PATTERNS:
        m = pat.fullmatch(sentence)
        if m:
            a, b = int(m.group("a")), int(m.group("b"))
            return {"kind": kind, "city": m.group("city"), "start_day": a, "end_day": b, "text": sentence}
    return None


def _parse_flight_list(text: str) -> tuple[list[list[str]], list[dict[str, Any]]]:
    body = " ".join(text.split()).rstrip(".")
    flights: list[list[str]] = []
    items: list[dict[str, Any]] = []
    for raw in body.split(", "):
        item = raw.strip()
        m = _ONE_WAY.match(item)
        if m:
            flights.append([m.group(1), m.group(2)])
            items.append({"text": item, "from": m.group(1), "to": m.group(2), "both_ways": False})
            continue
        m = _BOTH_WAYS.match(item)
        if m:
            flights.append([m.group(1), m.group(2)])
            flights.append([m.group(2), m.group(1)])
            items.append({"text": item, "from": m.group(1), "to": m.group(2), "both_ways": True})
            continue
        raise DataError(f"trip prompt: unrecognised direct-flight item {item!r}")
    return flights, items


# -- plans ---------------------------------------------------------------------------------------


class TripStay(BaseModel):
    """One stay: you are in ``city`` from ``start_day`` to ``end_day`` inclusive."""

    model_config = ConfigDict(extra="forbid")

    city: str = Field(min_length=1, description="the city, spelled as in the query")
    start_day: int = Field(ge=1, description="first day in the city (the arrival flight day, or day 1)")
    end_day: int = Field(ge=1, description="last day in the city (the day you fly on, for all but the last stay)")


class TripPlan(BaseModel):
    """A trip: the stays in visiting order. You fly to the next city on the day a stay ends."""

    model_config = ConfigDict(extra="forbid")

    stays: list[TripStay] = Field(min_length=1)


def stays_of(plan: Any) -> list[tuple[str, int, int]]:
    """``[(city, start_day, end_day), ...]`` from a validated plan JSON."""
    return [(str(s["city"]), int(s["start_day"]), int(s["end_day"])) for s in plan["stays"]]


def plan_from_sequence(cities: list[str], durations: list[int]) -> dict[str, Any]:
    """The plan of a city order with stay lengths (flight days shared): how the gold answer reads."""
    stays = []
    day = 1
    for city, length in zip(cities, durations, strict=True):
        stays.append({"city": city, "start_day": day, "end_day": day + length - 1})
        day += length - 1
    return {"stays": stays}


def render_trip(plan: Any, total_days: int | None = None) -> str:
    """The canonical text of a plan, in the format of the golden answers (the official script reads it)."""
    stays = stays_of(plan)
    total = total_days if total_days is not None else (stays[-1][2] if stays else 0)
    lines = [f"Here is the trip plan for visiting the {len(stays)} European cities for {total} days:", ""]
    for i, (city, start, end) in enumerate(stays):
        length = end - start + 1
        verb = f"Arriving in {city} and visit {city}" if i == 0 else f"Visit {city}"
        lines.append(f"**Day {start}-{end}:** {verb} for {length} days.")
        if i + 1 < len(stays):
            nxt = stays[i + 1][0]
            lines.append(f"**Day {end}:** Fly from {city} to {nxt}.")
    return "\n".join(lines)


# -- reading text answers ------------------------------------------------------------------------

_RANGE = re.compile(r"\d+-\d+")
_FLIGHT_LINE = re.compile(r".*Day (\d+).*from (\w+) to (\w+)")
_TOTAL_LINE = re.compile(r"European cities for (\d+) days")


@dataclass(frozen=True)
class TripLines:
    """What the official line scan keeps from an answer."""

    total_days: int | None
    #: the first "a-b" of each line that has one, up to the line whose range ends on the total
    ranges: list[tuple[int, int]]
    #: (day, from, to) of each flight line
    flights: list[tuple[int, str, str]]
    #: the text of each flight line
    flight_texts: list[str]


def scan_lines(text: str) -> TripLines:
    """Read the answer line by line as the official script does.

    A line with "European cities for N days" sets the total; the first "a-b" of a line is a range,
    and a range ending on the total stops the scan (alternative plans below it are not read); a line
    matching "...Day D...from X to Y" (the last such D, X and Y) is a flight, unless the scan
    stopped on that line.
    """
    total: int | None = None
    ranges: list[tuple[int, int]] = []
    flights: list[tuple[int, str, str]] = []
    texts: list[str] = []
    for line in text.split("\n"):
        m_total = _TOTAL_LINE.search(line)
        if m_total:
            total = int(m_total.group(1))
        m_range = _RANGE.search(line)
        if m_range:
            a, b = m_range.group(0).split("-")
            ranges.append((int(a), int(b)))
            if int(b) == total:
                break
        m_flight = _FLIGHT_LINE.match(line)
        if m_flight:
            flights.append((int(m_flight.group(1)), m_flight.group(2), m_flight.group(3)))
            texts.append(line.strip())
    return TripLines(total, ranges, flights, texts)


def official_sequence(text: str) -> list[tuple[str, int]]:
    """The (city, stay) list the official script reconstructs from an answer ([] when it finds none).

    Cities: the first flight's origin, then every flight's destination. Stays come from the flight
    days alone: the boundaries are day 1, each flight day and the end of the last range read.
    """
    lines = scan_lines(text)
    if not lines.ranges or not lines.flights:
        return []
    cities = [lines.flights[0][1]] + [f[2] for f in lines.flights]
    bounds = [1] + [f[0] for f in lines.flights] + [lines.ranges[-1][1]]
    return [(city, bounds[i + 1] - bounds[i] + 1) for i, city in enumerate(cities)]


def official_solved(text: str, gold_cities: list[str], gold_durations: list[int]) -> bool:
    """The official exact match: every gold (city, stay) matches the parsed one at the same position.

    Parsed cities beyond the gold ones are not looked at; a shorter parse fails.
    """
    parsed = official_sequence(text)
    if len(parsed) < len(gold_cities):
        return False
    return all(parsed[i] == (gold_cities[i], gold_durations[i]) for i in range(len(gold_cities)))


def parse_trip(text: str) -> dict[str, Any]:
    """A plan from a text answer, read the way the official script reads it.

    The flights give the city order and the stay boundaries (day 1, each flight day, the end of the
    last "Day a-b" range read), exactly as the official reconstruction does, so a plan read here is
    the plan the official score judges. A flight that leaves from a city other than the one you are
    in is a format error. Answers without flight lines but with "Day a-b ... <City>" lines are read
    from the ranges. Raises PlanFormatError when no plan can be read.
    """
    if not text or not text.strip():
        raise PlanFormatError("the answer is empty")
    lines = scan_lines(text)
    if lines.flights:
        if not lines.ranges:
            raise PlanFormatError(
                "the answer has flight lines but no 'Day a-b' ranges, so the last day of the trip is unknown"
            )
        current = lines.flights[0][1]
        for (day, origin, dest), line in zip(lines.flights, lines.flight_texts, strict=True):
            if origin != current:
                raise PlanFormatError(
                    f"the flight '{line}' leaves from {origin} on day {day}, but at that point of the plan "
                    f"you are in {current}"
                )
            current = dest
        cities = [lines.flights[0][1]] + [f[2] for f in lines.flights]
        bounds = [1] + [f[0] for f in lines.flights] + [lines.ranges[-1][1]]
        for i, city in enumerate(cities):
            if bounds[i + 1] < bounds[i]:
                raise PlanFormatError(
                    f"the stay in {city} would run from day {bounds[i]} back to day {bounds[i + 1]}: "
                    "flight days must not go backwards"
                )
        stays = [{"city": city, "start_day": bounds[i], "end_day": bounds[i + 1]} for i, city in enumerate(cities)]
        return {"stays": stays}
    stays = _stays_from_ranges(text)
    if not stays:
        raise PlanFormatError(
            "no plan found: expected lines like '**Day 1-5:** Arriving in Helsinki and visit Helsinki for 5 days.' "
            "and '**Day 5:** Fly from Helsinki to Barcelona.'"
        )
    return {"stays": stays}


_RANGE_CITY = re.compile(r"Day (\d+)\s*-\s*(\d+)\W*(?:.*?\b(?:in|visit|Visit|at|stay in)\s+)?([A-Z][a-z]+)")


def _stays_from_ranges(text: str) -> list[dict[str, Any]]:
    stays: list[dict[str, Any]] = []
    for line in text.split("\n"):
        m = _RANGE_CITY.search(line)
        if m and "Fly" not in line:
            stays.append({"city": m.group(3), "start_day": int(m.group(1)), "end_day": int(m.group(2))})
    return stays


# -- exhaustive search ---------------------------------------------------------------------------


def solve_trip(constraints: dict[str, Any], limit: int = 1) -> list[dict[str, Any]]:
    """Up to ``limit`` plans that satisfy every constraint, by depth-first search over city orders.

    The order fixes every day (stays are consecutive and share flight days), so a partial order is
    cut as soon as a hop is not a listed flight or a placed city's event falls outside its stay.
    """
    stays: dict[str, int] = constraints["stays"]
    total: int = constraints["total_days"]
    flights: dict[str, set[str]] = {}
    for a, b in constraints["flights"]:
        flights.setdefault(a, set()).add(b)
    windows: dict[str, list[tuple[int, int]]] = {}
    for ev in constraints["events"]:
        windows.setdefault(ev["city"], []).append((ev["start_day"], ev["end_day"]))
    if sum(stays.values()) - (len(stays) - 1) != total:
        return []
    found: list[dict[str, Any]] = []
    order: list[tuple[str, int, int]] = []

    def fits(city: str, start: int) -> bool:
        end = start + stays[city] - 1
        return all(start <= a and b <= end for a, b in windows.get(city, ()))

    def extend(day: int, left: set[str]) -> None:
        if len(found) >= limit:
            return
        if not left:
            found.append({"stays": [{"city": c, "start_day": s, "end_day": e} for c, s, e in order]})
            return
        options = flights.get(order[-1][0], set()) & left if order else set(left)
        for city in sorted(options):
            if not fits(city, day):
                continue
            end = day + stays[city] - 1
            order.append((city, day, end))
            left.remove(city)
            extend(end, left)
            left.add(city)
            order.pop()

    extend(1, set(stays))
    return found
