"""Shared pieces of the NATURAL PLAN tasks: data files, splits, loading and clock helpers.

The data directory holds ``natural_plan/`` with the official full files (``trip_planning.json``,
``meeting_planning.json``, ``calendar_scheduling.json``) where present, and the 100-instance subsets
under ``subsets_100/``. Each file is one JSON object keyed ``<task>_example_<i>``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from modulo.errors import DataError
from modulo.settings import data_dir as default_data_dir

#: folder of the NATURAL PLAN data under the data directory
SUBDIR = "natural_plan"

OFFICIAL_REPO = "https://github.com/google-deepmind/natural-plan"
OFFICIAL_COMMIT = "ca76db336072ff8931db43bc1ca8d381038cf073"


@dataclass(frozen=True)
class TaskFiles:
    """Where one task's data lives and how to recognise the official full file."""

    task: str
    full: str
    subset: str
    #: git blob hash of the official full file (``git hash-object FILE``)
    full_blob: str
    full_count: int


TASK_FILES: dict[str, TaskFiles] = {
    "trip": TaskFiles(
        "trip",
        "trip_planning.json",
        "subsets_100/trip_planning_100.json",
        "de8f16dd532578efed5de226fbd8a998441b5f13",
        1600,
    ),
    "meeting": TaskFiles(
        "meeting",
        "meeting_planning.json",
        "subsets_100/meeting_planning_100.json",
        "4eef311ef67706195a6e166b40a872dcaaf47bba",
        1000,
    ),
    "calendar": TaskFiles(
        "calendar",
        "calendar_scheduling.json",
        "subsets_100/calendar_scheduling_100.json",
        "1a786214dccbb047eb6fbb232749e7e791f28a00",
        1000,
    ),
}

SPLIT_FULL = "full"
SPLIT_SUBSET = "subset100"


def np_dir(data_dir: Path | None = None) -> Path:
    """``<data_dir>/natural_plan`` (the data directory defaults to ``modulo.settings.data_dir()``)."""
    return (data_dir or default_data_dir()) / SUBDIR


def split_path(task: str, split: str, data_dir: Path | None = None) -> Path:
    """The file behind ``split`` (``full`` or ``subset100``) of ``task``."""
    files = TASK_FILES[task]
    if split == SPLIT_FULL:
        return np_dir(data_dir) / files.full
    if split == SPLIT_SUBSET:
        return np_dir(data_dir) / files.subset
    raise DataError(f"natural_plan/{task}: no data file for split {split!r}")


def missing_file_message(task: str, path: Path) -> str:
    files = TASK_FILES[task]
    return (
        f"natural_plan/{task}: the data file {path} is missing. The full {task} file "
        f"({files.full_count} instances) is the official data/{files.full} from {OFFICIAL_REPO} "
        f"(commit {OFFICIAL_COMMIT}); copy it to {path} and check it with `git hash-object {files.full}`, "
        f"which must print {files.full_blob}. Meanwhile the split {SPLIT_SUBSET!r} (100 instances) can be used."
    )


@lru_cache(maxsize=16)
def _read_json(path: str, mtime_ns: int) -> dict[str, dict[str, Any]]:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except json.JSONDecodeError as exc:
        raise DataError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise DataError(f"{path} must be one JSON object mapping instance keys to objects")
    return data


def read_instances(task: str, split: str, data_dir: Path | None = None) -> dict[str, dict[str, Any]]:
    """The raw instances of ``split`` keyed by instance key, in example-index order (cached per file).

    Raises DataError with how to obtain the file when it is absent.
    """
    path = split_path(task, split, data_dir)
    if not path.is_file():
        if split == SPLIT_FULL:
            raise DataError(missing_file_message(task, path))
        raise DataError(
            f"natural_plan/{task}: the subset file {path} is missing; set MODULO_DATA_DIR to the data directory "
            f"holding {SUBDIR}/{TASK_FILES[task].subset}"
        )
    data = _read_json(str(path), path.stat().st_mtime_ns)
    return {k: data[k] for k in sorted(data, key=example_index)}


def example_index(key: str) -> int:
    """``trip_planning_example_12`` -> 12 (keys without a number sort last)."""
    m = re.search(r"_(\d+)$", key)
    return int(m.group(1)) if m else 1 << 30


def git_blob_hash(path: Path) -> str:
    """What ``git hash-object`` prints for ``path``."""
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def require_fields(key: str, item: dict[str, Any], fields: Iterable[str], task: str) -> None:
    missing = [f for f in fields if f not in item]
    if missing:
        raise DataError(f"natural_plan/{task}: instance {key} lacks the field(s) {', '.join(missing)}")


# -- clocks -----------------------------------------------------------------------------------------

_AMPM = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*([AaPp][Mm])\s*$")
_HHMM = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*$")


def ampm_to_minutes(text: str) -> int:
    """``"2:15PM"`` -> 855 (minutes after midnight). Raises ValueError on anything else."""
    m = _AMPM.match(text)
    if not m:
        raise ValueError(f"not a time like 2:15PM: {text!r}")
    hour, minute, half = int(m.group(1)), int(m.group(2)), m.group(3).upper()
    if not 1 <= hour <= 12 or minute > 59:
        raise ValueError(f"not a valid clock time: {text!r}")
    return (hour % 12) * 60 + minute + (720 if half == "PM" else 0)


def minutes_to_ampm(minutes: int) -> str:
    """855 -> ``"2:15PM"`` (wraps past midnight)."""
    minutes %= 24 * 60
    hour, minute = divmod(minutes, 60)
    half = "AM" if hour < 12 else "PM"
    return f"{(hour % 12) or 12}:{minute:02d}{half}"


def hhmm_to_minutes(text: str) -> int:
    """``"14:30"`` -> 870. Raises ValueError on anything else."""
    m = _HHMM.match(text)
    if not m:
        raise ValueError(f"not a time like 14:30: {text!r}")
    hour, minute = int(m.group(1)), int(m.group(2))
    if hour > 24 or minute > 59:
        raise ValueError(f"not a valid clock time: {text!r}")
    return hour * 60 + minute


def minutes_to_hhmm(minutes: int) -> str:
    """870 -> ``"14:30"``."""
    return f"{minutes // 60}:{minutes % 60:02d}"
