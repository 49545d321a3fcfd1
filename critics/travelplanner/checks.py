"""What the official and strict checks share: the constraint keys, their names, and the result type."""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .store import Store

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
KEY_CRITICS: dict[str, str] = {v: k for k, v in CRITIC_KEYS.items()}

MEALS = ("breakfast", "lunch", "dinner")
DAY_FIELDS = ("days", "current_city", "transportation", "breakfast", "attraction", "lunch", "dinner", "accommodation")

#: what a check function returns: (True/False, or None when not applicable; message; evidence)
Outcome = tuple[bool | None, str | None, dict[str, Any]]
CheckFn = Callable[[Mapping[str, Any], Any, Store], Outcome]


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
        reason = f"{type(exc).__name__}: {exc}"
        return CheckResult(False, reason, error=type(exc).__name__, details={"exception": reason})
    return CheckResult(value, message, details=details)


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


def money(value: float) -> str:
    """``$123`` or ``$123.5``."""
    return f"${value:,.0f}" if float(value).is_integer() else f"${value:,.2f}"
