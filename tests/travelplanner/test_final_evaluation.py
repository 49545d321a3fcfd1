"""A run's evaluation of its final plans (``TravelPlanner.evaluate_final``) takes an official check as done
where one of the benchmark's critics passed the very same plan and problem: its figures, rows and tables
are those of ``evaluate``, which runs every check, on golden plans and on chains of edited golden plans
(odd values, missing fields, plans the official code crashes on), with the critics in either mode."""

from __future__ import annotations

from typing import Any

import pytest

from critics.travelplanner import official
from critics.travelplanner.benchmark import EVALUATIONS_KEPT, TravelPlanner
from critics.travelplanner.critics import ALL_CRITICS, OFFICIAL_KEYS, official_key_of
from critics.travelplanner.greedy import GreedyGenerator
from critics.travelplanner.store import BoundedMemo
from modulo.benchmark import FinalPlan
from modulo.binding import bind_critics
from modulo.components import critics as registry
from modulo.critic import critic
from modulo.executor import FrozenPlan, call_on_copy
from modulo.types import Problem, Verdict
from tests.travelplanner.test_critic_cache import _parses, _problems
from tests.travelplanner.test_day_memo import _sequences


def _passed_by(tp: TravelPlanner, cases: list[tuple[Problem, Any]], mode: str) -> list[frozenset[str]]:
    """Per plan, the critics that passed it (applicable, passed, no error), run as the executor runs a batch."""
    critics = bind_critics(list(ALL_CRITICS), tp, {"mode": mode, "feedback": "hint"})
    out = []
    for problem, plan in cases:
        frozen = FrozenPlan.of(plan)
        mine = frozen.copy()
        names = set()
        for c in critics:
            outcome, mine = call_on_copy(c, problem, frozen, mine)
            if isinstance(outcome, Verdict) and outcome.passed and outcome.applicable and outcome.error is None:
                names.add(c.name)
        out.append(frozenset(names))
    return out


def _checks_run(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    original = official.run_check

    def counting(*args: Any) -> Any:
        calls[0] += 1
        return original(*args)

    monkeypatch.setattr(official, "run_check", counting)
    return calls


def _same_as_evaluate(
    tp: TravelPlanner, cases: list[tuple[Problem, Any]], mode: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[int, int]:
    """evaluate_final (with the critics' passes) against evaluate (every check run), nothing kept between
    them; the official checks each ran."""
    passed = _passed_by(tp, cases, mode)
    assert any(passed) and not all(len(p) == len(ALL_CRITICS) for p in passed)
    calls = _checks_run(monkeypatch)
    monkeypatch.setattr(tp, "_evaluations", BoundedMemo(EVALUATIONS_KEPT))
    plain = tp.evaluate([p for p, _ in cases], [plan for _, plan in cases])
    every = calls[0]
    monkeypatch.setattr(tp, "_evaluations", BoundedMemo(EVALUATIONS_KEPT))
    final = tp.evaluate_final(FinalPlan(p, plan, names) for (p, plan), names in zip(cases, passed, strict=True))
    assert final == plain
    return every, calls[0] - every


@pytest.mark.parametrize("mode", ["strict", "official"])
def test_edited_golden_plans_get_the_figures_of_every_check_run(
    tp: TravelPlanner, golden: list[dict[str, Any]], mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cases = [(p, plan) for p, plan in _sequences(golden, 30, 8, seed=15) if _parses(tp, p)]
    every, reused = _same_as_evaluate(tp, cases, mode, monkeypatch)
    assert reused < 0.7 * every, (reused, every)  # many checks were passed by a critic: not run again


@pytest.mark.slow  # about 2,000 golden plans x 13 critics, and three evaluations
@pytest.mark.parametrize("mode", ["strict", "official"])
def test_every_golden_plan_gets_the_figures_of_every_check_run(
    tp: TravelPlanner, golden: list[dict[str, Any]], mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cases = [(p, plan) for p, plan in _problems(golden) if _parses(tp, p)]
    assert len(cases) > 1000
    _same_as_evaluate(tp, cases, mode, monkeypatch)


def test_only_the_packages_own_critics_count(tp: TravelPlanner, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pass counts by the name of a critic registered to this package; a name taken over by another critic
    (or unknown) does not, and the check is run."""
    assert {name: official_key_of(name) for name in ALL_CRITICS} == OFFICIAL_KEYS
    assert official_key_of("format") is None and official_key_of("no_such_critic") is None

    @critic("budget", group="hard", description="a stand-in that passes everything")
    def lenient(problem: Problem, plan: Any) -> Verdict:
        return Verdict.ok()

    problem = tp.load("validation")[0]
    plan = GreedyGenerator(benchmark=tp).plan(problem)
    calls = _checks_run(monkeypatch)
    monkeypatch.setattr(tp, "_evaluations", BoundedMemo(EVALUATIONS_KEPT))
    tp.evaluate([problem], [plan])
    every = calls[0]
    registry.register("budget", lenient, replace=True)
    try:
        assert official_key_of("budget") is None
        monkeypatch.setattr(tp, "_evaluations", BoundedMemo(EVALUATIONS_KEPT))
        tp.evaluate_final([FinalPlan(problem, plan, frozenset({"budget"}))])
        assert calls[0] - every == every == 13  # every check ran, valid_cost too
    finally:
        registry.unregister("budget")
    assert official_key_of("budget") == "valid_cost"
    monkeypatch.setattr(tp, "_evaluations", BoundedMemo(EVALUATIONS_KEPT))
    tp.evaluate_final([FinalPlan(problem, plan, frozenset({"budget"}))])
    assert calls[0] - 2 * every == 12  # the package's own critic passed it: valid_cost is not run again
