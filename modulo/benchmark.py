"""Benchmarks (domains): problems, plan schema, prompts, parser, evaluator.

A benchmark is a :class:`Benchmark` subclass registered under the ``modulo.benchmarks`` entry-point
group. The core never imports a benchmark; it looks one up by name. A benchmark declares:

* ``name``, its ``splits()`` and ``load(split)`` returning :class:`~modulo.types.Problem` objects;
* ``plan_model``: the pydantic model of a plan (its JSON Schema is exported for structured output
  and used with ``jsonschema`` to validate anything that came from outside);
* ``check_format(problem, plan)``: structural errors beyond the schema (day count, keys, ...);
* ``parse(text, problem)``: an optional deterministic text -> plan parser (``reformulator=parser``);
* ``prompts``: template names for the roles ``direct``, ``cot``, ``json`` (generator asked for JSON),
  ``reformulate`` and optionally backprompt overrides; and ``prompt_variables(problem)``;
  ``template_dir``: the folder its templates live in (a plugin ships its own; the built-ins keep theirs
  in the repository's ``prompts/``), looked up through :meth:`Benchmark.template`;
* ``critic_names()``: its default critics (the ``all`` preset), and ``metrics``/``evaluate``: the
  official numbers, computed from the same checks the critics use;
* optionally ``prove_unsolvable(problem)``: an explanation when no plan can pass;
* multi-turn hooks (see :mod:`modulo.users`): ``apply_update(problem, update)`` returns the problem with
  a :class:`~modulo.types.ProblemUpdate` applied (the default merges ``add`` into the constraints and tells
  the planner ``text`` in the query); ``check_abstention(problem, reason)`` checks a planner's reason for
  declining where the benchmark can (default: it cannot); ``classify_reply(text)`` reads a planner's reply
  as a plan, a question for the user or an abstention (markers ``QUESTION:``, ``ABSTAIN:``/``[Unsolved]``);
* optionally, for ``modulo critics extract`` (:mod:`modulo.extract`): ``extraction_constraints()`` (each
  constraint's description), ``critic_view(problem)`` (what an extracted critic may see) and
  ``gate_cases(constraint, ...)`` (plans labelled by the benchmark's oracle);
* optionally ``submission_formats`` and ``write_submission(fmt, problems, plans, out)``: the official
  submission files ``modulo export RUN --format FMT --out FILE`` writes (all problems of the run's
  split in order, the best plan per problem, ``None`` where none was delivered); the default has no
  formats and ``write_submission`` raises :class:`~modulo.errors.ConfigError` naming what exists;
* optionally its commands, each a ``click.Command`` the ``modulo`` CLI runs: ``evaluate_command()``
  (``modulo evaluate NAME ...``), ``synth_command()`` (``modulo synth NAME ...``), ``audit_command()``
  (``modulo critics audit NAME ...``) and ``commands()`` (``modulo bench NAME COMMAND ...``).
"""

from __future__ import annotations

import copy
import functools
import json
import threading
import weakref
from abc import ABC, abstractmethod
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, NamedTuple, TypeVar

import jsonschema
from pydantic import BaseModel, TypeAdapter, ValidationError

from .errors import PlanFormatError
from .problems import ProblemSet, select_problems
from .prompts import Template, benchmark_template
from .schemacheck import Check, compile_check
from .tools import Toolbox
from .types import Abstention, AbstentionCheck, PlanJSON, Problem, ProblemUpdate, canonical_json

if TYPE_CHECKING:
    import click

#: what a planner's reply is: a plan (the usual case), a clarification question, or an abstention
ReplyAct = Literal["plan", "question", "abstain"]

T = TypeVar("T")


def frozen_data(value: Any) -> Any:
    """A read-only copy of JSON-like data: dicts become read-only mappings, lists and tuples tuples.
    Data shared between critic calls (see :class:`PerProblem`) is handed out this way, so no call can
    change what the next one reads."""
    kind = type(value)
    if kind is str or kind is int or kind is float or kind is bool or value is None:  # most values: at once
        return value
    if kind is dict or isinstance(value, Mapping):
        return MappingProxyType({k: frozen_data(v) for k, v in value.items()})
    if kind is list or kind is tuple or isinstance(value, (list, tuple)):
        return tuple(frozen_data(v) for v in value)
    if isinstance(value, (set, frozenset)):
        return frozenset(frozen_data(v) for v in value)
    return value


class PerProblem(Generic[T]):
    """Data derived from a problem (a parsed query, a constraint index), computed once per problem.

    ``cache = PerProblem(compute)``; ``cache(problem)`` returns ``compute(problem)``, computed on the
    first call for that :class:`~modulo.types.Problem` object and kept while the object lives (keyed by
    identity, so an updated problem, a new object, gets its own). Critics and evaluators of one problem
    share the value: make it immutable (``frozen_data``), never state one call changes for the next.
    Thread-safe; two threads asking at once may both compute, and one value wins.
    """

    def __init__(self, compute: Callable[[Problem], T]) -> None:
        self._compute = compute
        self._values: dict[int, tuple[weakref.ref[Problem], T]] = {}
        self._lock = threading.Lock()

    def __call__(self, problem: Problem) -> T:
        key = id(problem)
        entry = self._values.get(key)
        if entry is not None and entry[0]() is problem:
            return entry[1]
        value = self._compute(problem)

        def forget(ref: weakref.ref[Problem], key: int = key) -> None:
            with self._lock:
                if key in self._values and self._values[key][0] is ref:
                    del self._values[key]

        with self._lock:
            self._values[key] = (weakref.ref(problem, forget), value)
        return value

    def __len__(self) -> int:
        return len(self._values)


@dataclass(frozen=True)
class MetricSpec:
    """One headline metric a benchmark reports (a rate over problems unless ``kind`` says otherwise)."""

    key: str
    label: str
    kind: str = "rate"  # "rate" (a fraction in [0, 1]) or "count" or "value"
    description: str = ""
    #: whether a higher value is the better one (False: an error rate, a wrongful abstention): the tables
    #: that mark each column's best run read it
    higher_is_better: bool = True


@dataclass
class EvalResult:
    """What :meth:`Benchmark.evaluate` returns.

    ``metrics`` maps the benchmark's metric keys to values (rates as fractions). ``per_problem`` has
    one dict per evaluated plan (same order as the input), holding at least ``problem_id`` and a
    ``passed`` bool, plus per-constraint results keyed by constraint name (True/False/None) used by
    per-constraint tables and paired statistics. ``tables`` holds extra named breakdowns as lists of
    row dicts (per level, per constraint, ...). A benchmark that scores a large run's problems one at a
    time may hand ``per_problem`` back on disk (a :class:`~modulo.problems.Spool`: a read-only sequence
    read one row at a time), so the run's memory does not grow with its problems.
    """

    metrics: dict[str, float]
    per_problem: Sequence[dict[str, Any]] = field(default_factory=list)
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class FinalPlan:
    """A problem's final plan as a run's evaluation hands it to :meth:`Benchmark.evaluate_final`."""

    problem: Problem
    plan: PlanJSON | None
    #: the critics (registered names) whose verdict on this very plan, judged in this process against
    #: this very problem (the version in force at the end of the loop), passed it: applicable, passed,
    #: no error. Empty when that is not known (a problem resumed from an earlier run, a plan judged
    #: against an earlier version of the problem only, no critic). A benchmark may take a check of its
    #: evaluator as done where such a pass provably gives its answer (see :meth:`Benchmark.evaluate_final`).
    passed_by: frozenset[str] = frozenset()
    #: the run's decline (``plan`` is then None): the planner's last word, with the benchmark's check of its
    #: reason (:meth:`Benchmark.check_abstention`), or the benchmark's own proof that no plan exists, found
    #: before any model call (:meth:`Benchmark.prove_unsolvable`: verified, detail ``PROOF_DETAIL``); None
    #: when it delivered a plan or none could be read: a None plan without it is no plan, not an abstention
    abstention: Abstention | None = None


class Benchmark(ABC):
    """Base class of every benchmark. Subclasses set the class attributes and implement ``load``."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    #: the pydantic model of one plan, or of the root value (use a RootModel for lists)
    plan_model: ClassVar[type[BaseModel] | None] = None
    #: role -> template id (for example "travelplanner/direct"); a role not named here is looked up
    #: as ``<name>/<role>``, then ``core/<role>`` (see :meth:`template`)
    prompts: ClassVar[dict[str, str]] = {}
    #: the folder holding this benchmark's templates (``<template_dir>/<id>.j2``), searched before the
    #: core's prompts/ folder; a plugin benchmark sets it to a folder inside its own package. None: the
    #: core's prompts/ only (where the built-in benchmarks keep theirs)
    template_dir: ClassVar[Path | None] = None
    metrics: ClassVar[tuple[MetricSpec, ...]] = ()
    #: the metric that means "solved" for this benchmark (used by budget curves and paired tests)
    primary_metric: ClassVar[str] = ""
    #: splits whose labels must not leak into prompts (oracle critics on them need an override)
    test_splits: ClassVar[tuple[str, ...]] = ("test",)
    #: names of the official submission formats :meth:`write_submission` writes (``modulo export``)
    submission_formats: ClassVar[tuple[str, ...]] = ()
    #: a reply longer than this (characters) is a recorded format error, never parsed
    #: (``metacontroller.max_reply_chars`` overrides it)
    max_reply_chars: ClassVar[int] = 200_000
    #: a plan with more JSON values than this is a recorded format error, never criticised
    #: (``metacontroller.max_plan_items`` overrides it)
    max_plan_items: ClassVar[int] = 20_000
    #: this benchmark's own critics are CPU-heavy: True or "process" runs them in worker processes,
    #: "thread" each in a thread of its own (as a critic's own ``heavy``; see ``metacontroller.heavy``)
    heavy_critics: ClassVar[bool | str] = False
    #: this benchmark's plan checks (``validate_plan``/``plan_error`` and ``check_format``) are quick, well
    #: under a millisecond a plan, and never block: the ``format`` critic, which runs them, then runs on the
    #: event loop's thread with no hand-off (``metacontroller.inline_critics``). False (the default, and what a
    #: third-party benchmark gets): it runs in the worker thread, where a deadline can abandon a slow one. A
    #: subclass that makes those checks slow sets it back to False
    quick_format: ClassVar[bool] = False
    #: a reply whose first non-blank line starts with one of these (case-insensitive) is a question for
    #: the user, not a plan (the ``dialogue`` template tells the planner so)
    question_markers: ClassVar[tuple[str, ...]] = ("QUESTION:",)
    #: a reply whose first non-blank line starts with one of these declines to plan; the rest is the reason
    abstain_markers: ClassVar[tuple[str, ...]] = ("ABSTAIN:", "[Unsolved]")

    def __init__(self, data_dir: Path | None = None) -> None:
        self.data_dir = data_dir

    # -- problems ------------------------------------------------------------------------------
    @abstractmethod
    def splits(self) -> list[str]:
        """Names of the splits this benchmark can load."""

    @abstractmethod
    def load(self, split: str) -> list[Problem]:
        """All problems of ``split``. Raise :class:`~modulo.errors.DataError` with a clear message on bad data."""

    def select(self, split: str, *, limit: int | None = None, ids: Sequence[str] | None = None) -> list[Problem]:
        """``load`` then keep the given ids (in the order given) or the first ``limit`` problems."""
        from .errors import ConfigError

        problems = self.load(split)
        counts = Counter(p.id for p in problems)
        duplicates = sorted(pid for pid, n in counts.items() if n > 1)
        if duplicates:
            from .errors import DataError

            raise DataError(
                f"{self.name}/{split} holds duplicate problem ids ({', '.join(duplicates[:5])}"
                + (f" and {len(duplicates) - 5} more" if len(duplicates) > 5 else "")
                + "): each would run and be counted twice; make the ids unique"
            )
        if limit is not None and limit < 0:
            raise ConfigError(f"benchmark.limit must be at least 0, not {limit}")
        if ids:
            by_id = {p.id: p for p in problems}
            missing = [i for i in ids if str(i) not in by_id]
            if missing:
                raise ConfigError(
                    f"benchmark.ids: {missing} not in {self.name}/{split} (ids look like {list(by_id)[:3]})"
                )
            problems = [by_id[str(i)] for i in ids]
        if limit is not None:
            problems = problems[:limit]
        return problems

    def iter_problems(self, split: str) -> Iterator[Problem]:
        """The problems of ``split`` one at a time, in order. The default hands out ``load(split)``.

        A benchmark with many problems overrides it to read or generate them as a stream; a run then
        spools the selected ones to a temporary file and holds only their ids (see :mod:`modulo.problems`).
        """
        yield from self.load(split)

    @property
    def streams_problems(self) -> bool:
        """Whether this benchmark hands its problems over as a stream (it overrides ``iter_problems``)."""
        return type(self).iter_problems is not Benchmark.iter_problems

    def problem_set(self, split: str, *, limit: int | None = None, ids: Sequence[str] | None = None) -> ProblemSet:
        """The problems a run selects (as :meth:`select`), as a :class:`~modulo.problems.ProblemSet`:
        spooled to a temporary file when the benchmark streams its problems, else held in memory."""
        if not self.streams_problems:
            return ProblemSet(self.select(split, limit=limit, ids=ids))
        return select_problems(self.iter_problems(split), f"{self.name}/{split}", limit=limit, ids=ids, spool=True)

    def check_plannable(self, problems: Sequence[Problem]) -> None:
        """Raise DataError naming the problems a planner cannot be run on (checked before any call)."""
        return None

    # -- plans ---------------------------------------------------------------------------------
    def plan_json_schema(self) -> dict[str, Any] | None:
        """The JSON Schema of a plan (from ``plan_model``), for structured output and validation."""
        if self.plan_model is None:
            return None
        return copy.deepcopy(_plan_tools(self.plan_model)[1])

    def validate_plan(self, value: Any) -> PlanJSON:
        """Validate a plan that came from outside; return its normalised JSON or raise PlanFormatError."""
        if self.plan_model is None:
            return value
        return self._schema_checked(value, None)[0]

    def checked_plan(self, value: Any, key: str | None = None) -> tuple[PlanJSON, str]:
        """:meth:`validate_plan`'s plan and its :func:`~modulo.types.canonical_json` text (what the loop
        fingerprints and hands its critics), in one pass: the text is remembered with the validation, so
        the plan is not encoded again. ``key``: ``canonical_json(value)``, when the caller has it."""
        if self._own_validation():
            plan = self.validate_plan(value)
            return plan, canonical_json(plan)
        if self.plan_model is None:
            return value, key if key is not None else canonical_json(value)
        return self._schema_checked(value, key)

    def _schema_checked(self, value: Any, key: str | None) -> tuple[PlanJSON, str]:
        """The plan model's validation (see :meth:`checked_plan`)."""
        assert self.plan_model is not None
        if key is None:
            try:
                key = canonical_json(value)
            except (TypeError, ValueError) as exc:
                raise PlanFormatError(f"the plan is not JSON data: {exc}") from None
        result, plan = _validation(self.plan_model, key)
        if not result.ok:
            raise PlanFormatError(result.reason)
        if plan is None:  # a plan validated before: its normalised form made again (a fresh copy)
            plan = _normalised(self.plan_model, key)
        # a fresh object, so the caller may change it
        return plan, result.canonical

    def _own_validation(self) -> bool:
        """Whether this benchmark validates plans its own way (it overrides :meth:`validate_plan`)."""
        return type(self).validate_plan is not Benchmark.validate_plan or "validate_plan" in getattr(
            self, "__dict__", {}
        )

    def plan_error(self, value: Any) -> str | None:
        """Why :meth:`validate_plan` rejects ``value`` (its PlanFormatError's message), None when it accepts
        it; no normalised copy is made (what the format critic asks, on every iteration)."""
        if self._own_validation():
            try:  # a benchmark's own validation
                self.validate_plan(value)
            except PlanFormatError as exc:
                return str(exc)
            return None
        if self.plan_model is None:
            return None
        ok, result = self._validated(value)
        return None if ok else result

    def _validated(self, value: Any) -> tuple[bool, str]:
        """(True, "") or (False, why not), memoised on the canonical text."""
        assert self.plan_model is not None
        try:
            key = canonical_json(value)
        except (TypeError, ValueError) as exc:
            return False, f"the plan is not JSON data: {exc}"
        return _validate_cached(self.plan_model, key)

    def check_format(self, problem: Problem, plan: PlanJSON) -> list[str]:
        """Structural problems beyond the schema (day count, missing keys, ...). Empty when fine."""
        return []

    def parse(self, text: str, problem: Problem) -> PlanJSON:
        """Deterministic text -> plan parser. Raise PlanFormatError when the text has no plan.

        Benchmarks without a parser leave this as is; ``reformulator=parser`` then fails at bind time.
        """
        raise NotImplementedError

    @property
    def has_parser(self) -> bool:
        return type(self).parse is not Benchmark.parse

    def render_plan(self, plan: PlanJSON) -> str:
        """Plan as text for a backprompt ("your previous plan was ...")."""
        return json.dumps(plan, indent=1, ensure_ascii=False)

    def plan_text(self, plan: PlanJSON, problem: Problem) -> str:
        """Plan as text in ``problem``'s backprompt; override when the text needs the problem."""
        return self.render_plan(plan)

    def plan_table(self, plan: PlanJSON) -> PlanTable | None:
        """The plan as a table for ``modulo view`` (None: the viewer shows the JSON). Cells are plain text."""
        return None

    # -- prompts -------------------------------------------------------------------------------
    def template(self, role: str) -> Template:
        """The template of ``role`` (``direct``, ``cot``, ``json``, ``reformulate``, ``backprompt_*``).

        ``prompts[role]`` when the benchmark names one (that id exactly), else ``<name>/<role>`` falling
        back to ``core/<role>``; each id is looked for in :attr:`template_dir` first, then in the core's
        prompts/ folder. Raises PromptError when none exists.
        """
        return benchmark_template(self.name, role, named=self.prompts.get(role), own=self.template_dir)

    def prompt_variables(self, problem: Problem) -> dict[str, Any]:
        """Variables available to this benchmark's templates (``problem`` is always available too)."""
        return {"query": problem.query, "context": problem.context}

    # -- critics and evaluation ----------------------------------------------------------------
    def critic_names(self) -> list[str]:
        """The benchmark's own critics, format first: what the ``all`` preset selects."""
        return ["format"]

    def evaluate(self, problems: Sequence[Problem], plans: Sequence[PlanJSON | None]) -> EvalResult:
        """Score final plans (``None`` = nothing delivered) the way the benchmark's official script does."""
        raise NotImplementedError(f"benchmark {self.name!r} has no evaluator")

    def evaluate_stream(self, pairs: Iterable[tuple[Problem, PlanJSON | None]]) -> EvalResult:
        """:meth:`evaluate` over (problem, final plan) pairs handed over one at a time.

        The default gathers them into two lists and calls ``evaluate``; a benchmark that scores each
        problem on its own overrides it to keep no problem after scoring it (a run's evaluation then
        holds one problem at a time). Either way the result equals ``evaluate`` on the same pairs.
        """
        problems: list[Problem] = []
        plans: list[PlanJSON | None] = []
        for problem, plan in pairs:
            problems.append(problem)
            plans.append(plan)
        return self.evaluate(problems, plans)

    def evaluate_final(self, finals: Iterable[FinalPlan]) -> EvalResult:
        """:meth:`evaluate_stream` of a run's final plans, each with the critics that passed it
        (:attr:`FinalPlan.passed_by`): how a run evaluates its problems, once for the summary, the
        evaluation and the console's table.

        The default ignores what the critics said. A benchmark whose critics run its evaluator's own checks
        (or checks held to them) may override it to skip a check a critic already passed on the very same
        plan and problem, where the answer is provably the one the check would give; the result must equal
        :meth:`evaluate_stream` on the same (problem, plan) pairs.
        """
        return self.evaluate_stream((final.problem, final.plan) for final in finals)

    def prove_unsolvable(self, problem: Problem) -> str | None:
        """An explanation when ``problem`` provably has no valid plan, else None (the default: unknown)."""
        return None

    @property
    def can_prove_unsolvable(self) -> bool:
        return type(self).prove_unsolvable is not Benchmark.prove_unsolvable

    # -- multi-turn: updates, questions, abstention --------------------------------------------
    def apply_update(self, problem: Problem, update: ProblemUpdate) -> Problem:
        """``problem`` with ``update`` applied: the new problem the critics rebind to.

        The default merges ``update.add`` into the constraints (key by key), replaces the query or the
        context where the update gives one, and appends ``update.text`` to the query (so a re-rendered
        first prompt states it). A benchmark whose critics read something else (a budget in the metadata,
        a rule in the context) overrides this; it must return a new Problem and leave ``problem`` as is.
        """
        query = update.query if update.query is not None else problem.query
        if update.text:
            query = f"{query}\n\nUpdate: {update.text}"
        return problem.model_copy(
            update={
                "constraints": {**problem.constraints, **update.add},
                "query": query,
                "context": update.context if update.context is not None else problem.context,
            }
        )

    def check_abstention(self, problem: Problem, reason: str) -> AbstentionCheck:
        """Whether a planner's reason for declining ``problem`` holds (Z3's core, a missing tool).

        Default: the benchmark cannot check reasons (``verified=None``). Override to return True/False.
        """
        return AbstentionCheck(verified=None, detail=f"benchmark {self.name!r} cannot check an abstention reason")

    @property
    def can_check_abstention(self) -> bool:
        return type(self).check_abstention is not Benchmark.check_abstention

    def classify_reply(self, text: str) -> tuple[ReplyAct, str]:
        """Read a planner's reply: ``("question", question)``, ``("abstain", reason)`` or ``("plan", text)``.

        The default looks at the first non-blank line for :attr:`question_markers` and
        :attr:`abstain_markers`; a benchmark with another convention (TravelBench's ``[Unsolved]``
        anywhere in the reply) overrides it.
        """
        stripped = text.lstrip()
        head = stripped[:200].lower()
        try:
            if not head.startswith(_lowered(self.abstain_markers, self.question_markers)):
                return "plan", text  # the usual reply, a plan: told by one look at its start
        except TypeError:  # markers held in a list (not hashable): each one is tried below
            pass
        for act, markers in (("abstain", self.abstain_markers), ("question", self.question_markers)):
            for marker in markers:
                if head.startswith(marker.lower()):
                    rest = stripped[len(marker) :].strip()
                    return act, rest  # type: ignore[return-value]
        return "plan", text

    # -- tools ---------------------------------------------------------------------------------
    def tools(self) -> Toolbox | None:
        """The tools an agent may call on this benchmark (``modulo tools``, ``generator=tool_agent``), or None."""
        return None

    def scripted_demo(self) -> Path | None:
        """A script (``llm.script`` format) that ``llm=scripted`` plays on this benchmark when it is given none,
        so that a run with no model shows every stage doing its job; None (the default): stand-in replies.
        The run records the file it played (run.json ``llm.script``)."""
        return None

    def published_rows(self, split: str, generator: str) -> list[tuple[str, dict[str, float]]]:
        """Published figures to print beside a run's own: (label, metric key -> value) rows. Default none."""
        return []

    # -- extracted critics (``modulo critics extract``, :mod:`modulo.extract`) -------------------
    def extraction_constraints(self) -> list[ConstraintInfo]:
        """The constraints a critic can be extracted for: each one's description for the model, how the
        problem and plan encode it, and the built-in critic it corresponds to. Empty: none."""
        return []

    def critic_view(self, problem: Problem) -> dict[str, Any]:
        """What an extracted critic sees of ``problem`` (JSON data): never an answer (a witness, a gold
        plan, the oracle's labels). The default: the query, the context and the structured constraints."""
        return {"query": problem.query, "context": problem.context, "constraints": problem.constraints}

    def gate_cases(self, constraint: str, *, problems: int, seed: int) -> list[GateCase]:
        """Labelled plans for the extraction gate of ``constraint``: plans of about ``problems`` problems,
        each with the benchmark's *oracle* verdict on that constraint alone (a solver, golden verdicts, gold
        answers and their perturbations). Only plans that pass the format check belong here. The core
        splits them by problem into a training part (feedback) and a held-out part (never shown)."""
        raise NotImplementedError(f"benchmark {self.name!r} has no gate set for extracted critics")

    # -- command-line hooks (``modulo data ...``, ``modulo evaluate ...``) ---------------------
    def fuzz_cases(self, n: int) -> list[tuple[Problem, PlanJSON]]:
        """Up to ``n`` problems, each with a plan known to be good for it (a synthesized witness, a gold
        plan, a golden plan): the seeds :mod:`modulo.testing.fuzz` edits. Empty: nothing to fuzz from."""
        return []

    # -- command-line hooks (``modulo data``, ``evaluate``, ``synth``, ``critics audit``, ``bench``) ----
    @classmethod
    def has_hook(cls, hook: str) -> bool:
        """Whether this benchmark overrides the command hook ``hook`` (``evaluate_command``, ...)."""
        return getattr(cls, hook, None) is not getattr(Benchmark, hook, None)

    def data_check(self) -> DataReport:
        """What data is present, what is missing and what that rules out."""
        return DataReport(ok=True, lines=[f"{self.name}: needs no data files"])

    def data_download(self) -> DataReport:
        """Fetch and verify the official files where a network exists; raise DataError otherwise."""
        return self.data_check()

    def write_submission(
        self, fmt: str, problems: Sequence[Problem], plans: Mapping[str, PlanJSON | None], out: Path
    ) -> int:
        """Write the submission file ``out`` in format ``fmt`` (one of ``submission_formats``).

        ``problems`` are all problems of the run's split in order; ``plans`` maps a problem id to its
        best plan (missing or ``None``: no plan delivered). Returns the number of lines written.
        """
        from .errors import ConfigError

        known = ", ".join(self.submission_formats) or "none"
        raise ConfigError(f"benchmark {self.name!r} has no submission format {fmt!r} (its submission formats: {known})")

    # command hooks: each returns a click command the CLI mounts under the benchmark's name (None, the
    # default: the benchmark has no such command). A command's options show in its ``--help``; a wrong
    # argument is click's usage error and bad input a ModuloError, both printed by the CLI's one error
    # printer; the callback's return value (an int, default 0) is the exit code
    def evaluate_command(self) -> click.Command | None:
        """``modulo evaluate <benchmark> ARGS...``: score plans and print results."""
        return None

    def synth_command(self) -> click.Command | None:
        """``modulo synth <benchmark> ARGS...``: write a fixed set of generated problems."""
        return None

    def audit_command(self) -> click.Command | None:
        """``modulo critics audit <benchmark> ARGS...``: compare this benchmark's critics with a reference
        (an oracle, recorded verdicts) and print where they disagree. Exit 0 when they all agree, 1 when not."""
        return None

    def commands(self) -> list[click.Command]:
        """The benchmark's own subcommands: ``modulo bench <benchmark> NAME ARGS...`` runs the one named NAME."""
        return []


@dataclass(frozen=True)
class ConstraintInfo:
    """One constraint a critic can be extracted for (:meth:`Benchmark.extraction_constraints`)."""

    #: the constraint's name (an extracted critic is named after it)
    name: str
    #: what the constraint requires, in words: the model's task
    description: str
    #: how the problem's fields and the plan encode it (units, formats, which fields matter)
    notes: str = ""
    #: the built-in critic that checks the same constraint (compared against in reports), if any
    reference: str | None = None


@dataclass(frozen=True)
class GateCase:
    """One labelled plan of an extraction gate set (:meth:`Benchmark.gate_cases`)."""

    problem: Problem
    plan: PlanJSON
    #: the oracle's verdict: the plan satisfies the constraint
    valid: bool
    #: how the plan was made: ``witness``, a mutation operator, ``golden``, ``gold``, ``perturbed``, ...
    origin: str = ""
    #: what the oracle said, in words (the requirement an invalid plan breaks)
    oracle: str = ""
    #: cases of one group go to the same side of the training/held-out split (default: the problem id);
    #: plans derived from one base plan, for example, so no variant of a held-out plan is trained on
    group: str = ""


@dataclass
class PlanTable:
    """A plan as a table for the trace viewer (``modulo view``): plain text cells, escaped by the viewer."""

    columns: list[str]
    rows: list[list[str]]


@dataclass
class DataReport:
    """Result of a data check or download: ``ok`` and human-readable lines."""

    ok: bool
    lines: list[str] = field(default_factory=list)


@functools.lru_cache(maxsize=64)
def _plan_tools(model: type[BaseModel]) -> tuple[TypeAdapter[Any], dict[str, Any], Any, Check | None]:
    """A TypeAdapter, the JSON Schema, a compiled jsonschema validator and the fast yes/no check
    (:mod:`modulo.schemacheck`; None when the schema is beyond it) for a plan model (built once)."""
    adapter: TypeAdapter[Any] = TypeAdapter(model)
    schema = adapter.json_schema()
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return adapter, schema, cls(schema), compile_check(schema)


class _Validation(NamedTuple):
    """A plan's validation: valid or not; why not ("" when valid); and the normalised plan's canonical
    JSON text ("" when not valid). The normalised plan itself is not kept: a plan seen again is rare (a
    repeat), and writing every plan's JSON for it cost an encoding per iteration."""

    ok: bool
    reason: str
    canonical: str


#: (plan model, canonical text of a plan) -> its validation, the most recently used last
_VALIDATIONS: OrderedDict[tuple[type[BaseModel], str], _Validation] = OrderedDict()
_VALIDATIONS_SIZE = 4096
_VALIDATIONS_LOCK = threading.Lock()  # the format critic may ask from a worker thread


def _validation(model: type[BaseModel], key: str) -> tuple[_Validation, PlanJSON]:
    """The validation of the plan whose canonical JSON text is ``key``, memoised on it, and, when it was
    made just now and the plan is valid, the normalised plan itself (a fresh object; None otherwise)."""
    memo_key = (model, key)
    with _VALIDATIONS_LOCK:
        known = _VALIDATIONS.get(memo_key)
        if known is not None:
            _VALIDATIONS.move_to_end(memo_key)
            return known, None
    adapter, _, validator, valid = _plan_tools(model)
    value = json.loads(key)
    plan: PlanJSON = None
    result: _Validation | None = None
    if valid is None or not valid(value):  # jsonschema itself only for a schema beyond the fast check, or to explain
        error = jsonschema.exceptions.best_match(validator.iter_errors(value))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "the top level"
            result = _Validation(False, f"at {where}: {error.message}", "")
    if result is None:
        try:
            plan = adapter.dump_python(adapter.validate_python(value), mode="json")
            result = _Validation(True, "", canonical_json(plan))
        except ValidationError as exc:
            result = _Validation(False, _short_validation_error(exc), "")
    with _VALIDATIONS_LOCK:
        _VALIDATIONS[memo_key] = result
        if len(_VALIDATIONS) > _VALIDATIONS_SIZE:
            _VALIDATIONS.popitem(last=False)
    return result, plan


def _normalised(model: type[BaseModel], key: str) -> PlanJSON:
    """The normalised form of the valid plan whose canonical JSON text is ``key`` (a fresh object): what
    :func:`_validation` made of it when it validated it first."""
    adapter = _plan_tools(model)[0]
    return adapter.dump_python(adapter.validate_python(json.loads(key)), mode="json")


def _validate_cached(model: type[BaseModel], key: str) -> tuple[bool, str]:
    """(True, "") or (False, reason), memoised on the plan's canonical JSON text."""
    result, _ = _validation(model, key)
    return result.ok, result.reason


def _short_validation_error(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        loc = "/".join(str(x) for x in err["loc"]) or "the top level"
        parts.append(f"at {loc}: {err['msg']}")
    more = len(exc.errors()) - 5
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


@functools.lru_cache(maxsize=64)
def _lowered(*groups: tuple[str, ...]) -> tuple[str, ...]:
    """Every marker of ``groups``, lower-cased (what :meth:`Benchmark.classify_reply` compares with)."""
    return tuple(marker.lower() for markers in groups for marker in markers)
