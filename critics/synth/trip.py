"""synth/trip: multi-city itineraries, NATURAL PLAN trip-planning style.

A plan is ``{"stays": [{"city", "start_day", "end_day"}]}`` in travel order; a flight day counts for
both cities, so consecutive stays share a day. Constraint kinds: ``total_days`` (start on day 1,
end on day N, no gaps), ``cities`` (each city once, no other city), ``stay`` (length of one city's
stay), ``flights`` (consecutive cities have a direct flight; the flight graph is a networkx graph),
``event`` (a day window that must lie inside the stay in that city), ``start_city``, ``end_city``.
By default the synthesizer adds events until the witness is the only valid plan, as NATURAL PLAN does.
"""

from __future__ import annotations

import copy
import itertools
import json
import random
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import networkx as nx
import z3
from pydantic import Field

from modulo.errors import ConfigError, DataError, PlanFormatError
from modulo.types import PlanJSON

from .common import (
    Constraint,
    Formula,
    alternation,
    capitalize,
    conj,
    disj,
    fill,
    impl,
    match_name,
    model_int,
    pick,
    plan_entries,
    template_regex,
)
from .family import Family, Mutant, PlanModel, Row, Spec, named_rows, reordered
from .words import CITIES, EVENTS

TEMPLATES: dict[str, tuple[str, ...]] = {
    "total_days": (
        "You plan to visit {k} {adj} cities for {n} days in total",
        "You are planning a {n}-day trip through {k} {adj} cities",
    ),
    "cities": ("You visit each city exactly once", "Every city gets one single stay"),
    "stay": (
        "You would like to visit {city} for {n} days",
        "You plan to stay in {city} for {n} days",
        "You want to spend {n} days in {city}",
    ),
    "flights": (
        "You only take direct flights to commute between cities",
        "You travel between cities only by direct flight",
    ),
    "start_city": ("Your trip starts in {city}", "You begin the trip in {city}"),
    "end_city": ("Your trip ends in {city}", "You finish the trip in {city}"),
    "event": ("You want to {event}", "You have to {event}", "You would like to {event}"),
}
_FLIGHT_LIST = "Here are the cities that have direct flights: {pairs}."
_ASK = (
    "Find a trip plan of visiting the cities for {n} days by taking direct flights to commute between them. "
    "Write each stay as '**Day 1-3:** Visit Paris for 3 days.' and each flight as '**Day 3:** Fly from Paris to Rome.'"
)


class Stay(PlanModel):
    city: str
    start_day: int = Field(description="first day in the city (the arrival day)")
    end_day: int = Field(description="last day in the city (the departure day, shared with the next city)")


class TripPlan(PlanModel):
    """Stays in travel order."""

    stays: list[Stay]


def _stays(plan: PlanJSON) -> list[tuple[str, int, int]]:
    out = []
    for i, st in enumerate(plan_entries(plan, "stays", ("city", "start_day", "end_day"), "stay")):
        try:
            out.append((str(st["city"]), int(st["start_day"]), int(st["end_day"])))
        except (TypeError, ValueError):
            raise PlanFormatError(f"stay {i + 1}: days must be integers") from None
    return out


def layout(order: Sequence[str], lengths: dict[str, int]) -> PlanJSON:
    """Stays for cities visited in ``order`` with the given stay lengths (flight days shared)."""
    day = 1
    stays = []
    for city in order:
        end = day + lengths[city] - 1
        stays.append({"city": city, "start_day": day, "end_day": end})
        day = end
    return {"stays": stays}


class TripFamily(Family):
    name = "trip"
    unique_by_default = True
    plan_model = TripPlan
    critic_kinds: ClassVar[dict[str, tuple[str, ...]]] = {
        "synth_trip_days": ("total_days",),
        "synth_trip_cities": ("cities",),
        "synth_stay": ("stay",),
        "synth_direct_flight": ("flights",),
        "synth_event": ("event",),
        "synth_trip_endpoints": ("start_city", "end_city"),
    }
    entities = "cities"
    entity_fields = ("city",)
    vocabulary: ClassVar[Mapping[str, Sequence[str]]] = {t: pool for t, (_adj, pool) in CITIES.items()}
    presets: ClassVar[dict[str, dict[str, Any]]] = {
        "easy": {"n_cities": 3, "n_events": 1, "max_stay": 5, "extra_flights": 1, "endpoints": 0.0},
        "medium": {"n_cities": 5, "n_events": 2, "max_stay": 5, "extra_flights": 3, "endpoints": 0.2},
        "hard": {"n_cities": 7, "n_events": 3, "max_stay": 6, "extra_flights": 6, "endpoints": 0.3},
    }
    mutation_kinds = ("swap", "shift", "drop", "duplicate", "collide", "boundary_out", "boundary_in")

    def validate_knobs(self, knobs: dict[str, Any]) -> None:
        self.int_knob(knobs, "n_cities", 2, 12)
        self.int_knob(knobs, "max_stay", 2, 10)
        for key in ("n_events", "extra_flights"):
            self.int_knob(knobs, key)
        if not 0.0 <= float(knobs["endpoints"]) <= 1.0:
            raise ConfigError(f"synth/trip: endpoints is a probability, got {knobs['endpoints']!r}")

    # -- synthesis -------------------------------------------------------------------------------
    def skeleton(self, rng: random.Random, knobs: dict[str, Any], topic: str) -> Spec:
        adj, pool = CITIES[topic]
        k = knobs["n_cities"]
        cities = rng.sample(list(pool), k)
        lengths = {c: rng.randint(2, knobs["max_stay"]) for c in cities}
        total = sum(lengths.values()) - (k - 1)
        path = list(cities)
        rng.shuffle(path)
        graph = nx.Graph()
        graph.add_nodes_from(cities)
        nx.add_path(graph, path)
        missing = [(a, b) for i, a in enumerate(cities) for b in cities[i + 1 :] if not graph.has_edge(a, b)]
        for a, b in rng.sample(missing, min(len(missing), knobs["extra_flights"])):
            graph.add_edge(a, b)
        pairs = sorted(sorted(e) for e in graph.edges)
        rng.shuffle(pairs)
        cs: list[Constraint] = [
            {"kind": "total_days", "days": total},
            {"kind": "cities"},
            {"kind": "flights", "pairs": [list(p) for p in pairs]},
        ]
        cs += [{"kind": "stay", "city": c, "days": lengths[c]} for c in cities]
        return {
            "family": "trip",
            "topic": topic,
            "adjective": adj,
            "cities": cities,
            "constraints": cs,
            "n_base": len(cs),
        }

    def wanted(self, knobs: dict[str, Any]) -> int:
        return int(knobs["n_events"]) + (1 if knobs["endpoints"] > 0 else 0)

    def symbolic_rows(self, spec: Spec, ctx: Any = None) -> tuple[list[Row], list[Formula]]:
        k = len(spec["cities"])
        rows: list[Row] = [
            (z3.Int(f"city_{i}", ctx), z3.Int(f"start_{i}", ctx), z3.Int(f"end_{i}", ctx)) for i in range(k)
        ]
        domain: list[Formula] = [z3.Distinct(*[r[0] for r in rows])]
        domain += [z3.And(r[0] >= 0, r[0] < k) for r in rows]
        domain += [r[1] <= r[2] for r in rows]  # a stay never ends before it starts (the format check's rule)
        return rows, domain

    def _total(self, spec: Spec) -> int:
        return int(next(c["days"] for c in spec["constraints"] if c["kind"] == "total_days"))

    def encode(self, c: Constraint, spec: Spec, rows: Sequence[Row]) -> Formula:
        kind = c["kind"]
        idx = {city: i for i, city in enumerate(spec["cities"])}
        if kind == "total_days":
            if not rows:
                return False
            links = [rows[i][2] == rows[i + 1][1] for i in range(len(rows) - 1)]
            return conj([rows[0][1] == 1, rows[-1][2] == c["days"], *links])
        if kind == "cities":
            k = len(spec["cities"])
            return conj(_count(rows, j) == 1 for j in range(k)) if len(rows) == k else False
        if kind == "stay":
            j = idx[c["city"]]
            return conj(impl(r[0] == j, r[2] - r[1] + 1 == c["days"]) for r in rows)
        if kind == "flights":
            edges = [(idx[a], idx[b]) for a, b in c["pairs"]]
            return conj(
                disj(disj([conj([x == u, y == v]), conj([x == v, y == u])]) for u, v in edges)
                for x, y in ((rows[i][0], rows[i + 1][0]) for i in range(len(rows) - 1))
            )
        if kind == "event":
            j = idx[c["city"]]
            return conj(impl(r[0] == j, conj([r[1] <= c["first"], r[2] >= c["last"]])) for r in rows)
        if kind == "start_city":
            return bool(rows) and (rows[0][0] == idx[c["city"]])
        if kind == "end_city":
            return bool(rows) and (rows[-1][0] == idx[c["city"]])
        raise ValueError(f"unknown constraint kind {kind!r}")

    def read_plan(self, plan: PlanJSON) -> Any:
        return _stays(plan)

    def plan_rows(self, spec: Spec, plan: PlanJSON) -> list[Row]:
        return named_rows(spec["cities"], _stays(plan))

    def model_plan(self, spec: Spec, model: Any, rows: Sequence[Row]) -> PlanJSON:
        return {
            "stays": [
                {
                    "city": spec["cities"][model_int(model, r[0])],
                    "start_day": model_int(model, r[1]),
                    "end_day": model_int(model, r[2]),
                }
                for r in rows
            ]
        }

    def candidate(self, rng: random.Random, spec: Spec, witness: PlanJSON, knobs: dict[str, Any]) -> Constraint | None:
        stays = _stays(witness)
        has_end = any(c["kind"] in ("start_city", "end_city") for c in spec["constraints"])
        n_events = sum(1 for c in spec["constraints"] if c["kind"] == "event")
        if not has_end and knobs["endpoints"] > 0 and (n_events >= knobs["n_events"] or rng.random() < 0.3):
            if rng.random() < knobs["endpoints"]:
                first = rng.random() < 0.5
                city = stays[0][0] if first else stays[-1][0]
                return {"kind": "start_city" if first else "end_city", "city": city}
            if n_events >= knobs["n_events"]:
                return None
        return self._event(rng, spec, stays, guided=rng.random() < 0.8)

    def _event(self, rng: random.Random, spec: Spec, stays: list[tuple[str, int, int]], *, guided: bool) -> Constraint:
        lengths = {c["city"]: c["days"] for c in spec["constraints"] if c["kind"] == "stay"}
        label = pick(rng, sorted(EVENTS))
        if guided:
            city, s, e = stays[rng.randrange(len(stays))]
            a = rng.randint(s, e)
            b = rng.randint(a, e)
        else:
            city = pick(rng, spec["cities"])
            n = self._total(spec)
            a = rng.randint(1, n)
            b = min(n, a + rng.randint(0, lengths[city] - 1))
        return {"kind": "event", "what": label, "city": city, "first": a, "last": b}

    def block(self, spec: Spec, rows: Sequence[Row], plan: PlanJSON) -> Formula:
        idx = {city: i for i, city in enumerate(spec["cities"])}
        return z3.Not(z3.And(*[rows[i][0] == idx[city] for i, (city, _s, _e) in enumerate(_stays(plan))]))

    def distinguish(self, rng: random.Random, spec: Spec, witness: PlanJSON, other: PlanJSON) -> Constraint | None:
        mine = {c: (s, e) for c, s, e in _stays(witness)}
        theirs = {c: (s, e) for c, s, e in _stays(other)}
        moved = [c for c in mine if mine[c] != theirs.get(c)]
        if not moved:
            return None
        city = pick(rng, moved)
        s, e = mine[city]
        s2, e2 = theirs[city]
        outside = [d for d in range(s, e + 1) if not s2 <= d <= e2]
        day = pick(rng, [str(d) for d in outside])
        a = int(day)
        lo, hi = rng.randint(s, a), rng.randint(a, e)
        return {"kind": "event", "what": pick(rng, sorted(EVENTS)), "city": city, "first": lo, "last": hi}

    def contradictions(self, rng: random.Random, spec: Spec, witness: PlanJSON) -> list[Constraint]:
        lengths = {c["city"]: c["days"] for c in spec["constraints"] if c["kind"] == "stay"}
        total = self._total(spec)
        out: list[Constraint] = []
        cities = list(spec["cities"])
        rng.shuffle(cities)
        for city in cities:
            n = lengths[city]
            if n + 1 <= total:
                a = rng.randint(1, total - n)
                out.append(
                    {"kind": "event", "what": pick(rng, sorted(EVENTS)), "city": city, "first": a, "last": a + n}
                )
        events = [c for c in spec["constraints"] if c["kind"] == "event"]
        clash: list[Constraint] = []
        for ev in events:
            for city in cities:
                if city != ev["city"] and ev["last"] - ev["first"] >= 1 and lengths[city] >= 2:
                    a = rng.randint(ev["first"], ev["last"] - 1)
                    clash.append(
                        {"kind": "event", "what": pick(rng, sorted(EVENTS)), "city": city, "first": a, "last": a + 1}
                    )
            if ev["last"] > lengths[ev["city"]]:
                clash.append({"kind": "start_city", "city": ev["city"]})
            if ev["first"] < total - lengths[ev["city"]] + 1:
                clash.append({"kind": "end_city", "city": ev["city"]})
        rng.shuffle(clash)
        return clash + out if rng.random() < 0.5 else out + clash

    # -- text ------------------------------------------------------------------------------------
    def _event_text(self, c: Constraint) -> str:
        template = EVENTS[c["what"]] if c["first"] != c["last"] else _one_day(EVENTS[c["what"]])
        return fill(template, city=c["city"], a=c["first"], b=c["last"])

    def render(self, spec: Spec, rng: random.Random) -> tuple[str, Spec]:
        spec = copy.deepcopy(spec)
        k, total = len(spec["cities"]), self._total(spec)
        for c in spec["constraints"]:
            values: dict[str, Any] = {
                "k": k,
                "adj": spec["adjective"],
                "n": c.get("days", ""),
                "city": c.get("city", ""),
            }
            if c["kind"] == "event":
                values["event"] = self._event_text(c)
            c["text"] = fill(pick(rng, TEMPLATES[c["kind"]]), **values)
        by_kind = {kind: [c for c in spec["constraints"] if c["kind"] == kind] for kind in TEMPLATES}
        parts = [
            by_kind["total_days"][0]["text"] + ".",
            by_kind["cities"][0]["text"] + ".",
            by_kind["flights"][0]["text"] + ".",
        ]
        rest = [c for c in spec["constraints"] if c["kind"] in ("stay", "event", "start_city", "end_city")]
        parts += [capitalize(c["text"]) + "." for c in rest]
        flights = by_kind["flights"][0]
        pairs = ", ".join(f"{a} and {b}" for a, b in flights["pairs"])
        parts.append(_FLIGHT_LIST.format(pairs=pairs))
        return " ".join(parts) + "\n\n" + _ASK.format(n=total), spec

    def parse_query(self, text: str) -> Spec:
        body = text.split("\n\n")[0]
        sentences = [s.strip().rstrip(".") for s in re.split(r"(?<=\.)\s+(?=[A-Z])", body.strip()) if s.strip()]
        flights_at = next((i for i, s in enumerate(sentences) if s.startswith("Here are the cities")), None)
        if flights_at is None:
            raise DataError("synth/trip: the query has no list of direct flights")
        pairs_text = sentences[flights_at].split(": ", 1)[1]
        pairs = [p.split(" and ") for p in pairs_text.split(", ")]
        cities = sorted({c for p in pairs for c in p})
        word = r"[A-Za-z]+"
        slots = {"k": r"\d+", "n": r"\d+", "adj": word, "city": alternation(cities), "event": ".+"}
        parsers = [(kind, template_regex(t, slots)) for kind, ts in TEMPLATES.items() for t in ts]
        ev_slots = {"city": alternation(cities), "a": r"\d+", "b": r"\d+"}
        event_parsers = [(label, template_regex(t, ev_slots)) for label, t in EVENTS.items()]
        event_parsers += [(label, template_regex(_one_day(t), ev_slots)) for label, t in EVENTS.items()]
        constraints: list[Constraint] = []
        for sentence in sentences[:flights_at]:
            for kind, rx in parsers:
                m = rx.fullmatch(sentence)
                if not m:
                    continue
                g = m.groupdict()
                if kind == "total_days":
                    constraints.append({"kind": kind, "days": int(g["n"])})
                elif kind in ("cities", "flights"):
                    c: Constraint = {"kind": kind}
                    if kind == "flights":
                        c["pairs"] = [list(p) for p in pairs]
                    constraints.append(c)
                elif kind == "stay":
                    constraints.append({"kind": kind, "city": g["city"], "days": int(g["n"])})
                elif kind in ("start_city", "end_city"):
                    constraints.append({"kind": kind, "city": g["city"]})
                else:
                    constraints.append(_parse_event(g["event"], event_parsers))
                break
            else:
                raise DataError(f"synth/trip: sentence not understood: {sentence!r}")
        return {"cities": cities, "constraints": constraints}

    # -- plans -----------------------------------------------------------------------------------
    def check_format(self, spec: Spec, plan: PlanJSON) -> list[str]:
        try:
            stays = _stays(plan)
        except PlanFormatError as exc:
            return [str(exc)]
        if not stays:
            return ["the plan has no stays"]
        return [
            f"stay {i + 1} ends (day {e}) before it starts (day {s})" for i, (_c, s, e) in enumerate(stays) if e < s
        ]

    def violation(self, c: Constraint, spec: Spec, plan: PlanJSON) -> str | None:
        stays = [(match_name(city, spec["cities"]), city, s, e) for city, s, e in _stays(plan)]
        kind = c["kind"]
        if kind == "total_days":
            if not stays:
                return "Your plan has no stays."
            if stays[0][2] != 1:
                return f"Your plan starts on day {stays[0][2]}, not day 1."
            if stays[-1][3] != c["days"]:
                return f"Your plan ends on day {stays[-1][3]}, not day {c['days']}."
            for a, b in itertools.pairwise(stays):
                if a[3] != b[2]:
                    return (
                        f"You leave {a[1]} on day {a[3]} but arrive in {b[1]} on day {b[2]}; "
                        "the flight day must be the last day in one city and the first in the next."
                    )
            return None
        if kind == "cities":
            problems = [f"{name!r} is not one of the cities" for known, name, _s, _e in stays if known is None]
            for city in spec["cities"]:
                n = sum(1 for x in stays if x[0] == city)
                if n != 1:
                    problems.append(f"{city} is visited {n} times")
            return "; ".join(problems) + "." if problems else None
        if kind == "stay":
            for known, name, s, e in stays:
                if known == c["city"] and e - s + 1 != c["days"]:
                    return f"Your plan stays in {name} from day {s} to day {e}, which is {e - s + 1} days."
            return None
        if kind == "flights":
            edges = {frozenset(p) for p in c["pairs"]}
            for a, b in itertools.pairwise(stays):
                if a[0] is None or b[0] is None or frozenset((a[0], b[0])) not in edges:
                    return f"Your plan flies from {a[1]} to {b[1]} on day {a[3]}, but there is no direct flight."
            return None
        if kind == "event":
            for known, name, s, e in stays:
                if known == c["city"] and not (s <= c["first"] and e >= c["last"]):
                    return (
                        f"Your plan is in {name} from day {s} to day {e}, which does not cover "
                        f"day {c['first']} to day {c['last']}."
                    )
            return None
        if kind == "start_city":
            return None if not stays or stays[0][0] == c["city"] else f"Your plan starts in {stays[0][1]}."
        if kind == "end_city":
            return None if not stays or stays[-1][0] == c["city"] else f"Your plan ends in {stays[-1][1]}."
        raise ValueError(f"unknown constraint kind {kind!r}")

    def parse_plan(self, text: str, spec: Spec) -> PlanJSON:
        start = text.find("{")
        if start >= 0:
            try:
                data = json.loads(text[start : text.rfind("}") + 1])
                if isinstance(data, dict) and isinstance(data.get("stays"), list):
                    return data
            except (ValueError, RecursionError):  # not JSON, a number too long to convert, or nested too deep
                pass
        if "PLAN:" in text:
            text = text.rsplit("PLAN:", 1)[1]
        city_rx = re.compile(alternation(spec["cities"]), re.IGNORECASE)
        rx = re.compile(r"Day\s*(\d+)\s*[-–]\s*(\d+)\**\s*:?\**\s*(.*)", re.IGNORECASE)
        stays = []
        for line in text.splitlines():
            m = rx.search(line)
            if not m:
                continue
            found = city_rx.search(m.group(3))
            name = match_name(found.group(0), spec["cities"]) if found else m.group(3).strip()
            stays.append({"city": name or "", "start_day": int(m.group(1)), "end_day": int(m.group(2))})
        if not stays:
            raise PlanFormatError("no line of the form '**Day 1-3:** Visit Paris for 3 days.' was found")
        return {"stays": stays}

    def render_plan(self, plan: PlanJSON) -> str:
        lines = []
        stays = plan["stays"]
        for i, st in enumerate(stays):
            n = st["end_day"] - st["start_day"] + 1
            verb = f"Arriving in {st['city']} and visit" if i == 0 else "Visit"
            lines.append(f"**Day {st['start_day']}-{st['end_day']}:** {verb} {st['city']} for {n} days.")
            if i + 1 < len(stays):
                lines.append(f"**Day {st['end_day']}:** Fly from {st['city']} to {stays[i + 1]['city']}.")
        return "\n".join(lines)

    def format_hint(self) -> str:
        return _ASK.split(". ", 1)[1]

    # -- mutants ---------------------------------------------------------------------------------
    def mutants(self, rng: random.Random, spec: Spec, plan: PlanJSON) -> list[Mutant]:
        stays = [dict(s) for s in plan["stays"]]
        order = [s["city"] for s in stays]
        lengths = {s["city"]: s["end_day"] - s["start_day"] + 1 for s in stays}
        n = len(stays)
        out: list[Mutant] = []

        def add(kind: str, p: PlanJSON, target: str = "") -> None:
            out.append(Mutant(kind, p, target))

        def with_flight_day(i: int, day: int) -> PlanJSON:
            """Move the flight between stay i and i+1 to ``day``."""
            new = [dict(s) for s in stays]
            new[i]["end_day"] = day
            new[i + 1]["start_day"] = day
            return {"stays": new}

        if n >= 2:
            i, j = rng.sample(range(n), 2)
            swapped = list(order)
            swapped[i], swapped[j] = swapped[j], swapped[i]
            add("swap", layout(swapped, lengths))
            renamed = [dict(s) for s in stays]
            renamed[i]["city"], renamed[j]["city"] = renamed[j]["city"], renamed[i]["city"]
            add("swap", {"stays": renamed})
            i = rng.randrange(n - 1)
            add("shift", with_flight_day(i, stays[i]["end_day"] + rng.choice((-2, -1, 1, 2))))
            collided = [dict(s) for s in stays]
            collided[i + 1]["start_day"] = collided[i]["start_day"]
            add("collide", {"stays": collided})
            k = rng.randrange(n)
            add("drop", layout([c for x, c in enumerate(order) if x != k], lengths), order[k])
        k = rng.randrange(n)
        add("duplicate", layout([*order[: k + 1], order[k], *order[k + 1 :]], lengths), order[k])
        pos = {s["city"]: i for i, s in enumerate(stays)}
        for c in spec["constraints"]:
            kind, cid = c["kind"], c["id"]
            if kind == "event" and c["city"] in pos:
                i = pos[c["city"]]
                if i + 1 < n:
                    add("boundary_out", with_flight_day(i, c["last"] - 1), cid)
                    add("boundary_in", with_flight_day(i, c["last"]), cid)
                if i > 0:
                    add("boundary_out", with_flight_day(i - 1, c["first"] + 1), cid)
                    add("boundary_in", with_flight_day(i - 1, c["first"]), cid)
            elif kind == "stay" and c["city"] in pos:
                longer = dict(lengths)
                longer[c["city"]] += 1
                add("boundary_out", layout(order, longer), cid)
            elif kind == "total_days":
                over = [dict(s) for s in stays]
                over[-1]["end_day"] += 1
                add("boundary_out", {"stays": over}, cid)
        return out

    # -- skins and equivalent rewrites --------------------------------------------------------------
    def topic_words(self, topic: str) -> dict[str, Any]:
        return {"adjective": CITIES[topic][0]}

    def rename(self, spec: Spec, mapping: dict[str, str], topic: str) -> Spec:
        out = super().rename(spec, mapping, topic)
        for c in out["constraints"]:
            if c["kind"] == "flights":
                c["pairs"] = [[mapping[a], mapping[b]] for a, b in c["pairs"]]
        return out

    def restructure(self, rng: random.Random, spec: Spec) -> Spec:
        """Flight pairs reordered and flipped, events re-labelled, stays and events in another order."""
        out = copy.deepcopy(spec)
        for c in out["constraints"]:
            c.pop("text", None)
            if c["kind"] == "flights":
                c["pairs"] = [list(reversed(p)) if rng.random() < 0.5 else p for p in c["pairs"]]
                rng.shuffle(c["pairs"])
            if c["kind"] == "event":
                c["what"] = pick(rng, sorted(EVENTS))
        out["constraints"] = reordered(rng, out["constraints"][:3], out["constraints"][3:])
        return out

    def structural_kinds(self) -> tuple[str, ...]:
        return ("total_days", "cities", "flights", "stay")

    # -- multi-turn -------------------------------------------------------------------------------
    def validate_constraint(self, c: Constraint, spec: Spec) -> None:
        super().validate_constraint(c, spec)
        if "city" in c and c["city"] not in spec["cities"]:
            raise ValueError(f"synth/trip: {c['city']!r} is not one of the cities {spec['cities']}")

    def sentence(self, c: Constraint, spec: Spec) -> str:
        values: dict[str, Any] = {
            "k": len(spec["cities"]),
            "adj": spec["adjective"],
            "n": c.get("days", ""),
            "city": c.get("city", ""),
        }
        if c["kind"] == "event":
            values["event"] = self._event_text(c)
        return fill(TEMPLATES[c["kind"]][0], **values)


def _count(rows: Sequence[Row], j: int) -> Any:
    if all(isinstance(r[0], int) for r in rows):
        return sum(1 for r in rows if r[0] == j)
    return z3.Sum([z3.If(r[0] == j, 1, 0) for r in rows])


def _one_day(template: str) -> str:
    """The single-day form of an event sentence: '... on day {a}'."""
    return template.replace(" between day {a} and day {b}", " on day {a}").replace(
        " from day {a} to day {b}", " on day {a}"
    )


def _parse_event(text: str, parsers: list[tuple[str, re.Pattern[str]]]) -> Constraint:
    for label, rx in parsers:
        m = rx.fullmatch(text)
        if m:
            g = m.groupdict()
            first = int(g["a"])
            return {"kind": "event", "what": label, "city": g["city"], "first": first, "last": int(g.get("b") or first)}
    raise DataError(f"synth/trip: event not understood: {text!r}")
