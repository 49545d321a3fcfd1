"""synth/tasks: PDoctor's setting. Actions with durations, order relations and time windows, one at a time.

A plan is a schedule ``{"schedule": [{"task", "start", "end"}]}`` with clock times. Constraint kinds:
``coverage`` (each task exactly once), ``no_overlap``, ``horizon`` (the working day), ``duration``,
``precedence`` (first ends before then starts), ``not_before``, ``deadline`` and ``window``.
"""

from __future__ import annotations

import copy
import itertools
import json
import random
import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any, ClassVar

import z3
from pydantic import Field

from modulo.errors import ConfigError, DataError, PlanFormatError
from modulo.types import PlanJSON

from .common import (
    DUR_RE,
    TIME_RE,
    Constraint,
    Formula,
    alternation,
    capitalize,
    conj,
    disj,
    fill,
    fmt_hours,
    fmt_time,
    match_name,
    model_int,
    parse_hours,
    parse_time,
    pick,
    plan_entries,
    template_regex,
)
from .family import Family, Mutant, PlanModel, Row, Spec, named_rows, reordered
from .words import JOBS

STEP = 60

TEMPLATES: dict[str, tuple[str, ...]] = {
    "precedence": (
        "{a} happens before {b}",
        "{a} occurs earlier than {b}",
        "{a} is executed prior to {b}",
        "{a} precedes {b}",
        "{b} comes after {a}",
        "{b} happens after {a}",
        "{b} is done later than {a}",
        "{b} follows {a}",
        "before {b}, {a} is executed",
        "after {a}, {b} happens",
        "{a} has to be finished before {b} starts",
        "{b} can only start once {a} is done",
    ),
    "not_before": (
        "{a} happens after {t}",
        "{a} cannot start before {t}",
        "{a} starts no earlier than {t}",
        "after {t}, {a} is executed",
    ),
    "deadline": (
        "{a} happens before {t}",
        "{a} must be finished by {t}",
        "{a} is done no later than {t}",
        "before {t}, {a} is completed",
    ),
    "window": (
        "{a} takes place between {t1} and {t2}",
        "{a} must happen within {t1} to {t2}",
        "{a} is scheduled some time from {t1} until {t2}",
        "between {t1} and {t2}, {a} is executed",
    ),
    "duration": ("{a} takes {d}", "{a} lasts {d}", "{a} needs {d}"),
    "horizon": (
        "your day starts at {t1} and every task must be finished by {t2}",
        "you can start working at {t1} and must be done with everything by {t2}",
        "work begins at {t1} and all tasks have to end by {t2}",
    ),
    "no_overlap": (
        "you can only do one task at a time",
        "no two tasks can overlap",
        "tasks cannot be done in parallel",
    ),
    "coverage": ("each task must be done exactly once", "do every task once and only once"),
}
JOINERS = ("; ", ", and ", ", but ", ", yet ", ", while ", ", whereas ")
_JOIN_SPLIT = re.compile(r";\s+|,\s+(?:and|but|yet|while|whereas)\s+")
QUERY_KINDS = ("precedence", "not_before", "deadline", "window")
_INTRO = ("You work as {role}.", "You are {role}.")
_LIST = ("Today you have {n} tasks: {names}.", "There are {n} tasks to do today: {names}.")
_ASK = "Give the start and end time of every task, one per line, like '9:00-10:00: task'."

#: violations spelled out in one piece of feedback (the rest are counted, not built)
SHOWN = 3


class ScheduleItem(PlanModel):
    task: str = Field(description="the task's name as written in the query")
    start: str = Field(description="start time, H:MM (24-hour clock)")
    end: str = Field(description="end time, H:MM (24-hour clock)")


class TasksPlan(PlanModel):
    """A day's schedule: every task with its start and end time."""

    schedule: list[ScheduleItem]


def _items(plan: PlanJSON) -> list[tuple[str, int, int]]:
    entries = plan_entries(plan, "schedule", ("task", "start", "end"), "schedule entry")
    return [(str(item["task"]), parse_time(item["start"]), parse_time(item["end"])) for item in entries]


class TasksFamily(Family):
    name = "tasks"
    plan_model = TasksPlan
    critic_kinds: ClassVar[dict[str, tuple[str, ...]]] = {
        "synth_task_coverage": ("coverage",),
        "synth_task_duration": ("duration",),
        "synth_no_overlap": ("no_overlap",),
        "synth_horizon": ("horizon",),
        "synth_precedence": ("precedence",),
        "synth_window": ("not_before", "deadline", "window"),
    }
    entities = "actions"
    entity_fields = ("action", "first", "then")
    vocabulary: ClassVar[Mapping[str, Sequence[str]]] = {t: pool for t, (_role, pool) in JOBS.items()}
    presets: ClassVar[dict[str, dict[str, Any]]] = {
        "easy": {"n_actions": 3, "n_constraints": 3, "slack": 3, "max_duration": 2, "kinds": QUERY_KINDS},
        "medium": {"n_actions": 5, "n_constraints": 6, "slack": 3, "max_duration": 3, "kinds": QUERY_KINDS},
        "hard": {"n_actions": 8, "n_constraints": 11, "slack": 2, "max_duration": 2, "kinds": QUERY_KINDS},
    }
    mutation_kinds = ("swap", "shift", "drop", "duplicate", "collide", "boundary_out", "boundary_in")

    def validate_knobs(self, knobs: dict[str, Any]) -> None:
        n = self.int_knob(knobs, "n_actions", 2, 12, "an integer from 2 to 12")
        for key in ("n_constraints", "slack", "max_duration"):
            self.int_knob(knobs, key, 1 if key == "max_duration" else 0, said="a non-negative integer")
        if n * knobs["max_duration"] + knobs["slack"] > 18:
            raise ConfigError(
                f"synth/tasks: n_actions * max_duration + slack = {n * knobs['max_duration'] + knobs['slack']}"
                " hours does not fit in one day (at most 18)"
            )
        kinds = tuple(knobs["kinds"])
        bad = [k for k in kinds if k not in QUERY_KINDS]
        if bad or not kinds:
            raise ConfigError(f"synth/tasks: kinds must be a non-empty subset of {list(QUERY_KINDS)}, got {kinds}")
        knobs["kinds"] = kinds

    # -- synthesis -------------------------------------------------------------------------------
    def skeleton(self, rng: random.Random, knobs: dict[str, Any], topic: str) -> Spec:
        role, pool = JOBS[topic]
        actions = rng.sample(list(pool), knobs["n_actions"])
        durations = [STEP * rng.randint(1, knobs["max_duration"]) for _ in actions]
        total = sum(durations) // STEP + knobs["slack"]
        start_hour = 8 if total <= 16 else 24 - 2 - total
        h0 = start_hour * 60
        h1 = h0 + total * 60
        cs: list[Constraint] = [
            {"kind": "coverage"},
            {"kind": "no_overlap"},
            {"kind": "horizon", "start": h0, "end": h1},
        ]
        cs += [{"kind": "duration", "action": a, "minutes": d} for a, d in zip(actions, durations, strict=True)]
        return {
            "family": "tasks",
            "topic": topic,
            "role": role,
            "actions": actions,
            "constraints": cs,
            "n_base": len(cs),
        }

    def wanted(self, knobs: dict[str, Any]) -> int:
        return int(knobs["n_constraints"])

    def symbolic_rows(self, spec: Spec, ctx: Any = None) -> tuple[list[Row], list[Formula]]:
        rows: list[Row] = []
        domain: list[Formula] = []
        for i, _a in enumerate(spec["actions"]):
            ks, ke = z3.Int(f"ks_{i}", ctx), z3.Int(f"ke_{i}", ctx)
            rows.append((i, STEP * ks, STEP * ke))
        return rows, domain

    def _dur(self, spec: Spec, action: str) -> int:
        for c in spec["constraints"]:
            if c["kind"] == "duration" and c["action"] == action:
                return int(c["minutes"])
        raise KeyError(action)

    def _horizon(self, spec: Spec) -> tuple[int, int]:
        for c in spec["constraints"]:
            if c["kind"] == "horizon":
                return int(c["start"]), int(c["end"])
        raise KeyError("horizon")

    def encode(self, c: Constraint, spec: Spec, rows: Sequence[Row]) -> Formula:
        kind = c["kind"]
        idx = {a: i for i, a in enumerate(spec["actions"])}
        if kind == "coverage":
            counts = [sum(1 for r in rows if r[0] == i) for i in range(len(spec["actions"]))]
            return all(n == 1 for n in counts) and all(r[0] >= 0 for r in rows)
        if kind == "no_overlap":
            return conj(
                disj([rows[i][2] <= rows[j][1], rows[j][2] <= rows[i][1]])
                for i in range(len(rows))
                for j in range(i + 1, len(rows))
            )
        if kind == "horizon":
            return conj(conj([r[1] >= c["start"], r[2] <= c["end"]]) for r in rows)
        if kind == "duration":
            return conj(r[2] - r[1] == c["minutes"] for r in rows if r[0] == idx[c["action"]])
        if kind == "precedence":
            a, b = idx[c["first"]], idx[c["then"]]
            return conj(ra[2] <= rb[1] for ra in rows if ra[0] == a for rb in rows if rb[0] == b)
        a = idx[c["action"]]
        mine = [r for r in rows if r[0] == a]
        if kind == "not_before":
            return conj(r[1] >= c["time"] for r in mine)
        if kind == "deadline":
            return conj(r[2] <= c["time"] for r in mine)
        if kind == "window":
            return conj(conj([r[1] >= c["start"], r[2] <= c["end"]]) for r in mine)
        raise ValueError(f"unknown constraint kind {kind!r}")

    def read_plan(self, plan: PlanJSON) -> Any:
        return _items(plan)

    def plan_rows(self, spec: Spec, plan: PlanJSON) -> list[Row]:
        return named_rows(spec["actions"], _items(plan))

    def model_plan(self, spec: Spec, model: Any, rows: Sequence[Row]) -> PlanJSON:
        items = [(model_int(model, r[1]), model_int(model, r[2]), spec["actions"][r[0]]) for r in rows]
        items.sort()
        return {"schedule": [{"task": a, "start": fmt_time(s), "end": fmt_time(e)} for s, e, a in items]}

    def _times(self, witness: PlanJSON) -> dict[str, tuple[int, int]]:
        return {name: (s, e) for name, s, e in _items(witness)}

    def candidate(self, rng: random.Random, spec: Spec, witness: PlanJSON, knobs: dict[str, Any]) -> Constraint | None:
        kinds = knobs["kinds"]
        weights = {"precedence": 0.45, "window": 0.2, "not_before": 0.15, "deadline": 0.2}
        kind = rng.choices(list(kinds), weights=[weights[k] for k in kinds])[0]
        actions = spec["actions"]
        times = self._times(witness)
        h0, h1 = self._horizon(spec)
        guided = rng.random() < 0.75
        if kind == "precedence":
            a, b = rng.sample(actions, 2)
            if guided and times[a][0] > times[b][0]:
                a, b = b, a
            return {"kind": "precedence", "first": a, "then": b}
        a = pick(rng, actions)
        d = self._dur(spec, a)
        s, e = times[a]
        if kind == "not_before":
            t = s - STEP * rng.randint(0, 1) if guided else h0 + STEP * rng.randint(1, max(1, (h1 - d - h0) // STEP))
            return {"kind": "not_before", "action": a, "time": max(h0 + STEP, t)}
        if kind == "deadline":
            t = (
                e + STEP * rng.randint(0, 1)
                if guided
                else h0 + d + STEP * rng.randint(0, max(0, (h1 - h0 - d) // STEP - 1))
            )
            return {"kind": "deadline", "action": a, "time": min(h1 - STEP, t)}
        if guided:
            t1 = max(h0, s - STEP * rng.randint(0, 2))
            t2 = min(h1, e + STEP * rng.randint(0, 2))
        else:
            t1 = h0 + STEP * rng.randint(0, max(0, (h1 - h0 - d) // STEP))
            t2 = min(h1, t1 + d + STEP * rng.randint(0, 3))
        return {"kind": "window", "action": a, "start": t1, "end": t2}

    def block(self, spec: Spec, rows: Sequence[Row], plan: PlanJSON) -> Formula:
        order = [spec["actions"].index(name) for name, _s, _e in sorted(_items(plan), key=lambda x: x[1])]
        return z3.Not(z3.And(*[rows[order[i]][2] <= rows[order[i + 1]][1] for i in range(len(order) - 1)]))

    def distinguish(self, rng: random.Random, spec: Spec, witness: PlanJSON, other: PlanJSON) -> Constraint | None:
        w = [n for n, _s, _e in sorted(_items(witness), key=lambda x: x[1])]
        o = [n for n, _s, _e in sorted(_items(other), key=lambda x: x[1])]
        for a, b in zip(w, o, strict=True):
            if a != b:
                return {"kind": "precedence", "first": a, "then": b}
        return None

    def contradictions(self, rng: random.Random, spec: Spec, witness: PlanJSON) -> list[Constraint]:
        h0, h1 = self._horizon(spec)
        out: list[Constraint] = []
        precs = [c for c in spec["constraints"] if c["kind"] == "precedence"]
        rng.shuffle(precs)
        reversed_ = [{"kind": "precedence", "first": c["then"], "then": c["first"]} for c in precs]
        actions = list(spec["actions"])
        rng.shuffle(actions)
        tight: list[Constraint] = []
        for a in actions:
            d = self._dur(spec, a)
            if d > STEP:
                t1 = h0 + STEP * rng.randint(0, max(0, (h1 - h0 - d) // STEP))
                tight.append({"kind": "window", "action": a, "start": t1, "end": t1 + d - STEP})
            tight.append({"kind": "not_before", "action": a, "time": h1 - d + STEP})
            if d > STEP:
                tight.append({"kind": "deadline", "action": a, "time": h0 + d - STEP})
            for c in spec["constraints"]:
                if c["kind"] == "not_before" and c["action"] == a:
                    tight.append({"kind": "deadline", "action": a, "time": c["time"] + d - STEP})
        rng.shuffle(tight)
        out = reversed_ + tight if rng.random() < 0.5 else tight + reversed_
        return out

    # -- text ------------------------------------------------------------------------------------
    def _values(self, c: Constraint) -> dict[str, str]:
        k = c["kind"]
        if k == "precedence":
            return {"a": c["first"], "b": c["then"]}
        if k in ("not_before", "deadline"):
            return {"a": c["action"], "t": fmt_time(c["time"])}
        if k == "window":
            return {"a": c["action"], "t1": fmt_time(c["start"]), "t2": fmt_time(c["end"])}
        if k == "duration":
            return {"a": c["action"], "d": fmt_hours(c["minutes"])}
        if k == "horizon":
            return {"t1": fmt_time(c["start"]), "t2": fmt_time(c["end"])}
        return {}

    def render(self, spec: Spec, rng: random.Random) -> tuple[str, Spec]:
        spec = copy.deepcopy(spec)
        for c in spec["constraints"]:
            c["text"] = fill(pick(rng, TEMPLATES[c["kind"]]), **self._values(c))
        by_kind: dict[str, list[Constraint]] = {}
        for c in spec["constraints"]:
            by_kind.setdefault(c["kind"], []).append(c)
        names = spec["actions"]
        listed = ", ".join(names[:-1]) + " and " + names[-1]
        parts = [
            fill(pick(rng, _INTRO), role=spec["role"]),
            fill(pick(rng, _LIST), n=len(names), names=listed),
            capitalize("; ".join(c["text"] for c in by_kind.get("duration", []))) + ".",
        ]
        for kind in ("horizon", "no_overlap", "coverage"):
            parts += [capitalize(c["text"]) + "." for c in by_kind.get(kind, [])]
        rest = [c for c in spec["constraints"] if c["kind"] in QUERY_KINDS]
        i = 0
        while i < len(rest):
            if i + 1 < len(rest) and rng.random() < 0.5:
                parts.append(capitalize(rest[i]["text"] + pick(rng, JOINERS) + rest[i + 1]["text"]) + ".")
                i += 2
            else:
                parts.append(capitalize(rest[i]["text"]) + ".")
                i += 1
        return " ".join(parts) + "\n\n" + _ASK, spec

    def parse_query(self, text: str) -> Spec:
        body = text.split("\n\n")[0]
        sentences = [s.strip().rstrip(".") for s in re.split(r"(?<=\.)\s+", body.strip()) if s.strip()]
        role = actions = None
        for pattern in _INTRO:
            m = re.fullmatch(pattern.replace("{role}", "(?P<role>.+)").rstrip("."), sentences[0])
            if m:
                role = m.group("role")
        for pattern in _LIST:
            rx = re.escape(pattern.rstrip(".")).replace(r"\{n\}", r"(?P<n>\d+)").replace(r"\{names\}", "(?P<names>.+)")
            m = re.fullmatch(rx, sentences[1])
            if m:
                actions = re.split(r", | and ", m.group("names"))
        if role is None or actions is None:
            raise DataError(f"synth/tasks: cannot read the task list from {text[:120]!r}")
        parsers = _clause_parsers(tuple(actions))
        constraints: list[Constraint] = []
        for sentence in sentences[2:]:
            for clause in _JOIN_SPLIT.split(sentence):
                constraints.append(_parse_clause(clause, parsers, actions))
        return {"role": role, "actions": actions, "constraints": constraints}

    # -- plans -----------------------------------------------------------------------------------
    def violation(self, c: Constraint, spec: Spec, plan: PlanJSON) -> str | None:
        items = _items(plan)
        named = [(match_name(n, spec["actions"]), n, s, e) for n, s, e in items]
        kind = c["kind"]

        def at(s: int, e: int) -> str:
            return f"{fmt_time(s)}-{fmt_time(e)}"

        if kind == "coverage":
            problems = []
            for a in spec["actions"]:
                k = sum(1 for x in named if x[0] == a)
                if k == 0:
                    problems.append(f"{a} is missing from your schedule")
                elif k > 1:
                    problems.append(f"{a} appears {k} times")
            problems += [f"{n!r} is not one of the tasks" for known, n, _s, _e in named if known is None]
            return "; ".join(problems) + "." if problems else None
        if kind == "no_overlap":
            # the first SHOWN clashes only: built lazily, never the whole quadratic list
            clashes = list(
                itertools.islice(
                    (
                        f"{named[i][1]} ({at(*named[i][2:])}) overlaps {named[j][1]} ({at(*named[j][2:])})"
                        for i in range(len(named))
                        for j in range(i + 1, len(named))
                        if named[i][2] < named[j][3] and named[j][2] < named[i][3]
                    ),
                    SHOWN,
                )
            )
            return "In your schedule " + "; ".join(clashes) + "." if clashes else None
        if kind == "horizon":
            outside = [(n, s, e) for _k, n, s, e in named if s < c["start"] or e > c["end"]]
            if outside:
                bad = [f"{n} at {at(s, e)}" for n, s, e in outside[:SHOWN]]
                more = f" (and {len(outside) - SHOWN} more)" if len(outside) > SHOWN else ""
                window = f"{fmt_time(c['start'])}-{fmt_time(c['end'])}"
                return f"Your schedule has {', '.join(bad)}{more}, outside {window}."
            return None
        if kind == "precedence":
            firsts = [x for x in named if x[0] == c["first"]]
            thens = [x for x in named if x[0] == c["then"]]
            for fa in firsts:
                for tb in thens:
                    if fa[3] > tb[2]:
                        return (
                            f"Your schedule has {c['first']} at {at(fa[2], fa[3])} and {c['then']} at "
                            f"{at(tb[2], tb[3])}, so {c['then']} starts before {c['first']} ends."
                        )
            return None
        mine = [x for x in named if x[0] == c["action"]]
        for _k, n, s, e in mine:
            if kind == "duration" and e - s != c["minutes"]:
                return f"Your schedule has {n} at {at(s, e)}, which is {e - s} minutes, not {c['minutes']}."
            if kind == "not_before" and s < c["time"]:
                return f"Your schedule starts {n} at {fmt_time(s)}, before {fmt_time(c['time'])}."
            if kind == "deadline" and e > c["time"]:
                return f"Your schedule ends {n} at {fmt_time(e)}, after {fmt_time(c['time'])}."
            if kind == "window" and (s < c["start"] or e > c["end"]):
                return f"Your schedule has {n} at {at(s, e)}, not inside {fmt_time(c['start'])}-{fmt_time(c['end'])}."
        return None

    def parse_plan(self, text: str, spec: Spec) -> PlanJSON:
        data = _json_object(text)
        if data is not None and isinstance(data.get("schedule"), list):
            return data
        if "SCHEDULE:" in text:
            text = text.rsplit("SCHEDULE:", 1)[1]
        rx = re.compile(
            r"(\d{1,2}:\d{2}\s*(?:[ap]\.?m\.?)?)\s*(?:-|–|—|to|until)\s*(\d{1,2}:\d{2}\s*(?:[ap]\.?m\.?)?)",
            re.IGNORECASE,
        )
        names_rx = re.compile(alternation(spec["actions"]), re.IGNORECASE)
        schedule = []
        for line in text.splitlines():
            m = rx.search(line)
            if not m:
                continue
            rest = (line[: m.start()] + " " + line[m.end() :]).strip()
            hit = names_rx.search(rest)
            name = hit.group(0) if hit else re.sub(r"^[\s:*\-–.)\d]+|[\s*.]+$", "", rest)
            known = match_name(name, spec["actions"])
            try:
                start, end = parse_time(m.group(1)), parse_time(m.group(2))
            except PlanFormatError:
                continue
            schedule.append({"task": known or name, "start": fmt_time(start), "end": fmt_time(end)})
        if not schedule:
            raise PlanFormatError("no line of the form '9:00-10:00: task' was found")
        return {"schedule": schedule}

    def render_plan(self, plan: PlanJSON) -> str:
        return "\n".join(f"{x['start']}-{x['end']}: {x['task']}" for x in plan["schedule"])

    def format_hint(self) -> str:
        return _ASK

    # -- mutants ---------------------------------------------------------------------------------
    def mutants(self, rng: random.Random, spec: Spec, plan: PlanJSON) -> list[Mutant]:
        items = [dict(x) for x in plan["schedule"]]
        n = len(items)
        out: list[Mutant] = []

        def moved(i: int, start: int, end: int | None = None) -> PlanJSON:
            new = [dict(x) for x in items]
            s, e = parse_time(new[i]["start"]), parse_time(new[i]["end"])
            end = start + (e - s) if end is None else end
            if start < 0 or end > 24 * 60 or end < 0:
                return None
            new[i]["start"], new[i]["end"] = fmt_time(start), fmt_time(end)
            return {"schedule": new}

        def add(kind: str, p: PlanJSON, target: str = "") -> None:
            if p is not None:
                out.append(Mutant(kind, p, target))

        if n >= 2:
            i, j = rng.sample(range(n), 2)
            new = [dict(x) for x in items]
            new[i]["task"], new[j]["task"] = new[j]["task"], new[i]["task"]
            add("swap", {"schedule": new})
            cj = parse_time(items[j]["start"])
            add("collide", moved(i, cj), items[i]["task"])
        for _ in range(2):
            i = rng.randrange(n)
            delta = rng.choice((-2, -1, 1, 2)) * STEP
            add("shift", moved(i, parse_time(items[i]["start"]) + delta), items[i]["task"])
        i = rng.randrange(n)
        add("drop", {"schedule": [x for k, x in enumerate(items) if k != i]}, items[i]["task"])
        add("duplicate", {"schedule": [*items, dict(items[i])]}, items[i]["task"])
        pos = {x["task"]: k for k, x in enumerate(items)}
        for c in spec["constraints"]:
            kind, cid = c["kind"], c["id"]
            if kind in ("not_before", "deadline", "window", "duration") and c["action"] in pos:
                k = pos[c["action"]]
                s, e = parse_time(items[k]["start"]), parse_time(items[k]["end"])
                d = e - s
                if kind in ("not_before", "window"):
                    t = c["time"] if kind == "not_before" else c["start"]
                    add("boundary_out", moved(k, t - STEP), cid)
                    add("boundary_in", moved(k, t), cid)
                if kind in ("deadline", "window"):
                    t = c["time"] if kind == "deadline" else c["end"]
                    add("boundary_out", moved(k, t - d + STEP), cid)
                    add("boundary_in", moved(k, t - d), cid)
                if kind == "duration":
                    add("boundary_out", moved(k, s, s + c["minutes"] + STEP), cid)
                    add("boundary_out", moved(k, s, s + c["minutes"] - STEP), cid)
            elif kind == "precedence" and c["first"] in pos and c["then"] in pos:
                ka, kb = pos[c["first"]], pos[c["then"]]
                ea = parse_time(items[ka]["end"])
                add("boundary_out", moved(kb, ea - STEP), cid)
                add("boundary_in", moved(kb, ea), cid)
            elif kind == "horizon":
                first = min(range(n), key=lambda k: parse_time(items[k]["start"]))
                last = max(range(n), key=lambda k: parse_time(items[k]["end"]))
                add("boundary_out", moved(first, c["start"] - STEP), cid)
                le = parse_time(items[last]["end"]) - parse_time(items[last]["start"])
                add("boundary_out", moved(last, c["end"] - le + STEP), cid)
                add("boundary_in", moved(last, c["end"] - le), cid)
        return out

    # -- skins and equivalent rewrites --------------------------------------------------------------
    def topic_words(self, topic: str) -> dict[str, Any]:
        return {"role": JOBS[topic][0]}

    def restructure(self, rng: random.Random, spec: Spec) -> Spec:
        """Windows split into 'not before' + 'deadline' (or the reverse), query constraints reordered."""
        out = copy.deepcopy(spec)
        base = [c for c in out["constraints"] if c["kind"] not in QUERY_KINDS]
        rest = [c for c in out["constraints"] if c["kind"] in QUERY_KINDS]
        split: list[Constraint] = []
        for c in rest:
            c.pop("text", None)
            if c["kind"] == "window" and rng.random() < 0.7:
                split.append({"kind": "not_before", "action": c["action"], "time": c["start"]})
                split.append({"kind": "deadline", "action": c["action"], "time": c["end"]})
            else:
                split.append(c)
        merged = [c for c in split if c["kind"] not in ("not_before", "deadline")]
        for a in spec["actions"]:
            starts = [c for c in split if c["kind"] == "not_before" and c["action"] == a]
            ends = [c for c in split if c["kind"] == "deadline" and c["action"] == a]
            while starts and ends and rng.random() < 0.5:
                t1, t2 = starts.pop()["time"], ends.pop()["time"]
                merged.append({"kind": "window", "action": a, "start": t1, "end": t2})
            merged += starts + ends
        for c in base:
            c.pop("text", None)
        out["constraints"] = reordered(rng, base, merged)
        return out

    def structural_kinds(self) -> tuple[str, ...]:
        return ("coverage", "no_overlap", "horizon", "duration")

    # -- multi-turn -------------------------------------------------------------------------------
    def validate_constraint(self, c: Constraint, spec: Spec) -> None:
        super().validate_constraint(c, spec)
        for key in ("action", "first", "then"):
            if key in c and c[key] not in spec["actions"]:
                raise ValueError(f"synth/tasks: {c[key]!r} is not one of the tasks {spec['actions']}")

    def sentence(self, c: Constraint, spec: Spec) -> str:
        return fill(TEMPLATES[c["kind"]][0], **self._values(c))

    def parse_requirement(self, text: str, spec: Spec) -> Constraint:
        try:
            return _parse_clause(text, _clause_parsers(tuple(spec["actions"])), spec["actions"])
        except DataError as exc:
            raise ValueError(str(exc)) from None


@lru_cache(maxsize=512)
def _clause_parsers(actions: tuple[str, ...]) -> list[tuple[str, re.Pattern[str]]]:
    alt = alternation(actions)
    slots = {"a": alt, "b": alt, "t": TIME_RE, "t1": TIME_RE, "t2": TIME_RE, "d": DUR_RE}
    return [(kind, template_regex(t, slots)) for kind, ts in TEMPLATES.items() for t in ts]


def _parse_clause(clause: str, parsers: list[tuple[str, re.Pattern[str]]], actions: list[str]) -> Constraint:
    for kind, rx in parsers:
        m = rx.fullmatch(clause.strip())
        if not m:
            continue
        g = m.groupdict()

        def act(key: str, g: dict[str, str] = g) -> str:
            name = match_name(g[key], actions)
            if name is None:
                raise DataError(f"unknown task {g[key]!r}")
            return name

        if kind == "precedence":
            return {"kind": kind, "first": act("a"), "then": act("b")}
        if kind in ("not_before", "deadline"):
            return {"kind": kind, "action": act("a"), "time": parse_time(g["t"])}
        if kind == "window":
            return {"kind": kind, "action": act("a"), "start": parse_time(g["t1"]), "end": parse_time(g["t2"])}
        if kind == "duration":
            return {"kind": kind, "action": act("a"), "minutes": parse_hours(g["d"])}
        if kind == "horizon":
            return {"kind": kind, "start": parse_time(g["t1"]), "end": parse_time(g["t2"])}
        return {"kind": kind}
    raise DataError(f"synth/tasks: clause not understood: {clause!r}")


def _json_object(text: str) -> dict[str, Any] | None:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        value = json.loads(text[start : end + 1])
    except (ValueError, RecursionError):  # not JSON, a number too long to convert, or nested too deep
        return None
    return value if isinstance(value, dict) else None
