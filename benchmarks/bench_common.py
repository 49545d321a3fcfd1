"""What the benchmark scripts share: a synthetic run directory's ``run.json`` and records, and the end
of a script (the figures written to ``--json FILE`` when asked, the exit status).

The scripts import it as a sibling module (they are run as ``python benchmarks/NAME.py``)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from modulo.types import ProblemResult

#: the record formats a synthetic run can be written in: 2 is what ``modulo run`` writes today (shared
#: texts and verdicts); 1 is the expanded form older runs have (``modulo export --format records``)
RECORD_FORMATS = (1, 2)


def record_format_option(parser: Any) -> None:
    """``--record-format {1,2}`` on a script that writes a synthetic run (default: what runs write)."""
    parser.add_argument(
        "--record-format",
        type=int,
        choices=RECORD_FORMATS,
        default=RECORD_FORMATS[-1],
        help="the format of the synthetic records (default 2, what modulo run writes; 1, the expanded form)",
    )


def write_record(fh: IO[str], record: ProblemResult, record_format: int) -> None:
    """One line of a synthetic ``records.jsonl``, in ``record_format`` (as the run's writer encodes it)."""
    from modulo.recordformat import encode_record

    line = encode_record(record).decode("utf-8") if record_format == 2 else record.model_dump_json()
    fh.write(line + "\n")


def write_run_info(
    path: Path, benchmark: str, split: str, critics: Sequence[str], max_iterations: int, problem_ids: Sequence[str]
) -> None:
    """``path/run.json`` of a synthetic run, written through the typed model: ``benchmark``/``split``
    answered by a scripted model named ``synthetic`` with ``critics`` at budget ``max_iterations`` (the
    directory is made when missing)."""
    from modulo.runinfo import BenchmarkInfo, BudgetInfo, GeneratorInfo, LLMInfo, RunInfo

    path.mkdir(parents=True, exist_ok=True)
    info = RunInfo(
        run_id=path.name,
        benchmark=BenchmarkInfo(name=benchmark, split=split),
        generator=GeneratorInfo(name="llm"),
        llm=LLMInfo(name="scripted", model="synthetic"),
        critics=list(critics),
        budget=BudgetInfo(max_iterations=max_iterations),
        problem_ids=list(problem_ids),
    )
    (path / "run.json").write_text(info.to_json())


def least_time(fn: Callable[[], Any], repeat: int = 3, clock: Callable[[], float] = time.perf_counter) -> float:
    """The least time of ``repeat`` calls of ``fn``, by ``clock`` (wall time; ``time.thread_time``: this
    thread's CPU)."""
    best = float("inf")
    for _ in range(repeat):
        t0 = clock()
        fn()
        best = min(best, clock() - t0)
    return best


def finish(figures: Mapping[str, Any], json_file: Path | None, ok: bool = True) -> int:
    """Write ``figures`` to ``json_file`` (the script's ``--json FILE``) when one was given; the exit
    status: 0 when the script's targets were met (``ok``), 1 when not."""
    if json_file is not None:
        json_file.write_text(json.dumps(figures, indent=1))
    return 0 if ok else 1


def conclude(figures: Mapping[str, Any], verdicts: Sequence[str], ok: bool, json_file: Path | None) -> int:
    """The end of a measuring script: the figures as JSON on stdout, then one line per target met or
    missed (``verdicts``), the figures written to ``json_file`` when given; the exit status (see :func:`finish`)."""
    print(json.dumps(figures, indent=1))
    for line in verdicts:
        print(line)
    return finish(figures, json_file, ok)
