"""What the benchmark scripts share: a synthetic run directory's ``run.json``, and the end of a
script (the figures written to ``--json FILE`` when asked, the exit status).

The scripts import it as a sibling module (they are run as ``python benchmarks/NAME.py``)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


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
