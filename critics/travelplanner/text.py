"""How plan entries are read.

Two readings live here:

* the **official** one, with exactly the regular expressions of the published evaluation (an entry is
  ``"<Name>, <City>"`` split at the last comma, a trailing ``(State)`` cut at the first ``(``, a route is
  ``from A to B`` with B running to the next comma). These functions accept any value and fail the
  way the official code fails on odd input (``TypeError`` on a non-string), which the official checks
  rely on to reproduce its crashes;
* the **strict** one, used by :mod:`critics.travelplanner.strict`: whole-string parsing with the
  pieces stripped, returning ``None`` where the text does not have the expected shape.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

# -- the official reading -------------------------------------------------------------------------
_NAME_CITY = re.compile(r"(.*?),\s*([^,]+)(\(\w[\w\s]*\))?$")
_BEFORE_PARENTHESIS = re.compile(r"^(.*?)\([^)]*\)")
_FROM_TO = re.compile(r"from\s+(.+?)\s+to\s+([^,]+)(?=[,\s]|$)")

PLACEHOLDER_DAY = "You don't need to fill in the information for this or later days."


def before_parenthesis(text: Any) -> Any:
    """The text before the first ``(...)`` group, else the text itself (``TypeError`` on a non-string)."""
    if type(text) is str:
        return _before_parenthesis(text)
    match = _BEFORE_PARENTHESIS.search(text)
    return match.group(1) if match else text


def name_city(entry: Any) -> tuple[str, str]:
    """``"Name, City(State)"`` -> ``("Name", "City")``; ``("-", "-")`` when there is no comma."""
    if type(entry) is str:
        return _official_name_city(entry)
    match = _NAME_CITY.search(entry)  # TypeError on a non-string, as the official code raises
    if match is None:
        return "-", "-"
    return match.group(1).strip(), before_parenthesis(match.group(2).strip()).strip()


def from_to(text: Any) -> tuple[str, str] | tuple[None, None]:
    """``"... from A to B, ..."`` -> ``("A", "B")``; ``(None, None)`` when there is no such route."""
    if type(text) is str:
        return _from_to(text)
    match = _FROM_TO.search(text)  # TypeError on a non-string, as the official code raises
    if match is None:
        return None, None
    return match.group(1), match.group(2)


# the same plan texts are read by a dozen checks in every iteration: each reading is computed once
# (plain strings only; the results are immutable)
@lru_cache(maxsize=65536)
def _before_parenthesis(text: str) -> str:
    match = _BEFORE_PARENTHESIS.search(text)
    return match.group(1) if match else text


@lru_cache(maxsize=262144)
def _official_name_city(entry: str) -> tuple[str, str]:
    match = _NAME_CITY.search(entry)
    if match is None:
        return "-", "-"
    return match.group(1).strip(), _before_parenthesis(match.group(2).strip()).strip()


@lru_cache(maxsize=65536)
def _from_to(text: str) -> tuple[str, str] | tuple[None, None]:
    match = _FROM_TO.search(text)
    if match is None:
        return None, None
    return match.group(1), match.group(2)


def flight_number_official(value: str) -> str:
    """The number after the exact label ``Flight Number: `` up to the next comma (``IndexError`` if absent)."""
    return value.split("Flight Number: ")[1].split(",")[0]


# -- the strict reading ---------------------------------------------------------------------------
_STRICT_ROUTE = re.compile(r"^\s*from\s+(.+?)\s+to\s+(.+?)\s*$", re.IGNORECASE | re.DOTALL)
_ROUTE_IN_TEXT = re.compile(r"\bfrom\s+(.+?)\s+to\s+([^,;]+)", re.IGNORECASE)
_STATE_SUFFIX = re.compile(r"\s*\([^()]*\)\s*$")
_FLIGHT_NUMBER = re.compile(r"flight\s+number\s*:\s*([A-Za-z]*\d+)", re.IGNORECASE)


def strip_state(city: str) -> str:
    """``"Austin(Texas)"`` or ``"Austin (Texas)"`` -> ``"Austin"``."""
    return _STATE_SUFFIX.sub("", city).strip()


@dataclass(frozen=True)
class CityDay:
    """A day's ``current_city`` read strictly: a travel day (``origin`` -> ``city``) or a stay in ``city``."""

    city: str
    origin: str | None = None

    @property
    def travel(self) -> bool:
        return self.origin is not None

    @property
    def cities(self) -> tuple[str, ...]:
        return (self.origin, self.city) if self.origin is not None else (self.city,)


def strict_current_city(value: Any) -> CityDay | None:
    """Read ``current_city``: ``"from A to B"`` (a travel day) or a single city. None when unreadable."""
    return _current_city(value) if isinstance(value, str) else None


_STARTS_WITH_FROM = re.compile(r"^from\b", re.IGNORECASE)
_HAS_ROUTE = re.compile(r"\bfrom\b.*\bto\b", re.IGNORECASE)


@lru_cache(maxsize=65536)
def _current_city(value: str) -> CityDay | None:
    text = value.strip()
    if not text or text == "-":
        return None
    if _STARTS_WITH_FROM.match(text):
        match = _STRICT_ROUTE.match(text)
        if match is None:
            return None
        origin, dest = strip_state(match.group(1)), strip_state(match.group(2))
        if not origin or not dest:
            return None
        return CityDay(city=dest, origin=origin)
    if _HAS_ROUTE.search(text):
        return None
    city = strip_state(text)
    return CityDay(city=city) if city else None


def strict_name_city(entry: Any) -> tuple[str, str] | None:
    """``"Name, City"`` split at the last comma, both parts stripped, ``(State)`` removed. None if malformed."""
    return _name_city(entry) if isinstance(entry, str) else None


@lru_cache(maxsize=262144)
def _name_city(entry: str) -> tuple[str, str] | None:
    if "," not in entry:
        return None
    name, _, city = entry.rpartition(",")
    name, city = name.strip(), strip_state(city)
    if not name or not city:
        return None
    return name, city


@lru_cache(maxsize=65536)
def strict_route(text: str) -> tuple[str, str] | None:
    """The first ``from A to B`` in a transportation text (B ends at a comma or semicolon), states removed."""
    match = _ROUTE_IN_TEXT.search(text)
    if match is None:
        return None
    return strip_state(match.group(1)), strip_state(match.group(2))


@lru_cache(maxsize=65536)
def strict_flight_number(text: str) -> str | None:
    match = _FLIGHT_NUMBER.search(text)
    return match.group(1) if match else None


def is_blank(value: Any) -> bool:
    """An unfilled field: missing, empty, or ``-``."""
    return value is None or (isinstance(value, str) and value.strip() in ("", "-"))


@lru_cache(maxsize=65536)
def split_attractions(value: str) -> tuple[str, ...]:
    """All ``;``-separated attractions of a day, stripped, empty pieces dropped (the last one included)."""
    return tuple(part.strip() for part in value.split(";") if part.strip() and part.strip() != "-")


def normalise(text: str) -> str:
    """Case- and space-insensitive key for comparing free text."""
    return " ".join(text.split()).casefold()


_DRIVING = re.compile(r"\bself[- ]?driv\w*|\bdriv(?:e|es|ing)\b")


@lru_cache(maxsize=65536)
def strict_modes(text: str) -> frozenset[str]:
    """Every mode a transportation text mentions. ``Driving`` and ``drive`` count as self-driving."""
    low = text.lower()
    modes: set[str] = set()
    if "flight" in low:
        modes.add("flight")
    if "taxi" in low or "cab" in re.findall(r"[a-z]+", low):
        modes.add("taxi")
    if _DRIVING.search(low):
        modes.add("self-driving")
    return frozenset(modes)
