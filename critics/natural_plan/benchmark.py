"""The three NATURAL PLAN benchmarks: ``natural_plan/trip``, ``natural_plan/meeting``, ``natural_plan/calendar``.

Problems: ``id`` is the instance key, ``query`` the 0-shot prompt (``shots=5``: the 5-shot prompt),
``constraints`` what the critics need, parsed from the prompt (never the answer), and ``metadata``
the cell (num_cities / num_people / num_days) plus the gold answer under ``gold`` / ``gold_plan``
for the evaluator. Critics never read ``metadata``.

Texts and plans: every task has a deterministic parser (``parse``: text -> plan JSON, reading the
answer the way the official script does) and a renderer (``render``: plan JSON -> the canonical text
of the golden answers). :meth:`evaluate` accepts either per problem: a ``str`` is a raw answer and
is scored as it stands; a plan is rendered to its canonical text for the official score.

Two scores per answer:

* ``official``: the published script's score, bug for bug (trip: the city/stay sequence read from
  the flight lines equals the gold one; meeting: the simulated number of people met equals the
  gold plan's, a crash of the script counting as unsolved; calendar: the first slot equals gold's);
* ``valid``: the answer read as a plan passes the format check and every critic of its task.

The primary metric is ``valid``: it is exactly what certifies a plan in the loop, and it does not
reject the valid alternatives that exact match rejects on instances with several solutions
(65/1600 trip instances, 18/100 calendar subset instances). ``official`` is kept for comparison
with published numbers.
"""

from __future__ import annotations

import json
from abc import abstractmethod
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import click
from pydantic import BaseModel, ValidationError

from critics.core import format_critic
from modulo.benchmark import Benchmark, ConstraintInfo, DataReport, EvalResult, GateCase, MetricSpec
from modulo.binding import bind_critics
from modulo.critic import Critic, CriticFactory
from modulo.errors import ConfigError, DataError, ModuloError, PlanFormatError
from modulo.prompts import role_templates
from modulo.types import PlanJSON, Problem, Verdict, json_lines

from . import calendar as cal
from . import extract as _extract
from . import meeting as mtg
from . import trip as trp
from .calendar_critics import CALENDAR_CRITICS
from .common import (
    SPLIT_FULL,
    SPLIT_SUBSET,
    TASK_FILES,
    git_blob_hash,
    missing_file_message,
    np_dir,
    read_instances,
    require_fields,
    split_path,
)
from .meeting_critics import MEETING_CRITICS
from .trip_critics import TRIP_CRITICS

#: answer fields that the JSONL prediction files may use
_TEXT_KEYS = ("text", "response", "answer", "prediction", "raw_reply", "reply")
_PLAN_KEYS = ("plan", "best_plan")


class NaturalPlanBenchmark(Benchmark):
    """What the three tasks share: splits, evaluation, the evaluate command. Subclasses fill the task."""

    task: ClassVar[str] = ""
    critic_factories: ClassVar[tuple[CriticFactory, ...]] = ()
    #: the instance's integer fields that make a cell of the per-cell tables (kept in the metadata)
    cell_keys: ClassVar[tuple[str, ...]] = ()
    #: the other fields an instance of the task must have
    fields: ClassVar[tuple[str, ...]] = ()
    test_splits: ClassVar[tuple[str, ...]] = ()
    quick_format: ClassVar[bool] = True  # a strict pydantic check and a scan of the plan: microseconds
    primary_metric: ClassVar[str] = "valid"
    metrics: ClassVar[tuple[MetricSpec, ...]] = (
        MetricSpec("official", "official", description="the published script's score (exact match / count match)"),
        MetricSpec("valid", "valid", description="the answer read as a plan passes every critic of its task"),
        MetricSpec("delivery", "delivery", description="an answer that could be read as a plan"),
    )
    #: the marker after which the parser reads the answer (None: the whole text)
    answer_marker: ClassVar[str | None] = "SOLUTION:"

    def __init_subclass__(cls, task: str = "", **kwargs: Any) -> None:
        """The benchmark ``natural_plan/<task>`` with its templates."""
        super().__init_subclass__(**kwargs)
        if task:
            cls.task, cls.name = task, f"natural_plan/{task}"
            cls.prompts = role_templates(cls.name)

    def __init__(self, data_dir: Path | None = None, shots: int = 0) -> None:
        super().__init__(data_dir)
        if shots not in (0, 5):
            raise ConfigError(f"{self.name}: shots must be 0 or 5, not {shots!r}")
        self.shots = shots
        self._critics: list[Critic] | None = None

    # -- problems --------------------------------------------------------------------------------
    def splits(self) -> list[str]:
        return [SPLIT_FULL, SPLIT_SUBSET]

    def load(self, split: str) -> list[Problem]:
        if split not in self.splits():
            raise DataError(f"{self.name}: unknown split {split!r}; the splits are {', '.join(self.splits())}")
        raw = read_instances(self.task, self.file_split(split), self.data_dir)
        keys = self._split_keys(split, raw)
        problems = []
        for key in keys:
            try:
                problems.append(self._problem(key, raw[key], split))
            except ModuloError:
                raise
            except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:  # a malformed row
                raise DataError(
                    f"{self.name}: instance {key!r} of the {split} data is malformed "
                    f"({type(exc).__name__}: {str(exc)[:200]}); check the data file (modulo data check {self.name})"
                ) from None
        return problems

    def file_split(self, split: str) -> str:
        """The data file split behind ``split`` (trip's validation/test come from the full file)."""
        return split

    def _split_keys(self, split: str, raw: dict[str, dict[str, Any]]) -> list[str]:
        return list(raw)

    def _prompt(self, key: str, item: dict[str, Any]) -> str:
        field = "prompt_5shot" if self.shots == 5 else "prompt_0shot"
        require_fields(key, item, (field, "golden_plan"), self.task)
        return str(item[field])

    def _problem(self, key: str, item: dict[str, Any], split: str) -> Problem:
        """One problem from one raw instance: its prompt and the constraints read from it, its metadata (the
        task, split and shots, the cell's fields, then what :meth:`_read` adds)."""
        prompt = self._prompt(key, item)
        require_fields(key, item, (*self.cell_keys, *self.fields), self.task)
        constraints, metadata = self._read(key, item, prompt)
        cells = {k: int(item[k]) for k in self.cell_keys}
        return Problem(
            id=key,
            benchmark=self.name,
            query=prompt,
            constraints=constraints,
            metadata={"task": self.task, "split": split, "shots": self.shots, **cells, **metadata},
        )

    @abstractmethod
    def _read(self, key: str, item: dict[str, Any], prompt: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """The instance's constraints (read from its prompt) and its task's metadata (the gold answer...)."""

    def _gold_plan(self, text: str) -> PlanJSON:
        """The golden answer read as a plan, or None when the parser cannot read it."""
        try:
            return self._parse_text(text)
        except PlanFormatError:
            return None

    # -- plans and texts -------------------------------------------------------------------------
    @abstractmethod
    def render(self, plan: PlanJSON, problem: Problem | None = None) -> str:
        """The canonical text of a (validated) plan, in the golden answers' format."""

    @abstractmethod
    def _parse_text(self, text: str) -> PlanJSON:
        """Text -> plan JSON (raises PlanFormatError)."""

    def parse(self, text: str, problem: Problem) -> PlanJSON:
        """Deterministic text -> plan parser (the reading of the official script; see each task)."""
        if not isinstance(text, str):
            raise PlanFormatError("the answer is not text")
        if self.answer_marker and self.answer_marker in text:
            text = text[text.rfind(self.answer_marker) + len(self.answer_marker) :]
        try:
            return self._parse_text(text)
        except ValueError as exc:  # e.g. a day number of 5000 digits, too long for int() (found by fuzzing)
            raise PlanFormatError(f"the answer could not be read: {str(exc)[:200]}") from None

    def validate_plan(self, value: Any) -> PlanJSON:
        """The base validation, with a fast path: a value the pydantic model accepts in strict mode
        (no coercion) also satisfies its JSON Schema, so jsonschema (slow on the meeting steps'
        ``oneOf``) only runs to explain a rejection."""
        if self.plan_model is not None:
            try:
                return self.plan_model.model_validate(value, strict=True).model_dump(mode="json")
            except ValidationError:
                pass
        return super().validate_plan(value)

    def render_plan(self, plan: PlanJSON) -> str:
        """A plan as its canonical text (used when a backprompt shows the previous plan)."""
        try:
            return self.render(self.validate_plan(plan))
        except (PlanFormatError, KeyError, TypeError, ValueError):
            return super().render_plan(plan)

    @abstractmethod
    def official_solved(self, problem: Problem, text: str) -> bool:
        """The official score of a text answer (needs the gold answer from ``problem.metadata``)."""

    # -- prompts ---------------------------------------------------------------------------------
    def prompt_variables(self, problem: Problem) -> dict[str, Any]:
        schema = self.plan_json_schema()
        return {
            "query": problem.query,
            "context": problem.context,
            "task": self.task,
            "schema": json.dumps(schema, indent=1) if schema else "",
            "example": json.dumps(self.example_plan(), ensure_ascii=False),
            "answer_format": self.render(self.example_plan()),
        }

    @abstractmethod
    def example_plan(self) -> PlanJSON:
        """A small made-up plan that shows the JSON shape (not an answer to any instance)."""

    # -- extracted critics (``modulo critics extract natural_plan/TASK``) -------------------------
    def extraction_constraints(self) -> list[ConstraintInfo]:
        """One constraint per critic of the task."""
        return _extract.extraction_constraints(self)

    def critic_view(self, problem: Problem) -> dict[str, Any]:
        """The query and the constraints parsed from it (never ``metadata``, which holds the gold answer)."""
        return {"query": problem.query, "constraints": problem.constraints}

    def gate_cases(self, constraint: str, *, problems: int, seed: int) -> list[GateCase]:
        """Gold answers and perturbations labelled by construction (see :mod:`critics.natural_plan.extract`)."""
        return _extract.gate_cases(self, constraint, problems=problems, seed=seed)

    # -- critics and evaluation ------------------------------------------------------------------
    def fuzz_cases(self, n: int) -> list[tuple[Problem, PlanJSON]]:
        """The first ``n`` problems of ``subset100`` that have a gold plan, with it."""
        cases = [(p, p.metadata.get("gold_plan")) for p in self.select("subset100")[:n]]
        return [(p, plan) for p, plan in cases if plan is not None]

    def critic_names(self) -> list[str]:
        return ["format", *(f.name for f in self.critic_factories)]

    def critics(self) -> list[Critic]:
        """The task's critics, bound (format excluded), in priority order."""
        if self._critics is None:
            bound = bind_critics([f.name for f in self.critic_factories], self)
            self._critics = sorted(bound, key=lambda c: c.priority)
        return self._critics

    def check(self, problem: Problem, plan: PlanJSON) -> tuple[PlanJSON, list[Verdict]]:
        """Validate ``plan`` (format) and run every critic: (normalised plan or None, verdicts).

        The format verdict comes first; when it fails the other critics are not run.
        """
        verdict = format_critic(benchmark=self)(problem, plan)
        if not verdict.accepts:
            return None, [verdict]
        plan = self.validate_plan(plan)
        return plan, [verdict, *(c(problem, plan) for c in self.critics())]

    def read_answer(self, problem: Problem, answer: PlanJSON | str | None) -> tuple[str | None, PlanJSON, str | None]:
        """(text for the official score, plan for the critics, format error) of one answer."""
        if answer is None:
            return None, None, "no answer"
        if isinstance(answer, str):
            try:
                return answer, self.parse(answer, problem), None
            except PlanFormatError as exc:
                return answer, None, str(exc)
        try:
            plan = self.validate_plan(answer)
        except PlanFormatError as exc:
            return None, answer, str(exc)
        return self.render(plan, problem), plan, None

    def evaluate(self, problems: Sequence[Problem], plans: Sequence[PlanJSON | str | None]) -> EvalResult:
        """Score answers: a ``str`` is a raw text answer, anything else a plan JSON (None: no answer).

        ``metrics``: ``official``, ``valid`` and ``delivery`` as rates. ``per_problem``: problem_id,
        ``passed`` (= valid), official, valid, delivered, the cell, and each critic's result
        (True/False, None when not applicable or not run). ``tables``: ``cells`` and ``critics``.
        """
        if len(problems) != len(plans):
            raise ConfigError(f"{self.name}: {len(problems)} problems but {len(plans)} answers")
        rows: list[dict[str, Any]] = []
        names = self.critic_names()
        for problem, answer in zip(problems, plans, strict=True):
            text, plan, error = self.read_answer(problem, answer)
            official = text is not None and self.official_solved(problem, text)
            row: dict[str, Any] = {"problem_id": problem.id, "cell": self.cell_of(problem)}
            row.update(dict.fromkeys(names))
            if plan is None and error is not None:
                row["format"] = False if answer is not None else None
                verdicts: list[Verdict] = []
            else:
                _, verdicts = self.check(problem, plan)
            for v in verdicts:
                row[v.critic] = v.passed if v.applicable and v.error is None else None
            delivered = bool(verdicts) and verdicts[0].accepts
            valid = delivered and all(v.accepts for v in verdicts)
            failing = [v.critic for v in verdicts if not v.accepts]
            row.update(
                official=official,
                valid=valid,
                passed=valid,
                delivered=delivered,
                failing=failing,
                format_error=error if not delivered else None,
            )
            rows.append(row)
        n = len(rows)

        def rate(key: str, subset: list[dict[str, Any]]) -> float:
            return sum(bool(r[key]) for r in subset) / len(subset) if subset else 0.0

        metrics = {
            "official": rate("official", rows),
            "valid": rate("valid", rows),
            "delivery": rate("delivered", rows),
        }
        cells: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in rows:
            cells[r["cell"]].append(r)
        cell_rows = [
            {
                "cell": cell,
                "n": len(rs),
                "official": sum(r["official"] for r in rs),
                "valid": sum(r["valid"] for r in rs),
                "official_rate": rate("official", rs),
                "valid_rate": rate("valid", rs),
            }
            for cell, rs in sorted(cells.items(), key=lambda kv: _cell_order(kv[0]))
        ]
        critic_rows = []
        for name in names:
            judged = [r[name] for r in rows if r[name] is not None]
            critic_rows.append(
                {
                    "critic": name,
                    "judged": len(judged),
                    "passed": sum(judged),
                    "pass_rate": sum(judged) / len(judged) if judged else None,
                }
            )
        tables = {"cells": cell_rows, "critics": critic_rows}
        if n == 0:
            metrics = {k: 0.0 for k in metrics}
        return EvalResult(metrics=metrics, per_problem=rows, tables=tables)

    def cell_of(self, problem: Problem) -> str:
        return " ".join(f"{k}={problem.metadata.get(k)}" for k in self.cell_keys)

    # -- data ------------------------------------------------------------------------------------
    def data_check(self) -> DataReport:
        files = TASK_FILES[self.task]
        lines = [f"{self.name}: data under {np_dir(self.data_dir)}"]
        ok = True
        subset = split_path(self.task, SPLIT_SUBSET, self.data_dir)
        if subset.is_file():
            n = len(read_instances(self.task, SPLIT_SUBSET, self.data_dir))
            lines.append(
                f"  {SPLIT_SUBSET}: {subset.name} present, {n} instances" + ("" if n == 100 else " (expected 100)")
            )
            ok = ok and n == 100
        else:
            ok = False
            lines.append(f"  {SPLIT_SUBSET}: MISSING {subset}")
        full = split_path(self.task, SPLIT_FULL, self.data_dir)
        if full.is_file():
            blob = git_blob_hash(full)
            same = blob == files.full_blob
            lines.append(
                f"  {SPLIT_FULL}: {full.name} present, git blob {blob[:12]}"
                + (" (matches the official file)" if same else f" (DIFFERS from the official {files.full_blob[:12]})")
            )
            ok = ok and same
        else:
            lines.append(
                f"  {SPLIT_FULL}: MISSING {full.name} ({files.full_count} instances): the '{SPLIT_FULL}' split "
                "and the headline numbers on it cannot be run; see `modulo evaluate` with --split subset100"
            )
        return DataReport(ok=ok, lines=lines)

    def data_download(self) -> DataReport:
        report = self.data_check()
        full = split_path(self.task, SPLIT_FULL, self.data_dir)
        if not full.is_file():
            raise DataError(missing_file_message(self.task, full) + " (no automatic download is implemented)")
        return report

    # -- the evaluate command --------------------------------------------------------------------
    def default_split(self) -> str:
        full = split_path(self.task, SPLIT_FULL, self.data_dir)
        return SPLIT_FULL if full.is_file() else SPLIT_SUBSET

    def evaluate_command(self) -> click.Command:
        """``modulo evaluate natural_plan/<task> [--split S] [--predictions FIELD|FILE.jsonl] [--json]``."""

        @click.command(help=f"Score answers to {self.name}: the official score and constraint validity.")
        @click.option("--split", default=None, help=f"one of {', '.join(self.splits())} (default: full if present)")
        @click.option(
            "--predictions",
            default="pred_5shot_pro",
            show_default=True,
            help="a field of the data files to replay, or a JSONL file with one "
            "{problem_id|id, text|response|answer | plan|best_plan} per line (run records work too)",
        )
        @click.option(
            "--data-dir",
            type=click.Path(file_okay=False, path_type=Path),
            default=None,
            help="the data directory (default $MODULO_DATA_DIR)",
        )
        @click.option("--limit", type=int, default=None, help="score only the first N problems")
        @click.option("--json", "as_json", is_flag=True, help="print one JSON object with counts and cells")
        @click.option(
            "--iteration0",
            is_flag=True,
            help="also replay the answers as iteration 0 of the loop: how many the critics certify, "
            "which critics fire, and what the first backprompt would say",
        )
        @click.option("--examples", type=int, default=3, show_default=True, help="with --iteration0: examples shown")
        def evaluate(data_dir: Path | None, **options: Any) -> None:
            if data_dir is not None:
                self.data_dir = data_dir
            self.evaluate_answers(**options)

        return evaluate

    def evaluate_answers(
        self,
        *,
        split: str | None = None,
        predictions: str = "pred_5shot_pro",
        limit: int | None = None,
        as_json: bool = False,
        iteration0: bool = False,
        examples: int = 3,
    ) -> None:
        """Score the answers ``predictions`` names (a data field or a JSONL file) and print the figures."""
        split = split or self.default_split()
        problems = self.select(split, limit=limit)
        answers, note = self.predictions(predictions, split, problems)
        result = self.evaluate(problems, answers)
        loop0 = None
        if iteration0:
            from .replay import replay_report

            texts = {p.id: a for p, a in zip(problems, answers, strict=True) if isinstance(a, str)}
            loop0 = replay_report(self, problems, predictions, texts=texts)
        n = len(problems)
        official = sum(r["official"] for r in result.per_problem)
        valid = sum(r["valid"] for r in result.per_problem)
        if as_json:
            out = {
                "benchmark": self.name,
                "split": split,
                "predictions": predictions,
                "n": n,
                "official": official,
                "valid": valid,
                "delivered": sum(r["delivered"] for r in result.per_problem),
                "official_rate": result.metrics["official"],
                "valid_rate": result.metrics["valid"],
                "cells": result.tables["cells"],
                "critics": result.tables["critics"],
            }
            if note:
                out["note"] = note
            if loop0 is not None:
                out["iteration0"] = {
                    "parsed": loop0.parsed,
                    "certified": loop0.certified,
                    "firing": dict(loop0.firing().most_common()),
                    "first_backprompts": {r.problem_id: r.feedback for r in loop0.rows if not r.certified},
                }
            print(json.dumps(out, indent=1))
            return
        print(f"{self.name} split={split} predictions={predictions}")
        if note:
            print(note)
        print(f"n={n}  official={official}/{n} ({_pct(official, n)})  valid={valid}/{n} ({_pct(valid, n)})")
        print()
        print(f"{'cell':<28}{'n':>5}{'official':>10}{'valid':>8}")
        for row in result.tables["cells"]:
            print(f"{row['cell']:<28}{row['n']:>5}{row['official']:>10}{row['valid']:>8}")
        print()
        print(f"{'critic':<24}{'judged':>8}{'passed':>8}")
        for row in result.tables["critics"]:
            print(f"{row['critic']:<24}{row['judged']:>8}{row['passed']:>8}")
        if loop0 is not None:
            print()
            print(loop0.summary(examples=examples))

    def predictions(
        self, source: str, split: str, problems: Sequence[Problem]
    ) -> tuple[list[PlanJSON | str | None], str | None]:
        """Answers for ``problems`` from a data field name or a JSONL file, and a note on what was missing."""
        path = Path(source)
        from_file = path.suffix in (".jsonl", ".json") or path.is_file()
        if from_file:
            by_id = read_prediction_file(path)
        else:
            raw = read_instances(self.task, self.file_split(split), self.data_dir)
            sample = next(iter(raw.values()), {})
            if source not in sample:
                fields = ", ".join(k for k in sample if k.startswith("pred")) or "none"
                raise DataError(f"{self.name}: the data has no field {source!r} (prediction fields: {fields})")
            by_id = {k: raw[k].get(source) for k in raw}
        answers = [by_id.get(p.id) for p in problems]
        missing = sum(1 for p in problems if p.id not in by_id)
        wanted = {p.id for p in problems}
        unknown = sum(1 for k in by_id if k not in wanted) if from_file else 0
        notes = []
        if missing:
            notes.append(f"{missing} problem(s) have no prediction and count as unsolved")
        if unknown:
            notes.append(f"{unknown} prediction(s) are for ids outside this split and were ignored")
        return answers, "; ".join(notes) or None


def read_prediction_file(path: Path) -> dict[str, PlanJSON | str | None]:
    """``{problem_id: answer}`` from a JSONL file (a text under text/response/answer/..., or a plan)."""
    if not path.is_file():
        raise DataError(f"predictions file {path} not found")
    out: dict[str, PlanJSON | str | None] = {}
    lines = path.read_text(encoding="utf-8").splitlines()
    for n, row in json_lines(lines, lambda n, exc: DataError(f"{path}:{n}: not JSON ({exc.msg})")):
        if not isinstance(row, dict):
            raise DataError(f"{path}:{n}: expected a JSON object per line")
        pid = row.get("problem_id", row.get("id"))
        if pid is None:
            raise DataError(f"{path}:{n}: no 'problem_id' or 'id'")
        answer: PlanJSON | str | None = None
        for key in _TEXT_KEYS:
            if isinstance(row.get(key), str):
                answer = row[key]
                break
        else:
            for key in _PLAN_KEYS:
                if key in row:
                    answer = row[key]
                    break
            else:
                raise DataError(f"{path}:{n}: no answer field (one of {', '.join(_TEXT_KEYS + _PLAN_KEYS)})")
        out[str(pid)] = answer
    return out


def _pct(k: int, n: int) -> str:
    return f"{100 * k / n:.2f}%" if n else "-"


def _cell_order(cell: str) -> tuple[int, ...]:
    return tuple(int(part.split("=")[1]) if part.split("=")[-1].isdigit() else 0 for part in cell.split())


# -- the tasks -------------------------------------------------------------------------------------


class TripPlanning(NaturalPlanBenchmark, task="trip"):
    """NATURAL PLAN Trip Planning (1,600 instances, 3-10 cities)."""

    description: ClassVar[str] = "NATURAL PLAN trip planning: order European cities with stays, flights and events"
    plan_model: ClassVar[type[BaseModel] | None] = trp.TripPlan
    critic_factories: ClassVar[tuple[CriticFactory, ...]] = TRIP_CRITICS
    cell_keys: ClassVar[tuple[str, ...]] = ("num_cities",)
    fields: ClassVar[tuple[str, ...]] = ("cities", "durations")
    #: Mind Evolution's split of the 1,600: the first 40 of each num_cities cell validate, the rest test
    VALIDATION_PER_CELL: ClassVar[int] = 40
    test_splits: ClassVar[tuple[str, ...]] = ("test",)

    def splits(self) -> list[str]:
        return [SPLIT_FULL, SPLIT_SUBSET, "validation", "test"]

    def file_split(self, split: str) -> str:
        return SPLIT_FULL if split in ("validation", "test") else split

    def _split_keys(self, split: str, raw: dict[str, dict[str, Any]]) -> list[str]:
        if split not in ("validation", "test"):
            return list(raw)
        seen: dict[str, int] = defaultdict(int)
        keys = []
        for key, item in raw.items():
            cell = str(item.get("num_cities"))
            first = seen[cell] < self.VALIDATION_PER_CELL
            seen[cell] += 1
            if first == (split == "validation"):
                keys.append(key)
        return keys

    def _read(self, key: str, item: dict[str, Any], prompt: str) -> tuple[dict[str, Any], dict[str, Any]]:
        constraints = trp.parse_trip_constraints(prompt)
        cities = [c for c in str(item["cities"]).split("**") if c]
        durations = [int(d) for d in str(item["durations"]).split("**") if d]
        return constraints, {
            "total_days": constraints["total_days"],
            "gold": item["golden_plan"],
            "gold_cities": cities,
            "gold_durations": durations,
            "gold_plan": trp.plan_from_sequence(cities, durations),
        }

    def check_format(self, problem: Problem, plan: PlanJSON) -> list[str]:
        return [
            f"the stay in {s['city']} ends on day {s['end_day']}, before it starts on day {s['start_day']}"
            for s in plan["stays"]
            if s["end_day"] < s["start_day"]
        ]

    def render(self, plan: PlanJSON, problem: Problem | None = None) -> str:
        total = problem.constraints.get("total_days") if problem is not None else None
        return trp.render_trip(plan, total)

    def _parse_text(self, text: str) -> PlanJSON:
        return trp.parse_trip(text)

    def official_solved(self, problem: Problem, text: str) -> bool:
        md = problem.metadata
        return trp.official_solved(text, list(md["gold_cities"]), list(md["gold_durations"]))

    def prove_unsolvable(self, problem: Problem) -> str | None:
        """An exhaustive search over city orders finds no plan that passes every critic."""
        if trp.solve_trip(problem.constraints, limit=1):
            return None
        c = problem.constraints
        return (
            f"No order of the {c['num_cities']} cities works: with the stated stay lengths, every order either "
            "uses a flight that is not listed (in that direction) or puts an event outside its city's stay "
            "(exhaustive search over city orders)."
        )

    def example_plan(self) -> PlanJSON:
        return {
            "stays": [
                {"city": "Lisbon", "start_day": 1, "end_day": 3},
                {"city": "Paris", "start_day": 3, "end_day": 7},
            ]
        }


class MeetingPlanning(NaturalPlanBenchmark, task="meeting"):
    """NATURAL PLAN Meeting Planning (1,000 instances, 1-10 people; 100 in the subset here)."""

    description: ClassVar[str] = "NATURAL PLAN meeting planning: meet as many friends in San Francisco as possible"
    plan_model: ClassVar[type[BaseModel] | None] = mtg.MeetingPlan
    critic_factories: ClassVar[tuple[CriticFactory, ...]] = MEETING_CRITICS
    cell_keys: ClassVar[tuple[str, ...]] = ("num_people",)
    fields: ClassVar[tuple[str, ...]] = ("constraints", "dist_matrix")
    #: the official reader keeps what follows the FIRST "SOLUTION:", and so does the parser
    answer_marker: ClassVar[str | None] = None

    def _read(self, key: str, item: dict[str, Any], prompt: str) -> tuple[dict[str, Any], dict[str, Any]]:
        constraints = mtg.parse_meeting_constraints(prompt)
        _cross_check_meeting(key, constraints, mtg.constraints_from_fields(item))
        gold = item["golden_plan"]
        gold_steps = list(gold) if isinstance(gold, list) else mtg.solution_steps(str(gold))
        gold_score = mtg.official_score(gold_steps, constraints)
        if gold_score.crashed:
            raise DataError(f"{self.name}: the golden plan of {key} does not simulate: {gold_score.reason}")
        return constraints, {
            "gold": gold,
            "gold_count": gold_score.score,
            "gold_plan": self._gold_plan(" ".join(gold_steps)),
        }

    def check_format(self, problem: Problem, plan: PlanJSON) -> list[str]:
        return [
            f"step {i + 1} is a 'start' step, which may only come first"
            for i, s in enumerate(plan["steps"])
            if s["action"] == "start" and i > 0
        ]

    def render(self, plan: PlanJSON, problem: Problem | None = None) -> str:
        return mtg.render_meeting(plan)

    def _parse_text(self, text: str) -> PlanJSON:
        return mtg.parse_meeting(text)

    def read_answer(self, problem: Problem, answer: PlanJSON | str | None) -> tuple[str | None, PlanJSON, str | None]:
        """As for every task, and a list of step sentences (the golden answers' format, e.g. ``--predictions
        golden_plan``) is the text of those sentences in order, as a plan JSON it would be refused."""
        if isinstance(answer, list) and answer and all(isinstance(step, str) for step in answer):
            answer = " ".join(answer)
        return super().read_answer(problem, answer)

    def official_solved(self, problem: Problem, text: str) -> bool:
        result = mtg.official_score(mtg.solution_steps(text), problem.constraints)
        return not result.crashed and result.score == int(problem.metadata["gold_count"])

    def example_plan(self) -> PlanJSON:
        return {
            "steps": [
                {"action": "start", "location": "Nob Hill", "time": "9:00AM"},
                {"action": "travel", "destination": "Marina District", "minutes": 11, "arrival": "9:11AM"},
                {"action": "wait", "until": "10:00AM"},
                {"action": "meet", "person": "Alex", "minutes": 60, "start": "10:00AM", "end": "11:00AM"},
            ]
        }


def _cross_check_meeting(key: str, parsed: dict[str, Any], fields: dict[str, Any]) -> None:
    same = (
        parsed["start_location"] == fields["start_location"]
        and parsed["start_time"] == fields["start_time"]
        and parsed["distances"] == fields["distances"]
        and {p["name"]: (p["location"], p["start"], p["end"], p["min_minutes"]) for p in parsed["people"]}
        == {p["name"]: (p["location"], p["start"], p["end"], p["min_minutes"]) for p in fields["people"]}
    )
    if not same:
        raise DataError(f"natural_plan/meeting: {key}: the prompt text and the constraints/dist_matrix fields disagree")


class CalendarScheduling(NaturalPlanBenchmark, task="calendar"):
    """NATURAL PLAN Calendar Scheduling (1,000 instances; 100 in the subset here)."""

    description: ClassVar[str] = "NATURAL PLAN calendar scheduling: one meeting slot that fits every calendar"
    plan_model: ClassVar[type[BaseModel] | None] = cal.CalendarSlot
    critic_factories: ClassVar[tuple[CriticFactory, ...]] = CALENDAR_CRITICS
    cell_keys: ClassVar[tuple[str, ...]] = ("num_people", "num_days")
    fields: ClassVar[tuple[str, ...]] = ("duration",)

    def _read(self, key: str, item: dict[str, Any], prompt: str) -> tuple[dict[str, Any], dict[str, Any]]:
        constraints = cal.parse_calendar_constraints(prompt)
        gold = str(item["golden_plan"])
        return constraints, {
            "duration_hours": str(item["duration"]),
            "gold": gold,
            "gold_plan": self._gold_plan(gold),
        }

    def render(self, plan: PlanJSON, problem: Problem | None = None) -> str:
        return cal.render_calendar(plan)

    def _parse_text(self, text: str) -> PlanJSON:
        return cal.parse_calendar(text)

    def official_solved(self, problem: Problem, text: str) -> bool:
        return cal.official_solved(text, str(problem.metadata["gold"]))

    def prove_unsolvable(self, problem: Problem) -> str | None:
        """No start time on any allowed day fits the busy blocks, work hours and preferences."""
        if cal.earliest_slot(problem.constraints) is not None:
            return None
        c = problem.constraints
        return (
            f"No {c['duration']}-minute slot on {', '.join(c['days'])} within the work hours is free for everyone "
            "and respects every stated preference (every candidate start time was checked)."
        )

    def example_plan(self) -> PlanJSON:
        return {"day": "Tuesday", "start": "10:30", "end": "11:00"}


BENCHMARKS: dict[str, type[NaturalPlanBenchmark]] = {
    "trip": TripPlanning,
    "meeting": MeetingPlanning,
    "calendar": CalendarScheduling,
}
