"""Streaming reads of ``records.jsonl``: one record (a plain dict) at a time, never the whole run.

A resumed run may record a problem twice (the last record counts), a killed run may leave a torn last
line. :func:`iter_records` makes two passes over the file: the first finds, for each problem, the
byte offset of its last good-looking line (reading one line at a time and parsing only the problem
id at the start of the line); the second parses and yields those lines in file order. Memory holds
one record and a dict of offsets, whatever the size of the run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ..recordformat import expand_record

#: how every note about a record left out of a read begins (:func:`skipped`)
SKIP_NOTE = "records.jsonl: skipped"


def skipped(notes: Iterable[str]) -> int:
    """How many of ``notes`` (:func:`iter_records`'s, or any reader's that uses :data:`SKIP_NOTE`) say a record
    was left out: an unreadable or truncated line, a record that is not one."""
    return sum(1 for note in notes if note.startswith(SKIP_NOTE))


#: ``model_dump_json`` writes ``problem_id`` first; anything else falls back to a full parse
_ID_AT_START = re.compile(rb'^\{"problem_id":("(?:[^"\\]|\\.)*")')


def _line_problem_id(line: bytes) -> str | None:
    match = _ID_AT_START.match(line)
    if match is not None:
        try:
            return str(json.loads(match.group(1)))
        except ValueError:
            return None
    try:
        value = json.loads(line)
    except ValueError:
        return None
    if isinstance(value, dict) and "problem_id" in value:
        return str(value["problem_id"])
    return None


def iter_records(path: Path, notes: list[str] | None = None) -> Iterator[dict[str, Any]]:
    """The last record of each problem in ``path`` (a run directory or its records.jsonl), in file order,
    each as the dict of record format 1 whatever format its line has (:func:`modulo.recordformat.expand_record`).

        Problems recorded more than once, unreadable lines and a truncated last line are reported in
        ``notes`` (and skipped), never silently dropped.
    """
    notes = notes if notes is not None else []
    file = path / "records.jsonl" if path.is_dir() else path
    if not file.is_file():
        return
    last: dict[str, int] = {}
    repeated: set[str] = set()
    with file.open("rb") as fh:
        lineno = 0
        while True:
            offset = fh.tell()
            line = fh.readline()
            if not line:
                break
            lineno += 1
            if not line.strip():
                continue
            pid = _line_problem_id(line)
            if pid is None:
                if not line.endswith(b"\n"):
                    notes.append(f"{SKIP_NOTE} a truncated last line (line {lineno}; the run was killed mid-write)")
                else:
                    notes.append(f"{SKIP_NOTE} unreadable line {lineno}")
                continue
            if not line.endswith(b"\n"):
                try:
                    json.loads(line)
                except ValueError:
                    notes.append(f"{SKIP_NOTE} a truncated last line (line {lineno}; the run was killed mid-write)")
                    continue
            if pid in last:
                repeated.add(pid)
            last[pid] = offset
        for pid in sorted(repeated):
            notes.append(f"records.jsonl: problem {pid} recorded more than once; the last record is used")
        for offset in sorted(last.values()):
            fh.seek(offset)
            line = fh.readline()
            try:
                record = expand_record(json.loads(line))
            except ValueError as exc:
                notes.append(f"{SKIP_NOTE} unreadable record at byte {offset}: {exc}")
                continue
            if isinstance(record, dict):
                yield record
