"""TravelBench's three files: reading, checking and turning rows into problems.

The data lives in ``$MODULO_DATA_DIR/travelbench/`` (``single_turn.jsonl``, ``multi_turn.jsonl``,
``unsolve.jsonl``; CC BY-NC 4.0, never copied into the repository). Every row is checked as it is
read: a row that is not a JSON object, lacks a field, has a field of the wrong type, an unsolvable row
without exactly one cause, or a solvable row with a cause, is a :class:`~modulo.errors.DataError`
naming the file, the line and the field.

A row becomes a :class:`~modulo.types.Problem`: ``query`` is the raw spoken request, ``context`` the
user's location and navigation state, ``metadata`` holds the query time, the category and the mean
tool-call count of the reference runs; the clarified ``intent`` and the ``user_profile`` go to
``Problem.hidden`` (only the user simulator reads them, never the planner), and ``solvable`` is False
for the unsolvable file (``metadata.cause`` says why: ``missing_tool``, ``missing_info`` or
``no_actionable``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from modulo.errors import DataError
from modulo.settings import data_dir as default_data_dir
from modulo.types import Problem

#: file name, row count of the published copy, mode of each file
FILES: dict[str, tuple[str, int]] = {
    "single_turn": ("single_turn.jsonl", 500),
    "multi_turn": ("multi_turn.jsonl", 500),
    "unsolvable": ("unsolve.jsonl", 100),
}
CAUSES = ("missing_tool", "missing_info", "no_actionable")
_TIME = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}(:\d{2})?$")
_STRINGS = ("trace_id", "time", "query", "primary_intent", "context", "intent")


@dataclass(frozen=True)
class Row:
    """One checked row of a TravelBench file."""

    kind: str
    line: int
    trace_id: str
    time: str
    query: str
    primary_intent: str
    context: str
    intent: str
    causes: tuple[str, ...]
    user_profile: str | None
    avg_tool_calls: float | None

    @property
    def problem_id(self) -> str:
        return f"{self.kind}-{self.trace_id}"


def travelbench_dir(data_dir: Path | None) -> Path:
    return (data_dir if data_dir is not None else default_data_dir()) / "travelbench"


def file_path(kind: str, data_dir: Path | None) -> Path:
    return travelbench_dir(data_dir) / FILES[kind][0]


def read_rows(kind: str, data_dir: Path | None) -> list[Row]:
    """Every row of the file of ``kind`` (single_turn, multi_turn, unsolvable), checked."""
    path = file_path(kind, data_dir)
    if not path.is_file():
        raise DataError(
            f"TravelBench file {path} is missing: put the dataset's {FILES[kind][0]} under "
            f"{travelbench_dir(data_dir)} (set MODULO_DATA_DIR; `modulo data check {benchmark_name(kind)}` "
            "says what is there)"
        )
    rows: list[Row] = []
    with path.open(encoding="utf-8") as fh:
        for number, text in enumerate(fh, start=1):
            if not text.strip():
                continue
            rows.append(parse_row(kind, text, f"{path}:{number}", number))
    seen: dict[str, int] = {}
    for row in rows:
        if row.trace_id in seen:
            raise DataError(f"{path}:{row.line}: trace_id {row.trace_id!r} repeats line {seen[row.trace_id]}")
        seen[row.trace_id] = row.line
    return rows


def benchmark_name(kind: str) -> str:
    return f"travelbench/{kind}"


def parse_row(kind: str, text: str, where: str, line: int = 0) -> Row:
    """One line of a file of ``kind``; DataError naming ``where`` and the field when it is malformed."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"{where}: not a JSON object ({exc.msg} at column {exc.colno})") from None
    if not isinstance(raw, dict):
        raise DataError(f"{where}: a row must be a JSON object, not {type(raw).__name__}")
    values: dict[str, Any] = {}
    for name in _STRINGS:
        value = raw.get(name)
        if name == "context" and name not in raw:
            value = ""  # three unsolvable rows carry no context at all (no location known)
        if name == "trace_id" and isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str) or (name in ("trace_id", "query", "time") and not value.strip()):
            got = "missing" if name not in raw else f"{type(value).__name__} {value!r}"[:80]
            raise DataError(f"{where}: field {name!r} must be a non-empty string ({got})")
        values[name] = value
    if not _TIME.match(values["time"]):
        raise DataError(f"{where}: field 'time' must read 'YYYY-MM-DD HH:MM', not {values['time']!r}")
    causes = []
    for name in CAUSES:
        flag = raw.get(name)
        if not isinstance(flag, bool):
            got = "missing" if name not in raw else repr(flag)
            raise DataError(f"{where}: field {name!r} must be true or false ({got})")
        if flag:
            causes.append(name)
    if kind == "unsolvable" and len(causes) != 1:
        raise DataError(
            f"{where}: an unsolvable row has exactly one of {', '.join(CAUSES)} true, this one has "
            f"{', '.join(causes) or 'none'}"
        )
    if kind != "unsolvable" and causes:
        raise DataError(f"{where}: a solvable ({kind}) row has {', '.join(causes)} true")
    profile = raw.get("user_profile")
    if kind == "multi_turn" and (not isinstance(profile, str) or not profile.strip()):
        raise DataError(f"{where}: a multi-turn row needs a non-empty string 'user_profile'")
    avg = raw.get("avg_tool_calls")
    if kind != "unsolvable":
        if isinstance(avg, bool) or not isinstance(avg, int | float) or avg < 0:
            raise DataError(f"{where}: field 'avg_tool_calls' must be a number >= 0 ({avg!r})")
    return Row(
        kind=kind,
        line=line,
        causes=tuple(causes),
        user_profile=profile if isinstance(profile, str) else None,
        avg_tool_calls=float(avg) if isinstance(avg, int | float) and not isinstance(avg, bool) else None,
        **values,
    )


def to_problem(row: Row, benchmark: str) -> Problem:
    """The problem the loop runs; the intent and profile only in ``hidden``."""
    hidden: dict[str, Any] = {"intent": row.intent}
    if row.user_profile is not None:
        hidden["user_profile"] = row.user_profile
    metadata: dict[str, Any] = {
        "split": row.kind,
        "trace_id": row.trace_id,
        "time": row.time,
        "primary_intent": row.primary_intent,
        "category": row.primary_intent.split(".")[0],
        "mode": "multi" if row.kind == "multi_turn" else "single",
    }
    if row.avg_tool_calls is not None:
        metadata["avg_tool_calls"] = row.avg_tool_calls
    if row.causes:
        metadata["cause"] = row.causes[0]
    return Problem(
        id=row.problem_id,
        benchmark=benchmark,
        query=row.query,
        context=row.context,
        metadata=metadata,
        hidden=hidden,
        solvable=row.kind != "unsolvable",
    )
