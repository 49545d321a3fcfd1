"""Loading TravelPlanner's splits into :class:`~modulo.types.Problem` objects.

Files (under ``<data_dir>/travelplanner/``): ``train.jsonl`` (45 rows) and ``validation.jsonl`` (180 rows),
one official Hugging Face row per line with the HF string fields (``date``, ``local_constraint``,
``reference_information``, ``annotated_plan``) kept as Python-literal strings. Those are read with
:func:`ast.literal_eval`, never ``eval``.

Splits:

* ``train``           the 45 train queries;
* ``validation``      the 180 validation queries, in the official order; the benchmark gives the 51 rows
                      without reference information one derived with the tools (``metadata['derived']``,
                      see :mod:`.derive`);
* ``validation-ref``  the 129 validation rows that carry official reference information, untouched.

A problem's id is ``<split>-<idx>`` with the file's split (``validation-61`` in both validation splits, so
results line up), ``query`` is the query text, ``context`` the reference information exactly as the
official planner prompt shows it after "Given information:", ``constraints`` the structured fields and
``metadata`` level, days, split, idx and whether reference information exists.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from modulo.errors import DataError
from modulo.types import Problem

SPLIT_FILES = {"train": "train.jsonl", "validation": "validation.jsonl", "validation-ref": "validation.jsonl"}
SPLIT_SIZES = {"train": 45, "validation": 180, "test": 1000}
LEVELS = ("easy", "medium", "hard")
LOCAL_KEYS = ("house rule", "cuisine", "room type", "transportation")


def literal(value: Any, what: str) -> Any:
    """A Python-literal string parsed with ``ast.literal_eval``; other values returned as they are."""
    if not isinstance(value, str):
        return value
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:
        raise DataError(f"{what}: not a Python literal ({type(exc).__name__}: {exc}): {value[:80]!r}") from None


def structured_query(row: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The structured fields of a row (HF strings parsed), checked; ``DataError`` naming ``where`` if bad."""
    if not isinstance(row, Mapping):
        raise DataError(f"{where}: expected a JSON object, got {type(row).__name__}")
    missing = [k for k in ("org", "dest", "days", "visiting_city_number", "people_number", "budget") if k not in row]
    if missing:
        raise DataError(f"{where}: missing field(s) {missing}")
    out: dict[str, Any] = {}
    for key in ("org", "dest"):
        if not isinstance(row[key], str) or not row[key].strip():
            raise DataError(f"{where}: field {key!r} must be a non-empty string, got {row[key]!r}")
        out[key] = row[key]
    for key in ("days", "visiting_city_number", "people_number"):
        value = row[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise DataError(f"{where}: field {key!r} must be a positive integer, got {value!r}")
        out[key] = value
    budget = row["budget"]
    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or budget < 0:
        raise DataError(f"{where}: field 'budget' must be a non-negative number, got {budget!r}")
    out["budget"] = budget
    dates = literal(row.get("date", []), f"{where}: field 'date'")
    if not isinstance(dates, (list, tuple)) or not all(isinstance(d, str) for d in dates):
        raise DataError(f"{where}: field 'date' must be a list of date strings, got {dates!r}")
    out["date"] = list(dates)
    local = literal(row.get("local_constraint", {}), f"{where}: field 'local_constraint'")
    if local is None:
        local = {}
    if not isinstance(local, Mapping):
        raise DataError(f"{where}: field 'local_constraint' must be a dict, got {type(local).__name__}")
    unknown = sorted(set(local) - set(LOCAL_KEYS))
    if unknown:
        raise DataError(f"{where}: unknown local constraint(s) {unknown} (known: {list(LOCAL_KEYS)})")
    constraint = {key: local.get(key) for key in LOCAL_KEYS}
    cuisine = constraint["cuisine"]
    if cuisine is not None and not (isinstance(cuisine, list) and all(isinstance(c, str) for c in cuisine)):
        raise DataError(f"{where}: local constraint 'cuisine' must be None or a list of strings, got {cuisine!r}")
    for key in ("house rule", "room type", "transportation"):
        if constraint[key] is not None and not isinstance(constraint[key], str):
            raise DataError(f"{where}: local constraint {key!r} must be None or a string, got {constraint[key]!r}")
    out["local_constraint"] = constraint
    level = row.get("level")
    if level is not None and level not in LEVELS:
        raise DataError(f"{where}: field 'level' must be one of {list(LEVELS)}, got {level!r}")
    out["level"] = level
    return out


def query_key(constraints: Mapping[str, Any]) -> str:
    """A stable text of a structured query (what a derivation from it depends on)."""
    return json.dumps(
        {k: constraints.get(k) for k in ("org", "dest", "days", "visiting_city_number", "date")}, sort_keys=True
    )


def reference_entries(text: str, where: str) -> list[dict[str, Any]]:
    """The reference information: a list of ``{'Description': ..., 'Content': ...}`` entries."""
    value = literal(text, f"{where}: field 'reference_information'")
    if not isinstance(value, list) or not all(
        isinstance(e, dict) and isinstance(e.get("Description"), str) and "Content" in e for e in value
    ):
        raise DataError(f"{where}: 'reference_information' must be a list of {{'Description', 'Content'}} entries")
    return value


def split_root(data_dir: Path) -> Path:
    """``<data_dir>/travelplanner`` (or ``data_dir`` itself when it already is that folder)."""
    if (data_dir / "travelplanner").is_dir():
        return data_dir / "travelplanner"
    if (data_dir / "validation.jsonl").is_file() or (data_dir / "database").is_dir():
        return data_dir
    return data_dir / "travelplanner"


def read_rows(root: Path, file_split: str) -> list[tuple[str, dict[str, Any]]]:
    """``(where, row)`` for every line of ``<root>/<file_split>.jsonl``."""
    path = root / f"{file_split}.jsonl"
    if not path.is_file():
        raise DataError(
            f"TravelPlanner {file_split} split not found: {path} does not exist. Set MODULO_DATA_DIR (or data_dir) "
            "to the folder holding travelplanner/ (see `modulo data check travelplanner`)."
        )
    rows = []
    with path.open(encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{path.name} line {lineno}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{where}: not valid JSON ({exc})") from None
            if isinstance(row, dict) and "idx" in row:
                where += f" (idx {row['idx']})"
            rows.append((where, row))
    return rows


def row_to_problem(row: Mapping[str, Any], where: str, *, file_split: str, split: str, position: int) -> Problem:
    constraints = structured_query(row, where)
    idx = row.get("idx", position)
    if isinstance(idx, bool) or not isinstance(idx, int):
        raise DataError(f"{where}: field 'idx' must be an integer, got {idx!r}")
    query = row.get("query")
    if not isinstance(query, str) or not query.strip():
        raise DataError(f"{where}: field 'query' must be a non-empty string")
    reference = row.get("reference_information")
    if reference is not None:
        if not isinstance(reference, str):
            raise DataError(f"{where}: 'reference_information' must be a string or null")
        reference_entries(reference, where)
    return Problem(
        id=f"{file_split}-{idx}",
        benchmark="travelplanner",
        query=query,
        context=reference or "",
        constraints=constraints,
        metadata={
            "level": constraints["level"],
            "days": constraints["days"],
            "split": split,
            "idx": idx,
            "has_reference": reference is not None,
        },
    )


def load_split(root: Path, split: str) -> list[Problem]:
    """All problems of ``split`` (see the module doc)."""
    if split not in SPLIT_FILES:
        raise DataError(f"unknown TravelPlanner split {split!r}; known: {sorted(SPLIT_FILES)}")
    file_split = SPLIT_FILES[split].removesuffix(".jsonl")
    problems = [
        row_to_problem(row, where, file_split=file_split, split=split, position=i + 1)
        for i, (where, row) in enumerate(read_rows(root, file_split))
    ]
    seen: dict[str, int] = {}
    for p in problems:
        seen[p.id] = seen.get(p.id, 0) + 1
    dup = sorted(k for k, n in seen.items() if n > 1)
    if dup:
        raise DataError(f"{file_split}.jsonl: duplicate idx for {dup[:5]}")
    if split == "validation-ref":
        problems = [p for p in problems if p.metadata["has_reference"]]
    return problems


def load_annotated_plans(root: Path) -> dict[int, Any]:
    """Train idx -> the annotated plan (the day list of ``annotated_plan[1]``, padding included)."""
    plans: dict[int, Any] = {}
    for where, row in read_rows(root, "train"):
        value = literal(row.get("annotated_plan"), f"{where}: field 'annotated_plan'")
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            raise DataError(f"{where}: 'annotated_plan' must be [query, day list]")
        plans[int(row["idx"])] = value[1]
    return plans


def require_reference(problems: list[Problem]) -> None:
    """Raise ``DataError`` naming the problems that have no reference information (sole-planning needs it)."""
    missing = [p.id for p in problems if not p.context]
    if missing:
        shown = ", ".join(missing[:12]) + (f" and {len(missing) - 12} more" if len(missing) > 12 else "")
        raise DataError(
            f"sole-planning needs the reference information, which {len(missing)} TravelPlanner problem(s) lack: "
            f"{shown}. Use the 'validation-ref' split (the 129 validation rows that have it), or train."
        )
