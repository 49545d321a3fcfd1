"""What the official and strict checks share: the constraint keys, their names, and the result type."""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .store import Store

#: house-rule names in a query -> the text a listing's ``house_rules`` carries when it forbids them
HOUSE_RULE_TEXT = {
    "smoking": "No smoking",
    "parties": "No parties",
    "children under 10": "No children under 10",
    "visitors": "No visitors",
    "pets": "No pets",
}

COMMONSENSE_KEYS: tuple[str, ...] = (
    "is_reasonable_visiting_city",
    "is_valid_restaurants",
    "is_valid_attractions",
    "is_valid_accommodation",
    "is_valid_transportation",
    "is_valid_information_in_current_city",
    "is_valid_information_in_sandbox",
    "is_not_absent",
)
HARD_KEYS: tuple[str, ...] = (
    "valid_cuisine",
    "valid_room_rule",
    "valid_transportation",
    "valid_room_type",
    "valid_cost",
)
ALL_KEYS: tuple[str, ...] = COMMONSENSE_KEYS + HARD_KEYS

#: the paper's names of the official keys
PAPER_NAMES: dict[str, str] = {
    "is_reasonable_visiting_city": "Reasonable City Route",
    "is_valid_restaurants": "Diverse Restaurants",
    "is_valid_attractions": "Diverse Attractions",
    "is_valid_accommodation": "Minimum Nights Stay",
    "is_valid_transportation": "Non-conf. Transportation",
    "is_valid_information_in_current_city": "Within Current City",
    "is_valid_information_in_sandbox": "Within Sandbox",
    "is_not_absent": "Complete Information",
    "valid_cuisine": "Cuisine",
    "valid_room_rule": "Room Rule",
    "valid_transportation": "Transportation",
    "valid_room_type": "Room Type",
    "valid_cost": "Budget",
}

#: registered critic name -> official key
CRITIC_KEYS: dict[str, str] = {
    "reasonable_city_route": "is_reasonable_visiting_city",
    "diverse_restaurants": "is_valid_restaurants",
    "diverse_attractions": "is_valid_attractions",
    "minimum_nights_stay": "is_valid_accommodation",
    "non_conflicting_transportation": "is_valid_transportation",
    "within_current_city": "is_valid_information_in_current_city",
    "within_sandbox": "is_valid_information_in_sandbox",
    "complete_information": "is_not_absent",
    "cuisine": "valid_cuisine",
    "room_rule": "valid_room_rule",
    "transportation": "valid_transportation",
    "room_type": "valid_room_type",
    "budget": "valid_cost",
}

MEALS = ("breakfast", "lunch", "dinner")
DAY_FIELDS = ("days", "current_city", "transportation", "breakfast", "attraction", "lunch", "dinner", "accommodation")

#: what a check function returns: (True/False, or None when not applicable; message; evidence)
CheckOutcome = tuple[bool | None, str | None, dict[str, Any]]
CheckFn = Callable[[Mapping[str, Any], Any, Store], CheckOutcome]


@dataclass(frozen=True)
class CheckResult:
    """One constraint's result on one plan.

    ``value`` is True, False or None (not applicable). ``error`` is set (to the exception's type) when
    the official code raises on this plan; such a result counts as a failure.
    """

    value: bool | None
    message: str | None = None
    error: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """Not failed: True or not applicable, and no crash."""
        return self.error is None and self.value is not False

    @property
    def verdict(self) -> bool | None:
        """True/False/None, with a crash read as False."""
        return False if self.error is not None else self.value

    @property
    def applicable(self) -> bool:
        return self.error is not None or self.value is not None


def run_check(fn: CheckFn, query: Mapping[str, Any], plan: Any, store: Store) -> CheckResult:
    """Run one check; an exception becomes a failed result naming the exception (never a crash)."""
    try:
        value, message, details = fn(query, plan, store)
    except Exception as exc:
        return crashed(exc)
    return CheckResult(value, message, details=details)


def crashed(exc: Exception) -> CheckResult:
    """The failed result of a check that raised ``exc``."""
    reason = f"{type(exc).__name__}: {exc}"
    return CheckResult(False, reason, error=type(exc).__name__, details={"exception": reason})


def query_dates(query: Mapping[str, Any]) -> list[str]:
    """The trip's dates (the HF string or a list)."""
    dates = query.get("date")
    if isinstance(dates, str):
        try:
            dates = ast.literal_eval(dates)
        except (ValueError, SyntaxError):
            return []
    return [d for d in dates if isinstance(d, str)] if isinstance(dates, (list, tuple)) else []


def ceil_div(people: int, capacity: float) -> int:
    """How many rooms or cars ``people`` need at ``capacity`` each."""
    return math.ceil(people * 1.0 / capacity)


def people(n: int) -> str:
    """``1 person`` / ``4 people``."""
    return f"{n} person" if n == 1 else f"{n} people"


def money(value: float) -> str:
    """``$123`` or ``$123.5``."""
    return f"${value:,.0f}" if float(value).is_integer() else f"${value:,.2f}"


def _located(result: CheckResult, text: str) -> str:
    d = result.details
    if d.get("day") and d.get("field") and d.get("value") not in (None, "-"):
        return f"Day {d['day']} {d['field']} {d['value']!r}: {text}"
    return text


def describe_official(key: str, result: CheckResult) -> str:
    """The official message, located (day, field, value) and completed with the evidence behind it."""
    d = result.details
    if result.error is not None:
        return (
            f"{PAPER_NAMES[key]}: the official evaluator crashes on this plan ({result.message}). "
            "Check that every day has all its fields written as text in the usual format."
        )
    message = result.message or f"{PAPER_NAMES[key]} failed."
    extra = ""
    if key == "is_valid_accommodation" and "minimum_nights" in d:
        extra = f" It is booked for {d['nights']} night(s) but requires at least {d['minimum_nights']:g}."
    elif key == "valid_room_rule" and "house_rules" in d:
        extra = f" Its house rules are '{d['house_rules']}'."
    elif key == "valid_room_type" and "room_type" in d:
        extra = f" It is listed as '{d['room_type']}'."
    elif key == "valid_cost" and "total_cost" in d:
        message = (
            f"The plan costs {money(d['total_cost'])} in total, over the budget of {money(d['budget'])} by "
            f"{money(d['total_cost'] - d['budget'])}."
        )
    elif key == "valid_cuisine" and d.get("missing"):
        extra = f" No meal outside the origin serves {', '.join(d['missing'])}."
    elif key == "is_valid_information_in_sandbox" and d.get("kind") == "flight":
        extra = f" There is no flight {d.get('number')!r} from {d.get('origin')} to {d.get('dest')}."
    elif key == "is_valid_information_in_sandbox" and d.get("kind") in ("self-driving", "taxi"):
        extra = f" There is no {d['kind']} route from {d.get('origin')} to {d.get('dest')} in the database."
    elif key == "is_valid_information_in_sandbox" and d.get("kind"):
        extra = f" No {d['kind']} in {d.get('city')!r} has a name containing {d.get('name')!r}."
    elif key == "is_valid_transportation" and d.get("modes"):
        extra = f" Modes used: {', '.join(d['modes'])}; self-driving cannot be combined with flights or taxis."
    elif key == "is_not_absent" and d.get("reason") == "days":
        extra = f" The trip has {d['expected']} days; filled days: {d.get('filled_days')}."
    elif key == "is_not_absent" and d.get("reason") == "city_number":
        extra = f" The query asks for {d['expected']} city/cities; the plan visits {d.get('cities')}."
    elif key == "is_valid_information_in_current_city" and d.get("field") == "transportation":
        where = str(d.get("current_city", ""))
        if "from" not in where:
            extra = (
                f" On a day spent in {where}, the official check wants every letter of '{where}' in the "
                "transportation text: write '-' when the day has no trip."
            )
        else:
            extra = " The transportation text must name both cities of the day's route."
    elif key == "is_reasonable_visiting_city" and d.get("cities"):
        extra = f" Cities in order: {d['cities']}."
    return _located(result, message) + extra
