"""Meeting Planning: constraints, the plan schema, text <-> plan, simulations and the exact optimum.

A plan is a list of steps, each one of four kinds, matching the four sentences the official script
accepts: ``start`` (where and when the day begins), ``travel`` (to a place, minutes, arrival time),
``wait`` (until a time) and ``meet`` (a person, minutes, from, to).

Two simulations live here:

* :func:`official_score` replays the official script on text steps: the written minutes and times of
  travel and meet steps are ignored (travel takes the matrix time, a meeting takes the person's
  required minimum), the first error stops it and the people met so far count. An unknown place or
  person made the official script crash; here that is reported as ``crashed``.
* :func:`simulate` is the sound reading the critics use on plan JSON: every written number must be
  right, and each problem is recorded with the step it happened at.

One corner where the two disagree: a meeting written longer than the minimum moves the sound clock
further than the official one, so a following travel-then-meet without a wait step can pass the
sound reading while the official script, still at the earlier time, finds the next window not yet
open. No golden plan and no stored Gemini answer of the subset hits it (every valid answer there is
also officially solved).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from modulo.errors import DataError, PlanFormatError

from .common import ampm_to_minutes, minutes_to_ampm

TIME_PATTERN = r"^(1[0-2]|[1-9]):[0-5][0-9](AM|PM)$"
TimeStr = Annotated[str, Field(pattern=TIME_PATTERN, description="a clock time like 9:00AM or 2:15PM")]

# -- constraints ---------------------------------------------------------------------------------

_DIST_HEADER = "Travel distances (in minutes):"
_DIST_LINE = re.compile(r"^(.+?) to (.+): (\d+)\.$")
_T = r"(\d{1,2}:\d{2}[AP]M)"
_ARRIVE = re.compile(rf"^You arrive at (.+) at {_T}\.$")
_AVAILABLE = re.compile(rf"^(.+?) will be at (.+) from {_T} to {_T}\.$")
_MINIMUM = re.compile(r"^You'd like to meet (.+) for a minimum of (\d+) minutes\.$")


def parse_meeting_constraints(prompt: str) -> dict[str, Any]:
    """The start, the people and the travel-time matrix of a meeting prompt (0-shot or 5-shot).

    Keys: ``start_location``, ``start_time`` ("9:00AM"), ``start_text``; ``people``: a list of
    {name, location, start, end (clock strings), min_minutes, text (the availability sentence),
    minimum_text}; ``distances``: {from: {to: minutes}}.
    Raises DataError when the prompt does not follow the template.
    """
    at = prompt.rfind(_DIST_HEADER)
    if at < 0:
        raise DataError(f"meeting prompt: no {_DIST_HEADER!r} section")
    task = prompt[at + len(_DIST_HEADER) :]
    dist_text, sep, rest = task.partition("CONSTRAINTS:")
    if not sep:
        raise DataError("meeting prompt: no 'CONSTRAINTS:' section")
    distances: dict[str, dict[str, int]] = {}
    for line in dist_text.strip().splitlines():
        m = _DIST_LINE.match(line.strip())
        if not m:
            raise DataError(f"meeting prompt: unrecognised travel-time line {line!r}")
        distances.setdefault(m.group(1), {})[m.group(2)] = int(m.group(3))
    body = rest.split("\n\n")[0]
    start_location = start_time = start_text = None
    people: dict[str, dict[str, Any]] = {}
    for sentence in re.split(r"(?<=\.)\s+", body.strip()):
        if m := _ARRIVE.match(sentence):
            start_location, start_time, start_text = m.group(1), m.group(2), sentence
        elif m := _AVAILABLE.match(sentence):
            name = m.group(1)
            if name in people:
                raise DataError(f"meeting prompt: {name} is listed twice")
            people[name] = {"name": name, "location": m.group(2), "start": m.group(3), "end": m.group(4)}
            people[name]["text"] = sentence
        elif m := _MINIMUM.match(sentence):
            name = m.group(1)
            if name not in people:
                raise DataError(f"meeting prompt: minimum time for {name} before their availability")
            people[name]["min_minutes"] = int(m.group(2))
            people[name]["minimum_text"] = sentence
        else:
            raise DataError(f"meeting prompt: unrecognised constraint sentence {sentence!r}")
    if start_location is None or start_time is None:
        raise DataError("meeting prompt: no 'You arrive at ... at ...' sentence")
    for p in people.values():
        if "min_minutes" not in p:
            raise DataError(f"meeting prompt: no minimum meeting time for {p['name']}")
        for place in (p["location"],):
            if place not in distances:
                raise DataError(f"meeting prompt: {p['name']}'s place {place} has no travel times")
    return {
        "start_location": start_location,
        "start_time": start_time,
        "start_text": start_text,
        "people": list(people.values()),
        "distances": distances,
    }


def constraints_from_fields(item: dict[str, Any]) -> dict[str, Any]:
    """The same shape as :func:`parse_meeting_constraints`, built from the structured data fields
    (``constraints`` and ``dist_matrix``); used to cross-check the text parser."""
    start = item["constraints"][0]
    people = []
    for name, location, window, minimum in item["constraints"][1:]:
        a, b = (s.strip() for s in window.split("to"))
        people.append({"name": name, "location": location, "start": a, "end": b, "min_minutes": int(minimum)})
    return {"start_location": start[0], "start_time": start[1], "people": people, "distances": item["dist_matrix"]}


# -- plans ---------------------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StartStep(_Strict):
    """You start the day at ``location`` at ``time`` (the arrival place and time of the query)."""

    action: Literal["start"]
    location: str
    time: TimeStr


class TravelStep(_Strict):
    """You travel to ``destination``, taking ``minutes``, and arrive at ``arrival``."""

    action: Literal["travel"]
    destination: str
    minutes: int = Field(ge=0)
    arrival: TimeStr


class WaitStep(_Strict):
    """You wait where you are until ``until``."""

    action: Literal["wait"]
    until: TimeStr


class MeetStep(_Strict):
    """You meet ``person`` for ``minutes`` from ``start`` to ``end``, at the place you are at."""

    action: Literal["meet"]
    person: str
    minutes: int = Field(ge=0)
    start: TimeStr
    end: TimeStr


Step = Annotated[StartStep | TravelStep | WaitStep | MeetStep, Field(discriminator="action")]


class MeetingPlan(_Strict):
    """The day as a list of steps, in order."""

    steps: list[Step]


def render_meeting(plan: Any) -> str:
    """The canonical text of a plan: 'SOLUTION: You start at ... . You travel to ... .' (one line)."""
    sentences = []
    for s in plan["steps"]:
        kind = s["action"]
        if kind == "start":
            sentences.append(f"You start at {s['location']} at {s['time']}.")
        elif kind == "travel":
            sentences.append(
                f"You travel to {s['destination']} in {s['minutes']} minutes and arrive at {s['arrival']}."
            )
        elif kind == "wait":
            sentences.append(f"You wait until {s['until']}.")
        elif kind == "meet":
            sentences.append(f"You meet {s['person']} for {s['minutes']} minutes from {s['start']} to {s['end']}.")
    return "SOLUTION: " + " ".join(sentences)


# -- reading text answers ------------------------------------------------------------------------

_TIME = r"(\d{1,2}:\d{2}\s?[AaPp][Mm])"
_S_START = re.compile(rf"^You start at (.+?) at {_TIME}$")
_S_TRAVEL = re.compile(rf"^You travel to (.+?) in (\d+) minutes? and arrive at {_TIME}$")
#: the official script reads the time of a wait with strptime("%I:%M%p"): no space before AM/PM
_S_WAIT = re.compile(r"^You wait until ((?:1[0-2]|0?[1-9]):[0-5]?\d[AaPp][Mm])$")
_S_MEET = re.compile(rf"^You meet (.+?) for (\d+) minutes? from {_TIME} to {_TIME}$")


def solution_steps(text: str) -> list[str]:
    """The official step split: what follows the first 'SOLUTION:' (if any), cut at every '.'."""
    prefix = "SOLUTION:"
    if prefix in text:
        text = text[text.find(prefix) + len(prefix) :].strip()
    return [s.strip() for s in text.split(".") if s.strip()]


def _clock(text: str) -> str:
    return minutes_to_ampm(ampm_to_minutes(text.replace(" ", "")))


#: each step's sentence and its fields, in the order the sentence names them (with how each is read)
_STEP_SENTENCES: tuple[tuple[re.Pattern[str], str, tuple[tuple[str, Callable[[str], Any]], ...]], ...] = (
    (_S_START, "start", (("location", str), ("time", _clock))),
    (_S_TRAVEL, "travel", (("destination", str), ("minutes", int), ("arrival", _clock))),
    (_S_WAIT, "wait", (("until", _clock),)),
    (_S_MEET, "meet", (("person", str), ("minutes", int), ("start", _clock), ("end", _clock))),
)


def _read_step(sentence: str) -> dict[str, Any] | None:
    for pattern, action, fields in _STEP_SENTENCES:
        if m := pattern.match(sentence):
            return {"action": action, **{name: read(m.group(i)) for i, (name, read) in enumerate(fields, 1)}}
    return None


def parse_meeting(text: str) -> dict[str, Any]:
    """A plan from a text answer, split into steps exactly as the official script splits it.

    Each step must be one of the four sentences. Sentences after the last recognised step are taken
    as closing remarks and ignored (the official script stops there too); an unrecognised sentence
    before it is a format error, since the official script would stop at it.
    """
    if not text or not text.strip():
        raise PlanFormatError("the answer is empty")
    sentences = solution_steps(text)
    read: list[tuple[str, dict[str, Any] | None, bool]] = []  # (sentence, step, bad clock time)
    for sentence in sentences:
        try:
            read.append((sentence, _read_step(sentence), False))
        except ValueError:
            read.append((sentence, None, True))
    last = max((i for i, (_, step, bad_time) in enumerate(read) if step is not None or bad_time), default=-1)
    if last < 0:
        raise PlanFormatError(
            "no plan found: expected steps like 'You start at Nob Hill at 9:00AM.', "
            "'You travel to Marina District in 7 minutes and arrive at 9:07AM.', 'You wait until 3:45PM.', "
            "'You meet James for 75 minutes from 3:45PM to 5:00PM.'"
        )
    steps = []
    for sentence, step, bad_time in read[: last + 1]:
        if bad_time:
            raise PlanFormatError(
                f"the step '{sentence}' has a time that is not a valid clock time "
                "(hours 1 to 12, minutes 00 to 59, then AM or PM, like 2:15PM)"
            )
        if step is None:
            raise PlanFormatError(
                f"the step '{sentence}' is not one of the four allowed sentences (You start at P at T / "
                "You travel to P in N minutes and arrive at T / You wait until T / "
                "You meet NAME for N minutes from T to T); write times like 2:15PM"
            )
        steps.append(step)
    return {"steps": steps}


# -- the official simulation ---------------------------------------------------------------------

_STRPTIME = re.compile(r"(1[0-2]|0[1-9]|[1-9]):([0-5]\d|\d)(am|pm)", re.IGNORECASE)


def _official_time(text: str) -> int:
    m = _STRPTIME.fullmatch(text)
    if not m:
        raise ValueError(f"time data {text!r} does not match format '%I:%M%p'")
    return (int(m.group(1)) % 12) * 60 + int(m.group(2)) + (720 if m.group(3).lower() == "pm" else 0)


@dataclass
class OfficialScore:
    """What the official simulation found: people met before the first error, and how it ended."""

    score: int
    #: the step and reason that stopped it (None when every step passed)
    stopped_at: str | None = None
    reason: str | None = None
    #: the official script would have crashed (KeyError/IndexError on an unknown place or person)
    crashed: bool = False


def official_score(steps: list[str], constraints: dict[str, Any]) -> OfficialScore:
    """Replay the official text validator on ``steps`` (see the module docstring)."""
    people = {p["name"]: p for p in constraints["people"]}
    dist: dict[str, dict[str, int]] = constraints["distances"]
    location: str = constraints["start_location"]
    clock = _official_time(constraints["start_time"])
    met: set[str] = set()
    score = 0
    for step in steps:
        try:
            if step.startswith("You start"):
                continue
            if step.startswith("You travel"):
                dest = step.split("travel to ")[1].split(" in")[0].strip()
                clock += dist[location][dest]
                location = dest
            elif step.startswith("You wait"):
                until = _official_time(step.split("wait until ")[1].split(".")[0].strip())
                if until <= clock:
                    raise ValueError("Cannot go backwards in time")
                clock = until
            elif step.startswith("You meet"):
                name = step.split("meet ")[1].split(" for")[0].strip()
                if name in met:
                    raise ValueError(f"Person {name} already met")
                met.add(name)
                person = people[name]
                end = clock + int(person["min_minutes"])
                if (
                    location == person["location"]
                    and clock >= ampm_to_minutes(person["start"])
                    and end <= ampm_to_minutes(person["end"])
                ):
                    score += 1
                    clock = end
                else:
                    raise ValueError("Invalid meeting time or location")
            else:
                raise ValueError("Unknown plan format")
        except ValueError as exc:
            return OfficialScore(score, step, str(exc))
        except (KeyError, IndexError) as exc:
            return OfficialScore(score, step, f"{type(exc).__name__}: {exc}", crashed=True)
    return OfficialScore(score)


# -- the sound simulation ------------------------------------------------------------------------

IssueKind = Literal["travel", "forward", "location", "window", "duration", "once"]


@dataclass(frozen=True)
class Issue:
    kind: IssueKind
    step: int
    message: str
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class Simulation:
    issues: list[Issue]
    #: distinct known people the plan meets, in order
    met: list[str]
    #: True when an unknown place stopped the simulation before the end
    stopped: bool = False


def _step_text(step: dict[str, Any]) -> str:
    return render_meeting({"steps": [step]}).removeprefix("SOLUTION: ")


def simulate(plan: Any, constraints: dict[str, Any], *, official: bool = False) -> Simulation:
    """Walk the plan with a clock, recording every broken rule with the step it happened at.

    The clock starts at the arrival time and place, travel takes the matrix time, waiting moves the
    clock to the given time, and a meeting starts when the clock says and lasts its written minutes.

    ``official=True`` reads the plan as the official script does: the written minutes and times of
    start, travel and meet steps are not checked, and a meeting lasts exactly the required minimum.

    Otherwise the official script's clock runs alongside (``scored``: meetings advance it by their
    minimum only, so after a meeting longer than its minimum it is behind the plan's clock): a
    meeting that starts before its friend's window opens on that clock, with no wait in between, is
    a "forward" issue, since the official score stops there although the plan's own times fit.
    """
    people = {p["name"]: p for p in constraints["people"]}
    dist: dict[str, dict[str, int]] = constraints["distances"]
    location: str = constraints["start_location"]
    clock = ampm_to_minutes(constraints["start_time"])
    scored = clock  # the official script's clock (never ahead of ``clock``)
    issues: list[Issue] = []
    met: list[str] = []

    def add(kind: IssueKind, i: int, message: str, **details: Any) -> None:
        issues.append(Issue(kind, i, message, details))

    for i, step in enumerate(plan["steps"]):
        said = f"'{_step_text(step)}' (step {i + 1})"
        kind = step["action"]
        if kind == "start":
            if official:
                continue
            if step["location"] != constraints["start_location"]:
                add(
                    "location",
                    i,
                    f'{said} starts at {step["location"]}, but the query says "{constraints["start_text"]}"',
                )
            if ampm_to_minutes(step["time"]) != ampm_to_minutes(constraints["start_time"]):
                add("forward", i, f'{said} starts at {step["time"]}, but the query says "{constraints["start_text"]}"')
        elif kind == "travel":
            dest = step["destination"]
            if dest not in dist:
                add("location", i, f"{said} goes to {dest}, which is not one of the places in the travel-time list")
                return Simulation(issues, met, stopped=True)
            if dest == location:
                add("travel", i, f"{said} travels to {dest}, but you are already there")
                continue
            minutes = dist[location].get(dest)
            if minutes is None:
                add("travel", i, f"{said}: the travel-time list has no entry from {location} to {dest}")
                return Simulation(issues, met, stopped=True)
            arrive = clock + minutes
            scored += minutes
            if official:
                clock, location = arrive, dest
                continue
            if step["minutes"] != minutes:
                add(
                    "travel",
                    i,
                    f'{said} takes {step["minutes"]} minutes, but the query says "{location} to {dest}: {minutes}."',
                    expected=minutes,
                )
            if ampm_to_minutes(step["arrival"]) != arrive:
                add(
                    "travel",
                    i,
                    f"{said}: leaving {location} at {minutes_to_ampm(clock)} and travelling {minutes} minutes, "
                    f"you do not arrive at {step['arrival']}",
                    expected=minutes_to_ampm(arrive),
                )
            clock, location = arrive, dest
        elif kind == "wait":
            until = ampm_to_minutes(step["until"])
            if until <= clock:
                add(
                    "forward",
                    i,
                    f"{said}: it is already {minutes_to_ampm(clock)} at that point, so waiting until "
                    f"{step['until']} does not move time forward",
                )
            else:
                clock = until
            scored = max(scored, until)
        elif kind == "meet":
            name = step["person"]
            begin = clock
            person = people.get(name)
            if official and person is not None:
                minutes = int(person["min_minutes"])
            else:
                minutes = int(step["minutes"])
            end = begin + minutes
            said_start, said_end = ampm_to_minutes(step["start"]), ampm_to_minutes(step["end"])
            if said_start != begin and not official:
                if said_start > begin:
                    fix = f"add 'You wait until {step['start']}.' before it"
                else:
                    fix = "it cannot start before you are free"
                add(
                    "forward",
                    i,
                    f"{said} starts at {step['start']}, but at that point it is {minutes_to_ampm(begin)} "
                    f"(you are at {location}); {fix}",
                )
            if said_end != said_start + int(step["minutes"]) and not official:
                add(
                    "duration",
                    i,
                    f"{said}: from {step['start']} to {step['end']} is {said_end - said_start} minutes, "
                    f"not {step['minutes']}",
                )
            if person is None:
                add("location", i, f"{said} meets {name}, who is not one of the friends in the query")
                if official:
                    return Simulation(issues, met, stopped=True)
                clock = end
                continue
            if name in met:
                add("once", i, f"{said} meets {name} a second time")
            else:
                met.append(name)
            if location != person["location"]:
                add(
                    "location",
                    i,
                    f'{said} happens at {location}, but the query says "{person["text"]}"',
                )
            w_start, w_end = ampm_to_minutes(person["start"]), ampm_to_minutes(person["end"])
            if begin < w_start or end > w_end:
                add(
                    "window",
                    i,
                    f"{said} runs from {minutes_to_ampm(begin)} to {minutes_to_ampm(end)}, but the query says "
                    f'"{person["text"]}"',
                    person=name,
                )
            elif scored < w_start and not official:
                add(
                    "forward",
                    i,
                    f"{said} follows a meeting longer than its minimum with no wait in between: the scoring counts "
                    f"every meeting as lasting exactly its minimum, so by its clock it is {minutes_to_ampm(scored)} "
                    f'here, before "{person["text"]}"; wait until a later time first',
                    scored_clock=minutes_to_ampm(scored),
                )
            scored += int(person["min_minutes"])
            if int(step["minutes"]) < int(person["min_minutes"]) and not official:
                add(
                    "duration",
                    i,
                    f'{said} lasts {step["minutes"]} minutes, but the query says "{person["minimum_text"]}"',
                    person=name,
                )
            clock = end
        scored = min(scored, clock)
    return Simulation(issues, met)


# -- the exact optimum ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Optimum:
    """The most people that can be met, and one order of meetings that achieves it."""

    count: int
    order: tuple[str, ...]


def max_meetings(constraints: dict[str, Any]) -> Optimum:
    """Exact maximum by a DP over (set of people met, last person), keeping the earliest finish.

    Meeting someone as early as possible never hurts later meetings, so the earliest finish time per
    state is enough. Travel between two people at the same place takes no time.
    """
    people = constraints["people"]
    dist: dict[str, dict[str, int]] = constraints["distances"]
    n = len(people)
    locs = [p["location"] for p in people]
    opens = [ampm_to_minutes(p["start"]) for p in people]
    closes = [ampm_to_minutes(p["end"]) for p in people]
    need = [int(p["min_minutes"]) for p in people]
    start_loc = constraints["start_location"]
    start = ampm_to_minutes(constraints["start_time"])

    def travel(a: str, b: str) -> int:
        return 0 if a == b else dist[a][b]

    # best[mask][last] = earliest finish; parent for one witness order
    best: dict[tuple[int, int], int] = {}
    parent: dict[tuple[int, int], tuple[int, int] | None] = {}
    frontier: list[tuple[int, int]] = []
    for j in range(n):
        begin = max(start + travel(start_loc, locs[j]), opens[j])
        if begin + need[j] <= closes[j]:
            best[(1 << j, j)] = begin + need[j]
            parent[(1 << j, j)] = None
            frontier.append((1 << j, j))
    top: tuple[int, int] | None = frontier[0] if frontier else None
    while frontier:
        nxt: list[tuple[int, int]] = []
        for state in frontier:
            mask, last = state
            t = best[state]
            for j in range(n):
                if mask >> j & 1:
                    continue
                begin = max(t + travel(locs[last], locs[j]), opens[j])
                finish = begin + need[j]
                if finish > closes[j]:
                    continue
                key = (mask | 1 << j, j)
                if key not in best:
                    nxt.append(key)
                    best[key] = finish
                    parent[key] = state
                elif finish < best[key]:
                    best[key] = finish
                    parent[key] = state
        if nxt:
            top = nxt[0]
        frontier = nxt
    if top is None:
        return Optimum(0, ())
    order: list[str] = []
    node: tuple[int, int] | None = top
    while node is not None:
        order.append(people[node[1]]["name"])
        node = parent[node]
    return Optimum(len(order), tuple(reversed(order)))
