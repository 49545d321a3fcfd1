"""The per-day results kept between plans (critics/travelplanner/reading.py, the store's DayMemo) change no
verdict: random edits of golden plans, checked one after another as a loop does (each plan mostly
repeating the last one's days), give the same verdicts, feedback, hints and details with the memo as with
every plan read afresh, in both modes, for every query the edited plans are checked against; and the
benchmark's fast answers for plans of plain days (the format critic's plan_error and check_format, the
validation of a reformulated plan) are the schema's and the model's."""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from critics.travelplanner import official, strict
from critics.travelplanner import reading as reading_module
from critics.travelplanner.benchmark import TravelPlanner
from critics.travelplanner.checks import DAY_FIELDS
from critics.travelplanner.store import BoundedMemo
from modulo.benchmark import Benchmark
from modulo.errors import PlanFormatError
from modulo.types import Problem, canonical_json
from tests.travelplanner.test_critic_cache import _parses, _problems
from tests.travelplanner.test_reading import _batch_verdicts

#: values an edit may put in a field: other plans' texts, blanks, and values of other types (1, True and
#: 1.0 are equal in Python: a memo keyed by equality alone would mix them up)
ODD_VALUES: list[Any] = ["-", "", " ", None, 1, True, 1.0, 0, ["a list"], {"a": "dict"}, "Nowhere, Atlantis"]


def _edit(plan: list[Any], pool: dict[str, list[Any]], rng: random.Random) -> list[Any]:
    """A copy of ``plan`` with one random edit (most often one field of one day)."""
    out = copy.deepcopy(plan)
    if not out:
        return out
    kind = rng.random()
    i = rng.randrange(len(out))
    day = out[i]
    if kind < 0.6 and isinstance(day, dict):  # one field takes another plan's value of that field
        field = rng.choice(DAY_FIELDS[1:])
        day[field] = rng.choice(pool[field])
    elif kind < 0.72 and isinstance(day, dict):  # a blank or a value of another type
        day[rng.choice(DAY_FIELDS)] = copy.deepcopy(rng.choice(ODD_VALUES))
    elif kind < 0.78 and isinstance(day, dict):  # a field missing, or one more
        if rng.random() < 0.5:
            day.pop(rng.choice(DAY_FIELDS), None)
        else:
            day["notes"] = rng.choice(["extra", 3])
    elif kind < 0.84:  # two days swapped (same contents, other day numbers)
        j = rng.randrange(len(out))
        out[i], out[j] = out[j], out[i]
    elif kind < 0.9:  # a day dropped or repeated
        if rng.random() < 0.5 and len(out) > 1:
            del out[i]
        else:
            out.insert(i, copy.deepcopy(out[i]))
    elif kind < 0.95 and isinstance(day, dict):  # the day's number changed
        day["days"] = rng.choice([i, i + 2, str(i + 1), 1.0 * (i + 1)])
    else:  # a day that is not an object
        out[i] = rng.choice(["a day", None, [day]])
    return out


def _sequences(golden: list[dict[str, Any]], n: int, length: int, seed: int) -> Iterator[tuple[Problem, Any]]:
    """``n`` chains of ``length`` plans: each starts from a golden plan and edits the previous one; a
    plan is now and then checked against another query (the same days under other dates, people,
    constraints)."""
    rng = random.Random(seed)
    cases = [(p, plan) for p, plan in _problems(golden) if isinstance(plan, list) and plan]
    pool: dict[str, list[Any]] = {f: [] for f in DAY_FIELDS[1:]}
    for _, plan in cases:
        for day in plan:
            if isinstance(day, dict):
                for f in pool:
                    if isinstance(day.get(f), str):
                        pool[f].append(day[f])
    problems = list({id(p): p for p, _ in cases}.values())
    for problem, plan in rng.sample(cases, n):
        current: list[Any] = plan
        for _ in range(length):
            yield (rng.choice(problems) if rng.random() < 0.15 else problem), current
            current = _edit(current, pool, rng)


def _verdicts(tp: TravelPlanner, cases: list[tuple[Problem, Any]], mode: str) -> list[Any]:
    """Every critic's verdict (as data) on every plan, the 13 critics on one copy of the plan as the executor
    runs a batch (the format critic's fast answer, which the memo does not touch, has its own test)."""
    return _batch_verdicts(tp, cases, mode)


def _counted(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[int]:
    calls = [0]
    original: Callable[..., Any] = getattr(module, name)

    def counting(*args: Any) -> Any:
        calls[0] += 1
        return original(*args)

    monkeypatch.setattr(module, name, counting)
    return calls


def _check_chains(
    tp: TravelPlanner, golden: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch, n: int, length: int, seed: int
) -> None:
    cases = [(p, plan) for p, plan in _sequences(golden, n, length, seed) if _parses(tp, p)]
    assert len(cases) >= n * length * 0.8
    day_work = {
        "strict": _counted(monkeypatch, strict, "_within_sandbox_day"),
        "official": _counted(monkeypatch, official, "_sandbox_day"),
    }
    # a check kept by the fields it reads (the route): its official guard runs only where they changed
    route = [0]
    original = official.CHECKS["is_reasonable_visiting_city"]

    def counting(*args: Any) -> Any:
        route[0] += 1
        return original(*args)

    monkeypatch.setitem(official.CHECKS, "is_reasonable_visiting_city", counting)
    for mode in ("strict", "official"):
        tp.store.day_memo.clear()
        tp.store.field_memo.clear()
        before, route_before = day_work[mode][0], route[0]
        kept = _verdicts(tp, cases, mode)
        with_memo, route_kept = day_work[mode][0] - before, route[0] - route_before
        with reading_module.fresh_readings():
            fresh = _verdicts(tp, cases, mode)
        afresh, route_fresh = day_work[mode][0] - before - with_memo, route[0] - route_before - route_kept
        assert kept == fresh, mode
        # the memo was used: most days of an edited plan are the last plan's, worked out once
        assert 0 < with_memo < 0.7 * afresh, (mode, with_memo, afresh)
        if mode == "strict":  # the route of an edited plan is mostly the last plan's
            assert 0 < route_kept < 0.7 * route_fresh, (route_kept, route_fresh)
    assert len(tp.store.day_memo) > 0


def test_edited_plans_get_the_verdicts_of_plans_read_afresh(
    tp: TravelPlanner, golden: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    _check_chains(tp, golden, monkeypatch, n=6, length=8, seed=1)


@pytest.mark.slow  # about 2,400 edited plans x 14 critics x 2 modes, twice
def test_many_edited_plans_get_the_verdicts_of_plans_read_afresh(
    tp: TravelPlanner, golden: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    for seed in (2, 3):
        _check_chains(tp, golden, monkeypatch, n=100, length=12, seed=seed)


def _same_verdicts(tp: TravelPlanner, cases: list[tuple[Problem, Any]]) -> None:
    for mode in ("strict", "official"):
        tp.store.day_memo.clear()
        kept = _verdicts(tp, cases, mode)
        with reading_module.fresh_readings():
            assert kept == _verdicts(tp, cases, mode), mode


def test_the_same_day_under_other_inputs_is_worked_out_again(tp: TravelPlanner, golden: list[dict[str, Any]]) -> None:
    """A day kept from one plan is not reused where an input it is read with differs: another value of an
    equal other type (1, True, 1.0), another trip length (the last day needs no accommodation), other
    dates and numbers of people (another query)."""
    by_days: dict[int, list[tuple[Problem, Any]]] = {}
    for problem, plan in _problems(golden):
        if isinstance(plan, list) and _parses(tp, problem) and all(isinstance(d, dict) for d in plan):
            by_days.setdefault(tp.critic_query(problem)["days"], []).append((problem, plan))
    short, long = by_days[3][:20], by_days[5][:20]
    cases: list[tuple[Problem, Any]] = []
    for (p3, plan3), (p5, _) in zip(short, long, strict=True):
        cases.append((p3, plan3))
        cases.append((p5, [*plan3, *copy.deepcopy(plan3[1:3])]))  # day 3 was the last; now it is not
        cases.append((p5, plan3))  # the same days under another query
        for field, values in (("breakfast", [1, True, 1.0]), ("days", [1, True, 1.0, "1"])):
            for value in values:
                cases.append((p3, [{**plan3[0], field: value}, *plan3[1:]]))
        cases.append((p3, [{**plan3[0], "days": 1}, *plan3[1:]]))
        # the last day (no accommodation needed) again as day 3 of a trip one day longer
        longer = Problem(id=p3.id + "+1", benchmark="travelplanner", query="q", constraints={**p3.constraints})
        longer.constraints["days"] = 4
        cases.append((longer, [*plan3, copy.deepcopy(plan3[-1])]))
    assert all(_parses(tp, p) for p, _ in cases)
    _same_verdicts(tp, cases)


def test_a_day_changed_in_place_is_read_again(tp: TravelPlanner) -> None:
    """The same plan object, a day changed in place between two checks: the second check sees the change
    (the kept results belong to the old content)."""
    problem = tp.load("validation")[0]
    query = tp.critic_query(problem)
    from critics.travelplanner.greedy import GreedyGenerator

    plan = GreedyGenerator(benchmark=tp).plan(problem)
    assert strict.check("is_valid_information_in_sandbox", query, plan, tp.store).passed
    assert official.check("is_valid_information_in_sandbox", query, plan, tp.store).passed
    stay = next(d for d in plan if not str(d["current_city"]).startswith("from "))
    stay["lunch"] = "No Such Diner, " + str(stay["current_city"])
    assert not strict.check("is_valid_information_in_sandbox", query, plan, tp.store).passed
    assert not official.check("is_valid_information_in_sandbox", query, plan, tp.store).passed
    before = strict.check("valid_cost", query, plan, tp.store).details["items"]
    before[0]["cost"] = -1  # the caller's copy: the kept items are not changed
    assert strict.check("valid_cost", query, plan, tp.store).details["items"][0]["cost"] != -1


def test_the_fast_answers_for_plain_plans_are_the_slow_ones(tp: TravelPlanner, golden: list[dict[str, Any]]) -> None:
    rng = random.Random(4)
    plans = [row["plan"] for row in rng.sample(golden, 60)]
    pool: dict[str, list[Any]] = {f: ["-", "x, y"] for f in DAY_FIELDS[1:]}
    edited = [plan for base in plans if isinstance(base, list) for plan in (base, _edit(base, pool, rng))]
    edited += [[], [{}], "not a plan", [{**d, "days": 10**20} for d in plans[0] or [{}] if isinstance(d, dict)]]
    answers = [(tp.plan_error(plan), Benchmark.plan_error(tp, plan)) for plan in edited]
    assert all(fast == schema for fast, schema in answers)
    assert any(fast is None for fast, _ in answers) and any(fast is not None for fast, _ in answers)
    # the validation of a reformulated plan: the same plan (keys in the model's order) and canonical text,
    # a copy the caller may change, or the same error
    valid = [plan for plan in edited if plan and tp.plan_error(plan) is None]
    reordered = [[dict(reversed(d.items())) for d in plan] for plan in valid[:5]]
    for plan in [*edited, *reordered]:
        for key in (None, _canonical_or_none(plan)):
            fast, schema = _checked(tp.checked_plan, plan, key), _checked(Benchmark.checked_plan.__get__(tp), plan, key)
            assert fast == schema
            if fast[0] != "error":
                assert [list(d) for d in fast[0]] == [list(d) for d in schema[0]]
                assert all(a is not b for a, b in zip(fast[0], plan, strict=True))
    assert len(valid) > 10
    # the structural checks: a plain plan's quick answer is the one of the same days read one by one (a dict
    # subclass is not taken as plain)
    problem = tp.load("validation")[0]
    for plan in edited:
        if isinstance(plan, list):
            slow = [_Day(day) if type(day) is dict else day for day in plan]
            assert tp.check_format(problem, plan) == tp.check_format(problem, slow)


class _Day(dict[str, Any]):
    """A day that is not a plain dict."""


def _canonical_or_none(plan: Any) -> str | None:
    try:
        return canonical_json(plan)
    except (TypeError, ValueError):
        return None


def _checked(fn: Callable[..., Any], plan: Any, key: str | None) -> tuple[Any, ...]:
    try:
        return tuple(fn(plan, key))
    except PlanFormatError as exc:
        return ("error", str(exc))


def test_a_small_store_memo_stays_bounded_and_changes_no_verdict(
    tp: TravelPlanner, golden: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store's lookups are kept in a bounded memo: with room for a few dozen, the lookups dropped and
    made again, the critics give the verdicts they give with every lookup kept."""
    cases = [(p, plan) for p, plan in _sequences(golden, 4, 6, seed=5) if _parses(tp, p)]
    for mode in ("strict", "official"):
        tp.store.day_memo.clear()
        kept = _verdicts(tp, cases, mode)
        with monkeypatch.context() as m:
            m.setattr(tp.store, "_memo", BoundedMemo(40))
            tp.store.day_memo.clear()
            assert _verdicts(tp, cases, mode) == kept, mode
            assert 0 < len(tp.store._memo) <= 40


def test_an_outcome_kept_by_fields_is_handed_out_as_a_copy(tp: TravelPlanner) -> None:
    """The route check's outcome, kept by the plan's current cities, serves an equal route of another plan
    object; what a caller does to the details it got changes neither the kept outcome nor the next one."""
    from critics.travelplanner.greedy import GreedyGenerator

    problem = tp.load("validation")[0]
    query = tp.critic_query(problem)
    plan = GreedyGenerator(benchmark=tp).plan(problem)
    tp.store.field_memo.clear()
    first = strict.check("is_reasonable_visiting_city", query, plan, tp.store)
    assert first.passed and first.details["cities"] and len(tp.store.field_memo) == 1
    other = copy.deepcopy(plan)
    other[-1]["lunch"] = "Another Diner, " + str(other[-1]["current_city"])  # a field the route does not read
    first.details["cities"].append("Atlantis")
    again = strict.check("is_reasonable_visiting_city", query, other, tp.store)
    assert again.details["cities"] and "Atlantis" not in again.details["cities"] and len(tp.store.field_memo) == 1
    with reading_module.fresh_readings():
        assert strict.check("is_reasonable_visiting_city", query, other, tp.store) == again
