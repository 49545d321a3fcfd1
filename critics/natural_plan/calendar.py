"""Calendar Scheduling: constraints from the prompt, the plan schema, text <-> plan, the official match.

A plan is one slot ``{day, start, end}`` with 24-hour times ("14:30"). Busy blocks are half-open:
a meeting may start when a block ends. "would rather not meet on D before T" means the meeting
starts at T or later; "... after T" means it ends by T; without a time it rules the day out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from modulo.errors import DataError, PlanFormatError

from .common import hhmm_to_minutes, minutes_to_hhmm

WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
Weekday = Literal["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
HHMM_PATTERN = r"^([01]?[0-9]|2[0-3]):[0-5][0-9]$"

# -- constraints ---------------------------------------------------------------------------------

_DAY = r"(Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)"
_T = r"(\d{1,2}:\d{2})"
_HEADER = re.compile(
    rf"You need to schedule a meeting for (.+?) for (.+?) between the work hours of {_T} to {_T} "
    r"on (?:either )?(.+?)\.\s"
)
_SCHEDULES = re.compile(r"Here are the existing schedules for everyone during the days?:\s*\n")
_BUSY = re.compile(r"^\s*(?:has meetings on|is busy on|has blocked their calendar on) (.+?);?$")
_FREE = re.compile(
    r"^\s*(?:is free the entire (?:day|week)|has no meetings the whole (?:day|week)|"
    r"'s calendar is wide open the entire (?:day|week))\.?$"
)
_DAY_BLOCK = re.compile(rf"{_DAY} during ((?:{_T} to {_T}(?:, )?)+)")
_INTERVAL = re.compile(rf"{_T} to {_T}")
_PREF = re.compile(
    r"^(\w+) (?:would rather not meet on|can not meet on|cannot meet on|do not want to meet on|"
    rf"does not want to meet on|would like to avoid more meetings on) {_DAY}(?: (before|after) {_T})?\.$"
)
_CONTINUATION = re.compile(rf"^{_DAY}(?: (before|after) {_T})?\.$")
_EARLIEST = re.compile(
    r"^(?:The group|(\w+)) would like to (?:meet|schedule the meeting) at their earl(?:i|ie)st availability\.$"
)
_DURATIONS = {"half an hour": 30, "one hour": 60, "an hour": 60, "one and a half hours": 90, "two hours": 120}


def _duration_minutes(text: str) -> int:
    if text in _DURATIONS:
        return _DURATIONS[text]
    m = re.fullmatch(r"(\d+) minutes?", text)
    if m:
        return int(m.group(1))
    m = re.fullmatch(r"(\d+(?:\.\d+)?) hours?", text)
    if m:
        return round(float(m.group(1)) * 60)
    raise DataError(f"calendar prompt: unrecognised meeting duration {text!r}")


def _names(text: str) -> list[str]:
    head, _, last = text.rpartition(" and ")
    names = [n.strip() for n in head.split(",")] if head else []
    return [n for n in [*names, last.strip()] if n]


def _days(text: str) -> list[str]:
    found = re.findall(_DAY, text)
    if not found:
        raise DataError(f"calendar prompt: no weekday in {text!r}")
    return list(found)


def parse_calendar_constraints(prompt: str) -> dict[str, Any]:
    """Every constraint of a calendar prompt (0-shot or 5-shot: the last TASK is read).

    Keys: ``participants``; ``duration`` (minutes); ``work_start``/``work_end`` (minutes after midnight);
    ``days`` (in the order given); ``task_text`` (the first sentence); ``busy``: {person: {day:
    [[start, end], ...]}} in minutes; ``busy_texts``: {person: the schedule line}; ``preferences``:
    [{person, day, kind ("day", "before" or "after"), time (minutes or None), text}]; ``earliest``
    (bool) and ``earliest_text``. Raises DataError when a sentence is not recognised.
    """
    task = prompt.split("TASK:")[-1]
    m = _HEADER.search(task)
    if m is None:
        raise DataError("calendar prompt: no 'You need to schedule a meeting for ...' sentence")
    participants = _names(m.group(1))
    duration = _duration_minutes(m.group(2))
    work_start, work_end = hhmm_to_minutes(m.group(3)), hhmm_to_minutes(m.group(4))
    days = _days(m.group(5))
    sched = _SCHEDULES.search(task, m.end())
    if sched is None:
        raise DataError("calendar prompt: no 'Here are the existing schedules ...' section")
    rest = task[sched.end() :]
    block, _, tail = rest.partition("\n\n")
    busy: dict[str, dict[str, list[list[int]]]] = {p: {} for p in participants}
    busy_texts: dict[str, str] = {}
    for raw in block.splitlines():
        line = raw.strip()
        if not line:
            continue
        person = _owner(line, participants)
        remainder = line[len(person) :]
        busy_texts[person] = line
        if _FREE.match(remainder):
            continue
        bm = _BUSY.match(remainder)
        if bm is None:
            raise DataError(f"calendar prompt: unrecognised schedule line {line!r}")
        spans = bm.group(1)
        covered = 0
        for dm in _DAY_BLOCK.finditer(spans):
            covered += len(dm.group(0))
            for im in _INTERVAL.finditer(dm.group(2)):
                busy[person].setdefault(dm.group(1), []).append(
                    [hhmm_to_minutes(im.group(1)), hhmm_to_minutes(im.group(2))]
                )
        if covered == 0:
            raise DataError(f"calendar prompt: no 'DAY during T to T' in {line!r}")
    tail = tail.split("Find a time that works")[0]
    preferences: list[dict[str, Any]] = []
    earliest_text: str | None = None
    last_pref: tuple[str, str] | None = None  # (person, sentence so far)
    for raw in re.split(r"(?<=\.)\s+", tail.strip()):
        sentence = raw.strip()
        if not sentence:
            continue
        if pm := _PREF.match(sentence):
            person = _known(pm.group(1), participants)
            last_pref = (person, sentence)
            preferences.append(_pref(person, pm.group(2), pm.group(3), pm.group(4), sentence))
        elif (cm := _CONTINUATION.match(sentence)) and last_pref is not None:
            person, so_far = last_pref
            text = f"{so_far} {sentence}"
            last_pref = (person, text)
            preferences.append(_pref(person, cm.group(1), cm.group(2), cm.group(3), text))
        elif _EARLIEST.match(sentence):
            earliest_text = sentence
        else:
            raise DataError(f"calendar prompt: unrecognised sentence {sentence!r}")
    return {
        "participants": participants,
        "duration": duration,
        "work_start": work_start,
        "work_end": work_end,
        "days": days,
        "task_text": m.group(0).strip(),
        "busy": busy,
        "busy_texts": busy_texts,
        "preferences": preferences,
        "earliest": earliest_text is not None,
        "earliest_text": earliest_text,
    }


def _owner(line: str, participants: list[str]) -> str:
    """The participant a schedule line is about (the longest name it starts with)."""
    for name in sorted(participants, key=len, reverse=True):
        if line.startswith(name):
            return name
    raise DataError(f"calendar prompt: the schedule line {line!r} names none of {participants}")


def _known(name: str, participants: list[str]) -> str:
    if name not in participants:
        raise DataError(f"calendar prompt: {name} is not among the participants {participants}")
    return name


def _pref(person: str, day: str, kind: str | None, time: str | None, text: str) -> dict[str, Any]:
    return {
        "person": person,
        "day": day,
        "kind": kind or "day",
        "time": hhmm_to_minutes(time) if time else None,
        "text": text,
    }


# -- plans ---------------------------------------------------------------------------------------


class CalendarSlot(BaseModel):
    """The proposed meeting: a weekday and a 24-hour start and end time."""

    model_config = ConfigDict(extra="forbid")
    day: Weekday
    start: str = Field(pattern=HHMM_PATTERN, description="start time, 24-hour, like 9:30 or 14:00")
    end: str = Field(pattern=HHMM_PATTERN, description="end time, 24-hour, like 10:00 or 14:30")


def slot_of(plan: Any) -> tuple[str, int, int]:
    return str(plan["day"]), hhmm_to_minutes(plan["start"]), hhmm_to_minutes(plan["end"])


def render_calendar(plan: Any) -> str:
    """The canonical text, as in the golden answers: 'Here is the proposed time: Monday, 14:30 - 15:00 '."""
    day, start, end = slot_of(plan)
    return f"Here is the proposed time: {day}, {minutes_to_hhmm(start)} - {minutes_to_hhmm(end)} "


# -- reading text answers and the official match ------------------------------------------------

_SLOT = re.compile(r"([A-Za-z]+), ([0-9]+):([0-9]+) - ([0-9]+):([0-9]+)")


def official_slot(text: str) -> tuple[str, float, float]:
    """The first 'Day, H:MM - H:MM' of a text as the official script reads it: (day, start, end) in
    hours, where ':30' adds half an hour and any other minutes count as ':00'. ('', -1, -1) if none."""
    m = _SLOT.search(text)
    if m is None:
        return "", -1.0, -1.0

    def hours(h: str, mm: str) -> float:
        return float(h) + (0.5 if mm == "30" else 0.0)

    return m.group(1), hours(m.group(2), m.group(3)), hours(m.group(4), m.group(5))


def official_solved(text: str, gold_text: str) -> bool:
    """The official exact match of the first slot of the answer with the golden slot."""
    return official_slot(text) == official_slot(gold_text)


def parse_calendar(text: str) -> dict[str, Any]:
    """The plan of the first 'Day, H:MM - H:MM' in the text (the slot the official script reads)."""
    if not text or not text.strip():
        raise PlanFormatError("the answer is empty")
    m = _SLOT.search(text)
    if m is None:
        raise PlanFormatError("no proposed time found: answer like 'Here is the proposed time: Monday, 14:30 - 15:00'")
    day = m.group(1)
    if day not in WEEKDAYS:
        raise PlanFormatError(f"the first proposed time '{m.group(0)}' does not start with a weekday")
    try:
        start = hhmm_to_minutes(f"{m.group(2)}:{m.group(3)}")
        end = hhmm_to_minutes(f"{m.group(4)}:{m.group(5)}")
    except ValueError:
        raise PlanFormatError(f"the proposed time '{m.group(0)}' is not a valid clock time") from None
    if len(m.group(3)) != 2 or len(m.group(5)) != 2 or start >= 24 * 60 or end >= 24 * 60:
        raise PlanFormatError(f"the proposed time '{m.group(0)}' is not a valid clock time")
    return {"day": day, "start": minutes_to_hhmm(start), "end": minutes_to_hhmm(end)}


# -- checking a slot -----------------------------------------------------------------------------


@dataclass(frozen=True)
class SlotIssue:
    kind: Literal["work_hours", "duration", "busy", "preferences"]
    message: str


def slot_issues(day: str, start: int, end: int, c: dict[str, Any]) -> list[SlotIssue]:
    """Everything wrong with the slot ``day start-end`` under constraints ``c`` (empty when it fits)."""
    out: list[SlotIssue] = []
    when = f"{day}, {minutes_to_hhmm(start)} - {minutes_to_hhmm(end)}"
    if day not in c["days"]:
        out.append(SlotIssue("work_hours", f"{when} is on {day}, but the meeting must be on {_or(c['days'])}"))
    if start < c["work_start"] or end > c["work_end"] or start >= end:
        out.append(
            SlotIssue(
                "work_hours",
                f"{when} is not within the work hours of {minutes_to_hhmm(c['work_start'])} to "
                f"{minutes_to_hhmm(c['work_end'])}" + (" (it ends before it starts)" if start >= end else ""),
            )
        )
    if end - start != c["duration"]:
        out.append(
            SlotIssue(
                "duration", f"{when} lasts {end - start} minutes, but the meeting must last {c['duration']} minutes"
            )
        )
    for person, by_day in c["busy"].items():
        for bs, be in by_day.get(day, []):
            if start < be and bs < end:
                out.append(
                    SlotIssue(
                        "busy",
                        f"{when} overlaps {person}'s busy time {day} {minutes_to_hhmm(bs)} to {minutes_to_hhmm(be)} "
                        f'(the query says "{c["busy_texts"][person]}")',
                    )
                )
    for pref in c["preferences"]:
        if pref["day"] != day:
            continue
        kind, t = pref["kind"], pref["time"]
        if kind == "day" or (kind == "before" and start < t) or (kind == "after" and end > t):
            out.append(SlotIssue("preferences", f'{when} goes against "{pref["text"]}"'))
    return out


def _or(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def earliest_slot(c: dict[str, Any]) -> tuple[str, int, int] | None:
    """The earliest slot (first day in the given order, then earliest start) that fits every constraint.

    The earliest start on a day is the start of work, the end of a busy block or a "before T" time,
    so only those are tried.
    """
    for day in c["days"]:
        candidates = {c["work_start"]}
        for by_day in c["busy"].values():
            candidates.update(be for _, be in by_day.get(day, []))
        candidates.update(p["time"] for p in c["preferences"] if p["day"] == day and p["kind"] == "before")
        for start in sorted(candidates):
            if not slot_issues(day, start, start + c["duration"], c):
                return day, start, start + c["duration"]
    return None


def feasible_slots(c: dict[str, Any], step: int = 30) -> list[tuple[str, int, int]]:
    """Every fitting slot whose start lies on the ``step``-minute grid from the start of work."""
    out = []
    for day in c["days"]:
        for start in range(c["work_start"], c["work_end"] - c["duration"] + 1, step):
            if not slot_issues(day, start, start + c["duration"], c):
                out.append((day, start, start + c["duration"]))
    return out
