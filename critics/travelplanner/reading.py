"""One strict reading of a plan, shared by the 13 strict checks.

Every strict check reads the same things of a plan: the trip's days, each field's text (or the reason
it is not text), each day's ``current_city``, the entries' names and cities. :class:`PlanReading` reads
them once per plan, and the checks of :mod:`critics.travelplanner.strict` read the reading.

A reading is a pure function of ``(query, plan, store)`` and is never changed after it is built (its
days are tuples, a field that is not text is kept as the message the check raises, not as an
exception object). :func:`reading` builds one, or returns the one it built last in this thread for
the very same query and store objects and an equal plan: the 13 critics of one iteration run one after
another in one thread on one copy of the plan (see :mod:`modulo.executor`), so the first builds the
reading and the other 12 reuse it. The last reading is kept per thread (never shared between threads
or worker processes) and is reused only for an equal plan of the same query object, so a reused
reading is exactly the reading a fresh build would give; a plan changed in place between two calls is
read again. (As for the executor's own check of a critic's copy, "equal" is ``==``: a change that keeps
every value equal, such as 1 to 1.0, is not seen.) :func:`fresh_readings` turns the reuse off, for
the test that the shared reading changes nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

from .checks import MEALS
from .store import Accommodation, Attraction, Restaurant, Store
from .text import PLACEHOLDER_DAY, CityDay, split_attractions, strict_current_city, strict_name_city

T = TypeVar("T")

Query = Mapping[str, Any]
#: the fields of a day the strict checks read as text
TEXT_FIELDS = ("transportation", "breakfast", "attraction", "lunch", "dinner", "accommodation")


class Malformed(Exception):
    """The plan does not have the shape a check needs; becomes a failed result with this message."""

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.details = details


#: why a value cannot be read: the Malformed a check raises, kept as (message, details) so that a shared
#: reading never hands out one exception object twice (raising sets its traceback)
Problem = tuple[str, dict[str, Any]]


def _raise(problem: Problem) -> Any:
    raise Malformed(problem[0], **problem[1])


class DayReading:
    """One examined day: its number, its fields read as text, and its ``current_city`` read strictly."""

    __slots__ = ("_city", "_filled", "_texts", "day", "loose_city", "unit")

    def __init__(self, day: int, unit: Mapping[str, Any]) -> None:
        self.day = day
        self.unit = unit
        texts: dict[str, str | Problem | None] = {}
        filled: dict[str, str | Problem | None] = {}
        for field in TEXT_FIELDS:
            value = unit.get(field)
            if value is None:
                texts[field] = filled[field] = None
            elif isinstance(value, str):
                texts[field] = value
                filled[field] = None if value.strip() in ("", "-") else value  # text.is_blank
            else:
                texts[field] = filled[field] = (
                    f"Day {day} {field} must be text, not {type(value).__name__}.",
                    {"day": day, "field": field},
                )
        self._texts = texts
        self._filled = filled
        value = unit.get("current_city")
        #: ``current_city`` read strictly without complaint (None when unreadable)
        self.loose_city: CityDay | None = strict_current_city(value)
        city: CityDay | Problem
        if value == PLACEHOLDER_DAY:
            city = (
                f"Day {day} is marked 'You don't need to fill in ...' but is one of the trip's days.",
                {"day": day, "field": "current_city", "value": value},
            )
        elif self.loose_city is None:
            city = (
                f"Day {day} current_city {value!r} is neither a city name nor 'from <city> to <city>'.",
                {"day": day, "field": "current_city", "value": value},
            )
        else:
            city = self.loose_city
        self._city = city

    def text(self, field: str) -> str | None:
        """The field's text, None when missing; Malformed when it is not text."""
        value = self._texts[field]
        if value.__class__ is tuple:
            _raise(value)
        return value  # type: ignore[return-value]

    def filled(self, field: str) -> str | None:
        """The field's text when it is filled in, None when blank (missing, empty or ``-``); Malformed when
        it is not text."""
        value = self._filled[field]
        if value.__class__ is tuple:
            _raise(value)
        return value  # type: ignore[return-value]

    def city(self) -> CityDay:
        """``current_city`` read strictly; Malformed when it is the placeholder or unreadable."""
        if self._city.__class__ is tuple:
            _raise(self._city)
        return self._city  # type: ignore[return-value]

    def entry(self, value: str, field: str) -> tuple[str, str]:
        """``(name, city)`` of an entry of this day; Malformed when it is not ``<name>, <city>``."""
        parsed = strict_name_city(value)
        if parsed is None:
            raise Malformed(
                f"Day {self.day} {field} {value!r} is not written as '<name>, <city>'.",
                day=self.day,
                field=field,
                value=value,
            )
        return parsed


class PlanReading:
    """A plan read once for every strict check: the trip's examined days (at most ``query["days"]``)."""

    __slots__ = (
        "_accommodations",
        "_attractions",
        "_days",
        "_error",
        "_n",
        "_restaurants",
        "_snapshot",
        "plan",
        "query",
        "store",
    )

    def __init__(self, query: Query, plan: Any, store: Store) -> None:
        self.query = query
        self.plan = plan
        self.store = store
        self._n = query["days"]
        self._error: Problem | None = None
        out: list[DayReading] = []
        if not isinstance(plan, list):
            self._error = (f"The plan must be a list of day objects, not {type(plan).__name__}.", {"field": "plan"})
        else:
            for i, unit in enumerate(plan[: self._n]):
                if not isinstance(unit, Mapping):
                    self._error = (
                        f"Day {i + 1} must be an object with the day's fields, not {type(unit).__name__}.",
                        {"day": i + 1},
                    )
                    break
                out.append(DayReading(i + 1, unit))
        self._days = tuple(out)
        self._snapshot = _snapshot(plan)
        # the listings every entry of the examined days names exactly, looked up once
        self._restaurants: dict[str, tuple[Restaurant, ...]] = {}
        self._attractions: dict[str, tuple[Attraction, ...]] = {}
        self._accommodations: dict[str, tuple[Accommodation, ...]] = {}
        for d in out:
            for field in MEALS:
                value = d._filled[field]
                if type(value) is str:
                    self._restaurants[value] = _exact(store.exact_restaurants, value)
            value = d._filled["attraction"]
            if type(value) is str:
                for piece in split_attractions(value):
                    self._attractions[piece] = _exact(store.exact_attractions, piece)
            value = d._filled["accommodation"]
            if type(value) is str:
                self._accommodations[value] = _exact(store.exact_accommodations, value)

    def restaurants(self, value: str) -> tuple[Restaurant, ...]:
        """The restaurants the entry ``value`` names exactly (empty when none or when it is not
        ``<name>, <city>``): :meth:`Store.exact_restaurants` of its name and city."""
        rows = self._restaurants.get(value)
        return rows if rows is not None else _exact(self.store.exact_restaurants, value)

    def attractions(self, value: str) -> tuple[Attraction, ...]:
        """The attractions the entry ``value`` names exactly (see :meth:`restaurants`)."""
        rows = self._attractions.get(value)
        return rows if rows is not None else _exact(self.store.exact_attractions, value)

    def accommodations(self, value: str) -> tuple[Accommodation, ...]:
        """The accommodations the entry ``value`` names exactly (see :meth:`restaurants`)."""
        rows = self._accommodations.get(value)
        return rows if rows is not None else _exact(self.store.exact_accommodations, value)

    @property
    def days(self) -> tuple[DayReading, ...]:
        """The examined days; Malformed when the plan is not a list or an examined day is not an object."""
        if self._error is not None:
            _raise(self._error)
        return self._days

    def reads(self, query: Query, plan: Any, store: Store) -> bool:
        """Whether this is the reading of ``(query, plan, store)``: the same query, store and plan objects,
        the query's number of days and the plan's days still equal to what was read."""
        return (
            plan is self.plan
            and query is self.query
            and store is self.store
            and self._snapshot is not None
            and query["days"] == self._n
            and plan == self._snapshot
        )


def _exact(lookup: Callable[[str, str], tuple[T, ...]], value: str) -> tuple[T, ...]:
    parsed = strict_name_city(value)
    return lookup(*parsed) if parsed is not None else ()


def _snapshot(plan: Any) -> list[dict[str, Any]] | None:
    """What the plan held when it was read (its days copied; their values are immutable), or None when
    a change could not be seen this way (a value that is itself a container): such a plan is never reused."""
    if not isinstance(plan, list):
        return None
    out = []
    for unit in plan:
        if type(unit) is not dict:
            return None
        for value in unit.values():
            if value is not None and type(value) not in (str, int, float, bool):
                return None
        out.append(dict(unit))
    return out


_last = threading.local()


def reading(query: Query, plan: Any, store: Store) -> PlanReading:
    """The strict reading of ``plan``: the one this thread built last when it reads the same thing,
    else a new one (which becomes this thread's last)."""
    last: PlanReading | None = getattr(_last, "reading", None)
    if last is not None and last.reads(query, plan, store) and not getattr(_last, "fresh", False):
        return last
    new = PlanReading(query, plan, store)
    _last.reading = new
    return new


@contextmanager
def fresh_readings() -> Iterator[None]:
    """In this thread, every check reads the plan afresh (no reuse): the per-critic reading of before."""
    before = getattr(_last, "fresh", False)
    _last.fresh = True
    try:
        yield
    finally:
        _last.fresh = before
