"""Injected contradictions are proved by Z3 (unsat core in the query's words), before any generator call."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from critics.synth.benchmark import SynthBenchmark
from critics.synth.families import get_family
from modulo.backprompt import AllStrategy
from modulo.generators import LLMGenerator
from modulo.llm.base import LLMSettings
from modulo.metacontroller import LoopSettings, Metacontroller
from modulo.reformulate import ParserReformulator
from modulo.types import LLMCall, Outcome, Usage

from .conftest import FAMILIES, bench


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize(("difficulty", "n"), [("easy", 25), ("medium", 6)])
def test_every_injected_contradiction_is_proved_and_named(family: str, difficulty: str, n: int) -> None:
    b = bench(family, n=n, seed=7, difficulty=difficulty, unsolvable_fraction=1.0)
    fam = get_family(family)
    for p in b.load("generated"):
        assert not p.metadata["solvable"] and p.metadata["witness"] is None
        injected = next(c for c in p.constraints["constraints"] if c["id"] == p.metadata["injected"])
        explanation = b.prove_unsolvable(p)
        assert explanation is not None, p.id
        assert f'"{injected["text"]}"' in explanation, (p.id, injected["text"], explanation)
        core = fam.unsat_core_ids(p.constraints)
        assert core is not None and injected["id"] in core
        # the core is unsatisfiable and minimal: dropping any member makes the rest satisfiable
        kept = [c for c in p.constraints["constraints"] if c["id"] in core]
        assert not fam.satisfiable({**p.constraints, "constraints": kept})
        for cid in core:
            assert fam.satisfiable({**p.constraints, "constraints": [c for c in kept if c["id"] != cid]}), (p.id, cid)
        # without the injected constraint the problem is satisfiable again
        clean = [c for c in p.constraints["constraints"] if c["id"] != injected["id"]]
        assert fam.satisfiable({**p.constraints, "constraints": clean})


@pytest.mark.parametrize("family", FAMILIES)
def test_mixed_sets_and_solvable_problems_are_not_flagged(family: str) -> None:
    problems = bench(family, n=24, seed=1, unsolvable_fraction=0.5).load("generated")
    flags = [p.metadata["solvable"] for p in problems]
    assert 5 <= flags.count(False) <= 19
    for p in problems:
        assert (bench(family, n=0).prove_unsolvable(p) is None) == p.metadata["solvable"], p.id


@pytest.mark.slow
def test_tasks_reversed_precedence_core_is_the_two_clashing_sentences() -> None:
    """PDoctor's injection: after(a, b) where before(a, b) holds; the core names both (plus a duration)."""
    fam = get_family("tasks")
    seen = cycles = 0
    for p in bench("tasks", n=40, seed=3, difficulty="medium", unsolvable_fraction=1.0).load("generated"):
        spec = p.constraints
        inj = next(c for c in spec["constraints"] if c["id"] == p.metadata["injected"])
        if inj["kind"] != "precedence":
            continue
        twin = [
            c
            for c in spec["constraints"]
            if c["kind"] == "precedence" and c["first"] == inj["then"] and c["then"] == inj["first"]
        ]
        core = fam.unsat_core_ids(spec)
        assert core is not None and twin and inj["id"] in core
        kinds = [c["kind"] for c in spec["constraints"] if c["id"] in core]
        cycles += twin[0]["id"] in core and set(kinds) <= {"precedence", "duration"} and kinds.count("precedence") == 2
        seen += 1
    # the smallest clash is preferred: nearly always the two-sentence cycle (39/41 on this seed)
    assert seen >= 5 and cycles >= 0.8 * seen, (cycles, seen)


class _NoCalls:
    """An LLM client that fails the test if the loop ever calls it."""

    settings = LLMSettings(name="none", model="none")

    def __init__(self, replies: dict[str, str] | None = None) -> None:
        self.replies = replies or {}
        self.calls = 0

    async def call(self, request: Any, stage: str) -> LLMCall:
        self.calls += 1
        pid = request.tags.get("problem_id", "")
        if pid not in self.replies:
            raise AssertionError(f"generator called for {pid}")
        return LLMCall(stage=stage, messages=list(request.messages), reply=self.replies[pid], usage=Usage(calls=1))  # type: ignore[arg-type]

    async def aclose(self) -> None:
        pass


def _loop(b: SynthBenchmark, client: _NoCalls) -> Metacontroller:
    from modulo import components
    from modulo.registry import bind_arguments

    critics = []
    for name in b.critic_names():
        factory = components.critics.get(name)
        critics.append(factory(**bind_arguments("critic", name, factory, {}, inject={"benchmark": b})))
    return Metacontroller(
        benchmark=b,
        generator=LLMGenerator(benchmark=b),
        reformulator=ParserReformulator(b),
        critics=critics,
        strategy=AllStrategy(),
        llm=client,
        settings=LoopSettings(max_iterations=3),
    )


@pytest.mark.parametrize("family", FAMILIES)
def test_loop_stops_unsolvable_without_a_generator_call_and_certifies_the_witness(family: str) -> None:
    b = bench(family, n=6, seed=2, unsolvable_fraction=0.5)
    problems = b.load("generated")
    texts = {p.id: b.render_plan(p.metadata["witness"]) for p in problems if p.metadata["solvable"]}
    client = _NoCalls(texts)
    loop = _loop(b, client)
    for p in problems:
        before = client.calls
        result = asyncio.run(loop.solve(p))
        if p.metadata["solvable"]:
            assert result.outcome is Outcome.CERTIFIED, (p.id, result.stop_reason)
            assert result.best_plan == p.metadata["witness"]
        else:
            assert result.outcome is Outcome.UNSOLVABLE and client.calls == before
            assert result.explanation and "No plan can meet" in result.explanation
    assert 0 < len(texts) < len(problems)


def test_unsat_cores_are_memoised_per_spec_and_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """The unsolvability check and the final evaluation share one Z3 call per problem; the memo keeps
    at most CORE_CACHE_SIZE entries (oldest dropped), and a hit is a copy the caller may change."""
    import critics.synth.family as family_mod

    fam = get_family("calendar")
    monkeypatch.setattr(fam, "_core_cache", {}, raising=False)
    monkeypatch.setattr(family_mod, "CORE_CACHE_SIZE", 3)
    calls: list[str] = []
    compute = fam._compute_core

    def counted(spec: dict[str, Any]) -> list[str] | None:
        calls.append(str(spec["constraints"][0]["id"]))
        return compute(spec)

    monkeypatch.setattr(fam, "_compute_core", counted)
    problems = list(bench("calendar", n=5, seed=11, unsolvable_fraction=0.6).load("generated"))
    first = [fam.unsat_core_ids(p.constraints) for p in problems[:3]]
    assert any(c is not None for c in first), "the seed should give at least one unsolvable problem"
    again = [fam.unsat_core_ids(p.constraints) for p in problems[:3]]
    assert again == first and len(calls) == 3  # all three from the memo
    at = next(i for i, c in enumerate(again) if c is not None)
    again[at].append("changed by the caller")  # type: ignore[union-attr]
    assert fam.unsat_core_ids(problems[at].constraints) == first[at]
    fam.unsat_core_ids(problems[3].constraints)  # a fourth spec: the oldest entry goes
    assert len(fam._core_cache) == 3
    fam.unsat_core_ids(problems[0].constraints)
    assert len(calls) == 5  # the first problem's core was computed again


@pytest.mark.parametrize("family", FAMILIES)
def test_a_witness_the_checks_accept_proves_satisfiable_without_z3(
    family: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A solvable problem's recorded witness, accepted by every check, answers the unsolvability question
    and the evaluation's ``solvable`` with no unsat-core call; a witness that breaks a constraint (or
    none) leaves the question to Z3, which still proves injected contradictions."""
    fam = get_family(family)
    b = bench(family, n=0)
    calls: list[int] = []
    compute = fam._compute_core
    monkeypatch.setattr(fam, "_compute_core", lambda spec: calls.append(1) or compute(spec))
    monkeypatch.setattr(fam, "_core_cache", {}, raising=False)
    problems = bench(family, n=12, seed=5, unsolvable_fraction=0.5).load("generated")
    solvable = [p for p in problems if p.metadata["solvable"]]
    unsolvable = [p for p in problems if not p.metadata["solvable"]]
    assert solvable and unsolvable
    for p in solvable:
        assert b.prove_unsolvable(p) is None
        assert b.evaluate([p], [p.metadata["witness"]]).per_problem[0]["solvable"] is True
    assert calls == []
    for p in unsolvable:
        assert b.prove_unsolvable(p) is not None
    assert len(calls) == len(unsolvable)
    # a witness that breaks a constraint proves nothing: Z3 decides (and finds the problem solvable)
    import random

    p = solvable[0]
    wrong = next(
        m.plan
        for m in fam.mutants(random.Random(0), p.constraints, p.metadata["witness"])
        if m.plan
        and not fam.check_format(p.constraints, m.plan)
        and any(fam.violation(c, p.constraints, m.plan) is not None for c in p.constraints["constraints"])
    )
    before = len(calls)
    assert b.prove_unsolvable(p.model_copy(update={"metadata": {**p.metadata, "witness": wrong}})) is None
    assert len(calls) == before + 1
    assert not fam.witnessed(p.constraints, None) and not fam.witnessed(p.constraints, {"nonsense": 1})


@pytest.mark.parametrize("family", FAMILIES)
def test_the_loops_witness_check_touches_no_z3_object(family: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The unsolvability check runs in a worker thread while critics use Z3's shared context in
    another (not thread-safe: a segmentation fault): its witness check is Python alone."""
    import z3

    fam = get_family(family)
    problems = [p for p in bench(family, n=6, seed=5).load("generated") if p.metadata["solvable"]]

    def no_z3(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("Z3 used by the witness check")

    for name in ("IntVal", "Int", "Bool", "Solver", "Context", "And", "Or", "Not", "Implies", "Sum", "If"):
        monkeypatch.setattr(z3, name, no_z3)
    monkeypatch.setattr(type(fam), "plan_rows", no_z3)
    monkeypatch.setattr(type(fam), "z3_valid", no_z3)
    for p in problems:
        assert fam.witnessed(p.constraints, p.metadata["witness"])
        assert bench(family, n=0).prove_unsolvable(p) is None
