"""A synthetic full-size TravelPlanner flights table (shared by the tp_* benchmark scripts).

The real ``clean_Flights_2022.csv`` has about 3.8 million rows; we only have a 3,179-row subset. To
measure the store at full size, this writes a CSV of the same layout (an unnamed index column and the
nine columns the official loader selects) holding every real row of the partial table followed by
filler flights numbered from F5000000 up (no collision with real numbers, which run F3xxxxxx-F4xxxxxx),
on random routes between the database's cities and random March 2022 dates. Evaluating real plans
against it gives the same verdicts as against the partial table, only with a table of the real size.

The file goes to the cache directory (never the repository) and is reused when it already exists.
"""

from __future__ import annotations

import csv
import random
import time
from pathlib import Path

from critics.travelplanner.store import read_cities
from modulo import settings

REAL_ROWS = 3_827_083  # rows of the official clean_Flights_2022.csv, approximately


def data_root() -> Path:
    return settings.data_dir() / "travelplanner"


def synthetic_flights(rows: int = REAL_ROWS, *, seed: int = 0, path: Path | None = None) -> Path:
    """Write (or reuse) the synthetic flights CSV with ``rows`` rows; returns its path."""
    database = data_root() / "database"
    partial = database / "flights" / "clean_Flights_2022_partial.csv"
    cities = [city for city, _state in read_cities(database / "background" / "citySet_with_states.txt")]
    target = path or settings.cache_dir() / "travelplanner" / "synthetic" / f"clean_Flights_2022_{rows}.csv"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    rng = random.Random(seed)
    started = time.perf_counter()
    with partial.open(newline="") as src, tmp.open("w", newline="") as out:
        writer = csv.writer(out)
        reader = csv.reader(src)
        writer.writerow(["", *next(reader)])  # the official file's columns, after an unnamed index column
        n = 0
        for row in reader:
            writer.writerow([n, *row])
            n += 1
        number = 5_000_000
        batch: list[list[object]] = []
        while n < rows:
            a, b = rng.sample(cities, 2)
            dep = rng.randrange(5 * 60, 22 * 60)
            minutes = rng.randrange(45, 6 * 60)
            arr = (dep + minutes) % (24 * 60)
            batch.append(
                [
                    n,
                    f"F{number}",
                    rng.randrange(40, 1200),
                    f"{dep // 60:02d}:{dep % 60:02d}",
                    f"{arr // 60:02d}:{arr % 60:02d}",
                    f"{minutes // 60} hours {minutes % 60} minutes",
                    f"2022-03-{rng.randrange(1, 32):02d}",
                    a,
                    b,
                    float(rng.randrange(80, 2800)),
                ]
            )
            n += 1
            number += 1
            if len(batch) >= 100_000:
                writer.writerows(batch)
                batch.clear()
        writer.writerows(batch)
    tmp.replace(target)
    print(f"wrote {rows:,} flights to {target} in {time.perf_counter() - started:.1f} s")
    return target
