"""The common machinery of a synthesized problem family.

A family knows how to build a constraint skeleton, propose candidate constraints, encode every
constraint kind over *rows* (the items of a plan: Z3 terms while synthesizing, constants while
checking a plan), turn a Z3 model into a plan, render the constraint set as text (several wordings
per kind) and parse that text back. Everything else is shared here:

* :meth:`Family.synthesize`: PDoctor's Alg. 1. Each candidate is added under ``push`` and kept when
  the set stays satisfiable (and the candidate is not already implied); the last model is the
  witness. Optionally a blocking clause on the witness is added and, while another plan exists, a
  constraint that tells the two apart is added, until the witness is the only plan.
* :meth:`Family.inject_contradiction`: a constraint that clashes with the set, proved by Z3.
* :meth:`Family.explain_unsat`: ``assert_and_track`` + ``unsat_core`` (shrunk to a minimal core),
  rendered in the query's own words.
* :meth:`Family.z3_truths`: Z3's verdict on each constraint for a concrete plan (the oracle).
* :meth:`Family.violations`: the pure-Python checks behind the critics.
"""

from __future__ import annotations

import copy
import random
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import z3
from pydantic import BaseModel, ConfigDict

from modulo.errors import ConfigError, PlanFormatError
from modulo.types import PlanJSON, Problem

from .common import (
    Constraint,
    Formula,
    as_z3,
    check_choice,
    match_name,
    neg,
    new_solver,
    rng_for,
    truth,
    unsat_core,
)

Spec = dict[str, Any]
Row = tuple[Any, ...]


def named_rows(names: Sequence[str], entries: Iterable[tuple[str, int, int]]) -> list[Row]:
    """A plan's concrete rows from its ``(name, start, end)`` entries: the name's index in ``names``
    (matched loosely, -1 when it is not one of them), then start and end as Z3 values."""
    index = {name: i for i, name in enumerate(names)}
    rows: list[Row] = []
    for name, s, e in entries:
        known = match_name(name, names)
        rows.append((index[known] if known is not None else -1, z3.IntVal(s), z3.IntVal(e)))
    return rows


def reordered(rng: random.Random, fixed: list[Constraint], rest: list[Constraint]) -> list[Constraint]:
    """``fixed``, then ``rest`` in a random order, numbered again ``c1``, ``c2``, ... (the same requirements
    written in another order)."""
    rng.shuffle(rest)
    constraints = fixed + rest
    for i, c in enumerate(constraints):
        c["id"] = f"c{i + 1}"
    return constraints


# the base of the families' plan models: no field beyond the declared ones
class PlanModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


DIFFICULTIES = ("easy", "medium", "hard")

#: unsat cores kept per family (a digest and a few ids each: about 200 bytes): a 20,000-problem run's
#: final evaluation reuses the cores its unsolvability checks computed
CORE_CACHE_SIZE = 20_000
_CORE_LOCK = threading.Lock()

#: syntheses kept per process (the spec and witness of one problem each: a few KB): a benchmark built
#: again with the same arguments (the jobs of a sweep in one process, ``modulo check`` then ``run``, a
#: variant of a problem) reuses the Z3 search; the oldest entries are dropped past this size
SYNTHESIS_CACHE_SIZE = 512
_SYNTHESES: dict[tuple[Any, ...], Synthesis] = {}
_SYNTHESIS_LOCK = threading.Lock()


def clear_synthesis_cache() -> None:
    """Forget every kept synthesis (the next :meth:`Family.synthesize` runs Z3 again)."""
    with _SYNTHESIS_LOCK:
        _SYNTHESES.clear()


@dataclass
class Mutant:
    """A changed plan and how it was made (``kind`` is the mutation operator, ``target`` what it aimed at)."""

    kind: str
    plan: PlanJSON
    target: str = ""


@dataclass
class Synthesis:
    """What the synthesizer produced for one seed."""

    spec: Spec
    witness: PlanJSON | None
    unique: bool | None
    injected: str | None = None
    checks: int = 0
    tries: int = 0
    stats: dict[str, Any] = field(default_factory=dict)


class Family(ABC):
    """One family of synthesized problems (subclassed by tasks, calendar and trip)."""

    name: ClassVar[str] = ""
    #: the benchmark's name, ``synth/<name>``
    benchmark: ClassVar[str] = ""
    plan_model: ClassVar[type[BaseModel]]
    #: critic name -> the constraint kinds it checks (one critic per kind of requirement)
    critic_kinds: ClassVar[dict[str, tuple[str, ...]]] = {}
    #: the spec's key that lists its named entities (tasks, people, cities)
    entities: ClassVar[str] = ""
    #: the constraints' fields that hold an entity's name
    entity_fields: ClassVar[tuple[str, ...]] = ()
    #: topic -> the names its entities are drawn from
    vocabulary: ClassVar[Mapping[str, Sequence[str]]] = {}
    #: the topics (skins) problems can be written in: the vocabulary's
    topics: ClassVar[tuple[str, ...]] = ()
    #: difficulty -> default knobs
    presets: ClassVar[dict[str, dict[str, Any]]] = {}
    #: knobs the family accepts besides the presets' (name -> default)
    mutation_kinds: ClassVar[tuple[str, ...]] = ()
    #: whether a problem is made to have exactly one plan unless the benchmark's ``unique`` says otherwise
    unique_by_default: ClassVar[bool] = False
    #: how many rounds the uniqueness loop may add distinguishing constraints
    unique_rounds: ClassVar[int] = 25
    #: candidate tries per wanted constraint before giving up
    tries_per_constraint: ClassVar[int] = 6

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.benchmark = f"synth/{cls.name}"
        cls.topics = tuple(cls.vocabulary)

    # == knobs ==================================================================================
    def knobs(self, difficulty: str, overrides: dict[str, Any]) -> dict[str, Any]:
        check_choice("difficulty", difficulty, DIFFICULTIES)
        knobs = dict(self.presets[difficulty])
        for key, value in overrides.items():
            if value is None:
                continue
            if key not in knobs:
                raise ConfigError(f"{self.benchmark} has no knob {key!r}; knobs: {sorted(knobs)}")
            knobs[key] = value
        self.validate_knobs(knobs)
        return knobs

    def validate_knobs(self, knobs: dict[str, Any]) -> None:  # noqa: B027 (optional hook)
        """Raise ConfigError on impossible knob values."""

    def int_knob(self, knobs: dict[str, Any], key: str, low: int = 0, high: int | None = None, said: str = "") -> int:
        """``knobs[key]``, checked to be an integer from ``low`` to ``high``; else a ConfigError saying it must
        be ``said`` (by default "LOW..HIGH", or "a non-negative integer" with no ``high``)."""
        value = knobs[key]
        if not isinstance(value, int) or value < low or (high is not None and value > high):
            said = said or (f"{low}..{high}" if high is not None else "a non-negative integer")
            raise ConfigError(f"{self.benchmark}: {key} must be {said}, got {value!r}")
        return value

    # == family-specific pieces =================================================================
    @abstractmethod
    def skeleton(self, rng: random.Random, knobs: dict[str, Any], topic: str) -> Spec:
        """Entities plus the base constraints (durations, stays, work hours, ...), without texts."""

    @abstractmethod
    def symbolic_rows(self, spec: Spec, ctx: Any = None) -> tuple[list[Row], list[Formula]]:
        """Z3 rows (in ``ctx``) for a plan of ``spec`` and the domain formulas tying them (never tracked)."""

    @abstractmethod
    def encode(self, c: Constraint, spec: Spec, rows: Sequence[Row]) -> Formula:
        """The formula of one constraint over rows (symbolic or concrete)."""

    @abstractmethod
    def read_plan(self, plan: PlanJSON) -> Any:
        """The plan's entries in plain Python, what :meth:`plan_rows` makes its rows of. Raise
        PlanFormatError. No Z3 here: format checks run on several threads at once (the critics, the
        unsolvability checks), and Z3 values built in its shared default context from two threads at
        once crash the process."""

    @abstractmethod
    def plan_rows(self, spec: Spec, plan: PlanJSON) -> list[Row]:
        """Concrete rows of a plan (Z3 integer constants for times). Raise PlanFormatError."""

    @abstractmethod
    def model_plan(self, spec: Spec, model: Any, rows: Sequence[Row]) -> PlanJSON:
        """The plan a Z3 model describes."""

    @abstractmethod
    def candidate(self, rng: random.Random, spec: Spec, witness: PlanJSON, knobs: dict[str, Any]) -> Constraint | None:
        """A random constraint to try adding (often guided by the current witness)."""

    @abstractmethod
    def wanted(self, knobs: dict[str, Any]) -> int:
        """How many candidate constraints the synthesizer should keep."""

    def block(self, spec: Spec, rows: Sequence[Row], plan: PlanJSON) -> Formula:
        """'The plan is not ``plan``' in the family's sense of sameness (for uniqueness)."""
        raise NotImplementedError

    def distinguish(self, rng: random.Random, spec: Spec, witness: PlanJSON, other: PlanJSON) -> Constraint | None:
        """A constraint the witness satisfies and ``other`` violates."""
        return None

    @abstractmethod
    def contradictions(self, rng: random.Random, spec: Spec, witness: PlanJSON) -> list[Constraint]:
        """Candidate constraints that clash with the set (tried in order until one is UNSAT)."""

    @abstractmethod
    def render(self, spec: Spec, rng: random.Random) -> tuple[str, Spec]:
        """The query text and the spec with every constraint's ``text`` filled in."""

    @abstractmethod
    def parse_query(self, text: str) -> Spec:
        """Recover entities and constraints (without ids and texts) from a rendered query."""

    @abstractmethod
    def violation(self, c: Constraint, spec: Spec, plan: PlanJSON) -> str | None:
        """Why ``plan`` breaks ``c`` (quoting the plan and the query), or None when it keeps it. Pure
        Python. It never names a value the plan lacks that would fix it: that is :meth:`hint`'s job."""

    def hint(self, c: Constraint, spec: Spec, plan: PlanJSON) -> str | None:
        """A constructive suggestion for a broken ``c`` (a concrete value that fixes it), or None.
        Sent only at feedback level ``hint``."""
        return None

    @abstractmethod
    def parse_plan(self, text: str, spec: Spec) -> PlanJSON:
        """Deterministic text -> plan. Raise PlanFormatError when no plan is in the text."""

    @abstractmethod
    def render_plan(self, plan: PlanJSON) -> str:
        """A plan in the text format the prompts ask for (parse_plan reads it back)."""

    def check_format(self, spec: Spec, plan: PlanJSON) -> list[str]:
        """Problems that stop the critics from reading the plan at all (by default: what reading its
        entries raises)."""
        try:
            self.read_plan(plan)
        except PlanFormatError as exc:
            return [str(exc)]
        return []

    @abstractmethod
    def mutants(self, rng: random.Random, spec: Spec, plan: PlanJSON) -> list[Mutant]:
        """Plan mutants for critic audits (swap, shift, drop, duplicate, collide, boundary)."""

    def rename(self, spec: Spec, mapping: dict[str, str], topic: str) -> Spec:
        """The same spec with entities renamed (``mapping``) under another topic: the entity list and the
        constraints' ``entity_fields``, the topic's own words (``topic_words``); texts are dropped."""
        out = copy.deepcopy(spec)
        out["topic"] = topic
        out.update(self.topic_words(topic))
        out[self.entities] = [mapping[name] for name in spec[self.entities]]
        for c in out["constraints"]:
            for key in self.entity_fields:
                if key in c:
                    c[key] = mapping[c[key]]
            c.pop("text", None)
        return out

    def topic_words(self, topic: str) -> dict[str, Any]:
        """The spec's words that come with its topic (a role, an adjective, ...), besides the names."""
        return {}

    def topic_names(self, rng: random.Random, spec: Spec, topic: str) -> dict[str, str]:
        """A renaming of the spec's entities into ``topic``'s vocabulary."""
        names = spec[self.entities]
        return dict(zip(names, rng.sample(list(self.vocabulary[topic]), len(names)), strict=True))

    def restructure(self, rng: random.Random, spec: Spec) -> Spec:
        """An equivalent constraint set written differently (default: shuffled order)."""
        out = copy.deepcopy(spec)
        rng.shuffle(out["constraints"])
        return out

    def format_hint(self) -> str:
        """One line on the answer format, for prompts."""
        return ""

    # == shared machinery =======================================================================
    def synthesize(
        self,
        seed: int,
        knobs: dict[str, Any],
        *,
        topic: str | None = None,
        unique: bool = False,
        unsolvable: bool = False,
    ) -> Synthesis:
        """Alg. 1: grow a satisfiable constraint set for ``seed``; optionally make it unique or unsolvable.

        The result depends on the arguments only (its own random generator and Z3 context), so it is
        kept (see ``SYNTHESIS_CACHE_SIZE``): the same arguments again get a copy of it, not a new search."""
        # the family's search settings too: an instance may override the class's
        search = (self.unique_rounds, self.tries_per_constraint)
        key = (type(self), search, seed, repr(sorted(knobs.items())), topic, unique, unsolvable)
        with _SYNTHESIS_LOCK:
            kept = _SYNTHESES.get(key)
        if kept is None:
            kept = self._synthesize(seed, knobs, topic=topic, unique=unique, unsolvable=unsolvable)
            with _SYNTHESIS_LOCK:
                while len(_SYNTHESES) >= SYNTHESIS_CACHE_SIZE:
                    del _SYNTHESES[next(iter(_SYNTHESES))]  # the oldest entry (dicts keep insertion order)
                _SYNTHESES[key] = kept
        return copy.deepcopy(kept)

    def _synthesize(
        self,
        seed: int,
        knobs: dict[str, Any],
        *,
        topic: str | None,
        unique: bool,
        unsolvable: bool,
    ) -> Synthesis:
        rng = rng_for(self.name, "synth", seed)
        chosen_topic = topic or self.topics[rng.randrange(len(self.topics))]
        check_choice("topic", chosen_topic, self.topics)
        spec = self.skeleton(rng, knobs, chosen_topic)
        for i, c in enumerate(spec["constraints"]):
            c.setdefault("id", f"c{i + 1}")
        ctx = z3.Context()
        rows, domain = self.symbolic_rows(spec, ctx)
        meta = self.meta_kinds()
        solver = self._solver(spec, rows, domain, include_meta=False, ctx=ctx)
        checks = 1
        if solver.check() != z3.sat:
            raise RuntimeError(f"{self.name}: skeleton of seed {seed} is unsatisfiable (a generator bug)")
        witness = self.model_plan(spec, solver.model(), rows)
        want = self.wanted(knobs)
        kept = tries = 0
        seen = {self._key(c) for c in spec["constraints"]}
        while kept < want and tries < want * self.tries_per_constraint:
            tries += 1
            cand = self.candidate(rng, spec, witness, knobs)
            if cand is None or self._key(cand) in seen:
                continue
            f = self.encode(cand, spec, rows)
            if f is True and not self.may_be_implied(cand):
                continue
            if not self.may_be_implied(cand):
                solver.push()
                solver.add(as_z3(neg(f), ctx))
                implied = solver.check() == z3.unsat
                solver.pop()
                checks += 1
                if implied:
                    continue
            solver.push()
            solver.add(as_z3(f, ctx))
            checks += 1
            if solver.check() == z3.sat:
                self._append(spec, cand)
                seen.add(self._key(cand))
                witness = self.model_plan(spec, solver.model(), rows)
                kept += 1
            else:
                solver.pop()
        if any(c["kind"] in meta for c in spec["constraints"]):
            solver = self._solver(spec, rows, domain, include_meta=True, ctx=ctx)
            checks += 1
            if solver.check() != z3.sat:
                raise RuntimeError(f"{self.name}: seed {seed} lost its solution to a selection constraint (bug)")
            witness = self.model_plan(spec, solver.model(), rows)
        is_unique: bool | None = None
        if unique:
            is_unique = False
            for _round in range(self.unique_rounds):
                solver.push()
                solver.add(as_z3(self.block(spec, rows, witness), ctx))
                checks += 1
                if solver.check() == z3.unsat:
                    solver.pop()
                    is_unique = True
                    break
                other = self.model_plan(spec, solver.model(), rows)
                solver.pop()
                cand = self.distinguish(rng, spec, witness, other)
                if cand is None or self._key(cand) in seen:
                    break
                if not truth(self.encode(cand, spec, self.plan_rows(spec, witness))):
                    raise RuntimeError(f"{self.name}: distinguishing constraint rejects the witness (bug)")
                self._append(spec, cand)
                seen.add(self._key(cand))
                if any(c["kind"] in meta for c in spec["constraints"]):
                    solver = self._solver(spec, rows, domain, include_meta=True, ctx=ctx)
                else:
                    solver.add(as_z3(self.encode(cand, spec, rows), ctx))
        result = Synthesis(spec=spec, witness=witness, unique=is_unique, checks=checks, tries=tries)
        result.stats = {"kept": kept, "wanted": want}
        if unsolvable:
            injected = self.inject_contradiction(rng, spec, witness)
            result.injected = injected
            result.witness = None
            result.stats["witness_before_injection"] = witness
        return result

    def may_be_implied(self, c: Constraint) -> bool:
        """Whether a candidate already implied by the set may still be kept (busy blocks: realism)."""
        return False

    def meta_kinds(self) -> tuple[str, ...]:
        """Kinds whose formula depends on the other constraints (left out while the set grows)."""
        return ()

    def _solver(
        self, spec: Spec, rows: Sequence[Row], domain: Sequence[Formula], *, include_meta: bool, ctx: Any = None
    ) -> Any:
        solver = new_solver(ctx)
        for f in domain:
            solver.add(as_z3(f, ctx))
        meta = self.meta_kinds()
        for c in spec["constraints"]:
            if include_meta or c["kind"] not in meta:
                solver.add(as_z3(self.encode(c, spec, rows), ctx))
        return solver

    def inject_contradiction(self, rng: random.Random, spec: Spec, witness: PlanJSON) -> str:
        """Add a constraint that makes ``spec`` unsatisfiable (at a random place); return its id."""
        ctx = z3.Context()
        rows, domain = self.symbolic_rows(spec, ctx)
        for cand in self.contradictions(rng, spec, witness):
            trial = {**spec, "constraints": [*spec["constraints"], cand]}
            solver = self._solver(trial, rows, domain, include_meta=True, ctx=ctx)
            if solver.check() == z3.unsat:
                cid = self._append(spec, cand)
                cs = spec["constraints"]
                moved = cs.pop()
                lo = self._first_free_position(spec)
                cs.insert(rng.randint(lo, len(cs)), moved)
                return cid
        raise RuntimeError(f"{self.name}: no contradiction could be injected (a generator bug)")

    def _first_free_position(self, spec: Spec) -> int:
        """Index from which constraints may be shuffled (skeleton constraints stay first)."""
        return int(spec.get("n_base", 0))

    def explain_unsat(self, spec: Spec) -> str | None:
        """A readable explanation when ``spec`` has no plan (a minimal unsat core), else None."""
        core = self.unsat_core_ids(spec)
        if core is None:
            return None
        by_id = {c["id"]: c for c in spec["constraints"]}
        quoted = "; ".join(f'"{by_id[cid].get("text") or self.describe(by_id[cid])}"' for cid in core)
        return f"No plan can meet all of these requirements at once: {quoted}."

    def witnessed(self, spec: Spec, plan: PlanJSON, *, z3_check: bool = False) -> bool:
        """Whether ``plan`` (a problem's recorded witness) shows that ``spec`` has a plan: every
        constraint's Python check accepts it (``z3_check``: and it reads, and Z3 agrees, for the Z3
        notion of solvable). A cheap proof of satisfiability (a few tenths of a millisecond, against
        several milliseconds for an unsat-core call); False says nothing (the caller asks Z3).

        Without ``z3_check`` it touches no Z3 object: Z3's shared context is not thread-safe, and the
        loop's unsolvability check runs in a worker thread while critics use that context in another."""
        if not isinstance(plan, dict | list) or not plan:
            return False
        try:
            if any(self.violation(c, spec, plan) is not None for c in spec["constraints"]):
                return False
            if z3_check and self.check_format(spec, plan):
                return False
        except (PlanFormatError, KeyError, TypeError, ValueError, IndexError, AttributeError):
            return False
        return not z3_check or self.z3_valid(spec, plan)

    def satisfiable(self, spec: Spec) -> bool:
        """Whether some plan meets every constraint of ``spec`` (one Z3 call; the answer needs no fresh context)."""
        rows, domain = self.symbolic_rows(spec)
        return bool(self._solver(spec, rows, domain, include_meta=True).check() == z3.sat)

    def unsat_core_ids(self, spec: Spec) -> list[str] | None:
        """Ids of a minimal unsatisfiable subset of ``spec``'s constraints (None when satisfiable); memoised
        by a digest of the spec (without the sentences), the oldest entries dropped past
        ``CORE_CACHE_SIZE``: a run's unsolvability check and its final evaluation of the same problem
        then share one Z3 call, even over thousands of problems, in a few MB."""
        import hashlib
        import json

        key = hashlib.sha256(
            (
                json.dumps({k: v for k, v in spec.items() if k != "constraints"}, sort_keys=True)
                + json.dumps([{k: v for k, v in c.items() if k != "text"} for c in spec["constraints"]], sort_keys=True)
            ).encode()
        ).digest()
        cache: dict[bytes, list[str] | None] = self.__dict__.setdefault("_core_cache", {})
        with _CORE_LOCK:
            known = key in cache
            hit = cache.get(key)
        if not known:
            hit = self._compute_core(spec)
            with _CORE_LOCK:
                while len(cache) >= CORE_CACHE_SIZE:
                    del cache[next(iter(cache))]  # the oldest entry (dicts keep insertion order)
                cache[key] = hit
        return None if hit is None else list(hit)

    def _compute_core(self, spec: Spec) -> list[str] | None:
        ctx = z3.Context()
        rows, domain = self.symbolic_rows(spec, ctx)
        tracked = [(c["id"], self.encode(c, spec, rows)) for c in spec["constraints"]]
        structural = [c["id"] for c in spec["constraints"] if c["kind"] in self.structural_kinds()]
        return unsat_core(domain, tracked, prefer_drop=structural, ctx=ctx)

    def structural_kinds(self) -> tuple[str, ...]:
        """Kinds an explanation should name only when nothing else explains the clash."""
        return ()

    def describe(self, c: Constraint) -> str:
        args = ", ".join(f"{k}={v}" for k, v in c.items() if k not in ("id", "kind", "text"))
        return f"{c['kind']}({args})"

    def solve(self, spec: Spec, ctx: Any = None) -> PlanJSON | None:
        """A plan meeting every constraint of ``spec`` (selection ones included), found by Z3, or None when
        there is none. A fresh context unless ``ctx`` is given, so the plan depends on the constraint set
        only (a caller that passes one makes it depend on its own, deterministic, sequence of calls)."""
        ctx = ctx if ctx is not None else z3.Context()
        rows, domain = self.symbolic_rows(spec, ctx)
        solver = self._solver(spec, rows, domain, include_meta=True, ctx=ctx)
        if solver.check() != z3.sat:
            return None
        return self.model_plan(spec, solver.model(), rows)

    # -- multi-turn: requirements held back, added or changed (see :mod:`.multiturn`) -----------
    def may_hide(self, c: Constraint, visible: Spec) -> bool:
        """Whether ``c`` may be held back when ``visible`` is what the query still states."""
        return True

    def validate_constraint(self, c: Constraint, spec: Spec) -> None:
        """Raise ValueError when ``c`` is not a constraint of this family over ``spec``'s entities."""
        if c.get("kind") not in self.kinds():
            known = list(self.kinds())
            raise ValueError(f"{self.benchmark}: unknown constraint kind {c.get('kind')!r} (kinds: {known})")
        try:
            rows, _domain = self.symbolic_rows(spec)
            self.encode(c, spec, rows)
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise ValueError(f"{self.benchmark}: constraint {c} does not fit this problem ({exc})") from None

    def sentence(self, c: Constraint, spec: Spec) -> str:
        """``c`` in the query's words (its first wording)."""
        return self.describe(c)

    def parse_requirement(self, text: str, spec: Spec) -> Constraint:
        """One requirement written in the query's words, as a constraint (ValueError when not understood)."""
        raise ValueError(f"{self.benchmark}: give an added requirement as an object with its 'kind', not as text")

    def z3_truths(self, spec: Spec, plan: PlanJSON) -> dict[str, bool] | None:
        """Z3's verdict on each constraint for ``plan``; None when the plan cannot be read at all."""
        try:
            rows = self.plan_rows(spec, plan)
        except (PlanFormatError, KeyError, TypeError, ValueError):
            return None
        return {c["id"]: truth(self.encode(c, spec, rows)) for c in spec["constraints"]}

    def z3_valid(self, spec: Spec, plan: PlanJSON) -> bool:
        """Whether ``plan`` satisfies the whole constraint set, asked of a Z3 solver in one call."""
        try:
            rows = self.plan_rows(spec, plan)
        except (PlanFormatError, KeyError, TypeError, ValueError):
            return False
        solver = new_solver()
        for c in spec["constraints"]:
            solver.add(as_z3(self.encode(c, spec, rows)))
        return bool(solver.check() == z3.sat)

    def violations(self, spec: Spec, plan: PlanJSON, kinds: Sequence[str]) -> tuple[int, list[tuple[Constraint, str]]]:
        """(how many constraints of ``kinds`` apply, the broken ones with evidence)."""
        cs = [c for c in spec["constraints"] if c["kind"] in kinds]
        broken = []
        for c in cs:
            why = self.violation(c, spec, plan)
            if why is not None:
                broken.append((c, why))
        return len(cs), broken

    def kinds(self) -> tuple[str, ...]:
        return tuple(k for ks in self.critic_kinds.values() for k in ks)

    def critic_for_kind(self, kind: str) -> str:
        for name, ks in self.critic_kinds.items():
            if kind in ks:
                return name
        raise KeyError(kind)

    # -- helpers ---------------------------------------------------------------------------------
    @staticmethod
    def _key(c: Constraint) -> str:
        import json

        return json.dumps({k: v for k, v in c.items() if k not in ("id", "text")}, sort_keys=True)

    @staticmethod
    def _append(spec: Spec, c: Constraint) -> str:
        used = {x["id"] for x in spec["constraints"]}
        n = len(spec["constraints"]) + 1
        while f"c{n}" in used:
            n += 1
        c = dict(c)
        c["id"] = f"c{n}"
        spec["constraints"].append(c)
        return str(c["id"])


def problem_from(
    family: Family,
    synthesis: Synthesis,
    *,
    problem_id: str,
    wording_seed: int,
    meta: dict[str, Any],
) -> Problem:
    """Render a synthesis into a Problem (query text, constraints, metadata with the witness)."""
    query, spec = family.render(synthesis.spec, rng_for(family.name, "wording", wording_seed))
    metadata = {
        "family": family.name,
        "solvable": synthesis.injected is None,
        "witness": synthesis.witness,
        "unique": synthesis.unique,
        "injected": synthesis.injected,
        "z3_checks": synthesis.checks,
        "candidate_tries": synthesis.tries,
        "n_constraints": len(spec["constraints"]),
        "wording_seed": wording_seed,
        "topic": spec["topic"],
        **synthesis.stats,
        **meta,
    }
    return Problem(
        id=problem_id,
        benchmark=family.benchmark,
        query=query,
        constraints=spec,
        metadata=metadata,
        solvable=synthesis.injected is None,
    )
