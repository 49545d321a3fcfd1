"""The TravelPlanner benchmark (sole-planning): problems, plan schema, prompts, parser and evaluator."""

from __future__ import annotations

import json
import operator
import os
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, TextIO

import click
from pydantic import BaseModel, ConfigDict, Field, RootModel

from modulo import settings
from modulo.benchmark import (
    Benchmark,
    ConstraintInfo,
    DataReport,
    EvalResult,
    FinalPlan,
    GateCase,
    MetricSpec,
    PerProblem,
    PlanTable,
    frozen_data,
)
from modulo.errors import ConfigError, DataError
from modulo.types import PlanJSON, Problem, ProblemUpdate, canonical_json, json_lines

from . import data as tpdata
from .checks import DAY_FIELDS
from .critics import ALL_CRITICS, official_key_of
from .derive import DERIVE_VERSION, derive_reference
from .evaluate import (
    METRIC_KEYS,
    MODES,
    OFFICIAL_METRIC_NAMES,
    PlanEvaluation,
    evaluate_plan,
    official_split_of,
    summarise,
)
from .planformat import parse_text, plan_rows, render_text
from .store import FULL_FLIGHTS, BoundedMemo, Sources, Store
from .tools import TravelPlannerTools


class Day(BaseModel):
    """One day of a TravelPlanner plan, with the official keys."""

    model_config = ConfigDict(extra="forbid")

    days: int = Field(description="the day number, 1 for the first day")
    current_city: str = Field(description="'from <city> to <city>' on a travel day, else the city of the day")
    transportation: str = Field(
        description="'Flight Number: F..., from A to B, Departure Time: hh:mm, Arrival Time: hh:mm', "
        "'Self-driving, from A to B, ...', 'Taxi, from A to B, ...', or '-'"
    )
    breakfast: str = Field(description="'<restaurant name>, <city>' or '-'")
    attraction: str = Field(description="'<name>, <city>;' for each attraction, each ending with ';', or '-'")
    lunch: str = Field(description="'<restaurant name>, <city>' or '-'")
    dinner: str = Field(description="'<restaurant name>, <city>' or '-'")
    accommodation: str = Field(description="'<accommodation name>, <city>' or '-' (on the last day)")


class Plan(RootModel[list[Day]]):
    """A TravelPlanner plan: one object per day of the trip."""


_DAY_KEYS = frozenset(DAY_FIELDS)
_TEXT_FIELDS = DAY_FIELDS[1:]
_TEXTS_OF = operator.itemgetter(*_TEXT_FIELDS)
_ONLY_STR = frozenset({str})
#: a day number this size or smaller is written and read back by every JSON step of the validation
_SAFE_INT = 10**15


def _plain_plan(value: Any) -> bool:
    """Whether ``value`` is, at first sight, a plan that :class:`Plan` takes as it is: a list of dicts,
    each with exactly the 8 official keys, an ``int`` day number of ordinary size and 7 ``str`` values.
    Such a plan passes the schema and the model unchanged; anything else (False) is left to them."""
    if type(value) is not list:
        return False
    for day in value:
        if type(day) is not dict or day.keys() != _DAY_KEYS:
            return False
        number = day["days"]
        if type(number) is not int or not -_SAFE_INT <= number <= _SAFE_INT:
            return False
        if not _ONLY_STR.issuperset(map(type, _TEXTS_OF(day))):
            return False
    return True


_METRICS = (
    MetricSpec("delivery_rate", "Delivery rate", description="plans delivered (non-empty) over all queries"),
    MetricSpec("commonsense_micro", "Commonsense micro", description="passed commonsense checks / 8N"),
    MetricSpec("commonsense_macro", "Commonsense macro", description="plans passing every commonsense check / N"),
    MetricSpec("hard_micro", "Hard micro", description="passed hard checks / applicable hard constraints"),
    MetricSpec("hard_macro", "Hard macro", description="plans passing every applicable hard check / N"),
    MetricSpec("final_pass_rate", "Final pass rate", description="plans passing every check / N"),
)


#: no official check known to pass
_NONE: frozenset[str] = frozenset()

#: how many plan evaluations a benchmark keeps for the next evaluation of the same problem and plan
EVALUATIONS_KEPT = 2048

#: the TravelPlanner paper's greedy-search figures on validation (also quoted by the LLM-Modulo paper)
PAPER_GREEDY_VALIDATION = {
    "delivery_rate": 1.0,
    "commonsense_micro": 0.744,
    "commonsense_macro": 0.0,
    "hard_micro": 0.608,
    "hard_macro": 0.378,
    "final_pass_rate": 0.0,
}


PAPER_GREEDY_LABEL = "TravelPlanner paper, greedy, all 180 queries, official reference information"


class TravelPlanner(Benchmark):
    """TravelPlanner sole-planning (Xie et al., 2024): plan a trip from the given reference information.

    ``data_dir`` is the data folder holding ``travelplanner/`` (default: ``modulo.settings.data_dir()``);
    the database store goes under ``store_dir`` (default: ``modulo.settings.cache_dir()``); ``flights_csv``
    replaces the flights table (for example a full-size one).
    """

    name: ClassVar[str] = "travelplanner"
    description: ClassVar[str] = (
        "TravelPlanner sole-planning: multi-day travel plans under commonsense and hard constraints"
    )
    plan_model: ClassVar[type[BaseModel] | None] = Plan
    prompts: ClassVar[dict[str, str]] = {
        "direct": "travelplanner/direct",
        "cot": "travelplanner/cot",
        "json": "travelplanner/json",
        "reformulate": "travelplanner/reformulate",
    }
    metrics: ClassVar[tuple[MetricSpec, ...]] = _METRICS
    submission_formats: ClassVar[tuple[str, ...]] = ("travelplanner-submission",)
    primary_metric: ClassVar[str] = "final_pass_rate"
    test_splits: ClassVar[tuple[str, ...]] = ("test",)
    quick_format: ClassVar[bool] = True  # the schema check and check_format: microseconds, in memory

    #: where ``data_download`` fetches the splits (the Hugging Face dataset's CSV files)
    HF_URL: ClassVar[str] = "https://huggingface.co/datasets/osunlp/TravelPlanner/resolve/main/{split}.csv"

    def __init__(
        self,
        data_dir: Path | None = None,
        *,
        store_dir: Path | None = None,
        flights_csv: Path | None = None,
        database_url: str | None = None,
    ) -> None:
        super().__init__(settings.data_dir(data_dir))
        assert self.data_dir is not None
        self.root = tpdata.split_root(self.data_dir)
        self._store_dir = store_dir
        self._flights_csv = Path(flights_csv) if flights_csv else None
        self.database_url = database_url
        self._store: Store | None = None
        self._lock = threading.Lock()
        self._loaded: dict[str, list[Problem]] = {}
        self._critic_queries: PerProblem[Mapping[str, Any]] = PerProblem(lambda p: frozen_data(self.query_of(p)))
        self._last_query: tuple[Problem | None, Mapping[str, Any]] = (None, {})
        #: the last plans evaluated: (problem object, mode) -> (the problem, the plan's text, its evaluation)
        self._evaluations = BoundedMemo(EVALUATIONS_KEPT)

    # -- data ------------------------------------------------------------------------------------------
    @property
    def sources(self) -> Sources:
        return Sources.from_database_dir(self.root / "database", flights=self._flights_csv)

    @property
    def store(self) -> Store:
        """The database store (built on first use, rebuilt when a source file changes)."""
        if self._store is None:
            with self._lock:
                if self._store is None:
                    self._store = Store.open(self.sources, settings.cache_dir(self._store_dir))
        return self._store

    def tools(self) -> TravelPlannerTools:
        """The six official tools over the store (``modulo tools travelplanner ...``)."""
        return TravelPlannerTools(self.store)

    def splits(self) -> list[str]:
        return list(tpdata.SPLIT_FILES)

    def published_rows(self, split: str, generator: str) -> list[tuple[str, dict[str, float]]]:
        """The TravelPlanner paper's greedy-search row on the 180 validation queries (its Table 3). The console
        prints it only beside a run over the whole split (not one of ``benchmark.limit`` or ``ids``), whose 51
        easy rows carry derived reference information, so its label says what it is over."""
        if split == "validation" and generator == "greedy":
            return [(PAPER_GREEDY_LABEL, dict(PAPER_GREEDY_VALIDATION))]
        return []

    def load(self, split: str) -> list[Problem]:
        if split not in self._loaded:
            problems = tpdata.load_split(self.root, split)
            if any(not p.context for p in problems) and self.sources.missing() == []:
                problems = self._with_derived_reference(problems)
            self._loaded[split] = problems
        return list(self._loaded[split])

    def _with_derived_reference(self, problems: list[Problem]) -> list[Problem]:
        """Rows without reference information get one derived with the tools (see :mod:`.derive`),
        marked ``metadata['derived'] = True`` with the cities chosen. Cached beside the store."""
        cache = self.store.path.with_name(f"derived-reference-{self.store.fingerprint}-v{DERIVE_VERSION}.json")
        derived: dict[str, Any] = {}
        if cache.is_file():
            try:
                derived = json.loads(cache.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                derived = {}
        tools = self.tools()
        changed = False
        out = []
        for p in problems:
            if p.context:
                out.append(p)
                continue
            key = f"{p.id}:{tpdata.query_key(p.constraints)}"
            if key not in derived:
                entries, cities = derive_reference(tools, p.constraints)
                derived[key] = {"context": str(entries), "cities": cities}
                changed = True
            meta = {**p.metadata, "derived": True, "derived_cities": derived[key]["cities"]}
            out.append(p.model_copy(update={"context": derived[key]["context"], "metadata": meta}))
        if changed:
            tmp = cache.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(derived), encoding="utf-8")
            tmp.replace(cache)
        return out

    def apply_update(self, problem: Problem, update: ProblemUpdate) -> Problem:
        """A budget or a local constraint changed mid-loop (see :mod:`.updates`); the critics and the
        official evaluator read the new structured query."""
        from .updates import updated_problem

        return updated_problem(problem, update)

    def query_of(self, problem: Problem) -> dict[str, Any]:
        """The structured query the checks read (validated): a new dict, the caller's to change."""
        return tpdata.structured_query(problem.constraints, f"problem {problem.id}")

    def critic_query(self, problem: Problem) -> Mapping[str, Any]:
        """:meth:`query_of`, read-only, parsed once per problem object and shared by every critic call."""
        last = self._last_query  # the critics of a batch ask for the same problem one after another
        if last[0] is problem:
            return last[1]
        query = self._critic_queries(problem)
        self._last_query = (problem, query)  # one assignment: another thread reads the old pair or this one
        return query

    # -- plans -----------------------------------------------------------------------------------------
    def plan_error(self, value: Any) -> str | None:
        """:meth:`Benchmark.plan_error`, answered at once (None) for a plan of plain days that the schema
        and the model take as they are (the usual case, on every iteration: no JSON encoding of the plan)."""
        if self._taken_as_is(value):
            return None
        return super().plan_error(value)

    def checked_plan(self, value: Any, key: str | None = None) -> tuple[PlanJSON, str]:
        """:meth:`Benchmark.checked_plan`, answered at once for a plan of plain days (the usual case, on every
        iteration): the model would return the same days with their keys in the model's order, and their
        canonical text is the one of ``value`` (``key`` when given). Anything else goes to the model."""
        if self._taken_as_is(value):
            # each day a new dict with the fields in the model's order (a copy when they are in it already)
            plan = [dict(day) if tuple(day) == DAY_FIELDS else {f: day[f] for f in DAY_FIELDS} for day in value]
            return plan, key if key is not None else canonical_json(plan)
        return super().checked_plan(value, key)

    def _taken_as_is(self, value: Any) -> bool:
        """Whether ``value`` is a plan of plain days (:func:`_plain_plan`) that this benchmark's own model
        validates: then the fast answers of :meth:`plan_error` and :meth:`checked_plan` apply."""
        return self.plan_model is Plan and not self._validation_replaced() and _plain_plan(value)

    def _validation_replaced(self) -> bool:
        """A subclass or an instance changed how plans are validated: the fast answer does not apply."""
        return type(self).validate_plan is not Benchmark.validate_plan or "validate_plan" in self.__dict__

    def check_format(self, problem: Problem, plan: PlanJSON) -> list[str]:
        issues: list[str] = []
        days = problem.constraints.get("days")
        if not isinstance(plan, list):
            return [f"the plan must be a list of day objects, not {type(plan).__name__}"]
        if isinstance(days, int) and len(plan) != days:
            issues.append(f"the trip has {days} days but the plan has {len(plan)} day objects")
        if _plain_plan(plan):  # the usual case: every day has its keys and text values; only the numbers to check
            return issues + [
                f"day {i} is numbered {day['days']!r}" for i, day in enumerate(plan, 1) if day["days"] != i
            ]
        for i, day in enumerate(plan, start=1):
            if not isinstance(day, dict):
                issues.append(f"day {i} is not an object")
                continue
            if not day.keys() >= _DAY_KEYS:
                missing = [k for k in DAY_FIELDS if k not in day]
                issues.append(f"day {i} lacks {', '.join(missing)}")
            bad = [k for k in _TEXT_FIELDS if k in day and not isinstance(day[k], str)]
            if bad:
                issues.append(f"day {i}: {', '.join(bad)} must be text")
            if "days" in day and day["days"] != i:
                issues.append(f"day {i} is numbered {day['days']!r}")
        return issues

    def parse(self, text: str, problem: Problem) -> PlanJSON:
        days = problem.constraints.get("days")
        return parse_text(text, days if isinstance(days, int) else None)

    def render_plan(self, plan: PlanJSON) -> str:
        return render_text(plan)

    def plan_table(self, plan: PlanJSON) -> PlanTable | None:
        """Day by day: one row per day, one column per field (the paper's layout)."""
        table = plan_rows(plan)
        return PlanTable(*table) if table is not None else None

    # -- prompts ---------------------------------------------------------------------------------------
    def check_plannable(self, problems: Sequence[Problem]) -> None:
        """Sole planning needs the reference information: name the rows that lack it."""
        tpdata.require_reference(list(problems))

    def prompt_variables(self, problem: Problem) -> dict[str, Any]:
        """``query``, ``context`` (the reference information) and the structured fields.

        Raises DataError for a problem without reference information: sole-planning needs it.
        """
        tpdata.require_reference([problem])
        c = problem.constraints
        return {
            "query": problem.query,
            "context": problem.context,
            "days": c.get("days"),
            "org": c.get("org"),
            "dest": c.get("dest"),
            "dates": c.get("date"),
            "people_number": c.get("people_number"),
            "budget": c.get("budget"),
        }

    # -- critics and evaluation ------------------------------------------------------------------------
    def critic_names(self) -> list[str]:
        return ["format", *ALL_CRITICS]

    def evaluate(
        self, problems: Sequence[Problem], plans: Sequence[PlanJSON | None], *, mode: str = "official"
    ) -> EvalResult:
        """The official figures for ``plans`` (None = not delivered), aligned with ``problems``."""
        if len(problems) != len(plans):
            raise ConfigError(f"evaluate: {len(problems)} problems but {len(plans)} plans")
        if mode not in MODES:
            raise ConfigError(f"evaluate: mode must be one of {list(MODES)}, not {mode!r}")
        return self._scored([(p, plan, _NONE) for p, plan in zip(problems, plans, strict=True)], mode)

    def evaluate_final(self, finals: Iterable[FinalPlan]) -> EvalResult:
        """:meth:`evaluate` of a run's final plans (official mode), where a check that one of this
        benchmark's critics passed on the very same plan and problem (:attr:`FinalPlan.passed_by`) is not
        run again: a critic in official mode passes exactly when the official check does, and one in strict
        mode holds every plan its sound reading passes to the official check too (``strict._guarded``),
        so either pass means the official check answers True where the query states the constraint (and
        None where it does not, which the check itself answers from the query at once). Only critics
        registered under their names by this package count. The figures and rows are those of
        :meth:`evaluate` (``tests/travelplanner/test_benchmark.py`` checks it on runs)."""
        own: dict[str, str | None] = {}

        def passing(names: frozenset[str]) -> frozenset[str]:
            if not names:
                return _NONE
            for name in names - own.keys():
                own[name] = official_key_of(name)
            return frozenset(key for name in names if (key := own[name]) is not None)

        return self._scored([(f.problem, f.plan, passing(f.passed_by)) for f in finals], "official")

    def _scored(self, items: list[tuple[Problem, PlanJSON | None, frozenset[str]]], mode: str) -> EvalResult:
        """The figures, rows and tables of (problem, plan, official keys known to pass) items."""
        evaluations = [self._evaluation(p, plan, mode, passing) for p, plan, passing in items]
        problems = [p for p, _, _ in items]
        splits = {str(p.metadata.get("split")) for p in problems}
        distinct = len({p.id for p in problems}) == len(problems)
        split = official_split_of(splits, len(problems)) if distinct else None
        summary = summarise(evaluations, split=split)
        rows = [ev.row() for ev in evaluations]
        for row, p in zip(rows, problems, strict=True):
            row["derived"] = bool(p.metadata.get("derived"))  # reference information derived, not official
        return EvalResult(metrics=summary.metrics, per_problem=rows, tables=summary.tables)

    def _evaluation(
        self, problem: Problem, plan: PlanJSON | None, mode: str, passing: frozenset[str] = frozenset()
    ) -> PlanEvaluation:
        """:func:`evaluate_plan` of ``plan`` for ``problem`` (read as the critics read it; the official checks
        in ``passing`` known to pass). The last evaluations are kept (a bounded number, by the problem
        object and the mode, with a copy of the plan, for plans of plain days: equal plain plans are
        identical): a run's summary evaluates the delivered plans and then, where some problem's first plan
        is not its delivered one, every first plan, which is mostly the same plan again."""
        plain = _plain_plan(plan)
        key = (id(problem), mode)
        kept = self._evaluations.get(key)
        if plain and kept is not None and kept[0] is problem and kept[1] == plan:
            found: PlanEvaluation = kept[2]  # never changed once made: the rows and figures are made afresh
            return found
        ev = evaluate_plan(
            self.critic_query(problem),
            plan,
            self.store,
            mode=mode,
            id=problem.id,
            idx=problem.metadata.get("idx"),
            passing=passing,
        )
        if plain:
            assert isinstance(plan, list)
            self._evaluations.put(key, (problem, [dict(day) for day in plan], ev))  # its days' values: immutable
        return ev

    def evaluate_command(self) -> click.Command:
        return evaluate_command(self)

    def write_submission(
        self, fmt: str, problems: Sequence[Problem], plans: Mapping[str, PlanJSON | None], out: Path
    ) -> int:
        """``travelplanner-submission``: the official submission JSONL, one ``{"idx", "query", "plan"}`` line
        per problem of the split in order, ``"plan": []`` (not delivered) where there is no plan."""
        if fmt not in self.submission_formats:
            return super().write_submission(fmt, problems, plans, out)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
        with tmp.open("w", encoding="utf-8") as handle:
            for p in problems:
                plan = plans.get(p.id)
                line = {"idx": p.metadata["idx"], "query": p.query, "plan": plan if plan is not None else []}
                handle.write(json.dumps(line, ensure_ascii=False) + "\n")
        tmp.replace(out)
        return len(problems)

    def extraction_constraints(self) -> list[ConstraintInfo]:
        """One constraint per critic (``modulo critics extract travelplanner``)."""
        from .extract import extraction_constraints

        return extraction_constraints(self)

    def critic_view(self, problem: Problem) -> dict[str, Any]:
        """The query, its structured form and the reference information the planner was given."""
        from .extract import critic_view

        return critic_view(problem)

    def gate_cases(self, constraint: str, *, problems: int, seed: int) -> list[GateCase]:
        """Golden plans labelled by the official verdicts (see :mod:`critics.travelplanner.extract`)."""
        from .extract import gate_cases

        return gate_cases(self, constraint, problems=problems, seed=seed)

    def audit_command(self) -> click.Command:
        """``modulo critics audit travelplanner [...]``: the critics against the golden official verdicts."""
        from .audit import audit_command

        return audit_command(self)

    def fuzz_cases(self, n: int) -> list[tuple[Problem, PlanJSON]]:
        """Validation problems, each with a golden plan (the official evaluator's example plans)."""
        from .audit import golden_plans

        return golden_plans(self, n)

    # -- data commands ---------------------------------------------------------------------------------
    def data_check(self) -> DataReport:
        lines: list[str] = [f"travelplanner data folder: {self.root}"]
        ok = True
        for split, size in (("train", 45), ("validation", 180)):
            path = self.root / f"{split}.jsonl"
            if not path.is_file():
                ok = False
                lines.append(f"MISSING {path}: the {split} split cannot be loaded or evaluated")
                continue
            try:
                problems = self.load(split)
            except DataError as exc:
                ok = False
                lines.append(f"BAD {path}: {exc}")
                continue
            with_ref = sum(1 for p in problems if p.metadata["has_reference"])
            lines.append(
                f"ok {path.name}: {len(problems)} rows (expected {size}), {with_ref} with reference information"
            )
            if split == "validation" and with_ref < len(problems):
                derived = sum(1 for p in problems if p.metadata.get("derived"))
                lines.append(
                    f"   {len(problems) - with_ref} validation rows have no official reference information: "
                    f"{derived} of them carry one derived with the tools (marked 'derived'); 'validation-ref' "
                    f"is the {with_ref} untouched rows"
                )
        missing = self.sources.missing()
        if missing:
            ok = False
            lines += [f"MISSING {p}" for p in missing]
            lines.append("   without the database no plan can be checked or evaluated")
        else:
            try:
                store = self.store
            except DataError as exc:
                return DataReport(ok=False, lines=[*lines, f"BAD database: {exc}"])
            lines.append(f"ok database store {store.path}: " + ", ".join(f"{k} {v}" for k, v in store.counts.items()))
            flights = Path(store.sources.get("flights", ""))
            if flights.name == FULL_FLIGHTS:
                lines.append(f"ok flights: the full table {flights.name}")
            else:
                lines.append(
                    f"PARTIAL flights: {flights.name} ({store.counts.get('flights', 0)} rows) stands in for "
                    f"the 3.8M-row {FULL_FLIGHTS}. The official sandbox check ignores the date, so a real "
                    "flight missing here is judged 'not in the sandbox'. Figures are exact for sole-planning "
                    "on train and validation-ref (every flight of their reference information is present) "
                    "and for the golden verdicts, but may be too low for plans on the 51 derived easy "
                    "validation queries or from two-stage agents."
                )
        if not (self.root / "test.jsonl").is_file():
            lines.append("absent test split: test-set figures need the official leaderboard")
        return DataReport(ok=ok, lines=lines)

    def data_download(self) -> DataReport:
        """Fetch the official splits (Hugging Face) and database archive, then check them."""
        self.root.mkdir(parents=True, exist_ok=True)
        lines: list[str] = []
        for split in ("train", "validation"):
            url = self.HF_URL.format(split=split)
            content = _fetch(
                url,
                30.0,
                f"the TravelPlanner {split} split",
                f". Without a network, copy train.jsonl, validation.jsonl and database/ into {self.root} "
                "by hand and run `modulo data check travelplanner`.",
            )
            written = _hf_csv_to_jsonl(content, self.root / f"{split}.jsonl")
            if written != tpdata.SPLIT_SIZES[split]:
                raise DataError(
                    f"the downloaded {split} split has {written} rows, not {tpdata.SPLIT_SIZES[split]}: {url}"
                )
            lines.append(f"downloaded {split}: {written} rows from {url}")
        archive_url = self.database_url
        if not archive_url:
            raise DataError(
                "the TravelPlanner database archive has no fixed download address (the official one is a Google Drive "
                "link in the OSU-NLP-Group/TravelPlanner README): download and unzip it into "
                f"{self.root / 'database'}, or pass database_url=..., then run `modulo data check travelplanner`."
            )
        _unzip_database(_fetch(archive_url, 120.0, "the database archive"), self.root)
        report = self.data_check()
        return DataReport(ok=report.ok, lines=lines + report.lines)


def _fetch(url: str, timeout: float, what: str, hint: str = "") -> bytes:
    """The body at ``url``; a DataError naming ``what`` (then ``hint``) when it cannot be downloaded."""
    import httpx

    try:
        response = httpx.get(url, timeout=timeout, follow_redirects=True)
        response.raise_for_status()
    except httpx.HTTPError as exc:
        raise DataError(f"cannot download {what} from {url} ({type(exc).__name__}: {exc}){hint}") from None
    return response.content


def _hf_csv_to_jsonl(content: bytes, target: Path) -> int:
    """The HF CSV (string fields kept) as our JSONL layout, ``idx`` from 1."""
    import io

    import pandas as pd

    try:
        frame = pd.read_csv(io.BytesIO(content), keep_default_na=False)
    except ValueError as exc:
        raise DataError(f"the downloaded file is not the TravelPlanner CSV ({exc})") from None
    rows = []
    for i, record in enumerate(frame.to_dict("records"), start=1):
        row = {"idx": i, **{str(k): v for k, v in record.items() if not str(k).startswith("Unnamed")}}
        for key in ("days", "visiting_city_number", "people_number", "budget"):
            if key in row and row[key] != "":
                row[key] = int(row[key])
        for key in ("reference_information", "annotated_plan"):
            if row.get(key) == "":
                row[key] = None
        tpdata.structured_query(row, f"{target.name} row {i}")
        rows.append(row)
    target.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return len(rows)


def _unzip_database(content: bytes, root: Path) -> None:
    import io
    import zipfile

    try:
        with zipfile.ZipFile(io.BytesIO(content)) as archive:
            for member in archive.namelist():
                parts = Path(member).parts
                if "database" not in parts or ".." in parts:
                    continue
                rel = Path(*parts[parts.index("database") :])
                if member.endswith("/"):
                    (root / rel).mkdir(parents=True, exist_ok=True)
                    continue
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                (root / rel).write_bytes(archive.read(member))
    except zipfile.BadZipFile as exc:
        raise DataError(f"the database archive is not a zip file ({exc})") from None


# -- the evaluate command --------------------------------------------------------------------------------
def evaluate_command(benchmark: TravelPlanner) -> click.Command:
    """``modulo evaluate travelplanner PLANS [OPTIONS]``."""

    @click.command(
        help="Score TravelPlanner plans as the official eval.py does. PLANS is JSONL, one object per line with "
        "'idx' (1-based query index) and 'plan'. Lines may also carry 'id' and their own structured 'query' "
        "(corpus mode: any number of plans per query)."
    )
    @click.argument("plans", type=click.Path(path_type=Path))
    @click.option(
        "--split",
        type=click.Choice(["train", "validation", "validation-ref"]),
        default="validation",
        show_default=True,
        help="query split (validation-ref: the 129 rows with official reference information; figures over them "
        "use denominators computed from their queries, as a run on that split does)",
    )
    @click.option(
        "--mode",
        type=click.Choice(list(MODES)),
        default="official",
        show_default=True,
        help="official (bug for bug) or strict",
    )
    @click.option("--json", "as_json", is_flag=True, help="print the six figures as JSON fractions")
    @click.option(
        "--per-plan",
        type=click.Path(path_type=Path),
        default=None,
        metavar="OUT",
        help="write per-plan verdicts (JSONL)",
    )
    def evaluate(plans: Path, split: str, mode: str, as_json: bool, per_plan: Path | None) -> None:
        evaluate_file(benchmark, plans, split=split, mode=mode, as_json=as_json, per_plan=per_plan, out=sys.stdout)

    return evaluate


#: the note of a query of the split that the plans file has no line for
_NO_LINE = "no line"


def _read_lines(path: Path) -> list[tuple[int, dict[str, Any]]]:
    if not path.is_file():
        raise DataError(f"plans file {path} does not exist")
    out = []
    with path.open(encoding="utf-8") as handle:
        for lineno, value in json_lines(
            handle, lambda n, exc: DataError(f"{path.name} line {n}: not valid JSON ({exc})")
        ):
            if isinstance(value, str):  # eval.py accepts a line holding a Python-literal string
                value = tpdata.literal(value, f"{path.name} line {lineno}")
            if not isinstance(value, dict):
                raise DataError(f"{path.name} line {lineno}: expected a JSON object, got {type(value).__name__}")
            out.append((lineno, value))
    return out


def _line_idx(line: dict[str, Any], position: int, where: str) -> int:
    idx = line.get("idx", line.get("query_idx", position))
    if isinstance(idx, bool) or not isinstance(idx, int):
        raise DataError(f"{where}: 'idx' must be an integer, got {idx!r}")
    return idx


def collect(
    benchmark: TravelPlanner, path: Path, split: str, mode: str
) -> tuple[list[PlanEvaluation], list[tuple[dict[str, Any], PlanEvaluation]], str | None]:
    """Evaluate a plans file. Returns (evaluations to aggregate, (line, evaluation) per input line, split).

    Submission mode (each idx at most once, no line with its own query): the N queries of the split,
    those without a line undelivered, official denominators. Corpus mode: one evaluation per line.
    """
    lines = _read_lines(path)
    rows: dict[str, dict[int, Problem]] = {}

    def row(line_split: str, idx: int, where: str) -> Problem:
        if line_split not in rows:
            rows[line_split] = {int(p.metadata["idx"]): p for p in benchmark.load(line_split)}
        if idx not in rows[line_split]:
            raise DataError(f"{where}: idx {idx} is not a query of the {line_split} split")
        return rows[line_split][idx]

    parsed = []
    for position, (lineno, line) in enumerate(lines, start=1):
        where = f"{path.name} line {lineno}"
        idx = _line_idx(line, position, where)
        own = line.get("query") if isinstance(line.get("query"), dict) else None
        line_split = str(line.get("split") or split)
        if line_split not in ("train", "validation", "validation-ref"):
            raise DataError(f"{where}: unknown split {line_split!r}")
        parsed.append((where, idx, own, line_split, line))
    idxs = [idx for _, idx, _, _, _ in parsed]
    named = any(own is not None or "id" in line or "plan_id" in line for _, _, own, _, line in parsed)
    if not named and len(set(idxs)) != len(idxs):
        # a submission holds each query once: a repeat is a mistake (two files joined), not a corpus
        first: dict[int, int] = {}
        for (lineno, _), idx in zip(lines, idxs, strict=True):
            if idx in first:
                raise DataError(
                    f"{path.name}: idx {idx} is on lines {first[idx]} and {lineno}; a submission has one line "
                    "per query (to score several plans of a query, give each line an 'id': corpus mode)"
                )
            first[idx] = lineno
    corpus = any(own is not None for _, _, own, _, _ in parsed) or len(set(idxs)) != len(idxs)
    corpus = corpus or any(ls != split for _, _, _, ls, _ in parsed)

    per_line: list[tuple[dict[str, Any], PlanEvaluation]] = []
    for where, idx, own, line_split, line in parsed:
        if own is not None:
            query = tpdata.structured_query(own, f"{where}: query")
            query["level"] = query.get("level") or row(line_split, idx, where).constraints.get("level")
        else:
            query = benchmark.query_of(row(line_split, idx, where))
        ident = line.get("id", line.get("plan_id")) or f"{line_split}-{idx}"
        note = None if "plan" in line else "the line has no 'plan' (eval.py would crash): counted as not delivered"
        ev = evaluate_plan(query, line.get("plan"), benchmark.store, mode=mode, id=str(ident), idx=idx, note=note)
        per_line.append((line, ev))
    if corpus:
        return [ev for _, ev in per_line], per_line, None
    by_idx = {ev.idx: ev for _, ev in per_line}
    evaluations = []
    for problem in benchmark.load(split):
        idx = int(problem.metadata["idx"])
        if idx in by_idx:
            evaluations.append(by_idx[idx])
        else:
            evaluations.append(
                PlanEvaluation(
                    id=problem.id, query=benchmark.query_of(problem), delivered=False, idx=idx, note=_NO_LINE
                )
            )
    # the official denominators for a whole official split (as a run's own evaluation), else computed ones
    return evaluations, per_line, official_split_of({split}, len(evaluations))


def _print_report(out: TextIO, metrics: dict[str, float], summary: Any, *, mode: str, n_lines: int) -> None:
    n, cs_total, hard_total = summary.denominators
    out.write(
        f"TravelPlanner evaluation ({mode} mode): {n_lines} plan line(s), N = {n} ({summary.denominator_source})\n"
    )
    for key in METRIC_KEYS:
        out.write(f"{OFFICIAL_METRIC_NAMES[key]}: {metrics[key] * 100:.2f}%\n")
    out.write(f"(commonsense total {cs_total}, hard total {hard_total})\n\nper constraint:\n")
    for row in summary.tables["per_constraint"]:
        out.write(
            f"  {row['name']:<26} true {row['true']:>5}  false {row['false']:>5}  error {row['error']:>4}  "
            f"n/a {row['not_applicable']:>5}  not evaluated {row['not_evaluated']:>5}\n"
        )


def _unscored_input(
    evaluations: list[PlanEvaluation], per_line: list[tuple[dict[str, Any], PlanEvaluation]]
) -> list[str]:
    """What the figures count as not delivered although the file never gave a plan for it, where eval.py
    would stop: lines without a 'plan' key (a misspelt key scores a whole submission 0%), and queries of
    the split without a line."""

    def shown(items: list[str]) -> str:
        return ", ".join(items[:5]) + (f" and {len(items) - 5} more" if len(items) > 5 else "")

    out = []
    keyless = [ev.id for line, ev in per_line if "plan" not in line]
    if keyless:
        out.append(
            f"{len(keyless)} of {len(per_line)} line(s) have no 'plan' key ({shown(keyless)}): counted as not "
            "delivered (eval.py stops with a KeyError)"
        )
    absent = [ev.id for ev in evaluations if ev.note == _NO_LINE]
    if absent:
        out.append(
            f"{len(absent)} of {len(evaluations)} queries have no line ({shown(absent)}): counted as not delivered "
            "(eval.py stops with an IndexError)"
        )
    return out


def evaluate_file(
    benchmark: TravelPlanner, plans: Path, *, split: str, mode: str, as_json: bool, per_plan: Path | None, out: TextIO
) -> None:
    """Score the plans file ``plans`` (``modulo evaluate travelplanner``) and print the figures to ``out``;
    write per-plan verdicts to ``per_plan``. Bad input raises a DataError. Input eval.py would stop on but
    that is scored (lines without a 'plan', queries without a line: not delivered) is named on stderr."""
    evaluations, per_line, official = collect(benchmark, plans, split, mode)
    for warning in _unscored_input(evaluations, per_line):
        sys.stderr.write(f"warning: {warning}\n")
    summary = summarise(evaluations, split=official)
    if per_plan is not None:
        per_plan.parent.mkdir(parents=True, exist_ok=True)
        with per_plan.open("w", encoding="utf-8") as handle:
            for _line, ev in per_line:
                record: dict[str, Any] = {"id": ev.id, "idx": ev.idx, **ev.values()}
                record["delivered"] = ev.delivered
                record["hard_evaluated"] = ev.hard_evaluated
                record["reasons"] = ev.reasons()
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    if as_json:
        out.write(json.dumps({k: summary.metrics[k] for k in METRIC_KEYS}) + "\n")
    else:
        _print_report(out, summary.metrics, summary, mode=mode, n_lines=len(per_line))
