"""Plans as text: the day-by-day layout of the TravelPlanner paper, both ways.

::

    Day 1:
    Current City: from Sacramento to Atlanta
    Transportation: Flight Number: F3543986, from Sacramento to Atlanta, Departure Time: 06:17, ...
    Breakfast: -
    Attraction: Atlanta Botanical Garden, Atlanta;Piedmont Park, Atlanta;
    Lunch: ...
    Dinner: ...
    Accommodation: ...

:func:`render_text` writes a plan this way (for backprompts); :func:`parse_text` reads it back (the
deterministic ``reformulator=parser``), accepting a plan JSON list in the text as well.
"""

from __future__ import annotations

import json
import operator
import re
from typing import Any

from modulo.errors import PlanFormatError

from .checks import DAY_FIELDS

LABELS = {
    "current_city": "Current City",
    "transportation": "Transportation",
    "breakfast": "Breakfast",
    "attraction": "Attraction",
    "lunch": "Lunch",
    "dinner": "Dinner",
    "accommodation": "Accommodation",
}
_FIELD_OF = {
    "current city": "current_city",
    "current_city": "current_city",
    "city": "current_city",
    "transportation": "transportation",
    "transport": "transportation",
    "breakfast": "breakfast",
    "attraction": "attraction",
    "attractions": "attraction",
    "lunch": "lunch",
    "dinner": "dinner",
    "accommodation": "accommodation",
    "accommodations": "accommodation",
}
_DAY = re.compile(r"^[\s#>*_-]*day\s*(\d+)\s*(?:[:.)\-]+|$)[\s*_]*(.*)$", re.IGNORECASE)
_PLAN_MARK = re.compile(r"travel\s+plan\s*:", re.IGNORECASE)
_LINE = re.compile(r"^[\s>*_-]*([A-Za-z_ ]+?)[\s*_]*:[\s*_]*(.*?)\s*$")


#: a day's block: its number, then one line per field (formatted as an f-string would: ``format(value)``)
_BLOCK = "\n".join(["Day {}:", *(f"{label}: {{}}" for label in LABELS.values())])
#: the same with ``%s`` (``str(value)``: the same text as ``format(value)`` for every JSON value), quicker
_BLOCK_STR = "\n".join(["Day %s:", *(f"{label}: %s" for label in LABELS.values())])
_KNOWN = frozenset(DAY_FIELDS)
#: a day's number and fields, in the block's order
_FIELDS = operator.itemgetter("days", *LABELS)


def render_text(plan: Any) -> str:
    """The plan in the paper's text layout; non-list plans are shown as JSON."""
    if not isinstance(plan, list):
        return json.dumps(plan, ensure_ascii=False)
    blocks = []
    for i, day in enumerate(plan, start=1):
        if not isinstance(day, dict):
            blocks.append(f"Day {i}: {json.dumps(day, ensure_ascii=False)}")
            continue
        if not day:
            continue
        if day.keys() == _KNOWN:  # the usual day: the 8 official fields
            blocks.append(_BLOCK_STR % _FIELDS(day))
            continue
        get = day.get
        block = _BLOCK.format(get("days", i), *[get(field, "") for field in LABELS])
        if not day.keys() <= _KNOWN:  # fields beyond the official ones, each on a line of its own
            block += "".join(f"\n{key}: {value}" for key, value in day.items() if key not in _KNOWN)
        blocks.append(block)
    return "\n\n".join(blocks)


def plan_rows(plan: Any) -> tuple[list[str], list[list[str]]] | None:
    """The plan as a day-by-day table (columns, rows of text cells); None when it is not a list of days."""
    if not isinstance(plan, list) or not all(isinstance(day, dict) for day in plan):
        return None
    extra = list(dict.fromkeys(k for day in plan for k in day if k not in DAY_FIELDS))
    columns = ["Day", *LABELS.values(), *extra]
    rows = []
    for i, day in enumerate(plan, start=1):
        cells = [day.get("days", i), *(day.get(field, "") for field in LABELS), *(day.get(k, "") for k in extra)]
        rows.append([c if isinstance(c, str) else json.dumps(c, ensure_ascii=False) for c in cells])
    return columns, rows


def _json_plan(text: str) -> list[dict[str, Any]] | None:
    start = text.find("[")
    # bounded, so that a degenerate answer ('[[[[...', megabytes of it) costs linear time, not hours
    attempts, budget = 0, 20 * len(text) + 1_000_000
    while start != -1 and attempts < 2000 and budget > 0:
        attempts += 1
        try:
            value, _ = json.JSONDecoder().raw_decode(text, start)
        except json.JSONDecodeError as exc:
            budget -= exc.pos - start + 1
            start = text.find("[", start + 1)
            continue
        except (ValueError, RecursionError):  # a number too long to convert, or nested too deep
            budget -= 1000
            start = text.find("[", start + 1)
            continue
        if isinstance(value, list) and value and all(isinstance(d, dict) for d in value):
            return value
        start = text.find("[", start + 1)
    return None


def parse_text(text: str, days: int | None = None) -> list[dict[str, Any]]:
    """Read a text plan (``Day N:`` blocks of ``Field: value`` lines, or a JSON day list).

    The result has the 8 official keys on every day (missing fields become ``-``), days numbered
    from 1, at most ``days`` days. Raises :class:`PlanFormatError` when no day can be read.
    """
    if not isinstance(text, str) or not text.strip():
        raise PlanFormatError("the answer is empty")
    marks = list(_PLAN_MARK.finditer(text))
    body = text[marks[-1].end() :] if marks else text  # after "Travel Plan:", when the reply reasons first
    found: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    for raw in body.splitlines():
        line = raw.strip()
        if not line:
            continue
        day_match = _DAY.match(line)
        if day_match:
            current = {"days": int(day_match.group(1))}
            found.append(current)
            rest = day_match.group(2).strip()
            field_match = _LINE.match(rest) if rest else None
            if field_match and field_match.group(1).strip().lower() in _FIELD_OF:
                current[_FIELD_OF[field_match.group(1).strip().lower()]] = field_match.group(2)
            continue
        field_match = _LINE.match(line)
        if current is not None and field_match:
            key = field_match.group(1).strip().lower()
            if key in _FIELD_OF and _FIELD_OF[key] not in current:
                current[_FIELD_OF[key]] = field_match.group(2).strip()
    if not found:
        plan = _json_plan(text)
        if plan is None:
            raise PlanFormatError("no 'Day N:' blocks and no JSON day list found in the answer")
        found = [dict(d) for d in plan]
    out = []
    for i, day in enumerate(found[: days if days else None], start=1):
        row: dict[str, Any] = {"days": i}
        for field in DAY_FIELDS[1:]:
            value = day.get(field, "-")
            row[field] = value if isinstance(value, str) and value.strip() else "-"
        out.append(row)
    return out
