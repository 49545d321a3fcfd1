"""synth/calendar: one meeting for a group, NATURAL PLAN calendar-scheduling style.

A plan is one slot ``{"day", "start", "end"}``. Constraint kinds: ``meeting_duration``,
``work_hours`` (days and hours), ``busy`` (one blocked interval of one person), the preferences
``avoid_before``, ``avoid_after`` and ``avoid_day``, a ``deadline`` for the whole group, and
``earliest`` (the slot must be the group's earliest availability, which makes the answer unique).
The easy preset (two people, one day, two blocks each) keeps prompts short enough for a small model.
"""

from __future__ import annotations

import copy
import json
import random
import re
from collections.abc import Sequence
from typing import Any, ClassVar

import z3
from pydantic import Field

from modulo.errors import ConfigError, DataError, PlanFormatError
from modulo.types import PlanJSON

from .common import (
    DUR_RE,
    TIME_RE,
    WEEKDAYS,
    Constraint,
    Formula,
    alternation,
    capitalize,
    conj,
    disj,
    fill,
    fmt_hours,
    fmt_time,
    impl,
    match_name,
    model_int,
    neg,
    parse_hours,
    parse_time,
    pick,
    template_regex,
)
from .family import Family, Mutant, PlanModel, Row, Spec, reordered
from .words import MEETINGS, PEOPLE

STEP = 30
PREF_KINDS = ("avoid_before", "avoid_after", "avoid_day", "deadline")

TEMPLATES: dict[str, tuple[str, ...]] = {
    "meeting_duration": (
        "You need to schedule a {meeting} for {people} for {d}",
        "Please find a time slot of {d} for a {meeting} of {people}",
    ),
    "work_hours": (
        "between the work hours of {t1} to {t2} on {days}",
        "within working hours ({t1} to {t2}) on {days}",
    ),
    "busy": (
        "{p} has blocked their calendar on {day} during {t1} to {t2}",
        "{p} is busy on {day} during {t1} to {t2}",
        "{p} has meetings on {day} during {t1} to {t2}",
    ),
    "avoid_after": (
        "{p} would like to avoid more {meetings} on {day} after {t}",
        "{p} can not meet on {day} after {t}",
    ),
    "avoid_before": (
        "{p} would rather not meet on {day} before {t}",
        "{p} does not want to meet on {day} before {t}",
    ),
    "avoid_day": ("{p} would like to avoid more {meetings} on {day}", "{p} can not meet on {day}"),
    "deadline": ("The {meeting} must end by {t} on {day} at the latest", "The {meeting} has to be over by {day} {t}"),
    "earliest": (
        "The group would like to meet at their earliest availability",
        "Everyone wants the {meeting} as early as possible",
    ),
}
_BUSY_VERBS = ("has blocked their calendar", "is busy", "has meetings")
_SCHEDULES = "Here are the existing schedules for everyone during the {when}:"
_ASK = (
    "Find a time that works for everyone's schedule and constraints.\n"
    "Answer in the form 'Here is the proposed time: Monday, 13:30 - 14:30'."
)


class CalendarPlan(PlanModel):
    """The proposed meeting slot."""

    # patterns and the weekday enum let schema-constrained decoding (llama.cpp grammars) rule out
    # malformed times outright; the critics still check every value
    day: str = Field(
        description="weekday, for example Monday",
        json_schema_extra={"enum": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]},
    )
    start: str = Field(description="start time, H:MM (24-hour clock)", pattern=r"^([01]?[0-9]|2[0-3]):[0-5][0-9]$")
    end: str = Field(description="end time, H:MM (24-hour clock)", pattern=r"^([01]?[0-9]|2[0-3]):[0-5][0-9]$")


def _slot(plan: PlanJSON) -> tuple[str, int, int]:
    if not isinstance(plan, dict) or not {"day", "start", "end"} <= set(plan):
        raise PlanFormatError("a plan must be an object with 'day', 'start' and 'end'")
    day = match_name(str(plan["day"]), WEEKDAYS)
    if day is None:
        raise PlanFormatError(f"{plan['day']!r} is not a weekday")
    return day, parse_time(plan["start"]), parse_time(plan["end"])


def _join(names: Sequence[str], word: str = "and") -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + f" {word} " + names[-1]


def _days_text(days: Sequence[str]) -> str:
    return days[0] if len(days) == 1 else "either " + _join(days, "or")


class CalendarFamily(Family):
    name = "calendar"
    unique_by_default = True
    plan_model = CalendarPlan
    critic_kinds: ClassVar[dict[str, tuple[str, ...]]] = {
        "synth_meeting_duration": ("meeting_duration",),
        "synth_work_hours": ("work_hours",),
        "synth_busy": ("busy",),
        "synth_preference": ("avoid_before", "avoid_after", "avoid_day"),
        "synth_deadline": ("deadline",),
        "synth_earliest": ("earliest",),
    }
    entities = "people"
    entity_fields = ("person",)
    vocabulary = PEOPLE
    presets: ClassVar[dict[str, dict[str, Any]]] = {
        "easy": {
            "n_people": 2,
            "n_days": 1,
            "blocks": 2,
            "n_preferences": 0,
            "duration": None,
            "earliest": True,
            "kinds": ("avoid_before", "avoid_after", "avoid_day"),
        },
        "medium": {
            "n_people": 3,
            "n_days": 2,
            "blocks": 2,
            "n_preferences": 1,
            "duration": None,
            "earliest": True,
            "kinds": ("avoid_before", "avoid_after", "avoid_day"),
        },
        "hard": {
            "n_people": 5,
            "n_days": 3,
            "blocks": 3,
            "n_preferences": 2,
            "duration": None,
            "earliest": True,
            "kinds": ("avoid_before", "avoid_after", "avoid_day", "deadline"),
        },
    }
    mutation_kinds = ("swap", "shift", "collide", "boundary_out", "boundary_in")

    def __init__(self) -> None:
        self._grid_cache: dict[str, tuple[tuple[int, int], ...]] = {}

    def validate_knobs(self, knobs: dict[str, Any]) -> None:
        self.int_knob(knobs, "n_people", 1, 10)
        self.int_knob(knobs, "n_days", 1, 5, "1..5 (Monday to Friday)")
        for key in ("blocks", "n_preferences"):
            self.int_knob(knobs, key)
        if knobs["duration"] not in (None, 30, 60, 90, 120):
            raise ConfigError(
                f"synth/calendar: duration must be 30, 60, 90 or 120 minutes (or null), got {knobs['duration']!r}"
            )
        kinds = tuple(knobs["kinds"])
        if any(k not in PREF_KINDS for k in kinds):
            raise ConfigError(f"synth/calendar: kinds must be a subset of {list(PREF_KINDS)}, got {list(kinds)}")
        knobs["kinds"] = kinds

    # -- synthesis -------------------------------------------------------------------------------
    def skeleton(self, rng: random.Random, knobs: dict[str, Any], topic: str) -> Spec:
        people = rng.sample(list(PEOPLE[topic]), knobs["n_people"])
        days = list(WEEKDAYS[: knobs["n_days"]])
        duration = knobs["duration"] or rng.choice((30, 60, 60))
        cs: list[Constraint] = [
            {"kind": "meeting_duration", "minutes": duration},
            {"kind": "work_hours", "start": 540, "end": 1020, "days": days},
        ]
        if knobs["earliest"]:
            cs.append({"kind": "earliest"})
        meeting, meetings = MEETINGS[topic]
        return {
            "family": "calendar",
            "topic": topic,
            "meeting": meeting,
            "meetings": meetings,
            "people": people,
            "days": days,
            "constraints": cs,
            "n_base": len(cs),
        }

    def wanted(self, knobs: dict[str, Any]) -> int:
        return int(knobs["blocks"] * knobs["n_people"] * knobs["n_days"] + knobs["n_preferences"])

    def _get(self, spec: Spec, kind: str) -> Constraint:
        found = self._get_opt(spec, kind)
        if found is None:
            raise KeyError(kind)
        return found

    def _get_opt(self, spec: Spec, kind: str) -> Constraint | None:
        for c in spec["constraints"]:
            if c["kind"] == kind:
                return dict(c)
        return None

    def may_be_implied(self, c: Constraint) -> bool:
        return bool(c["kind"] == "busy")

    def meta_kinds(self) -> tuple[str, ...]:
        return ("earliest",)

    def symbolic_rows(self, spec: Spec, ctx: Any = None) -> tuple[list[Row], list[Formula]]:
        d, ks, ke = z3.Int("day", ctx), z3.Int("ks", ctx), z3.Int("ke", ctx)
        return [(d, STEP * ks, STEP * ke)], [d >= 0, d < len(spec["days"])]

    def encode(self, c: Constraint, spec: Spec, rows: Sequence[Row]) -> Formula:
        return conj(self._encode_row(c, spec, r) for r in rows)

    def _encode_row(self, c: Constraint, spec: Spec, row: Row) -> Formula:
        d, s, e = row
        kind = c["kind"]
        days = spec["days"]
        if kind == "meeting_duration":
            return e - s == c["minutes"]
        if kind == "work_hours":
            return conj(
                [disj(d == i for i in range(len(days)) if days[i] in c["days"]), s >= c["start"], e <= c["end"]]
            )
        if kind == "busy":
            return impl(d == days.index(c["day"]), disj([e <= c["start"], s >= c["end"]]))
        if kind == "avoid_after":
            return impl(d == days.index(c["day"]), e <= c["time"])
        if kind == "avoid_before":
            return impl(d == days.index(c["day"]), s >= c["time"])
        if kind == "avoid_day":
            return neg(d == days.index(c["day"]))
        if kind == "deadline":
            di = days.index(c["day"])
            return disj([d < di, conj([d == di, e <= c["time"]])])
        if kind == "earliest":
            terms = []
            for di, g in self._feasible_grid(spec):
                terms.append(neg(disj([di < d, conj([di == d, g < s])])))
            return conj(terms)
        raise ValueError(f"unknown constraint kind {kind!r}")

    def _feasible_grid(self, spec: Spec) -> list[tuple[int, int]]:
        """Grid slots (day index, start) that meet every constraint except ``earliest`` (decided exactly)."""
        key = json.dumps(
            [spec["days"], [{k: v for k, v in c.items() if k not in ("id", "text")} for c in spec["constraints"]]],
            sort_keys=True,
        )
        hit = self._grid_cache.get(key)
        if hit is None:
            hit = self._compute_grid(spec)
            if len(self._grid_cache) > 256:
                self._grid_cache.clear()
            self._grid_cache[key] = hit
        return list(hit)

    def _compute_grid(self, spec: Spec) -> tuple[tuple[int, int], ...]:
        dur = self._get(spec, "meeting_duration")["minutes"]
        wh = self._get(spec, "work_hours")
        others = [c for c in spec["constraints"] if c["kind"] != "earliest"]
        out = []
        for di in range(len(spec["days"])):
            for g in range(wh["start"], wh["end"] - dur + 1, STEP):
                row = (di, g, g + dur)
                if all(self._encode_row(c, spec, row) is True for c in others):
                    out.append((di, g))
        return tuple(out)

    def _first_free(self, spec: Spec) -> tuple[int, int] | None:
        """The earliest grid slot free of busy blocks, preferences and deadline (fast, for guidance only)."""
        dur = self._get(spec, "meeting_duration")["minutes"]
        wh = self._get(spec, "work_hours")
        for di, day in enumerate(spec["days"]):
            lo, hi = wh["start"], wh["end"]
            bad: list[tuple[int, int]] = []
            for c in spec["constraints"]:
                k = c["kind"]
                if k == "avoid_day" and c["day"] == day:
                    hi = lo - 1
                elif k == "avoid_before" and c["day"] == day:
                    lo = max(lo, c["time"])
                elif k == "avoid_after" and c["day"] == day:
                    hi = min(hi, c["time"])
                elif k == "deadline":
                    dl = spec["days"].index(c["day"])
                    if di > dl:
                        hi = lo - 1
                    elif di == dl:
                        hi = min(hi, c["time"])
                elif k == "busy" and c["day"] == day:
                    bad.append((c["start"], c["end"]))
            g = lo
            while g + dur <= hi:
                clash = [b for b in bad if g < b[1] and b[0] < g + dur]
                if not clash:
                    return di, g
                g = max(b[1] for b in clash)
        return None

    def read_plan(self, plan: PlanJSON) -> Any:
        return _slot(plan)

    def plan_rows(self, spec: Spec, plan: PlanJSON) -> list[Row]:
        day, s, e = _slot(plan)
        d = spec["days"].index(day) if day in spec["days"] else -1
        return [(d, z3.IntVal(s), z3.IntVal(e))]

    def model_plan(self, spec: Spec, model: Any, rows: Sequence[Row]) -> PlanJSON:
        d, s, e = rows[0]
        return {
            "day": spec["days"][model_int(model, d)],
            "start": fmt_time(model_int(model, s)),
            "end": fmt_time(model_int(model, e)),
        }

    def candidate(self, rng: random.Random, spec: Spec, witness: PlanJSON, knobs: dict[str, Any]) -> Constraint | None:
        people, days = spec["people"], spec["days"]
        wh = self._get(spec, "work_hours")
        dur = self._get(spec, "meeting_duration")["minutes"]
        ws, we = wh["start"], wh["end"]
        n_prefs = sum(1 for c in spec["constraints"] if c["kind"] in PREF_KINDS)
        n_busy = sum(1 for c in spec["constraints"] if c["kind"] == "busy")
        want_busy = knobs["blocks"] * len(people) * len(days)
        kinds = [k for k in knobs["kinds"] if k != "avoid_day" or len(days) > 1]
        if n_prefs < knobs["n_preferences"] and kinds and (n_busy >= want_busy or rng.random() < 0.3):
            kind = pick(rng, kinds)
            p, day = pick(rng, people), pick(rng, days)
            if kind == "avoid_after":
                return {
                    "kind": kind,
                    "person": p,
                    "day": day,
                    "time": ws + dur + STEP * rng.randint(0, (we - ws - dur) // STEP - 1),
                }
            if kind == "avoid_before":
                return {
                    "kind": kind,
                    "person": p,
                    "day": day,
                    "time": ws + STEP * rng.randint(1, (we - ws - dur) // STEP),
                }
            if kind == "avoid_day":
                return {"kind": kind, "person": p, "day": day}
            return {"kind": "deadline", "day": day, "time": ws + dur + STEP * rng.randint(0, (we - ws - dur) // STEP)}
        counts = {p: sum(1 for c in spec["constraints"] if c["kind"] == "busy" and c["person"] == p) for p in people}
        low = min(counts.values())
        p = pick(rng, [x for x in people if counts[x] == low])
        wday, wstart, _wend = _slot(witness)
        if self._get_opt(spec, "earliest") is not None:
            first = self._first_free(spec)
            if first is not None:
                wday, wstart = days[first[0]], first[1]
        if rng.random() < 0.5:
            day = wday
            length = STEP * rng.randint(1, 4)
            start = wstart - STEP * rng.randint(0, length // STEP - 1)
        else:
            day = pick(rng, days)
            length = STEP * rng.randint(1, 4)
            start = ws + STEP * rng.randint(0, (we - ws - length) // STEP)
        start, end = max(ws, start), min(we, start + length)
        if end <= start:
            return None
        for c in spec["constraints"]:
            if c["kind"] == "busy" and c["person"] == p and c["day"] == day and start <= c["end"] and c["start"] <= end:
                return None
        return {"kind": "busy", "person": p, "day": day, "start": start, "end": end}

    def block(self, spec: Spec, rows: Sequence[Row], plan: PlanJSON) -> Formula:
        day, s, _e = _slot(plan)
        d, rs, _re = rows[0]
        return z3.Not(z3.And(d == spec["days"].index(day), rs == s))

    def distinguish(self, rng: random.Random, spec: Spec, witness: PlanJSON, other: PlanJSON) -> Constraint | None:
        wd, ws, we = _slot(witness)
        od, os_, oe = _slot(other)
        start, end = os_, oe
        if wd == od:
            start, end = (max(os_, we), oe) if os_ > ws else (os_, min(oe, ws))
        if end <= start:
            return None
        people = list(spec["people"])
        rng.shuffle(people)
        for p in people:
            clash = any(
                c["kind"] == "busy" and c["person"] == p and c["day"] == od and start <= c["end"] and c["start"] <= end
                for c in spec["constraints"]
            )
            if not clash:
                return {"kind": "busy", "person": p, "day": od, "start": start, "end": end}
        return None

    def contradictions(self, rng: random.Random, spec: Spec, witness: PlanJSON) -> list[Constraint]:
        """A deadline before the earliest possible end, or a person who rules out what is left."""
        grid = self._feasible_grid(spec)
        dur = self._get(spec, "meeting_duration")["minutes"]
        days = spec["days"]
        out: list[Constraint] = []
        di, g = grid[0]
        p = pick(rng, spec["people"])
        if len(days) == 1:
            last = max(s for _d, s in grid)
            out.append({"kind": "avoid_before", "person": p, "day": days[0], "time": last + STEP})
            out.append({"kind": "avoid_after", "person": p, "day": days[0], "time": g + dur - STEP})
        out.append({"kind": "deadline", "day": days[di], "time": g + dur - STEP})
        rng.shuffle(out)
        if rng.random() < 0.25:
            wh = self._get(spec, "work_hours")
            out.insert(0, {"kind": "deadline", "day": days[0], "time": wh["start"] + dur - STEP})
        return out

    # -- text ------------------------------------------------------------------------------------
    def _values(self, c: Constraint, spec: Spec) -> dict[str, str]:
        v: dict[str, str] = {"meeting": spec["meeting"], "meetings": spec["meetings"]}
        k = c["kind"]
        if k == "meeting_duration":
            v.update(d=fmt_hours(c["minutes"]), people=_join(spec["people"]))
        elif k == "work_hours":
            v.update(t1=fmt_time(c["start"]), t2=fmt_time(c["end"]), days=_days_text(c["days"]))
        elif k == "busy":
            v.update(p=c["person"], day=c["day"], t1=fmt_time(c["start"]), t2=fmt_time(c["end"]))
        elif k in ("avoid_after", "avoid_before"):
            v.update(p=c["person"], day=c["day"], t=fmt_time(c["time"]))
        elif k == "avoid_day":
            v.update(p=c["person"], day=c["day"])
        elif k == "deadline":
            v.update(day=c["day"], t=fmt_time(c["time"]))
        return v

    def render(self, spec: Spec, rng: random.Random) -> tuple[str, Spec]:
        spec = copy.deepcopy(spec)
        verbs = {p: pick(rng, _BUSY_VERBS) for p in spec["people"]}
        for c in spec["constraints"]:
            if c["kind"] == "busy":
                template = "{p} " + verbs[c["person"]] + " on {day} during {t1} to {t2}"
            else:
                template = pick(rng, TEMPLATES[c["kind"]])
            c["text"] = fill(template, **self._values(c, spec))
        dur_c = self._get(spec, "meeting_duration")
        wh_c = self._get(spec, "work_hours")
        lines = [dur_c["text"] + " " + wh_c["text"] + ".", ""]
        lines.append(_SCHEDULES.format(when="day" if len(spec["days"]) == 1 else "days"))
        for p in spec["people"]:
            mine = [c for c in spec["constraints"] if c["kind"] == "busy" and c["person"] == p]
            if not mine:
                lines.append(f"{p} is free the entire day." if len(spec["days"]) == 1 else f"{p} is free on all days.")
                continue
            parts = []
            for day in spec["days"]:
                blocks = sorted((c for c in mine if c["day"] == day), key=lambda c: c["start"])
                if blocks:
                    spans = ", ".join(f"{fmt_time(c['start'])} to {fmt_time(c['end'])}" for c in blocks)
                    parts.append(f"{day} during {spans}")
            lines.append(f"{p} {verbs[p]} on {', '.join(parts)};")
        others = [c for c in spec["constraints"] if c["kind"] in (*PREF_KINDS, "earliest")]
        if others:
            lines.append("")
        lines += [capitalize(c["text"]) + "." for c in others]
        return "\n".join(lines) + "\n\n" + _ASK, spec

    def parse_query(self, text: str) -> Spec:
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        header = lines[0].rstrip(".")
        people: list[str] = []
        constraints: list[Constraint] = []
        names_any = r"[A-Z][a-z]+(?:(?:, | and )[A-Z][a-z]+)*"
        meeting_rx = r"[a-z][a-z ]*?"
        hdr_slots = {
            "meeting": meeting_rx,
            "people": names_any,
            "d": DUR_RE,
            "t1": TIME_RE,
            "t2": TIME_RE,
            "days": r"(?:either )?[A-Z][a-z]+day(?:(?:, | or )[A-Z][a-z]+day)*",
        }
        for dt in TEMPLATES["meeting_duration"]:
            for wt in TEMPLATES["work_hours"]:
                m = template_regex(dt + " " + wt, hdr_slots).fullmatch(header)
                if m:
                    people = re.split(r", | and ", m.group("people"))
                    days = re.split(r", | or ", m.group("days").removeprefix("either "))
                    meeting = m.group("meeting")
                    constraints.append({"kind": "meeting_duration", "minutes": parse_hours(m.group("d"))})
                    constraints.append(
                        {
                            "kind": "work_hours",
                            "start": parse_time(m.group("t1")),
                            "end": parse_time(m.group("t2")),
                            "days": days,
                        }
                    )
        if not people:
            raise DataError(f"synth/calendar: cannot read the header {header!r}")
        meetings = next((pl for sg, pl in MEETINGS.values() if sg == meeting), meeting + "s")
        day_alt = alternation(WEEKDAYS)
        person_alt = alternation(people)
        busy_rx = re.compile(rf"(?P<p>{person_alt}) (?:{alternation(_BUSY_VERBS)}) on (?P<rest>.+);")
        slots = {
            "p": person_alt,
            "day": day_alt,
            "t": TIME_RE,
            "t1": TIME_RE,
            "t2": TIME_RE,
            "meeting": re.escape(meeting),
            "meetings": re.escape(meetings),
        }
        sentence_parsers = [(k, template_regex(t, slots)) for k in (*PREF_KINDS, "earliest") for t in TEMPLATES[k]]
        for line in lines[1:]:
            if line.startswith("Here are the existing schedules") or line.startswith(("Find a time", "Answer in")):
                continue
            if re.fullmatch(rf"(?:{person_alt}) is free (?:the entire day|on all days)\.", line):
                continue
            m = busy_rx.fullmatch(line)
            if m:
                for chunk in re.split(rf", (?=(?:{day_alt}) during )", m.group("rest")):
                    day, spans = chunk.split(" during ", 1)
                    for span in spans.split(", "):
                        t1, t2 = span.split(" to ")
                        constraints.append(
                            {
                                "kind": "busy",
                                "person": m.group("p"),
                                "day": day,
                                "start": parse_time(t1),
                                "end": parse_time(t2),
                            }
                        )
                continue
            constraints.append(self._parse_sentence(line.rstrip("."), sentence_parsers))
        return {"people": people, "days": days, "meeting": meeting, "constraints": constraints}

    def _parse_sentence(self, sentence: str, parsers: list[tuple[str, re.Pattern[str]]]) -> Constraint:
        for kind, rx in parsers:
            m = rx.fullmatch(sentence)
            if not m:
                continue
            g = m.groupdict()
            if kind in ("avoid_after", "avoid_before"):
                return {"kind": kind, "person": g["p"], "day": g["day"], "time": parse_time(g["t"])}
            if kind == "avoid_day":
                return {"kind": kind, "person": g["p"], "day": g["day"]}
            if kind == "deadline":
                return {"kind": kind, "day": g["day"], "time": parse_time(g["t"])}
            return {"kind": kind}
        raise DataError(f"synth/calendar: sentence not understood: {sentence!r}")

    # -- plans -----------------------------------------------------------------------------------
    def violation(self, c: Constraint, spec: Spec, plan: PlanJSON) -> str | None:
        day, s, e = _slot(plan)
        where = f"{day}, {fmt_time(s)} - {fmt_time(e)}"
        kind = c["kind"]
        if kind == "meeting_duration":
            return None if e - s == c["minutes"] else f"Your slot {where} lasts {e - s} minutes, not {c['minutes']}."
        if kind == "work_hours":
            if day not in c["days"]:
                return f"Your slot is on {day}, which is not one of the allowed days."
            if s < c["start"] or e > c["end"]:
                return f"Your slot {where} is not within {fmt_time(c['start'])} to {fmt_time(c['end'])}."
            return None
        if kind == "busy":
            if day == c["day"] and s < c["end"] and c["start"] < e:
                return (
                    f"Your slot {where} overlaps {c['person']}'s busy time "
                    f"{fmt_time(c['start'])} to {fmt_time(c['end'])}."
                )
            return None
        if kind == "avoid_after":
            return f"Your slot {where} ends after {fmt_time(c['time'])}." if day == c["day"] and e > c["time"] else None
        if kind == "avoid_before":
            return (
                f"Your slot {where} starts before {fmt_time(c['time'])}." if day == c["day"] and s < c["time"] else None
            )
        if kind == "avoid_day":
            return f"Your slot is on {day}." if day == c["day"] else None
        if kind == "deadline":
            order = spec["days"]
            late = (day in order and order.index(day) > order.index(c["day"])) or (day == c["day"] and e > c["time"])
            return f"Your slot {where} ends later than {c['day']} {fmt_time(c['time'])}." if late else None
        if kind == "earliest":
            if self._earlier_slot(spec, day, s) is None:
                return None
            return f"Your slot {where} is not the earliest: an earlier slot fits everyone's schedule and constraints."
        raise ValueError(f"unknown constraint kind {kind!r}")

    def hint(self, c: Constraint, spec: Spec, plan: PlanJSON) -> str | None:
        if c["kind"] != "earliest":
            return None
        day, s, _e = _slot(plan)
        slot = self._earlier_slot(spec, day, s)
        return (
            None
            if slot is None
            else f"An earlier slot works for everyone: {slot['day']}, {slot['start']} - {slot['end']}."
        )

    def _earlier_slot(self, spec: Spec, day: str, start: int) -> dict[str, str] | None:
        """The earliest slot before (day, start) that keeps every other constraint, or None."""
        dur = self._get(spec, "meeting_duration")["minutes"]
        others = [x for x in spec["constraints"] if x["kind"] != "earliest"]
        wh = self._get(spec, "work_hours")
        rank = spec["days"].index(day) if day in spec["days"] else -1
        for di, dname in enumerate(spec["days"]):
            for g in range(wh["start"], wh["end"] - dur + 1, STEP):
                if (di, g) >= (rank, start):
                    break
                slot = {"day": dname, "start": fmt_time(g), "end": fmt_time(g + dur)}
                if all(self.violation(x, spec, slot) is None for x in others):
                    return slot
        return None

    def parse_plan(self, text: str, spec: Spec) -> PlanJSON:
        start = text.find("{")
        if start >= 0:
            try:
                data = json.loads(text[start : text.rfind("}") + 1])
                if isinstance(data, dict) and {"day", "start", "end"} <= set(data):
                    return data
            except (ValueError, RecursionError):  # not JSON, a number too long to convert, or nested too deep
                pass
        tm = r"\d{1,2}:\d{2}\s*(?:[ap]\.?m\.?)?"
        rx = re.compile(
            rf"({alternation(WEEKDAYS)})\s*,?\s*(?:from\s+)?({tm})\s*(?:-|–|—|to|until)\s*({tm})", re.IGNORECASE
        )
        m = rx.search(text.split("proposed time:", 1)[-1]) or rx.search(text)
        if not m:
            raise PlanFormatError("no slot of the form 'Monday, 13:30 - 14:30' was found")
        day = match_name(m.group(1), WEEKDAYS) or m.group(1)
        return {"day": day, "start": fmt_time(parse_time(m.group(2))), "end": fmt_time(parse_time(m.group(3)))}

    def render_plan(self, plan: PlanJSON) -> str:
        return f"Here is the proposed time: {plan['day']}, {plan['start']} - {plan['end']}"

    def format_hint(self) -> str:
        return "Answer in the form 'Here is the proposed time: Monday, 13:30 - 14:30'."

    # -- mutants ---------------------------------------------------------------------------------
    def mutants(self, rng: random.Random, spec: Spec, plan: PlanJSON) -> list[Mutant]:
        day, s, e = _slot(plan)
        dur = e - s
        out: list[Mutant] = []

        def add(kind: str, d: str, start: int, end: int | None = None, target: str = "") -> None:
            end = start + dur if end is None else end
            if 0 <= start <= 24 * 60 and 0 <= end <= 24 * 60:
                out.append(Mutant(kind, {"day": d, "start": fmt_time(start), "end": fmt_time(end)}, target))

        for _ in range(2):
            add("shift", day, s + STEP * rng.choice((-2, -1, 1, 2)))
        others = [d for d in spec["days"] if d != day]
        if others:
            add("swap", pick(rng, others), s)
        else:
            add("swap", day, e, s)
        busy = [c for c in spec["constraints"] if c["kind"] == "busy"]
        if busy:
            b = busy[rng.randrange(len(busy))]
            add("collide", b["day"], b["start"], target=b["id"])
        for c in spec["constraints"]:
            k, cid = c["kind"], c["id"]
            if k == "busy":
                add("boundary_out", c["day"], c["start"] - dur + STEP, target=cid)
                add("boundary_out", c["day"], c["end"] - STEP, target=cid)
                add("boundary_in", c["day"], c["start"] - dur, target=cid)
                add("boundary_in", c["day"], c["end"], target=cid)
            elif k == "work_hours":
                add("boundary_out", day, c["start"] - STEP, target=cid)
                add("boundary_out", day, c["end"] - dur + STEP, target=cid)
                add("boundary_in", day, c["start"], target=cid)
                add("boundary_in", day, c["end"] - dur, target=cid)
            elif k in ("avoid_after", "deadline"):
                add("boundary_out", c["day"], c["time"] - dur + STEP, target=cid)
                add("boundary_in", c["day"], c["time"] - dur, target=cid)
            elif k == "avoid_before":
                add("boundary_out", c["day"], c["time"] - STEP, target=cid)
                add("boundary_in", c["day"], c["time"], target=cid)
            elif k == "avoid_day":
                add("boundary_out", c["day"], s, target=cid)
            elif k == "meeting_duration":
                add("boundary_out", day, s, s + c["minutes"] + STEP, target=cid)
                add("boundary_out", day, s, s + c["minutes"] - STEP, target=cid)
            elif k == "earliest":
                add("boundary_out", day, s - STEP, target=cid)
        return out

    # -- skins and equivalent rewrites --------------------------------------------------------------
    def topic_words(self, topic: str) -> dict[str, Any]:
        meeting, meetings = MEETINGS[topic]
        return {"meeting": meeting, "meetings": meetings}

    def restructure(self, rng: random.Random, spec: Spec) -> Spec:
        """Busy blocks split at a half-hour boundary or adjacent ones merged; people listed in another order."""
        out = copy.deepcopy(spec)
        rng.shuffle(out["people"])
        merged: list[Constraint] = []
        for c in out["constraints"]:
            c.pop("text", None)
            if c["kind"] == "busy" and c["end"] - c["start"] >= 2 * STEP and rng.random() < 0.5:
                cut = c["start"] + STEP * rng.randint(1, (c["end"] - c["start"]) // STEP - 1)
                merged.append({**c, "end": cut})
                merged.append({**c, "start": cut})
            else:
                merged.append(c)
        out["constraints"] = reordered(rng, merged[: spec["n_base"]], merged[spec["n_base"] :])
        return out

    def structural_kinds(self) -> tuple[str, ...]:
        return ("meeting_duration", "work_hours", "earliest")

    # -- multi-turn -------------------------------------------------------------------------------
    def may_hide(self, c: Constraint, visible: Spec) -> bool:
        """A busy block only while its person keeps another one in the query (the query would otherwise
        call them free the entire day, which the held-back block contradicts)."""
        if c["kind"] != "busy":
            return True
        return any(x["kind"] == "busy" and x["person"] == c["person"] for x in visible["constraints"])

    def validate_constraint(self, c: Constraint, spec: Spec) -> None:
        super().validate_constraint(c, spec)
        if "person" in c and c["person"] not in spec["people"]:
            raise ValueError(f"synth/calendar: {c['person']!r} is not one of {spec['people']}")
        if "day" in c and c["day"] not in spec["days"]:
            raise ValueError(f"synth/calendar: {c['day']!r} is not one of the days {spec['days']}")
        for key in ("time", "start", "end"):
            if key in c and (not isinstance(c[key], int) or not 0 <= c[key] <= 24 * 60):
                raise ValueError(f"synth/calendar: {key} must be minutes after midnight, got {c[key]!r}")

    def sentence(self, c: Constraint, spec: Spec) -> str:
        template = "{p} is busy on {day} during {t1} to {t2}" if c["kind"] == "busy" else TEMPLATES[c["kind"]][0]
        return fill(template, **self._values(c, spec))

    def parse_requirement(self, text: str, spec: Spec) -> Constraint:
        person_alt, day_alt = alternation(spec["people"]), alternation(WEEKDAYS)
        m = re.fullmatch(
            rf"(?P<p>{person_alt}) (?:{alternation(_BUSY_VERBS)}) on (?P<day>{day_alt}) during "
            rf"(?P<t1>{TIME_RE}) to (?P<t2>{TIME_RE})",
            text,
            re.IGNORECASE,
        )
        if m:
            return {
                "kind": "busy",
                "person": match_name(m.group("p"), spec["people"]) or m.group("p"),
                "day": match_name(m.group("day"), WEEKDAYS) or m.group("day"),
                "start": parse_time(m.group("t1")),
                "end": parse_time(m.group("t2")),
            }
        meetings = spec.get("meetings") or spec["meeting"] + "s"
        slots = {
            "p": person_alt,
            "day": day_alt,
            "t": TIME_RE,
            "meeting": re.escape(spec["meeting"]),
            "meetings": re.escape(meetings),
        }
        parsers = [(k, template_regex(t, slots)) for k in (*PREF_KINDS, "earliest") for t in TEMPLATES[k]]
        try:
            return self._parse_sentence(text, parsers)
        except DataError as exc:
            raise ValueError(str(exc)) from None
