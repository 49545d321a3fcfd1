"""The strict checks' shared reading of a plan (critics/travelplanner/reading.py) gives the verdicts and
feedback of a reading made afresh by every critic, reads each plan once, and is never reused for a
plan that changed or for another query."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from critics.travelplanner import reading as reading_module
from critics.travelplanner import strict
from critics.travelplanner.benchmark import TravelPlanner
from critics.travelplanner.checks import ALL_KEYS
from critics.travelplanner.critics import ALL_CRITICS
from modulo.binding import bind_critics
from modulo.executor import FrozenPlan, call_on_copy
from modulo.types import Problem
from tests.travelplanner.test_critic_cache import _parses, _problems


class _Counting(reading_module.PlanReading):
    built = 0

    def __init__(self, *args: Any) -> None:
        type(self).built += 1
        super().__init__(*args)


def _batch_verdicts(tp: TravelPlanner, cases: list[tuple[Problem, Any]], mode: str = "strict") -> list[dict[str, Any]]:
    """The 13 critics (with hints; strict ones by default) on each plan as the executor runs a batch: one
    copy of the plan serving the critics one after another in one thread."""
    critics = bind_critics(list(ALL_CRITICS), tp, {"mode": mode, "feedback": "hint"})
    out = []
    for problem, plan in cases:
        frozen = FrozenPlan.of(plan)
        mine = frozen.copy()
        for critic in critics:
            outcome, mine = call_on_copy(critic, problem, frozen, mine)
            out.append(outcome.model_dump(mode="json") if hasattr(outcome, "model_dump") else repr(outcome))
    return out


@pytest.mark.slow  # about 2,000 golden plans x 13 critics, twice
def test_shared_reading_gives_the_verdicts_of_a_fresh_reading_per_critic(
    tp: TravelPlanner, golden: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    cases = [(p, plan) for p, plan in _problems(golden) if isinstance(plan, list)]
    parsed = [(p, plan) for p, plan in cases if _parses(tp, p)]
    assert len(parsed) > 1000
    monkeypatch.setattr(reading_module, "PlanReading", _Counting)
    _Counting.built = 0
    shared = _batch_verdicts(tp, cases)
    built_shared = _Counting.built
    _Counting.built = 0
    with reading_module.fresh_readings():
        fresh = _batch_verdicts(tp, cases)
    built_fresh = _Counting.built
    assert shared == fresh
    # the shared path really shares: one reading per plan (a plan whose query does not parse is a critic
    # error before any reading), where the fresh path reads the plan once per check; a plan holding a
    # day that is not an object of plain values (a few golden plans) is read by every check
    unshared = sum(1 for _, plan in parsed if reading_module._snapshot(plan) is None)
    assert unshared < 50
    assert len(parsed) <= built_shared <= len(parsed) + 12 * unshared
    assert built_fresh >= 10 * len(parsed)


def _results(query: Any, plan: Any, tp: TravelPlanner) -> list[tuple[Any, ...]]:
    return [
        (key, r.value, r.message, r.error, r.details)
        for key in ALL_KEYS
        for r in [strict.check(key, query, plan, tp.store)]
    ]


def test_a_plan_changed_in_place_or_another_query_is_read_again(tp: TravelPlanner) -> None:
    problem = tp.load("validation")[0]
    query = tp.critic_query(problem)
    from critics.travelplanner.greedy import GreedyGenerator

    plan = GreedyGenerator(benchmark=tp).plan(problem)
    before = _results(query, plan, tp)
    stay = next(d for d in plan if not str(d["current_city"]).startswith("from "))
    stay["breakfast"] = "No Such Diner, " + str(stay["current_city"])  # the same list, changed in place
    after = _results(query, plan, tp)
    with reading_module.fresh_readings():
        assert after == _results(query, plan, tp)
    assert after != before
    sandbox = dict((k, v) for k, v, *_ in after)["is_valid_information_in_sandbox"]
    assert sandbox is False
    # the same plan for a query of fewer days: read again (the examined days differ)
    shorter = {**query, "days": 1}
    with reading_module.fresh_readings():
        expected = _results(shorter, plan, tp)
    assert _results(shorter, plan, tp) == expected
    # a day that holds a container (a change inside it could not be seen): never reused
    odd = copy.deepcopy(plan)
    odd[0]["notes"] = ["a list"]
    first = reading_module.reading(query, odd, tp.store)
    assert reading_module.reading(query, odd, tp.store) is not first
    same = copy.deepcopy(plan)
    assert reading_module.reading(query, same, tp.store) is reading_module.reading(query, same, tp.store)
