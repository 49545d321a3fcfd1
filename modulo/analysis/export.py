"""``modulo export``: a run's or a sweep's frames as files for other tools, and benchmark submissions.

``modulo export RUN_DIR|SWEEP_DIR --format parquet|csv|jsonl [--out DIR]`` writes ``runs``,
``problems``, ``iterations``, ``verdicts`` and ``calls`` (one file each, ``--grains`` to choose).
``modulo export RUN_DIR --format records [--out FILE|-]`` writes the run's records expanded (record format
1, every text in place: for jq and other tools that read JSON lines). ``modulo export RUN_DIR --format FMT
--out FILE`` with one of the run's benchmark's
``submission_formats`` writes the official submission file through ``Benchmark.write_submission``:
every problem of the run's split in order, the best plan of each (none where the run has no record).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import IO

import pandas as pd
from pydantic import ValidationError

from ..errors import ConfigError, RunError
from ..types import PlanJSON, ProblemResult
from .frames import GRAINS, Results
from .records import SKIP_NOTE, iter_records
from .runs import RunMeta

FRAME_FORMATS = ("parquet", "csv", "jsonl")
ALL_GRAINS = ("runs", *GRAINS)


def write_frame(df: pd.DataFrame, path: Path, fmt: str) -> None:
    """One frame as ``fmt`` (parquet keeps the dtypes; csv and jsonl write missing values as empty / null)."""
    if fmt == "parquet":
        if importlib.util.find_spec("pyarrow") is None:
            raise ConfigError("--format parquet needs pyarrow: pip install pyarrow (or pip install -e '.[parquet]')")
        df.to_parquet(path, index=False)
    elif fmt == "csv":
        df.to_csv(path, index=False)
    elif fmt == "jsonl":
        df.to_json(path, orient="records", lines=True, force_ascii=False)
    else:
        raise ConfigError(f"unknown frame format {fmt!r}; formats: {', '.join(FRAME_FORMATS)}")


def export_frames(results: Results, out: Path, fmt: str, grains: Sequence[str] = ALL_GRAINS) -> dict[str, Path]:
    """Write each grain of ``results`` to ``out/<grain>.<ext>``; return grain -> path."""
    unknown = [g for g in grains if g not in ALL_GRAINS]
    if unknown:
        raise ConfigError(f"unknown grain(s) {unknown}; grains: {', '.join(ALL_GRAINS)}")
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    for grain in grains:
        path = out / f"{grain}.{fmt}"
        write_frame(results.frame(grain), path, fmt)
        written[grain] = path
    return written


def export_records(path: Path, out: IO[str], notes: list[str]) -> int:
    """Write the last record of each problem of the run at ``path`` (a run directory or a records file) to
    ``out`` in the expanded form, one line each: the JSON of record format 1, every text and verdict in
    place, whatever format the run wrote (:mod:`modulo.recordformat`). Returns the lines written."""
    if path.is_dir() and not (path / "records.jsonl").is_file():
        raise RunError(f"{path} holds no records.jsonl (--format records reads one run directory)")
    if not path.exists():
        raise RunError(f"{path} does not exist")
    written = 0
    for record in iter_records(path, notes):
        try:
            result = ProblemResult.model_validate(record)
        except ValidationError as exc:
            notes.append(f"{SKIP_NOTE} the record of {record.get('problem_id')!r}, not a record ({exc})")
            continue
        out.write(result.model_dump_json() + "\n")
        written += 1
    return written


def best_plans(meta: RunMeta) -> tuple[dict[str, PlanJSON], list[str]]:
    """Problem id -> the best plan of its last record (streamed; only the plans are kept), and the problems
    whose request changed during the loop (an update: ``user.updates``, a user's answer that revealed a hidden
    requirement)."""
    plans: dict[str, PlanJSON] = {}
    changed: list[str] = []
    for r in iter_records(meta.path, meta.notes):
        pid = str(r.get("problem_id"))
        plans[pid] = r.get("best_plan")
        iterations = r.get("iterations")
        if isinstance(iterations, list) and any(isinstance(it, dict) and it.get("updates") for it in iterations):
            changed.append(pid)
    return plans, changed


def export_submission(meta: RunMeta, fmt: str, out: Path) -> tuple[int, int, int]:
    """Write ``meta``'s benchmark submission ``fmt`` to ``out``: (lines written, problems, plans delivered)."""
    from ..reports.load import open_benchmark

    bench = open_benchmark(meta.info)
    if fmt not in bench.submission_formats:
        known = ", ".join(bench.submission_formats) or "none"
        raise ConfigError(
            f"unknown export format {fmt!r} for {meta.benchmark_name}: frame formats are "
            f"{', '.join(FRAME_FORMATS)}; its submission formats: {known}"
        )
    plans, changed = best_plans(meta)
    if changed:
        # the official format holds each problem's index and original query: its evaluator would score these
        # plans against requests they were not made for
        raise RunError(
            f"{meta.path}: {len(changed)} problem(s) changed during the loop ({', '.join(changed[:3])}"
            f"{', ...' if len(changed) > 3 else ''}: updates or a user's answers), and the {fmt} format can only "
            "name the original request, so its evaluator would score those plans against requests they were not "
            "made for; `modulo report` scores them against the request as it ended"
        )
    problems = bench.load(meta.split)
    ids = {p.id for p in problems}
    stray = [pid for pid in plans if pid not in ids]
    if stray:
        raise RunError(f"{meta.path}: problems {stray[:5]} are not in {meta.benchmark_name}/{meta.split}")
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = bench.write_submission(fmt, problems, plans, out)
    delivered = sum(1 for p in problems if plans.get(p.id) is not None)
    return lines, len(problems), delivered
