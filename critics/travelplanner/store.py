"""The TravelPlanner database in an indexed SQLite file, with memoised keyed lookups.

The official evaluation loads every table with pandas (``read_csv(...).dropna()`` and then a column
selection) and filters whole DataFrames for each lookup, which costs about 40 ms per plan with a small
flights table and a third of a second with the real 3.8M-row one. Here the tables are loaded once,
with the same pandas semantics (so the very same rows survive ``dropna``: 'Brooklyn Home', whose
``house_rules`` is empty, is not in the sandbox), into a SQLite file under the cache directory. The
file is rebuilt when a source file changes (size and modification time, hashed with the schema
version). Every lookup is a keyed query: flights by number or by (origin, destination, date); the
city tables by city, after which names are matched in Python over the few rows of that city. Results
are memoised in process.

Row order is the CSV order after ``dropna``, so "the first matching row" means what it means officially.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import sqlite3
import tempfile
import threading
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Protocol, TypeVar

from modulo.errors import DataError

SCHEMA_VERSION = 4
FULL_FLIGHTS = "clean_Flights_2022.csv"
PARTIAL_FLIGHTS = "clean_Flights_2022_partial.csv"
_CHUNK_ROWS = 200_000


class Flight(NamedTuple):
    number: str
    price: float
    dep_time: str
    arr_time: str
    elapsed: str
    date: str
    origin: str
    dest: str
    distance: float


class Accommodation(NamedTuple):
    name: str
    price: float
    room_type: str
    house_rules: str
    minimum_nights: float
    maximum_occupancy: float
    review_rate: float
    city: str


class Restaurant(NamedTuple):
    name: str
    average_cost: float
    cuisines: str
    rating: float
    city: str


class Attraction(NamedTuple):
    name: str
    latitude: float
    longitude: float
    address: str
    phone: str
    website: str
    city: str


class Road(NamedTuple):
    """The first ``distance.csv`` row for (origin, destination); duration/distance None when empty."""

    origin: str
    destination: str
    duration: str | None
    distance: str | None

    def cost(self, mode: str) -> int | None:
        """The official ``run_for_evaluation`` cost: None when a value is missing or the trip takes days."""
        if self.duration is None or self.distance is None or "day" in self.duration:
            return None
        km = float(self.distance.replace("km", "").replace(",", ""))
        if "driving" in mode:
            return int(km * 0.05)
        if mode == "taxi":
            return int(km)
        return None

    @property
    def valid(self) -> bool:
        return self.cost("taxi") is not None


# column order of each table as the official loaders select it
_TABLES: dict[str, tuple[str, list[str], type[Any]]] = {
    "flights": (
        "flights",
        [
            "Flight Number",
            "Price",
            "DepTime",
            "ArrTime",
            "ActualElapsedTime",
            "FlightDate",
            "OriginCityName",
            "DestCityName",
            "Distance",
        ],
        Flight,
    ),
    "accommodations": (
        "accommodations",
        [
            "NAME",
            "price",
            "room type",
            "house_rules",
            "minimum nights",
            "maximum occupancy",
            "review rate number",
            "city",
        ],
        Accommodation,
    ),
    "restaurants": ("restaurants", ["Name", "Average Cost", "Cuisines", "Aggregate Rating", "City"], Restaurant),
    "attractions": (
        "attractions",
        ["Name", "Latitude", "Longitude", "Address", "Phone", "Website", "City"],
        Attraction,
    ),
}


#: table -> its columns in the store, the fields of its row type
_COLUMNS: dict[str, str] = {table: ", ".join(row._fields) for table, (_name, _csv, row) in _TABLES.items()}


class _Named(Protocol):
    @property
    def name(self) -> str: ...


N = TypeVar("N", bound=_Named)
T = TypeVar("T")


def _by_name(
    row: type[N], table: str, *, exact: bool, alone: bool = False
) -> Callable[[Store, str, str], tuple[N, ...]]:
    """A :class:`Store` lookup ``(name, city)``: the rows of ``table`` in the city whose name contains
    ``name`` (the official matching) or, ``exact``, equals it once stripped (the strict matching, a part
    of the official one), in table order. Memoised: a dozen checks look up the same entries of a plan in
    every iteration. The city's rows are read (and kept) and the name matched over them, except with
    ``alone`` while the city's rows have not been read: then SQLite reads the rows whose name contains
    ``name`` (``instr``: the same substrings as Python's ``in`` in the text it is given) and any whose name
    is not text (on which the match below fails as it would over the city's rows), and the name is matched
    over those. A plan names one accommodation of a city, and the official evaluation on its own (``modulo
    evaluate``, or a run's end where no critic read the city) need not read the city's tens of listings."""

    tag = "exact" if exact else "match"
    alone_sql = (
        f"SELECT {_COLUMNS[table]} FROM {table} WHERE city = ? AND (instr(name, ?) > 0 OR typeof(name) != 'text') "
        "ORDER BY id"
    )

    def lookup(self: Store, name: str, city: str) -> tuple[N, ...]:
        key = (tag, table, name, city)
        found = self._memo.get(key)  # the usual case, without building the computation
        if found is not None:
            return found  # type: ignore[no-any-return]

        def compute() -> tuple[N, ...]:
            read = (table, _CITY, city) in self._memo
            if alone and not read and _text(name) and _text(city):
                rows = tuple(row(*r) for r in self._query(alone_sql, (city, name)))
            else:
                rows = self._select(row, table, _CITY, city)
            return tuple(r for r in rows if name in r.name and (not exact or r.name.strip() == name))

        return self._memoised(key, compute)  # type: ignore[no-any-return]

    return lookup


#: the city tables' key: every row of a city
_CITY = "city = ?"


def _text(value: object) -> bool:
    """Whether ``value`` is text SQLite is given as it is (a ``str`` without lone surrogates)."""
    if type(value) is not str:
        return False
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@dataclass(frozen=True)
class Sources:
    """The source files of the database."""

    flights: Path
    accommodations: Path
    restaurants: Path
    attractions: Path
    distances: Path
    cities: Path

    @classmethod
    def from_database_dir(cls, database: Path, *, flights: Path | None = None) -> Sources:
        """The official layout under ``database/``; the full flights table when present, else the partial one."""
        if flights is None:
            full = database / "flights" / FULL_FLIGHTS
            flights = full if full.is_file() else database / "flights" / PARTIAL_FLIGHTS
        return cls(
            flights=flights,
            accommodations=database / "accommodations" / "clean_accommodations_2022.csv",
            restaurants=database / "restaurants" / "clean_restaurant_2022.csv",
            attractions=database / "attractions" / "attractions.csv",
            distances=database / "googleDistanceMatrix" / "distance.csv",
            cities=database / "background" / "citySet_with_states.txt",
        )

    def items(self) -> list[tuple[str, Path]]:
        return [
            ("flights", self.flights),
            ("accommodations", self.accommodations),
            ("restaurants", self.restaurants),
            ("attractions", self.attractions),
            ("distances", self.distances),
            ("cities", self.cities),
        ]

    def missing(self) -> list[Path]:
        return [path for _, path in self.items() if not path.is_file()]

    def fingerprint(self) -> str:
        """Hash of (schema version, every file's resolved path, size and mtime)."""
        missing = self.missing()
        if missing:
            raise DataError(
                "TravelPlanner database files are missing: "
                + ", ".join(str(p) for p in missing)
                + ". Put the official database/ folder under <data_dir>/travelplanner/ (see `modulo data check`)."
            )
        parts: list[Any] = [SCHEMA_VERSION]
        for name, path in self.items():
            stat = path.stat()
            parts.append([name, str(path.resolve()), stat.st_size, stat.st_mtime_ns])
        return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:20]


# -- building -------------------------------------------------------------------------------------
def _create_schema(db: sqlite3.Connection) -> None:
    db.executescript(
        """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE flights (id INTEGER NOT NULL, number TEXT NOT NULL, price REAL, dep_time TEXT, arr_time TEXT,
            elapsed TEXT, date TEXT, origin TEXT, dest TEXT, distance REAL, PRIMARY KEY (number, id)) WITHOUT ROWID;
        CREATE TABLE accommodations (id INTEGER PRIMARY KEY, name TEXT, price REAL, room_type TEXT,
            house_rules TEXT, minimum_nights REAL, maximum_occupancy REAL, review_rate REAL, city TEXT);
        CREATE TABLE restaurants (id INTEGER PRIMARY KEY, name TEXT, average_cost REAL, cuisines TEXT,
            rating REAL, city TEXT);
        CREATE TABLE attractions (id INTEGER PRIMARY KEY, name TEXT, latitude REAL, longitude REAL,
            address TEXT, phone TEXT, website TEXT, city TEXT);
        CREATE TABLE roads (id INTEGER PRIMARY KEY, origin TEXT, destination TEXT, duration TEXT, distance TEXT);
        CREATE TABLE cities (city TEXT PRIMARY KEY, state TEXT);
        """
    )


def _create_indexes(db: sqlite3.Connection) -> None:
    db.executescript(
        """
        CREATE INDEX flights_route ON flights(origin, dest, date);
        CREATE INDEX accommodations_city ON accommodations(city);
        CREATE INDEX restaurants_city ON restaurants(city);
        CREATE INDEX attractions_city ON attractions(city);
        CREATE INDEX roads_pair ON roads(origin, destination);
        """
    )


def _csv_chunks(
    path: Path, columns: list[str], *, chunked: bool
) -> Iterator[tuple[list[int], list[tuple[Any, ...]], set[str]]]:
    """Rows of ``read_csv(path).dropna()[columns]`` in CSV order, chunk by chunk: (pandas index labels,
    rows as Python tuples, the columns pandas read as integers)."""
    import pandas as pd

    try:
        frames: Iterable[Any] = (
            pd.read_csv(path, chunksize=_CHUNK_ROWS, low_memory=False) if chunked else [pd.read_csv(path)]
        )
        for frame in frames:
            missing = [c for c in columns if c not in frame.columns]
            if missing:
                raise DataError(f"{path}: columns {missing} are missing (found {list(frame.columns)})")
            kept = frame.dropna()[columns]
            ints = {c for c in columns if pd.api.types.is_integer_dtype(kept[c].dtype)}
            yield kept.index.tolist(), list(zip(*(kept[c].tolist() for c in columns), strict=True)), ints
    except DataError:
        raise
    except (OSError, ValueError) as exc:  # pandas parser errors are ValueErrors
        raise DataError(f"{path}: cannot be read as the TravelPlanner table ({type(exc).__name__}: {exc})") from exc


def read_cities(path: Path) -> list[tuple[str, str]]:
    """``citySet_with_states.txt`` read as the official code reads it: lines split by a tab."""
    pairs = []
    for lineno, unit in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
        parts = unit.split("\t")
        if len(parts) != 2:
            if unit.strip() == "":
                continue  # a trailing newline (the official code would crash on it)
            raise DataError(f"{path}:{lineno}: expected 'City<TAB>State', got {unit!r}")
        pairs.append((parts[0], parts[1]))
    return pairs


def build(sources: Sources, target: Path, *, progress: Callable[[str], None] | None = None) -> None:
    """Build the SQLite store for ``sources`` at ``target`` (written to a temporary file, then renamed)."""
    import pandas as pd

    fingerprint = sources.fingerprint()
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        db = sqlite3.connect(tmp)
        db.execute("PRAGMA journal_mode=OFF")
        db.execute("PRAGMA synchronous=OFF")
        _create_schema(db)
        counts: dict[str, int] = {}
        int_columns: dict[str, list[str]] = {}
        for key, (table, columns, _row) in _TABLES.items():
            path = getattr(sources, key)
            marks = ",".join("?" * (len(columns) + 1))
            n = 0
            ints: set[str] | None = None
            # the id is the pandas index label (the CSV row number, gaps where dropna removed a row): it
            # orders rows as the official tables do and is the index the official RestaurantSearch prints
            for labels, rows, chunk_ints in _csv_chunks(path, columns, chunked=key == "flights"):
                db.executemany(
                    f"INSERT INTO {table} VALUES ({marks})",
                    ((int(label), *row) for label, row in zip(labels, rows, strict=True)),
                )
                ints = chunk_ints if ints is None else ints & chunk_ints
                n += len(rows)
                if progress is not None:
                    progress(f"{table}: {n} rows")
            counts[table] = n
            int_columns[table] = [c for c in columns if c in (ints or set())]
        try:
            roads = pd.read_csv(sources.distances)
        except (OSError, ValueError) as exc:
            raise DataError(f"{sources.distances}: cannot be read ({type(exc).__name__}: {exc})") from exc
        road_rows = []
        for i, (o, d, dur, dist) in enumerate(
            zip(
                roads["origin"].tolist(),
                roads["destination"].tolist(),
                roads["duration"].tolist(),
                roads["distance"].tolist(),
                strict=True,
            )
        ):
            road_rows.append((i + 1, _text_or_none(o), _text_or_none(d), _text_or_none(dur), _text_or_none(dist)))
        db.executemany("INSERT INTO roads VALUES (?,?,?,?,?)", road_rows)
        counts["roads"] = len(road_rows)
        cities = read_cities(sources.cities)
        db.executemany("INSERT OR REPLACE INTO cities VALUES (?,?)", cities)
        counts["cities"] = len(cities)
        _create_indexes(db)
        meta = {
            "fingerprint": fingerprint,
            "schema": str(SCHEMA_VERSION),
            "counts": json.dumps(counts),
            "int_columns": json.dumps(int_columns),
            "sources": json.dumps({k: str(v) for k, v in sources.items()}),
        }
        db.executemany("INSERT INTO meta VALUES (?,?)", list(meta.items()))
        db.commit()
        db.execute("ANALYZE")
        db.commit()
        db.close()
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()


def _text_or_none(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and value != value):
        return None
    return str(value)


def store_path(sources: Sources, cache_dir: Path) -> Path:
    """Where the store for ``sources`` lives: one file per flights table, under ``<cache>/travelplanner``."""
    key = hashlib.sha256(str(sources.flights.resolve()).encode()).hexdigest()[:12]
    return cache_dir / "travelplanner" / f"store-{key}.sqlite"


def _stored_fingerprint(path: Path) -> str | None:
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            row = db.execute("SELECT value FROM meta WHERE key='fingerprint'").fetchone()
        finally:
            db.close()
    except sqlite3.Error:
        return None
    return str(row[0]) if row else None


# -- reading ----------------------------------------------------------------------------------------
class BoundedMemo(dict[Hashable, Any]):
    """A memo of at most ``size`` entries: read it as a dict; add with :meth:`put`, which drops the older half
    (in the order they were added) when it is full. Safe to share between threads (each step is one dict
    operation)."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def put(self, key: Hashable, value: Any) -> None:
        if len(self) >= self.size:
            for old in list(itertools.islice(self, self.size // 2)):
                self.pop(old, None)
        self[key] = value


class DayMemo(BoundedMemo):
    """The checks' work on days, kept between plans (see :mod:`critics.travelplanner.reading`): a day's
    content -> its :data:`~critics.travelplanner.reading.Results`; the store it reads is the one that
    holds this memo. Bounded (about 4 KB a day, so 4 to 5 MB at most at the default ``size``)."""

    def __init__(self, size: int = 1024) -> None:
        super().__init__(size)


#: how many lookups a store keeps (city tables, flights, name lookups, roads): a run's plans name new
#: entries without end, the database's cities and flights it reads are far fewer
MEMO_SIZE = 16384


class Store:
    """Read-only keyed access to the database, memoised in process. Safe to share between threads."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        self._lock = threading.Lock()
        #: the lookups made (bounded: the oldest half is dropped when full, and read again when asked for)
        self._memo = BoundedMemo(MEMO_SIZE)
        #: the checks' per-day results (bounded; never the store's own data)
        self.day_memo = DayMemo()
        #: the checks' outcomes by the few fields of a plan they read (see reading.by_fields)
        self.field_memo = BoundedMemo(4096)
        meta = dict(self._query("SELECT key, value FROM meta", ()))
        self.fingerprint = str(meta.get("fingerprint", ""))
        self.counts: dict[str, int] = json.loads(meta.get("counts", "{}"))
        self.sources: dict[str, str] = json.loads(meta.get("sources", "{}"))
        #: table -> the official columns pandas reads as integers (the rest of the numbers are floats)
        self.int_columns: dict[str, list[str]] = json.loads(meta.get("int_columns", "{}"))
        self.city_state: dict[str, str] = dict(self._query("SELECT city, state FROM cities", ()))

    @classmethod
    def open(
        cls,
        sources: Sources,
        cache_dir: Path,
        *,
        rebuild: bool = False,
        progress: Callable[[str], None] | None = None,
    ) -> Store:
        """Open the store for ``sources``, building it first when absent or stale."""
        path = store_path(sources, cache_dir)
        fingerprint = sources.fingerprint()
        if rebuild or not path.is_file() or _stored_fingerprint(path) != fingerprint:
            build(sources, path, progress=progress)
        return cls(path)

    def close(self) -> None:
        self._db.close()

    def _query(self, sql: str, args: Sequence[Any]) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._db.execute(sql, tuple(args)).fetchall()

    def _memoised(self, key: tuple[Any, ...], compute: Callable[[], Any]) -> Any:
        try:
            return self._memo[key]
        except KeyError:
            value = compute()
            self._memo.put(key, value)
            return value

    def _select(self, row: type[T], table: str, where: str, *key: str) -> tuple[T, ...]:
        """The rows of ``table`` where ``where`` holds for ``key``, in table order, as ``row`` tuples."""
        return self._memoised(  # type: ignore[no-any-return]
            (table, where, *key),
            lambda: tuple(
                row(*r) for r in self._query(f"SELECT {_COLUMNS[table]} FROM {table} WHERE {where} ORDER BY id", key)
            ),
        )

    # -- flights ---------------------------------------------------------------------------------
    def flights_by_number(self, number: str) -> tuple[Flight, ...]:
        """Every row with this flight number, in table order."""
        return self._select(Flight, "flights", "number = ?", number)

    def flights_on(self, origin: str, dest: str, date: str) -> tuple[Flight, ...]:
        """The flights of one route on one date, in table order."""
        return self._select(Flight, "flights", "origin = ? AND dest = ? AND date = ?", origin, dest, date)

    # -- city tables -----------------------------------------------------------------------------
    def restaurants_in(self, city: str) -> tuple[Restaurant, ...]:
        return self._select(Restaurant, "restaurants", _CITY, city)

    def accommodations_in(self, city: str) -> tuple[Accommodation, ...]:
        return self._select(Accommodation, "accommodations", _CITY, city)

    def attractions_in(self, city: str) -> tuple[Attraction, ...]:
        return self._select(Attraction, "attractions", _CITY, city)

    # official matching: the row's name *contains* the given name (case-sensitive), the city is equal;
    # strict matching: the whole (stripped) name is equal, the city is equal
    match_restaurants = _by_name(Restaurant, "restaurants", exact=False)
    match_accommodations = _by_name(Accommodation, "accommodations", exact=False, alone=True)
    match_attractions = _by_name(Attraction, "attractions", exact=False)
    exact_restaurants = _by_name(Restaurant, "restaurants", exact=True)
    exact_accommodations = _by_name(Accommodation, "accommodations", exact=True)
    exact_attractions = _by_name(Attraction, "attractions", exact=True)

    # -- whole rows, for the tools ----------------------------------------------------------------
    def table_rows(self, table: str, *key: str) -> tuple[tuple[Any, ...], ...]:
        """(id, the official columns...) of every row of a flights route-date or of a city, in table order."""
        where = "origin = ? AND dest = ? AND date = ?" if table == "flights" else "city = ?"
        if table not in _TABLES or len(key) != where.count("?"):
            raise ValueError(f"table_rows: bad table or key {table!r} {key!r}")
        return self._memoised(  # type: ignore[no-any-return]
            ("rows", table, *key),
            lambda: tuple(self._query(f"SELECT id, {_COLUMNS[table]} FROM {table} WHERE {where} ORDER BY id", key)),
        )

    def city_pairs(self) -> list[tuple[str, str]]:
        """(city, state) lines of the state map in file order, duplicates kept (as the official CitySearch)."""
        return self._memoised(("pairs",), lambda: read_cities(Path(self.sources["cities"])))  # type: ignore[no-any-return]

    # -- roads and cities ------------------------------------------------------------------------
    def road(self, origin: str, destination: str) -> Road | None:
        """The first distance row of (origin, destination), or None."""

        def compute() -> Road | None:
            rows = self._query(
                "SELECT origin, destination, duration, distance FROM roads WHERE origin = ? AND destination = ? "
                "ORDER BY id LIMIT 1",
                (origin, destination),
            )
            return Road(*rows[0]) if rows else None

        return self._memoised(("rd", origin, destination), compute)  # type: ignore[no-any-return]

    def cities_in_state(self, state: str) -> tuple[str, ...]:
        return tuple(city for city, st in self.city_state.items() if st == state)
