"""TravelPlanner with constraints that change mid-loop: a budget or a local constraint updated at a turn.

An update's ``add`` (:class:`~modulo.types.ProblemUpdate`) may set

* ``budget``: a number of dollars, or a change relative to the query's budget, ``"-20%"`` / ``"+10%"``
  (rounded to whole dollars);
* ``house_rule`` (``"house rule"``): one of smoking, parties, children under 10, visitors, pets, or null
  to drop the requirement; ``room_type`` (``"room type"``): not shared room, shared room, private room,
  entire room, or null; ``transportation``: no flight, no self-driving, or null; ``cuisine``: a list of
  cuisines, or null.

Anything else (origin, destination, dates, days, travellers) is refused: the reference information the
planner was given is about those, so changing them would be another problem. The new structured query
is checked like a loaded row; the critics read it through :meth:`TravelPlanner.query_of`, and so does the
official evaluator when it is given the updated problem, so plans are judged against the final
constraints. The planner is told ``update.text`` or, when the update gives none, a sentence per change.
"""

from __future__ import annotations

import re
from typing import Any

from modulo.errors import ConfigError, DataError
from modulo.types import Problem, ProblemUpdate

from .checks import HOUSE_RULE_TEXT
from .data import structured_query
from .official import _ROOM_TYPE_OK

#: the values the official evaluator understands
HOUSE_RULES = tuple(HOUSE_RULE_TEXT)
ROOM_TYPES = tuple(_ROOM_TYPE_OK)
TRANSPORT_RULES = ("no flight", "no self-driving")

#: accepted spellings of the local-constraint keys (underscores are easier to write in a Hydra override)
LOCAL_ALIASES = {
    "house rule": "house rule",
    "house_rule": "house rule",
    "room type": "room type",
    "room_type": "room type",
    "transportation": "transportation",
    "cuisine": "cuisine",
}
_RELATIVE = re.compile(r"^\s*([+-])\s*(\d+(?:\.\d+)?)\s*%\s*$")


def _budget(value: Any, old: float, where: str) -> int | float:
    if isinstance(value, str):
        m = _RELATIVE.match(value)
        if not m:
            raise ConfigError(f"{where}: budget must be a number or a change like '-20%', not {value!r}")
        factor = 1 + (1 if m.group(1) == "+" else -1) * float(m.group(2)) / 100
        return max(0, round(old * factor))
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ConfigError(f"{where}: budget must be a non-negative number, not {value!r}")
    return value


def _choice(key: str, value: Any, options: tuple[str, ...], where: str) -> str | None:
    if value is None or value in options:
        return value  # type: ignore[no-any-return]
    raise ConfigError(f"{where}: {key} must be one of {list(options)} or null, not {value!r}")


def _sentence(key: str, value: Any) -> str:
    if key == "budget":
        return f"The budget is now ${value:,}."
    if value is None:
        return f"The {key} requirement no longer applies."
    if key == "house rule":
        return f"The accommodation must allow {value}."
    if key == "room type":
        return f"The accommodation must be a {value}."
    if key == "transportation":
        mode = {"no flight": "flights", "no self-driving": "self-driving"}[value]
        return f"The trip must not use {mode}."
    return f"The meals must include {', '.join(value)} cuisine."


def updated_problem(problem: Problem, update: ProblemUpdate) -> Problem:
    """``problem`` with ``update`` applied to its structured query (see the module doc)."""
    where = f"travelplanner update of {problem.id}"
    query = structured_query(problem.constraints, f"problem {problem.id}")
    local = dict(query["local_constraint"])
    budget = query["budget"]
    told: list[str] = []
    for key, value in update.add.items():
        if key == "budget":
            budget = _budget(value, float(query["budget"]), where)
            told.append(_sentence("budget", budget))
            continue
        if key not in LOCAL_ALIASES:
            raise ConfigError(
                f"{where}: an update may change budget, house_rule, room_type, transportation or cuisine, "
                f"not {key!r} (the reference information is about the rest)"
            )
        name = LOCAL_ALIASES[key]
        if name == "house rule":
            value = _choice("house_rule", value, HOUSE_RULES, where)
        elif name == "room type":
            value = _choice("room_type", value, ROOM_TYPES, where)
        elif name == "transportation":
            value = _choice("transportation", value, TRANSPORT_RULES, where)
        elif value is not None and not (isinstance(value, list) and all(isinstance(c, str) for c in value)):
            raise ConfigError(f"{where}: cuisine must be a list of cuisines or null, not {value!r}")
        local[name] = value
        told.append(_sentence(name, value))
    constraints = {**problem.constraints, "budget": budget, "local_constraint": local}
    try:
        structured_query(constraints, where)
    except DataError as exc:  # pragma: no cover - every value was checked above
        raise ConfigError(str(exc)) from None
    text = update.text or " ".join(told)
    base = update.query if update.query is not None else problem.query
    query_text = base + (f"\n\nUpdate: {text}" if text else "")
    context = update.context if update.context is not None else problem.context
    return problem.model_copy(update={"constraints": constraints, "query": query_text, "context": context})
