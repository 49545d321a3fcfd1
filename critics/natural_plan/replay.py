"""Replaying the stored Gemini 1.5 Pro answers as iteration 0 of an LLM-Modulo loop.

The data files keep each instance's 5-shot answer (``pred_5shot_pro``). Read as a first generation,
they tell how many plans the critics would certify at once and what the first backprompt would say::

    from critics.natural_plan.benchmark import TripPlanning
    from critics.natural_plan.replay import replay_report

    bench = TripPlanning()
    report = replay_report(bench, bench.load("subset100"))
    print(report.summary())
    report.rows[0].feedback      # the failing verdicts' feedback texts, in critic priority order

:func:`stored_predictions` gives ``{instance key: text}`` for a replay LLM backend.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from modulo.errors import DataError
from modulo.types import Problem, Verdict

from .benchmark import NaturalPlanBenchmark
from .common import read_instances


def stored_predictions(problem_file: str | Path, field: str = "pred_5shot_pro") -> dict[str, str]:
    """``{instance key: stored answer text}`` from a NATURAL PLAN data file (a full file or a subset)."""
    path = Path(problem_file)
    if not path.is_file():
        raise DataError(f"{path}: no such data file")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise DataError(f"{path}: expected one JSON object keyed by instance")
    out: dict[str, str] = {}
    for key, item in data.items():
        value = item.get(field) if isinstance(item, dict) else None
        if not isinstance(value, str):
            raise DataError(f"{path}: instance {key} has no text field {field!r}")
        out[key] = value
    return out


@dataclass
class ReplayRow:
    """Iteration 0 of one instance."""

    problem_id: str
    cell: str
    #: the stored text read as a plan (False: the format critic fails and gates the rest)
    parsed: bool
    certified: bool
    official: bool
    #: names of the critics that reject, in priority order (format first)
    failing: list[str] = field(default_factory=list)
    #: their feedback: what the first backprompt would list
    feedback: list[str] = field(default_factory=list)
    hints: list[str] = field(default_factory=list)


@dataclass
class ReplayReport:
    benchmark: str
    field: str
    rows: list[ReplayRow]

    @property
    def certified(self) -> int:
        return sum(r.certified for r in self.rows)

    @property
    def official(self) -> int:
        return sum(r.official for r in self.rows)

    @property
    def parsed(self) -> int:
        return sum(r.parsed for r in self.rows)

    def firing(self) -> Counter[str]:
        """How many instances each critic rejects at iteration 0."""
        return Counter(name for r in self.rows for name in r.failing)

    def summary(self, examples: int = 3) -> str:
        n = len(self.rows)
        lines = [
            f"{self.benchmark}: replay of {self.field} on {n} instances as iteration 0",
            f"  parsed {self.parsed}/{n}, certified {self.certified}/{n}, official {self.official}/{n}",
            "  critics rejecting: " + (", ".join(f"{k} {v}" for k, v in self.firing().most_common()) or "none"),
        ]
        shown = [r for r in self.rows if not r.certified][:examples]
        for r in shown:
            lines.append(f"  {r.problem_id}: " + " | ".join(r.feedback))
        return "\n".join(lines)


def replay_report(
    benchmark: NaturalPlanBenchmark,
    problems: Sequence[Problem],
    field: str = "pred_5shot_pro",
    texts: dict[str, str] | None = None,
) -> ReplayReport:
    """Parse each stored answer, run the task's critics, and record what iteration 0 would give.

    ``texts`` defaults to the ``field`` of the problems' own data file (their split).
    """
    if texts is None:
        texts = {}
        for split in sorted({str(p.metadata.get("split")) for p in problems}):
            raw = read_instances(benchmark.task, benchmark.file_split(split), benchmark.data_dir)
            texts.update({k: str(v.get(field, "")) for k, v in raw.items()})
    rows = []
    for problem in problems:
        text = texts.get(problem.id)
        if text is None:
            raise DataError(f"no stored {field!r} answer for {problem.id}")
        rows.append(_replay_one(benchmark, problem, text))
    return ReplayReport(benchmark.name, field, rows)


def _replay_one(benchmark: NaturalPlanBenchmark, problem: Problem, text: str) -> ReplayRow:
    _, plan, error = benchmark.read_answer(problem, text)
    verdicts: list[Verdict]
    if plan is None:
        verdicts = [
            Verdict.fail(f"No plan could be read from your answer: {error}.").model_copy(
                update={"critic": "format", "group": "format"}
            )
        ]
    else:
        _, verdicts = benchmark.check(problem, plan)
    failing = [v for v in verdicts if not v.accepts]
    return ReplayRow(
        problem_id=problem.id,
        cell=benchmark.cell_of(problem),
        parsed=plan is not None and bool(verdicts) and verdicts[0].accepts,
        certified=not failing,
        official=benchmark.official_solved(problem, text),
        failing=[v.critic for v in failing],
        feedback=[v.feedback for v in failing],
        hints=[v.hint for v in failing if v.hint],
    )
