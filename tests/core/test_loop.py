"""The metacontroller on a toy benchmark: iterations, gating, backprompts, outcomes, budgets."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from modulo.backprompt import AllStrategy, BackpromptContext, FirstStrategy, GroupedStrategy, HistoryStrategy
from modulo.errors import CriticError
from modulo.generators import LLMGenerator
from modulo.llm.base import LLMResponse
from modulo.metacontroller import LoopSettings, Metacontroller, RunAborted, _sha, best_iteration
from modulo.reformulate import JSONReformulator, ParserReformulator
from modulo.testing import FunctionModel, ScriptedModel
from modulo.types import IterationRecord, Outcome, Usage, Verdict

from . import toy

pytestmark = pytest.mark.usefixtures("toy_registered")


def make_loop(
    replies: dict[str, list[str]],
    *,
    critics: tuple[str, ...] = ("toy_sum", "toy_distinct"),
    strategy: Any = None,
    parser: bool = False,
    model: ScriptedModel | FunctionModel | None = None,
    **settings: Any,
) -> tuple[Metacontroller, ScriptedModel | FunctionModel]:
    """A loop on the toy benchmark whose model answers each problem from ``replies`` (the last reply
    repeats), or ``model`` when given."""
    from critics.core import format_critic

    bench = toy.Toy()
    model = model or ScriptedModel(replies, repeat_last=True)
    factories = {
        "format": format_critic,
        "toy_sum": toy.toy_sum,
        "toy_distinct": toy.toy_distinct,
        "toy_crash": toy.toy_crash,
    }
    bound = [factories["format"](benchmark=bench)] + [factories[c]() for c in critics]
    loop = Metacontroller(
        benchmark=bench,
        generator=_toy_generator(bench),
        reformulator=ParserReformulator(bench) if parser else JSONReformulator(bench),
        critics=bound,
        strategy=strategy or AllStrategy(),
        llm=model.client(),
        settings=LoopSettings(**settings),
    )
    return loop, model


def _toy_generator(bench: toy.Toy) -> LLMGenerator:
    # the first prompt is the bare query: a template given as text (no file)
    return LLMGenerator(benchmark=bench, template="{{ problem.query }}")


def solve(loop: Metacontroller, pid: str = "toy-0") -> Any:
    problem = next(p for p in loop.benchmark.load("dev") if p.id == pid)
    return asyncio.run(loop.solve(problem))


def test_iterates_until_all_critics_pass_and_records_backprompts() -> None:
    loop, model = make_loop({"toy-0": ["[1, 1]", "[1, 3]", "[2, 3]", "[0, 5]"]})
    result = solve(loop)
    assert result.outcome is Outcome.CERTIFIED
    assert len(result.iterations) == 3  # stops as soon as every critic passes
    assert model.calls == 3
    first, second, third = result.iterations
    assert not first.all_accept and not second.all_accept and third.all_accept
    # the backprompt recorded at iteration i is exactly what was sent at iteration i+1
    assert first.backprompt == second.prompt[-1].content
    assert second.backprompt == third.prompt[-1].content
    assert "The numbers sum to 2, not 5." in first.backprompt
    assert "The numbers must be distinct." in first.backprompt
    assert "[1, 1]" in first.backprompt  # the previous plan is included
    assert third.backprompt is None
    assert result.best_plan == [2, 3]


def test_format_failure_gates_other_critics() -> None:
    loop, _ = make_loop({"toy-0": ["[1, 2, 3]", "no json here", "[2, 3]"]})
    result = solve(loop)
    it0, it1, _it2 = result.iterations
    assert [v.critic for v in it0.verdicts] == ["format"]
    assert sorted(it0.gated) == ["toy_distinct", "toy_sum"]
    assert "expected 2 numbers, got 3" in it0.backprompt
    assert "The numbers sum" not in it0.backprompt
    assert it1.plan is None and it1.format_error
    assert "could not be read as a plan" in it1.backprompt
    assert result.outcome is Outcome.CERTIFIED


def test_budget_exhaustion_returns_best_plan_so_far() -> None:
    # [1,2]: distinct passes, sum fails; [4,4]: both fail -> best is the first
    loop, _ = make_loop({"toy-0": ["[1, 2]", "[4, 4]", "[4, 4]", "[4, 4]"]}, max_iterations=4)
    result = solve(loop)
    assert result.outcome is Outcome.EXHAUSTED and result.stop_reason == "iterations"
    assert result.best_plan == [1, 2] and result.best_iteration == 0
    assert result.iterations[2].repeat_of == 1  # a repeated plan is noticed, and said in the backprompt
    assert "same plan you proposed at attempt 2" in (result.iterations[2].backprompt or "")
    assert result.iterations[3].backprompt is None  # nothing is built after the last iteration


def test_failed_when_no_plan_is_ever_parsed() -> None:
    loop, _ = make_loop({"*": ["I cannot answer that."]}, max_iterations=2)
    result = solve(loop)
    assert result.outcome is Outcome.FAILED and result.best_plan is None


def _priced() -> FunctionModel:
    """Answers [1, 1] (never accepted); each call uses 10 + 5 tokens and costs a cent."""
    usage = Usage(input_tokens=10, output_tokens=5)
    reply = LLMResponse(text="[1, 1]", usage=usage, model="priced-1")
    return FunctionModel(lambda request: reply, price_input_per_mtok=600.0, price_output_per_mtok=800.0)


def test_token_and_dollar_budgets_stop_the_loop() -> None:
    loop, model = make_loop({}, model=_priced(), max_dollars=0.025)
    result = solve(loop)
    assert result.stop_reason == "dollars" and model.calls == 3
    assert result.usage.cost_usd == pytest.approx(0.03)
    loop, model = make_loop({}, model=_priced(), max_tokens=30)
    assert solve(loop).stop_reason == "tokens" and model.calls == 2


def test_unsolvable_is_checked_before_any_generator_call() -> None:
    loop, model = make_loop({"*": ["[2, 3]"]})
    loop.benchmark.unsolvable = {"toy-0"}  # type: ignore[attr-defined]
    result = solve(loop)
    assert result.outcome is Outcome.UNSOLVABLE and result.explanation == "target out of reach"
    assert model.calls == 0


def test_critic_crash_recorded_or_stops() -> None:
    loop, _ = make_loop({"*": ["[2, 3]"]}, critics=("toy_sum", "toy_crash"), max_iterations=2)
    result = solve(loop)
    crashed = next(v for v in result.iterations[0].verdicts if v.critic == "toy_crash")
    assert crashed.error and "boom" in crashed.error and not crashed.accepts
    assert result.outcome is Outcome.EXHAUSTED
    assert "boom" not in (result.iterations[0].backprompt or "")  # crashes are never pasted into prompts
    loop, _ = make_loop({"*": ["[2, 3]"]}, critics=("toy_crash",), on_critic_error="stop")
    with pytest.raises(RunAborted) as info:
        solve(loop)
    assert info.value.result.outcome is Outcome.ERROR and "boom" in (info.value.result.error or "")


def test_critic_wrapper_turns_exceptions_into_critic_error() -> None:
    with pytest.raises(CriticError, match="toy_crash"):
        toy.toy_crash()(toy.Toy().load("dev")[0], [1, 2])


def test_parser_reformulator_path() -> None:
    loop, _ = make_loop({"*": ["I pick 2 and 3."]}, parser=True)
    assert solve(loop).outcome is Outcome.CERTIFIED


def test_strategies_select_feedback() -> None:
    replies = {"toy-0": ["[1, 1]", "[2, 3]"]}
    for strategy, present, absent in (
        (FirstStrategy(), "distinct", "sum to"),  # toy_distinct has the higher priority (50)
        (GroupedStrategy(order=["hard", "commonsense"]), "Hard constraints", None),
    ):
        loop, _ = make_loop(replies, strategy=strategy)
        bp = solve(loop).iterations[0].backprompt or ""
        assert present in bp
        if absent:
            assert absent not in bp
    bp = (
        solve(make_loop(replies, strategy=GroupedStrategy(order=["hard", "commonsense"]))[0]).iterations[0].backprompt
        or ""
    )
    assert bp.index("Hard constraints") < bp.index("Commonsense constraints")
    loop, model = make_loop({"toy-0": ["[1, 1]", "[4, 4]", "[2, 3]"]}, strategy=HistoryStrategy(k=2))
    result = solve(loop)
    roles = [m.role for m in model.requests[-1].messages]
    assert roles == ["user", "assistant", "user", "assistant", "user"]
    assert result.outcome is Outcome.CERTIFIED
    # an attempt stays in the window for k prompts: its two messages are made once (the same objects)
    loop, model = make_loop({"toy-0": ["[1, 1]", "[4, 4]", "[5, 5]", "[2, 3]"]}, strategy=HistoryStrategy(k=2))
    result = solve(loop)
    third, fourth = model.requests[2].messages, model.requests[3].messages
    assert fourth[1] is third[3] and fourth[2] is third[4] and fourth[1].content == "[4, 4]"
    fresh = HistoryStrategy(k=2).build(
        BackpromptContext(
            problem=loop.benchmark.load("dev")[0].planner_view(),
            benchmark=loop.benchmark,
            first_prompt=list(fourth[:1]),
            history=result.iterations[:3],
            priorities=loop.priorities,
        )
    )
    assert [m.model_dump() for m in fresh.messages] == [m.model_dump() for m in fourth]
    assert all(it.prompt_sha256 == _sha(it.prompt) for it in result.iterations)


def test_best_iteration_ties_go_to_the_earliest_plan() -> None:
    def it(i: int, passed: int) -> IterationRecord:
        vs = [Verdict(critic=f"c{j}", passed=j < passed) for j in range(3)]
        return IterationRecord(index=i, plan=[i], verdicts=vs)

    history = [it(0, 1), it(1, 2), it(2, 2), it(3, 0)]
    assert best_iteration(history).index == 1  # type: ignore[union-attr]
    assert best_iteration(history, 2).index == 1  # type: ignore[union-attr]
    assert best_iteration(history, 0) is None
