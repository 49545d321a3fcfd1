"""A run-level dollar budget stops a run cleanly: every problem gets an outcome, those never started
included, the spending stops within one round of calls past the budget, and a resumed run spends
nothing more."""

from __future__ import annotations

from collections import Counter

import pytest
from click.testing import CliRunner

from modulo.cli.main import cli
from modulo.testing.drills import records, run_in_process
from modulo.types import Outcome

from .conftest import DrillFactory

N, CONCURRENCY, BUDGET = 24, 4, 0.6
PRICES = ["llm.price_input_per_mtok=400", "llm.price_output_per_mtok=400"]


@pytest.mark.slow
def test_dollar_budget_stops_the_run_with_every_problem_recorded(drill: DrillFactory) -> None:
    d = drill()
    overrides = d.overrides("budget", n=N, concurrency=CONCURRENCY, extra=[*PRICES, f"run.max_dollars={BUDGET}"])
    d.script(overrides)
    result = CliRunner().invoke(cli, ["run", *overrides])
    assert result.exit_code == 0, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output and "skipped" in result.output

    by_id = records(d.tmp / "budget")
    assert len(by_id) == N  # every problem has an outcome, those never started included
    outcomes = Counter(r.outcome.value for r in by_id.values())
    skipped = [r for r in by_id.values() if r.outcome is Outcome.SKIPPED]
    assert 0 < len(skipped) < N, outcomes
    for r in skipped:  # never started: no iteration, no call, no cost
        assert r.stop_reason == "run_budget" and r.iterations == [] and r.usage.calls == 0
    assert all(r.outcome is Outcome.SKIPPED for r in by_id.values() if not r.iterations)
    stopped = [r for r in by_id.values() if r.stop_reason == "run_budget" and r.iterations]
    assert len(stopped) <= CONCURRENCY  # only problems already under way when the money ran out

    # what the traces say was spent is what the server answered; the overshoot is at most one
    # iteration of each problem under way
    calls = [c for r in by_id.values() for it in r.iterations for c in it.calls]
    assert sum(not c.cached for c in calls) == d.fake.stats().requests
    spent = sum(c.usage.cost_usd for c in calls)
    per_iteration = max(it.usage.cost_usd for r in by_id.values() for it in r.iterations)
    assert BUDGET <= spent <= BUDGET + CONCURRENCY * per_iteration + 1e-9

    # resuming (skipped problems are retried) spends nothing: the budget is already used up
    before = d.fake.stats().requests
    again = run_in_process(overrides)
    assert d.fake.stats().requests == before
    assert len(records(d.tmp / "budget")) == N
    assert Counter(r.outcome.value for r in again.results) == outcomes


def test_a_problem_reached_after_the_money_ran_out_is_skipped_not_failed(drill: DrillFactory) -> None:
    # a problem can be taken up just before another one spends the last dollar; it then never runs an
    # iteration and must read 'skipped' (retried on resume), not 'failed' (no plan produced)
    import asyncio

    from modulo.build import build_session
    from modulo.metacontroller import RunBudget
    from modulo.testing.drills import compose

    d = drill()
    session = build_session(compose(d.overrides("late", n=2, extra=PRICES)))
    try:
        result = asyncio.run(session.loop.solve(session.problems[0], RunBudget(max_dollars=0.1, spent=0.1)))
    finally:
        asyncio.run(session.aclose())
    assert result.iterations == [] and result.stop_reason == "run_budget"
    assert result.outcome is Outcome.SKIPPED
    assert d.fake.stats().requests == 0


def test_a_dollar_budget_with_a_model_that_has_no_price_is_refused_before_any_call(drill: DrillFactory) -> None:
    """The drill's model has no list price: without prices its calls count as $0, so run.max_dollars (or
    metacontroller.max_dollars) could never stop the run. The run is refused (exit 2, nothing sent), and runs
    once the prices are set."""
    d = drill()
    priced = d.overrides("priced", n=2, concurrency=1, max_iterations=1, extra=[*PRICES, "run.max_dollars=50"])
    d.script(priced)  # the same two problems' answers serve every run below
    for cap in ("run.max_dollars=0.5", "metacontroller.max_dollars=0.5"):
        overrides = d.overrides("unpriced", n=2, concurrency=1, max_iterations=1, extra=[cap])
        result = CliRunner().invoke(cli, ["run", *overrides])
        assert result.exit_code == 2, result.output
        assert "no price is known for" in result.output and cap.split("=")[0] in result.output
        assert d.fake.stats().requests == 0
    result = CliRunner().invoke(cli, ["run", *priced])
    assert result.exit_code == 0, result.output
    assert d.fake.stats().requests > 0
