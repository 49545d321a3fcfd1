"""The synthesized benchmarks ``synth/tasks``, ``synth/calendar`` and ``synth/trip``.

Problems are generated on the fly from ``(n, seed, difficulty, knobs)``, identically for the same
arguments (``benchmark.n=50 benchmark.seed=1``), or read from a JSONL file written by
``modulo synth FAMILY --n N --seed S --out FILE.jsonl`` (``benchmark.path=FILE.jsonl``). Every
problem carries its structured constraints (``constraints``: the spec the critics read), and in
``metadata`` the witness plan found by Z3 (``witness``), whether it is the only plan (``unique``),
whether the problem is solvable (``solvable``; unsolvable ones carry the id of the ``injected``
contradiction), the knobs and the seeds.

For error dissection, :meth:`SynthBenchmark.variant` re-renders a problem with other wordings
(``wording_seed``), another skin (``topic``) or an equivalent, differently written constraint set
(``restructure_seed``); the witness stays valid in every variant.
"""

from __future__ import annotations

import inspect
import json
import random
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from modulo.benchmark import Benchmark, ConstraintInfo, DataReport, EvalResult, FinalPlan, GateCase, MetricSpec
from modulo.errors import ConfigError, DataError, PlanFormatError
from modulo.problems import Spool
from modulo.prompts import role_templates
from modulo.types import Abstention, AbstentionCheck, PlanJSON, Problem, ProblemUpdate

from .common import capitalize, derive_seed, rng_for
from .families import get_family
from .family import Family, problem_from
from .multiturn import HIDDEN_MODES, apply_changes, check_reason, choose_hidden, constraint_from, intent, visible_spec

if TYPE_CHECKING:
    import click

SPLIT = "generated"


class SynthBenchmark(Benchmark):
    """Shared by the three synthesized families; a subclass names its family (``family="tasks"``).

    The constructor takes the common arguments below and the family's knobs (the keys of its
    ``presets``; each defaults to None, the difficulty's preset). Each subclass's signature lists
    them by name (``__init_subclass__`` builds it), so a misspelt knob is refused like any other
    unknown argument, and run.json records their defaults."""

    family_name: ClassVar[str] = ""
    test_splits: ClassVar[tuple[str, ...]] = ()
    quick_format: ClassVar[bool] = True  # the schema check and reading the plan's entries: microseconds
    __signature__: ClassVar[inspect.Signature]
    primary_metric: ClassVar[str] = "success"
    metrics: ClassVar[tuple[MetricSpec, ...]] = (
        MetricSpec(
            "success",
            "success",
            description="solved (solvable), or declined with a reason Z3's proof does not refute (unsolvable)",
        ),
        MetricSpec(
            "solved", "solved", description="solvable problems whose plan passes every constraint (critics and Z3)"
        ),
        MetricSpec(
            "abstention_recall",
            "abstention recall",
            description="unsolvable problems declined (by the planner, or by the benchmark's proof before a call)",
        ),
        MetricSpec(
            "wrongful_abstention",
            "wrongful abstention",
            description="solvable problems the planner declined",
            higher_is_better=False,
        ),
        MetricSpec("delivery", "delivery", description="problems answered with a plan"),
        MetricSpec(
            "critic_z3_disagreements",
            "critic/Z3 disagreements",
            kind="count",
            description="plans on which the critics and Z3 disagree (should be 0)",
        ),
    )

    def __init__(
        self,
        data_dir: Path | None = None,
        *,
        n: int = 50,
        seed: int = 0,
        difficulty: str = "easy",
        unsolvable_fraction: float = 0.0,
        path: str | None = None,
        wording_seed: int | None = None,
        topic: str | None = None,
        unique: bool | None = None,
        hidden: int = 0,
        hidden_mode: str = "ask",
        update_after: int = 1,
        hide_contradiction: bool = False,
        **knobs: Any,
    ) -> None:
        super().__init__(data_dir)
        self.family: Family = get_family(self.family_name)
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ConfigError(f"{self.name}: n must be a non-negative integer, got {n!r}")
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise ConfigError(f"{self.name}: seed must be an integer, got {seed!r}")
        if not 0.0 <= float(unsolvable_fraction) <= 1.0:
            raise ConfigError(f"{self.name}: unsolvable_fraction must be in [0, 1], got {unsolvable_fraction!r}")
        if topic is not None and topic not in self.family.topics:
            raise ConfigError(f"{self.name}: topic {topic!r} is not one of {list(self.family.topics)}")
        self.n, self.seed, self.difficulty = n, seed, difficulty
        self.unsolvable_fraction = float(unsolvable_fraction)
        self.path = Path(path).expanduser() if path else None
        self.wording_seed, self.topic = wording_seed, topic
        self.unique = self.family.unique_by_default if unique is None else bool(unique)
        self.knobs = self.family.knobs(difficulty, {k: _knob_value(v) for k, v in knobs.items()})
        if isinstance(hidden, bool) or not isinstance(hidden, int) or hidden < 0:
            raise ConfigError(f"{self.name}: hidden must be a non-negative integer, got {hidden!r}")
        if hidden_mode not in HIDDEN_MODES:
            raise ConfigError(f"{self.name}: hidden_mode must be one of {list(HIDDEN_MODES)}, got {hidden_mode!r}")
        if isinstance(update_after, bool) or not isinstance(update_after, int) or update_after < 0:
            raise ConfigError(f"{self.name}: update_after must be a turn number >= 0, got {update_after!r}")
        self.hidden, self.hidden_mode, self.update_after = hidden, hidden_mode, update_after
        self.hide_contradiction = bool(hide_contradiction)
        self._cache: list[Problem] | None = None

    def __init_subclass__(cls, family: str = "", **kwargs: Any) -> None:
        """The benchmark of ``family``: its name, templates, plan model and constructor signature."""
        super().__init_subclass__(**kwargs)
        if not family:
            return
        fam = get_family(family)
        cls.family_name, cls.name = family, fam.benchmark
        cls.prompts = role_templates(cls.name)
        cls.plan_model = fam.plan_model
        init = inspect.signature(SynthBenchmark.__init__, eval_str=True)
        common = list(init.parameters.values())[1:-1]  # not self, not **knobs
        knobs = {key: value for preset in fam.presets.values() for key, value in preset.items()}
        own = [
            inspect.Parameter(key, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=_knob_type(value))
            for key, value in knobs.items()
        ]
        cls.__signature__ = inspect.Signature([*common, *own])

    # -- problems --------------------------------------------------------------------------------
    def splits(self) -> list[str]:
        return [SPLIT]

    def load(self, split: str) -> list[Problem]:
        if split != SPLIT:
            raise ConfigError(f"{self.name} has one split, {SPLIT!r}; got {split!r}")
        if self._cache is None:
            self._cache = self.read(self.path) if self.path else self.generate(self.n)
        return list(self._cache)

    def iter_problems(self, split: str) -> Iterator[Problem]:
        """The problems one at a time: read line by line from ``path``, or generated one after another
        (nothing is cached: a run spools what it selects, see :mod:`modulo.problems`)."""
        if split != SPLIT:
            raise ConfigError(f"{self.name} has one split, {SPLIT!r}; got {split!r}")
        if self._cache is not None:
            yield from self._cache
        elif self.path:
            yield from self.stream(self.path)
        else:
            yield from (self.make(i) for i in range(self.n))

    def generate(self, n: int, start: int = 0) -> list[Problem]:
        """Problems ``start .. start+n-1`` of this configuration (each depends only on its index)."""
        return [self.make(i) for i in range(start, start + n)]

    def make(self, index: int) -> Problem:
        """Problem ``index`` of this configuration."""
        instance_seed = derive_seed(self.family.name, self.seed, index)
        unsolvable = rng_for("unsolvable", self.seed, index).random() < self.unsolvable_fraction
        synthesis = self.family.synthesize(
            instance_seed, self.knobs, topic=self.topic, unique=self.unique, unsolvable=unsolvable
        )
        wording = instance_seed if self.wording_seed is None else derive_seed("wording", self.wording_seed, index)
        meta = {
            "difficulty": self.difficulty,
            "knobs": _jsonable(self.knobs),
            "seed": self.seed,
            "index": index,
            "instance_seed": instance_seed,
            "split": SPLIT,
        }
        tag = "u" if unsolvable else "s"
        pid = f"{self.family.name}-{self.difficulty}-{self.seed}-{index:04d}{tag}"
        problem = problem_from(self.family, synthesis, problem_id=pid, wording_seed=wording, meta=meta)
        if self.hidden:
            problem = self.hold_back(problem, rng_for("hidden", self.seed, index), wording)
        return problem

    # -- multi-turn: hidden requirements, updates, abstention (see :mod:`.multiturn`) -----------------
    def hold_back(self, problem: Problem, rng: random.Random, wording: int) -> Problem:
        """``problem`` with ``self.hidden`` of its stated requirements held back: the query is written again
        without them; each waits in ``problem.hidden`` (``h1``, ``h2``, ...: its sentence, told when asked)
        or, with ``hidden_mode=update``, in ``problem.updates`` (the i-th after turn ``update_after + i``)."""
        spec = problem.constraints
        keep: list[str] = []
        first: list[str] = []
        injected = problem.metadata.get("injected")
        if injected:
            (first if self.hide_contradiction else keep).append(str(injected))
        ids = first + choose_hidden(self.family, spec, self.hidden - len(first), rng, keep=keep + first)
        by_id = {c["id"]: c for c in spec["constraints"]}
        held = [by_id[cid] for cid in ids]
        bare = visible_spec(spec, ids)
        bare = {**bare, "constraints": [{k: v for k, v in c.items() if k != "text"} for c in bare["constraints"]]}
        query, shown = self.family.render(bare, rng_for(self.family.name, "wording", wording))
        visible_witness = self.family.solve(shown)
        meta = {
            **problem.metadata,
            "hidden_ids": ids,
            "hidden_mode": self.hidden_mode,
            "known_solvable": visible_witness is not None,
            "visible_witness": visible_witness,
        }
        update: dict[str, Any] = {"query": query, "constraints": shown, "metadata": meta}
        if self.hidden_mode == "ask":
            update["hidden"] = {
                f"h{i + 1}": {"text": capitalize(c["text"]) + ".", "add": {"constraints": [c]}}
                for i, c in enumerate(held)
            }
        else:
            update["updates"] = [
                ProblemUpdate(
                    after=self.update_after + i,
                    add={"constraints": [c]},
                    text=capitalize(c["text"]) + ".",
                    source="benchmark",
                )
                for i, c in enumerate(held)
            ]
        return problem.model_copy(update=update)

    def intent(self, problem: Problem) -> dict[str, Any]:
        """The whole constraint set the user means: the problem's constraints, the hidden requirements not
        yet told and the scheduled updates not yet applied (the oracle judges plans against it)."""
        return intent(problem.constraints, _pending(problem))

    def apply_update(self, problem: Problem, update: ProblemUpdate) -> Problem:
        """The problem after ``update``, re-derived from its constraint set. ``update.add`` may hold
        ``constraints`` (objects ``{"kind": ..., ...}`` or sentences in the query's words; one that carries
        the id of a held-back requirement reveals it), ``remove`` (ids) and ``reveal`` (keys of
        ``problem.hidden``, or ``"all"``). Z3 decides again whether the intent has a plan
        (``problem.solvable``, ``metadata['witness']``); the text the planner is told is ``update.text``
        or, when empty, the sentences of what was added."""
        add = dict(update.add)
        unknown = sorted(set(add) - {"constraints", "remove", "reveal"})
        if unknown:
            raise ConfigError(
                f"{self.name}: an update's add takes constraints, remove, reveal; not {', '.join(unknown)}"
            )
        spec = problem.constraints
        hidden = dict(problem.hidden)
        reveal = add.get("reveal") or []
        keys = list(hidden) if reveal == "all" else [reveal] if isinstance(reveal, str) else list(reveal)
        wanted: list[Any] = []
        for key in keys:
            item = hidden.pop(str(key), None)
            if item is None:
                raise ConfigError(f"{self.name}: problem {problem.id} holds no hidden item {key!r}")
            wanted += item.get("add", {}).get("constraints", [])
        raw = add.get("constraints") or []
        if not isinstance(raw, list):
            raw = [raw]
        try:
            wanted += [constraint_from(self.family, c, spec) for c in raw]
            remove = [str(r) for r in (add.get("remove") or [])]
            pending = _pending(problem)
            new_spec, _still, facts = apply_changes(self.family, spec, pending, add=wanted, remove=remove)
        except ValueError as exc:
            raise ConfigError(f"{self.name}: problem {problem.id}: {exc}") from None
        revealed = {c["id"] for c in wanted if "id" in c}
        for key, item in list(hidden.items()):  # a hidden item told through its constraint's id
            if {c.get("id") for c in item.get("add", {}).get("constraints", [])} & revealed:
                hidden.pop(key)
        added = [c for c in new_spec["constraints"] if c["id"] in facts["added"]]
        text = update.text or " ".join(capitalize(c["text"]) + "." for c in added)
        if remove:
            gone = [c for c in spec["constraints"] if c["id"] in remove]
            text = text or " ".join(f'No longer: "{c.get("text") or self.family.describe(c)}".' for c in gone)
        base = update.query if update.query is not None else problem.query
        query = base + (f"\n\nUpdate: {text}" if text else "")
        meta = {
            **problem.metadata,
            "solvable": facts["solvable"],
            "witness": facts["witness"],
            "known_solvable": facts["known_solvable"],
            "n_constraints": len(self.intent(problem.model_copy(update={"constraints": new_spec}))["constraints"]),
        }
        return problem.model_copy(
            update={
                "constraints": new_spec,
                "query": query,
                "context": update.context if update.context is not None else problem.context,
                "hidden": hidden,
                "solvable": facts["solvable"],
                "metadata": meta,
            }
        )

    def check_abstention(self, problem: Problem, reason: str) -> AbstentionCheck:
        """Accepted only when Z3 proves the intent unsatisfiable and the reason names a requirement of the
        unsat core (see :func:`critics.synth.multiturn.check_reason` for what *names* and *consistent* mean)."""
        result = check_reason(self.family, self.intent(problem), reason)
        return AbstentionCheck(verified=result.accepted, detail=result.message)

    def read(self, path: Path) -> list[Problem]:
        """Problems from a JSONL file written by :func:`write_problems` (``modulo synth ... --out``)."""
        return list(self.stream(path))

    def stream(self, path: Path) -> Iterator[Problem]:
        """:meth:`read`, one problem at a time."""
        if not path.is_file():
            raise DataError(f"{self.name}: problem file {path} does not exist (write one with 'modulo synth')")
        with path.open(encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    p = Problem.model_validate_json(line)
                except ValueError as exc:
                    raise DataError(f"{path}:{lineno}: not a problem record: {str(exc)[:200]}") from None
                if p.benchmark != self.name:
                    raise DataError(f"{path}:{lineno}: problem {p.id!r} belongs to {p.benchmark!r}, not {self.name!r}")
                yield p

    # -- variants for error dissection ------------------------------------------------------------
    def variant(
        self,
        problem: Problem,
        *,
        wording_seed: int | None = None,
        topic: str | None = None,
        restructure_seed: int | None = None,
    ) -> Problem:
        """The same constraint set written differently (wording), under another skin (topic), or an
        equivalent set written as another problem (restructure). The witness is carried over."""
        spec = json.loads(json.dumps(problem.constraints))
        for c in spec["constraints"]:
            c.pop("text", None)
        witness = problem.metadata.get("witness")
        suffix = []
        if topic is not None:
            if topic not in self.family.topics:
                raise ConfigError(f"{self.name}: topic {topic!r} is not one of {list(self.family.topics)}")
            mapping = self.family.topic_names(rng_for("topic", problem.id, topic), spec, topic)
            spec = self.family.rename(spec, mapping, topic)
            witness = _rename(witness, mapping)
            suffix.append(f"t-{topic}")
        if restructure_seed is not None:
            spec = self.family.restructure(rng_for("restructure", problem.id, restructure_seed), spec)
            suffix.append(f"r{restructure_seed}")
        wording = problem.metadata.get("wording_seed", 0) if wording_seed is None else wording_seed
        if wording_seed is not None:
            suffix.append(f"w{wording_seed}")
        query, spec = self.family.render(spec, rng_for(self.family.name, "wording", wording))
        metadata = {
            **problem.metadata,
            "witness": witness,
            "wording_seed": wording,
            "topic": spec["topic"],
            "variant_of": problem.id,
        }
        pid = problem.id + ("~" + "~".join(suffix) if suffix else "")
        return problem.model_copy(update={"id": pid, "query": query, "constraints": spec, "metadata": metadata})

    # -- plans -----------------------------------------------------------------------------------
    def check_format(self, problem: Problem, plan: PlanJSON) -> list[str]:
        return self.family.check_format(problem.constraints, plan)

    def parse(self, text: str, problem: Problem) -> PlanJSON:
        if not text or not text.strip():
            raise PlanFormatError("the answer is empty")
        try:
            return self.family.parse_plan(text, problem.constraints)
        except ValueError as exc:  # e.g. a day number of 5000 digits, too long for int() (found by fuzzing)
            raise PlanFormatError(f"the answer could not be read: {str(exc)[:200]}") from None

    def render_plan(self, plan: PlanJSON) -> str:
        try:
            return self.family.render_plan(plan)
        except (KeyError, TypeError):
            return super().render_plan(plan)

    def prompt_variables(self, problem: Problem) -> dict[str, Any]:
        example = self.family.render_plan(self.example_plan())
        return {
            "query": problem.query,
            "context": problem.context,
            "answer_format": self.family.format_hint(),
            "example": json.dumps(self.example_plan()),
            "example_text": example,
            "schema": json.dumps(self.plan_json_schema(), indent=1),
        }

    def example_plan(self) -> PlanJSON:
        raise NotImplementedError

    # -- critics, evaluation, unsolvability ---------------------------------------------------------
    def critic_names(self) -> list[str]:
        return ["format", *self.family.critic_kinds]

    def prove_unsolvable(self, problem: Problem) -> str | None:
        """A minimal unsat core of the problem's constraints, in the query's words (None: satisfiable).
        A problem whose recorded witness every critic accepts is satisfiable without asking Z3."""
        if self.family.witnessed(problem.constraints, problem.metadata.get("witness")):
            return None
        return self.family.explain_unsat(problem.constraints)

    def evaluate(self, problems: Sequence[Problem], plans: Sequence[PlanJSON | None]) -> EvalResult:
        if len(problems) != len(plans):
            raise ConfigError(f"{self.name}: {len(problems)} problems but {len(plans)} plans")
        return self.evaluate_stream(zip(problems, plans, strict=True))

    def evaluate_stream(self, pairs: Iterable[tuple[Problem, PlanJSON | None]]) -> EvalResult:
        """Each problem scored on its own as it comes (no problem is kept), its row put on disk (a
        :class:`~modulo.problems.Spool`) and counted into the metrics and tables as it goes: memory
        holds one problem and a few counters whatever the number of problems. A None plan is no plan (a
        failure, never an abstention: a decline comes with its reason, see :meth:`evaluate_final`)."""
        return self._scored((p, plan, None) for p, plan in pairs)

    def evaluate_final(self, finals: Iterable[FinalPlan]) -> EvalResult:
        """A run's final plans: a decline (:attr:`FinalPlan.abstention`: the planner's, or Z3's proof before any
        model call) is an abstention, correct on an unsolvable problem unless the benchmark refuted its reason
        (its check against Z3's minimal unsat core); a problem with no plan and no decline (no answer could be
        read) is a failure."""
        return self._scored((f.problem, f.plan, f.abstention) for f in finals)

    def _scored(self, items: Iterable[tuple[Problem, PlanJSON | None, Abstention | None]]) -> EvalResult:
        last: list[tuple[dict[str, Any], bool]] = []  # the last problem's intent and whether it has a plan
        rows: Spool[dict[str, Any]] = Spool(prefix="modulo-synth-rows-")
        tally = _Tally.new(list(self.family.critic_kinds))
        for p, plan, declined in items:
            row = self._score(p, plan, last, declined)
            # each rate's own part per problem (None: not counted), so reports show k/n and a CI
            solvable = row["solvable"]
            row["solved"] = bool(row["passed"]) if solvable else None
            row["wrongful_abstention"] = bool(row["abstained"]) if solvable else None
            row["abstention_recall"] = None if solvable else bool(row["abstained"])
            tally.add(row)
            rows.append(row)
        return EvalResult(metrics=tally.rates.metrics(), per_problem=rows, tables=tally.tables())

    def _score(
        self,
        problem: Problem,
        plan: PlanJSON | None,
        last: list[tuple[dict[str, Any], bool]],
        declined: Abstention | None = None,
    ) -> dict[str, Any]:
        spec = self.intent(problem)
        # the same problem again (another plan of it): its solvability is decided already
        known = last[0][1] if last and last[0][0] == spec else None
        if plan is None:
            solvable = self._solvable(problem, spec, known, last)
            row = self._row(problem, solvable, abstained=declined is not None)
            # a decline is right on an unsolvable problem unless its reason was refuted; no plan is never right
            right = declined is not None and not solvable and declined.verified is not False
            row.update(passed=right, z3_valid=None, disagreement=False, delivered=False)
            if declined is not None:
                row["abstention_verified"] = declined.verified
            return row
        if isinstance(plan, str):  # a raw answer: read it with the deterministic parser
            try:
                plan = self.parse(plan, problem)
            except PlanFormatError:
                plan = {}
        problems = self.family.check_format(spec, plan)
        try:
            self.validate_plan(plan)
        except PlanFormatError as exc:
            problems.append(str(exc))
        critics_pass = not problems
        checks: dict[str, bool | None] = {}
        for name, kinds in self.family.critic_kinds.items():
            if problems:
                checks[name] = False
                continue
            applicable, broken = self.family.violations(spec, plan, kinds)
            checks[name] = None if applicable == 0 else not broken
            critics_pass = critics_pass and not broken
        z3_ok = self.family.z3_valid(spec, plan)
        # a plan that reads, that every constraint's check accepts and that Z3 confirms proves a plan
        # exists, as a confirmed witness does: Z3 is not asked a second time (the witness) for it
        if known is None and z3_ok and critics_pass and self.family.witnessed(spec, plan):
            known = True
            last[:] = [(spec, True)]
        solvable = self._solvable(problem, spec, known, last)
        row = self._row(problem, solvable, abstained=False)
        row["delivered"] = True
        row.update(checks)
        row.update(format=not problems, z3_valid=z3_ok, disagreement=(critics_pass != z3_ok) and not problems)
        row["passed"] = bool(solvable and critics_pass and z3_ok)
        return row

    @staticmethod
    def _row(problem: Problem, solvable: bool, *, abstained: bool) -> dict[str, Any]:
        return {
            "problem_id": problem.id,
            "solvable": solvable,
            "abstained": abstained,
            "difficulty": problem.metadata.get("difficulty"),
            "size": _size(problem),
        }

    def _solvable(
        self, problem: Problem, spec: dict[str, Any], known: bool | None, last: list[tuple[dict[str, Any], bool]]
    ) -> bool:
        """Whether ``spec`` has a plan (``known``: decided already): a recorded witness that Z3 confirms
        proves one exists; otherwise Z3 searches (an unsat core). Remembered in ``last`` for the next plan."""
        if known is not None:
            return known
        witness = problem.metadata.get("witness")
        solvable = self.family.witnessed(spec, witness, z3_check=True) or self.family.unsat_core_ids(spec) is None
        last[:] = [(spec, solvable)]
        return solvable

    # -- hooks: fuzzing seeds and the benchmark's commands ------------------------------------------
    def fuzz_cases(self, n: int) -> list[tuple[Problem, PlanJSON]]:
        """The first ``n`` problems of this configuration with their witness plans (solvable ones)."""
        return [(p, p.metadata["witness"]) for p in self.generate(n) if p.metadata.get("witness") is not None]

    def extraction_constraints(self) -> list[ConstraintInfo]:
        """One constraint per built-in critic of the family (``modulo critics extract``)."""
        from .extract import extraction_constraints

        return extraction_constraints(self)

    def critic_view(self, problem: Problem) -> dict[str, Any]:
        """The query and the structured constraints; never the metadata (it holds the witness)."""
        return {"query": problem.query, "constraints": problem.constraints}

    def gate_cases(self, constraint: str, *, problems: int, seed: int) -> list[GateCase]:
        """Z3 witnesses and their mutants labelled by Z3 (see :mod:`critics.synth.extract`)."""
        from .extract import gate_cases

        return gate_cases(self, constraint, problems=problems, seed=seed)

    def synth_command(self) -> click.Command:
        """``modulo synth synth/FAMILY --n N --seed S --out FILE.jsonl [...]`` (see ``critics.synth.cli``)."""
        from .cli import synth_command

        return synth_command(self.name)

    def commands(self) -> list[click.Command]:
        """``modulo bench synth/FAMILY oracle-script ...`` (see :func:`critics.synth.cli.oracle_script`)."""
        from .cli import oracle_script_command

        return [oracle_script_command(self.name)]

    def audit_command(self) -> click.Command:
        """``modulo critics audit synth/FAMILY [...]``: mutation testing against Z3."""
        from .audit import audit_command

        return audit_command(self.name)

    def data_check(self) -> DataReport:
        lines = [f"{self.name}: generated on the fly, needs no data files"]
        if self.path is not None:
            ok = self.path.is_file()
            lines.append(f"problem file {self.path}: {'present' if ok else 'MISSING'}")
            return DataReport(ok=ok, lines=lines)
        return DataReport(ok=True, lines=lines)


def _pending(problem: Problem) -> list[dict[str, Any]]:
    """Requirements the user holds that are not yet in force: hidden items and scheduled updates."""
    seen = {c.get("id") for c in problem.constraints.get("constraints", [])}
    out: list[dict[str, Any]] = []
    items = [i.get("add", {}) for i in problem.hidden.values() if isinstance(i, dict)]
    for add in [*items, *(u.add for u in problem.updates)]:
        for c in add.get("constraints", []) if isinstance(add, dict) else []:
            if isinstance(c, dict) and c.get("id") not in seen:  # an applied update is in force already
                seen.add(c.get("id"))
                out.append(c)
    return out


def _size(problem: Problem) -> int:
    spec = problem.constraints
    for key in ("actions", "people", "cities"):
        if key in spec:
            return len(spec[key])
    return 0


@dataclass
class _Rates:
    """The evaluation's rates, counted one row at a time (each a ratio of integer counts)."""

    n: int = 0
    passed: int = 0
    delivered: int = 0
    solvable: int = 0
    solvable_passed: int = 0
    solvable_abstained: int = 0
    unsolvable_abstained: int = 0
    disagreements: int = 0

    def add(self, row: dict[str, Any]) -> None:
        self.n += 1
        self.passed += bool(row["passed"])
        self.delivered += bool(row["delivered"])
        if row["solvable"]:
            self.solvable += 1
            self.solvable_passed += bool(row["passed"])
            self.solvable_abstained += bool(row["abstained"])
        else:
            self.unsolvable_abstained += bool(row["abstained"])
        self.disagreements += bool(row.get("disagreement"))

    def metrics(self) -> dict[str, float]:
        metrics: dict[str, float] = {}
        if self.n:
            metrics["success"] = self.passed / self.n
            metrics["delivery"] = self.delivered / self.n
        if self.solvable:
            metrics["solved"] = self.solvable_passed / self.solvable
            metrics["wrongful_abstention"] = self.solvable_abstained / self.solvable
        if self.n - self.solvable:
            metrics["abstention_recall"] = self.unsolvable_abstained / (self.n - self.solvable)
        metrics["critic_z3_disagreements"] = float(self.disagreements)
        return metrics


@dataclass
class _Tally:
    """The metrics and tables of an evaluation, counted as its rows come: overall, per critic (checked,
    passed) and per (difficulty, size)."""

    critics: list[str]
    rates: _Rates
    per_critic: dict[str, list[int]]
    per_size: dict[tuple[Any, Any], _Rates]

    @classmethod
    def new(cls, critics: list[str]) -> _Tally:
        return cls(critics, _Rates(), {name: [0, 0] for name in critics}, {})

    def add(self, row: dict[str, Any]) -> None:
        self.rates.add(row)
        for name in self.critics:
            value = row.get(name)
            if value is not None:
                self.per_critic[name][0] += 1
                self.per_critic[name][1] += value
        self.per_size.setdefault((row["difficulty"], row["size"]), _Rates()).add(row)

    def tables(self) -> dict[str, list[dict[str, Any]]]:
        per_critic = [
            {"critic": name, "checked": checked, "pass_rate": passed / checked}
            for name, (checked, passed) in self.per_critic.items()
            if checked
        ]
        # in the order of each group's text (key, rows) as it was sorted when rows were kept per group:
        # that order is decided by the key's text alone
        per_size = [
            {"difficulty": d, "size": s, "n": g.n, **g.metrics()}
            for (d, s), g in sorted(self.per_size.items(), key=lambda kv: str((kv[0], [])))
        ]
        # the constraint columns of the per-problem rows (reports read exactly these as constraints)
        per_constraint = [{"constraint": name, "name": name} for name in ["format", *self.critics]]
        return {"per_critic": per_critic, "per_size": per_size, "per_constraint": per_constraint}


def _rename(value: Any, mapping: dict[str, str]) -> Any:
    if isinstance(value, str):
        return mapping.get(value, value)
    if isinstance(value, list):
        return [_rename(v, mapping) for v in value]
    if isinstance(value, dict):
        return {k: _rename(v, mapping) for k, v in value.items()}
    return value


def _knob_type(preset: Any) -> Any:
    """A knob's annotation, read from a preset value (a tuple: a list of names; None: any value)."""
    if preset is None:
        return Any
    return (Sequence[str] if isinstance(preset, tuple) else type(preset)) | None


def _knob_value(value: Any) -> Any:
    """A knob as the family reads it: a list (``kinds``) as a tuple."""
    return tuple(value) if isinstance(value, Sequence) and not isinstance(value, str) else value


def _jsonable(knobs: dict[str, Any]) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in knobs.items()}


class SynthTasks(SynthBenchmark, family="tasks"):
    """PDoctor-style daily tasks: order relations, time windows, durations, one task at a time."""

    description = "synthesized task schedules (PDoctor's order and time DSL), verified by Z3"

    def example_plan(self) -> PlanJSON:
        return {
            "schedule": [
                {"task": "task A", "start": "9:00", "end": "10:00"},
                {"task": "task B", "start": "10:00", "end": "12:00"},
            ]
        }


class SynthCalendar(SynthBenchmark, family="calendar"):
    """One meeting for a group over one or more days (NATURAL PLAN calendar style); small at easy."""

    description = "synthesized meeting scheduling (NATURAL PLAN calendar style), verified by Z3"

    def example_plan(self) -> PlanJSON:
        return {"day": "Monday", "start": "13:30", "end": "14:30"}


class SynthTrip(SynthBenchmark, family="trip"):
    """Multi-city itineraries with stays, direct flights and dated events (NATURAL PLAN trip style)."""

    description = "synthesized multi-city trips (NATURAL PLAN trip style), unique by default, verified by Z3"

    def example_plan(self) -> PlanJSON:
        return {
            "stays": [{"city": "Paris", "start_day": 1, "end_day": 3}, {"city": "Rome", "start_day": 3, "end_day": 5}]
        }


BENCHMARKS: dict[str, type[SynthBenchmark]] = {"tasks": SynthTasks, "calendar": SynthCalendar, "trip": SynthTrip}


def write_problems(problems: Iterable[Problem], path: Path) -> Iterator[Problem]:
    """Write one problem per line (the format ``benchmark.path=`` reads) as ``problems`` yields them, and
    yield each once it is written (nothing is kept: a caller counts what it needs)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for p in problems:
            fh.write(p.model_dump_json() + "\n")
            yield p
