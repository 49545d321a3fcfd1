"""The query parsed once per problem (TravelPlanner.critic_query) gives the critics' verdicts of the query
parsed on every call, on every golden plan, in both modes; the shared query is read-only."""

from __future__ import annotations

import json
from typing import Any

import pytest

from critics.travelplanner.benchmark import TravelPlanner
from critics.travelplanner.critics import ALL_CRITICS
from modulo.binding import bind_critics
from modulo.executor import FrozenPlan, call_critic
from modulo.types import Problem

pytestmark = pytest.mark.slow  # 2,000 golden plans x 13 critics x 2 modes, with and without the cache


def _problems(golden: list[dict[str, Any]]) -> list[tuple[Problem, Any]]:
    """One Problem object per distinct query (shared by that query's plans, as in a run), with each plan."""
    made: dict[str, Problem] = {}
    out = []
    for row in golden:
        key = json.dumps(row["query"], sort_keys=True)
        if key not in made:
            made[key] = Problem(id=row["family"], benchmark="travelplanner", query="q", constraints=row["query"])
        out.append((made[key], row["plan"]))
    return out


def _parses(tp: TravelPlanner, problem: Problem) -> bool:
    try:
        tp.query_of(problem)
    except Exception:
        return False
    return True


def _verdicts(tp: TravelPlanner, cases: list[tuple[Problem, Any]], mode: str) -> list[dict[str, Any]]:
    critics = bind_critics(list(ALL_CRITICS), tp, {"mode": mode, "feedback": "hint"})
    return [
        call_critic(c, problem, FrozenPlan.of(plan)).model_dump(mode="json") for problem, plan in cases for c in critics
    ]


@pytest.mark.parametrize("mode", ["strict", "official"])
def test_the_per_problem_query_gives_the_verdicts_of_a_query_parsed_on_every_call(
    tp: TravelPlanner, golden: list[dict[str, Any]], mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cases = _problems(golden)
    cached = _verdicts(tp, cases, mode)
    parsed = {id(p): p for p, _ in cases if _parses(tp, p)}  # (a malformed query is a critic error each time)
    assert parsed and all(tp.critic_query(p) is tp.critic_query(p) for p in parsed.values())  # kept, not redone
    with monkeypatch.context() as m:
        m.setattr(TravelPlanner, "critic_query", lambda self, p: self.query_of(p))  # the code before the cache
        fresh = _verdicts(tp, cases, mode)
    assert cached == fresh  # (most problems have several plans: all but the first read the cached query)


def test_the_shared_query_is_read_only(tp: TravelPlanner) -> None:
    problem = tp.load("validation")[0]
    query = tp.critic_query(problem)
    assert tp.critic_query(problem) is query  # computed once for this problem object
    with pytest.raises(TypeError):
        query["budget"] = 10**9  # type: ignore[index]
    with pytest.raises(TypeError):
        query["local_constraint"]["cuisine"] = ["Anything"]  # type: ignore[index]
    assert isinstance(query["date"], tuple)
    assert dict(query) | {"date": list(query["date"]), "local_constraint": dict(query["local_constraint"])} == {
        **tp.query_of(problem),
        "local_constraint": {
            k: list(v) if isinstance(v, tuple) else v for k, v in tp.query_of(problem)["local_constraint"].items()
        },
    }
    changed = problem.model_copy(update={"constraints": {**problem.constraints, "budget": 1}})
    assert tp.critic_query(changed)["budget"] == 1  # an updated problem (a new object) gets its own
