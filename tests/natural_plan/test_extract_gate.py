"""The NATURAL PLAN gate sets of ``modulo critics extract`` (issue 18): gold answers and perturbations,
labelled by construction, never by a critic.

The built-in critics are a second, independent derivation of the same verdicts: every label the
construction gives must agree with them on all 100 subset problems of each task (a wrong construction
or a wrong critic fails this test). A scripted extraction admits a correct calendar critic and rejects
a permissive one with its counterexample.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from critics.natural_plan.benchmark import NaturalPlanBenchmark
from critics.natural_plan.extract import GOLD, labelled_variants
from modulo.binding import bind_benchmark
from modulo.errors import ConfigError

from .conftest import _np_dir

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "experiments" / "scripts" / "extract_natural_plan_calendar.json"
TASKS = ("calendar", "trip", "meeting")


def bench(task: str) -> NaturalPlanBenchmark:
    _np_dir()
    b = bind_benchmark(f"natural_plan/{task}")
    assert isinstance(b, NaturalPlanBenchmark)
    return b


@pytest.mark.parametrize("task", TASKS)
def test_every_label_agrees_with_the_built_in_critic(task: str) -> None:
    b = bench(task)
    critics = {c.name: c for c in b.critics()}
    labels: Counter[tuple[str, bool]] = Counter()
    disagreements = []
    for problem in b.select("subset100"):
        variants = labelled_variants(b, problem, seed=0)
        assert variants and variants[0][0].origin == GOLD, problem.id
        for variant, plan in variants:
            for name, (valid, why) in variant.labels.items():
                labels[(name, valid)] += 1
                if critics[name](problem, plan).accepts != valid:
                    disagreements.append((problem.id, variant.origin, name, valid, why))
    assert not disagreements, disagreements[:5]
    for factory in b.critic_factories:  # every constraint gets plans of both labels
        assert labels[(factory.name, True)] > 0 and labels[(factory.name, False)] > 0, factory.name


@pytest.mark.parametrize("task", TASKS)
def test_each_gate_set_holds_the_gold_answers_and_plans_of_both_labels(task: str) -> None:
    b = bench(task)
    for info in b.extraction_constraints():
        cases = b.gate_cases(info.name, problems=12, seed=0)
        problems = {c.problem.id for c in cases}
        assert 12 <= len(problems) <= 15, info.name  # 12 with an invalid plan, up to 3 with none
        assert any(not c.valid for c in cases) and any(c.valid for c in cases), info.name
        gold = [c for c in cases if c.origin == GOLD]
        assert len(gold) == len(problems) and all(c.valid for c in gold), info.name
        assert all(c.oracle for c in cases), info.name
        assert b.gate_cases(info.name, problems=12, seed=0) == cases  # deterministic for a seed
        assert {c.problem.id for c in b.gate_cases(info.name, problems=12, seed=1)} != problems


def test_labels_are_only_what_the_construction_proves() -> None:
    b = bench("trip")
    problem = b.select("subset100")[0]
    by_origin = {v.origin: v for v, _ in labelled_variants(b, problem, seed=0)}
    shifted = by_origin["shifted_trip"]  # the whole trip a day later: the same order and stay lengths
    assert shifted.labels["trip_total_days"][0] is False
    for kept in ("trip_each_city_once", "trip_flight_days", "trip_stay_lengths", "trip_direct_flights"):
        assert shifted.labels[kept][0] is True
    repeated = by_origin["repeated_city"]  # a city renamed: the order and the stay lengths say nothing proven
    assert repeated.labels["trip_each_city_once"][0] is False
    assert "trip_direct_flights" not in repeated.labels and "trip_stay_lengths" not in repeated.labels


def test_the_critic_view_holds_no_gold_answer_and_unknown_constraints_are_refused() -> None:
    b = bench("calendar")
    problem = b.select("subset100")[0]
    view = b.critic_view(problem)
    assert set(view) == {"query", "constraints"}
    assert problem.metadata["gold"].strip() not in json.dumps(view)
    with pytest.raises(ConfigError, match="calendar_busy"):
        b.gate_cases("calendar_bussy", problems=4, seed=0)


@pytest.mark.slow  # candidates run in sandbox worker processes
def test_a_scripted_extraction_admits_the_correct_busy_critic_and_rejects_the_permissive_one(tmp_path: Path) -> None:
    from modulo.extract.gate import GateSettings
    from modulo.extract.run import run_extraction
    from modulo.llm.base import LLMSettings
    from modulo.llm.client import build_client

    b = bench("calendar")
    client = build_client(LLMSettings(name="scripted", model="scripted", script=str(SCRIPT)))

    async def go() -> Any:
        try:
            return await run_extraction(
                b, ["calendar_duration", "calendar_busy"], client, GateSettings(timeout_s=5.0), tmp_path / "out"
            )
        finally:
            await client.aclose()

    duration, busy = asyncio.run(go()).results
    assert duration.admitted and len(duration.attempts) == 1
    first, second = busy.attempts
    assert not first.admitted and "training: recall" in first.reason
    assert first.training is not None and first.training.confusion.false_rejects == 0
    example = first.training.counterexamples[0]  # a slot that starts before a busy block and runs into it
    assert example["oracle_valid"] is False and example["critic_rejected"] is False
    assert example["origin"] == "busy_run_into" and "overlaps" in example["oracle"]
    assert second.admitted and busy.admitted
