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
every value equal, such as 1 to 1.0, is not seen.)

**Between plans**, per day. A problem's next plan mostly repeats the last one's days, so the work done
on a day is kept with the day's content: the store's :class:`~critics.travelplanner.store.DayMemo` maps
each :func:`day_key` (all of the day's fields: names and values, in order) to the day's :data:`Results`:
per check, what the check found on that day, under a key naming the check and every
other input the day's part of the check reads (the day's number, the day's date, the number of people,
whether it is the trip's last day); the memo belongs to the store the work reads. A day is kept only
when every value is a plain string, integer or None (so equal keys mean identical values: ``1``,
``1.0`` and ``True`` are equal in Python and would share a key); any other day is worked out afresh
every time. What is kept, per check: that the day passes it (a failing day or a crash is never kept, so
its message and details are always worked out afresh) or the day's priced items (handed out as copies).
The day's reading itself is made afresh for each plan (cheap, and kept readings would add long-lived
objects that set off the interpreter's full garbage collections within critic calls).
:func:`fresh_readings` turns both reuses off, for the tests that they change nothing
(tests/travelplanner/test_reading.py, test_day_memo.py).
"""

from __future__ import annotations

import itertools
import operator
import threading
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from types import MappingProxyType
from typing import Any, TypeVar

from .checks import DAY_FIELDS
from .store import Accommodation, Attraction, Restaurant, Store
from .text import PLACEHOLDER_DAY, CityDay, strict_current_city, strict_name_city

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

    __slots__ = (
        "_city",
        "_filled",
        "_texts",
        "day",
        "loose_city",
        "results",
        "unit",
    )

    def __init__(self, day: int, unit: Mapping[str, Any], kept: Results | None = None) -> None:
        self.day = day
        self.unit = unit
        #: the checks' results on this day's content, kept between plans (:data:`Results`; keyed with the
        #: day's number where a result depends on it), None when the day is not kept
        self.results: Results | None = kept
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
        "_days",
        "_error",
        "_n",
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
        self._snapshot, _ = _read_days(plan)
        kept = kept_days(plan, store)
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
                out.append(DayReading(i + 1, unit, kept[i] if kept is not None else None))
        self._days = tuple(out)

    def restaurants(self, value: str) -> tuple[Restaurant, ...]:
        """The restaurants the entry ``value`` names exactly (empty when none or when it is not
        ``<name>, <city>``): :meth:`Store.exact_restaurants` of its name and city."""
        return _exact(self.store, "restaurants", value)  # type: ignore[no-any-return]

    def attractions(self, value: str) -> tuple[Attraction, ...]:
        """The attractions the entry ``value`` names exactly (see :meth:`restaurants`)."""
        return _exact(self.store, "attractions", value)  # type: ignore[no-any-return]

    def accommodations(self, value: str) -> tuple[Accommodation, ...]:
        """The accommodations the entry ``value`` names exactly (see :meth:`restaurants`)."""
        return _exact(self.store, "accommodations", value)  # type: ignore[no-any-return]

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


#: a day's content as a memo key: its fields in order and their values
DayKey = tuple[tuple[Any, ...], tuple[Any, ...]]


#: the types of the values a kept day may hold (each equal only to itself: 1, 1.0 and True are equal)
_PLAIN_TYPES = frozenset({str, int, type(None)})
#: the types of the values a snapshot may hold (immutable)
_SCALAR_TYPES = frozenset({str, int, float, bool, type(None)})


def day_key(unit: Any) -> DayKey | None:
    """The day's content as a key of :class:`~critics.travelplanner.store.DayMemo`: its fields in order
    and their values, when it is a dict whose values are all strings, integers (not booleans) or None, so
    that equal keys mean identical days; else None (the day is not kept). (Few objects: the official
    fields, the usual ones, are one shared tuple.)"""
    if type(unit) is dict:
        values = tuple(unit.values())
        if _PLAIN_TYPES.issuperset(map(type, values)):
            fields = tuple(unit)
            return (DAY_FIELDS if fields == DAY_FIELDS else fields), values
    return None


#: a day's content as kept between plans (in the store's memo, under its :func:`day_key`): the checks'
#: results on it, each under a key naming the check and every other input it reads (the day's number, a
#: date, the number of people, ...). Only passes and crash-free results are kept.
Results = dict[Hashable, Any]
Kept = tuple[Results | None, ...]
#: this thread's last plan as read: (plan, snapshot, day keys, store, its kept days)
_Seen = tuple[Any, list[dict[str, Any]] | None, tuple[DayKey | None, ...], Store | None, Kept | None]


def _read_days(plan: Any) -> tuple[list[dict[str, Any]] | None, tuple[DayKey | None, ...] | None]:
    """(:func:`_snapshot` of ``plan``, :func:`day_key` of each of its days), in one pass; kept for this
    thread's last plan: reused for the same plan object while its days are equal to the snapshot."""
    seen = _seen(plan)
    return (seen[1], seen[2]) if seen is not None else (None, None)


def _seen(plan: Any) -> _Seen | None:
    if type(plan) is not list:
        return None
    seen: _Seen | None = getattr(_last, "days", None)
    if seen is not None and seen[0] is plan and seen[1] is not None and plan == seen[1]:
        return seen
    snapshot: list[dict[str, Any]] | None = []
    keys: list[DayKey | None] = []
    for unit in plan:
        if type(unit) is not dict:
            snapshot = None
            keys.append(None)
            continue
        key = day_key(unit)
        keys.append(key)
        if snapshot is not None:
            if key is not None or _SCALAR_TYPES.issuperset(map(type, unit.values())):
                snapshot.append(dict(unit))
            else:
                snapshot = None
    new: _Seen = (plan, snapshot, tuple(keys), None, None)
    _last.days = new
    return new


def kept_days(plan: Any, store: Store) -> Kept | None:
    """The :data:`Results` of each day of ``plan`` in ``store``'s memo (None for a day that is not kept),
    found or added once per plan in this thread; None when ``plan`` is not a list or where reuse is off
    (:func:`fresh_readings`)."""
    if getattr(_last, "fresh", False):
        return None
    seen = _seen(plan)
    if seen is None:
        return None
    if seen[3] is store and seen[4] is not None:
        return seen[4]
    memo = store.day_memo
    kept: list[Results | None] = []
    for key in seen[2]:
        day: Results | None = None
        if key is not None:
            day = memo.get(key)
            if day is None:
                day = {}
                memo.put(key, day)
        kept.append(day)
    out = tuple(kept)
    _last.days = (seen[0], seen[1], seen[2], store, out)
    return out


def results_of(kept: Kept | None, day: int) -> Results | None:
    """The kept results of day number ``day`` (from 1), None when the day is not kept."""
    return kept[day - 1] if kept is not None else None


#: what a day's results hold for a check the day passes
PASSED = "passed"
R = TypeVar("R")


def unless_passed(
    results: dict[Hashable, Any] | None, key: Hashable, check: Callable[..., R | None], *args: Any
) -> R | None:
    """``check(*args)``: a day's part of a check, None when the day passes it. Skipped (None) when the
    day's kept ``results`` (None: not kept) hold that it passed under ``key``; a pass is kept, a failure
    or a crash never."""
    if results is None:
        return check(*args)
    if results.get(key) is PASSED:
        return None
    out = check(*args)
    if out is None:
        results[key] = PASSED
    return out


#: the store's exact lookups by table
_EXACT: dict[str, Callable[[Store, str, str], tuple[Any, ...]]] = {
    "restaurants": Store.exact_restaurants,
    "attractions": Store.exact_attractions,
    "accommodations": Store.exact_accommodations,
}


def _exact(store: Store, table: str, value: str) -> Any:
    """The rows of ``table`` that the entry ``value`` names exactly (:meth:`Store.exact_restaurants` and the
    like, of its name and city; empty when it is not ``<name>, <city>``), kept in the store's memo by the
    entry's text (a plan's entries are looked up again in every iteration)."""
    key = ("entry", table, value)
    rows = store._memo.get(key)
    if rows is None:
        parsed = strict_name_city(value)
        rows = _EXACT[table](store, *parsed) if parsed is not None else ()
        store._memo.put(key, rows)
    return rows


def _snapshot(plan: Any) -> list[dict[str, Any]] | None:
    """What the plan held when it was read (its days copied; their values are immutable), or None when
    a change could not be seen this way (a value that is itself a container): such a plan is never reused."""
    return _read_days(plan)[0]


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


#: what a check returns: (True/False/None, message, details)
Outcome = tuple[Any, Any, dict[str, Any]]


def by_fields(
    key: str, fields: tuple[str, ...], check: Callable[[Query, Any, Store], Outcome]
) -> Callable[..., Outcome]:
    """``check`` (one named ``key``, reading of each examined day only ``fields``, and the query and the store),
    its outcome kept in the store's ``field_memo`` by those fields' values: a problem's next plan mostly
    changes other fields, and then the check is not run again. Kept only for a plain plan (a list whose
    examined days are dicts holding ``fields`` as text) and only an outcome whose details are plain values
    or lists or dicts of them (handed out as copies); nothing is kept or read under :func:`fresh_readings`."""

    read = operator.itemgetter(*fields)
    flat: Callable[[Any], Iterable[Any]] = (lambda v: v) if len(fields) == 1 else itertools.chain.from_iterable

    def kept(query: Query, plan: Any, store: Store) -> Outcome:
        n = query.get("days") if type(query) in _QUERY_TYPES else None
        if type(plan) is not list or type(n) is not int or n < 1 or not plan or getattr(_last, "fresh", False):
            return check(query, plan, store)
        examined = plan[:n]
        if not _DICTS.issuperset(map(type, examined)):
            return check(query, plan, store)
        try:
            values = tuple(map(read, examined))
        except KeyError:  # a day without one of the fields
            return check(query, plan, store)
        if not _TEXTS.issuperset(map(type, flat(values))):
            return check(query, plan, store)
        memo = store.field_memo
        memo_key = (key, id(query), values)
        found = memo.get(memo_key)
        if found is not None and found[0] is query:  # (the query is held by the entry: its id is not reused)
            value, message, details = found[1]
            return value, message, _copied(details)
        outcome = check(query, plan, store)
        if all(_flat(v) for v in outcome[2].values()):
            memo.put(memo_key, (query, (outcome[0], outcome[1], _copied(outcome[2]))))
        return outcome

    kept.__name__ = getattr(check, "__name__", key)
    kept.__doc__ = check.__doc__
    return kept


#: the queries :func:`by_fields` reads its day count from (a parsed query, as the critics read it, or not)
_QUERY_TYPES = (dict, MappingProxyType)
_DICTS = frozenset({dict})
_TEXTS = frozenset({str})


#: the values an outcome kept by :func:`by_fields` may hold in its details (or lists or dicts of them)
_PLAIN = frozenset({str, int, float, bool, type(None)})


def _flat(value: Any) -> bool:
    """A plain value, or a list or dict of plain values."""
    kind = type(value)
    if kind is list:
        return _PLAIN.issuperset(map(type, value))
    if kind is dict:
        return _PLAIN.issuperset(map(type, value.values()))
    return kind in _PLAIN


def _copied(details: dict[str, Any]) -> dict[str, Any]:
    """``details`` (of :func:`_flat` values) with its lists and dicts copied."""
    return {k: v.copy() if type(v) in (list, dict) else v for k, v in details.items()} if details else {}


@contextmanager
def fresh_readings() -> Iterator[None]:
    """In this thread, every check reads the plan afresh (no reuse): the per-critic reading of before,
    and no per-day result or outcome by fields kept between plans is read or kept."""
    before = getattr(_last, "fresh", False)
    _last.fresh = True
    try:
        yield
    finally:
        _last.fresh = before
