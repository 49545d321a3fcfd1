"""The loop with turns: questions answered by a user, updates mid-loop, abstention, hidden information."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from modulo.metacontroller import LoopSettings, Metacontroller
from modulo.testing import ScriptedModel
from modulo.types import Outcome, Problem, ProblemResult, ProblemUpdate
from modulo.users import NO_MORE_QUESTIONS, NO_USER_REPLY
from modulo.users.llm import LLMUser
from modulo.users.scripted import ScriptedUser

from . import toy
from .test_loop import make_loop

pytestmark = pytest.mark.usefixtures("toy_registered")


def _loop(
    replies: dict[str, list[str]], *, user: Any = None, user_llm: Any = None, **settings: Any
) -> tuple[Metacontroller, Any]:
    loop, client = make_loop(replies)
    loop.settings = LoopSettings(**settings)
    loop.user, loop.user_llm = user, user_llm if user_llm is not None else loop.llm
    loop.dialogue = loop.benchmark.template("dialogue") if user is not None or loop.settings.abstain else None
    return loop, client


def _solve(loop: Metacontroller, problem: Problem | None = None) -> ProblemResult:
    problem = problem or loop.benchmark.load("dev")[0]  # toy-0: two distinct digits summing to 5
    return asyncio.run(loop.solve(problem))


def _prompts(result: ProblemResult, stages: tuple[str, ...] = ("generate", "reformulate")) -> str:
    texts = [m.content for it in result.iterations for m in it.prompt]
    texts += [m.content for it in result.iterations for c in it.calls if c.stage in stages for m in c.messages]
    return "\n".join(texts)


def test_a_question_is_answered_by_the_scripted_user_and_costs_a_turn() -> None:
    user = ScriptedUser(script={"answers": [{"match": "distinct", "answer": "Yes, two different digits."}]})
    loop, client = _loop({"toy-0": ["QUESTION: Must the digits be distinct?", "[2, 3]"]}, user=user)
    result = _solve(loop)
    assert result.outcome is Outcome.CERTIFIED and result.user == "scripted"
    q, plan = result.iterations
    assert (q.act, q.question, q.plan, q.verdicts) == ("question", "Must the digits be distinct?", None, [])
    assert q.answer is not None and q.answer.text == "Yes, two different digits." and q.answer.user == "scripted"
    # the next turn continues the conversation with the answer, and the first prompt invited questions
    assert plan.prompt[-2].role == "assistant" and plan.prompt[-2].content.startswith("QUESTION:")
    assert plan.prompt[-1].content == "The user answers: Yes, two different digits."
    assert "QUESTION:" in q.prompt[0].content
    assert (result.turns, result.questions, result.unnecessary_questions) == (2, 1, 0)
    assert client.calls == 2
    assert result.best_iteration == 1 and "dialogue" in result.templates


def test_questions_use_up_the_iteration_budget_unless_configured_free() -> None:
    replies = {"toy-0": ["QUESTION: which digits?", "QUESTION: really?", "[2, 3]"]}
    user = ScriptedUser(script={"default": "No idea."})
    result = _solve(_loop(replies, user=user, max_iterations=2)[0])
    assert result.outcome is Outcome.FAILED and result.turns == 2 and result.questions == 2
    result = _solve(_loop(replies, user=user, max_iterations=2, question_costs_iteration=False, max_questions=1)[0])
    # free questions: the second is past max_questions, gets the loop's reply and costs an iteration
    assert result.outcome is Outcome.CERTIFIED and result.turns == 3
    assert result.iterations[1].answer is not None and result.iterations[1].answer.text == NO_MORE_QUESTIONS
    with pytest.raises(ValueError, match="max_questions"):
        LoopSettings(question_costs_iteration=False)
    result = _solve(_loop(replies, user=user, max_iterations=1, question_costs_iteration=False, max_questions=1)[0])
    assert result.outcome is Outcome.FAILED and result.turns == 2  # the one iteration went to the second question
    # a planner that only ever asks: questions past the limit cost an iteration, so the loop still ends
    asking = {"toy-0": ["QUESTION: which digits?"]}
    result = _solve(_loop(asking, user=user, max_iterations=2, question_costs_iteration=False, max_questions=1)[0])
    assert result.outcome is Outcome.FAILED and result.turns == 3 and result.questions == 3


def test_without_a_user_a_question_gets_the_loops_reply() -> None:
    result = _solve(_loop({"toy-0": ["QUESTION: which digits?", "[2, 3]"]})[0])
    assert result.iterations[0].answer is not None and result.iterations[0].answer.text == NO_USER_REPLY
    assert result.outcome is Outcome.CERTIFIED and result.user is None


def test_an_unnecessary_question_is_counted() -> None:
    script = {"answers": [{"match": "sum", "answer": "They must sum to 5, as I said.", "unnecessary": True}]}
    loop, _ = _loop({"toy-0": ["QUESTION: What should they sum to?", "[2, 3]"]}, user=ScriptedUser(script=script))
    result = _solve(loop)
    assert result.questions == 1 and result.unnecessary_questions == 1
    assert result.iterations[0].answer is not None and result.iterations[0].answer.unnecessary is True


def test_an_update_makes_a_certified_plan_invalid_and_the_loop_recovers() -> None:
    update = ProblemUpdate(after=0, add={"target": 7}, text="The digits must now sum to 7.")
    loop, _ = _loop({"toy-0": ["[2, 3]", "[3, 4]"]}, updates=(update,))
    result = _solve(loop)
    first, second = result.iterations
    assert first.all_accept  # certified against the request as it was ...
    assert first.updates == [update] and first.rejudged is not None and not first.rejudged.accepts  # ... not after
    assert "The request has changed: The digits must now sum to 7." in (first.backprompt or "")
    assert "The numbers sum to 5, not 7." in (first.backprompt or "")
    assert "sum to 7" in second.prompt[-1].content and second.version == 1
    assert result.outcome is Outcome.CERTIFIED and result.best_plan == [3, 4] and result.best_iteration == 1
    assert result.updates == [update] and result.pending_updates == []


def test_a_plan_certified_before_the_last_update_is_not_delivered_as_certified() -> None:
    update = ProblemUpdate(after=0, add={"target": 7}, text="The digits must now sum to 7.")
    loop, _ = _loop({"toy-0": ["[2, 3]", "[2, 3]"]}, updates=(update,), max_iterations=1)
    result = _solve(loop)
    assert result.outcome is Outcome.EXHAUSTED and result.best_plan == [2, 3]
    assert not result.best_certified and result.best_rejected_by == ["toy_sum"]


def test_an_update_due_later_meets_a_plan_certified_earlier() -> None:
    # the user changes the request after seeing a plan that satisfies it: the update comes at once
    update = ProblemUpdate(after=3, add={"target": 7}, text="Now 7.")
    loop, _ = _loop({"toy-0": ["[2, 3]", "[3, 4]"]}, updates=(update,))
    result = _solve(loop)
    assert result.iterations[0].updates == [update] and result.outcome is Outcome.CERTIFIED
    assert result.turns == 2 and result.best_plan == [3, 4]


def test_updates_not_reached_are_recorded_as_pending() -> None:
    update = ProblemUpdate(after=5, add={"target": 7}, text="Now 7.")
    result = _solve(_loop({"toy-0": ["[1, 1]"]}, updates=(update,), max_iterations=2)[0])
    assert result.outcome is Outcome.EXHAUSTED and result.pending_updates == [update] and result.updates == []


def test_an_answer_that_reveals_a_hidden_constraint_applies_it() -> None:
    problem = (
        toy.Toy()
        .load("dev")[0]
        .model_copy(update={"hidden": {"sum": {"text": "Actually they must sum to 9.", "add": {"target": 9}}}})
    )
    user = ScriptedUser(script={"answers": [{"match": "sum", "reveal": "sum"}]})
    loop, _ = _loop({"toy-0": ["QUESTION: anything about the sum?", "[4, 5]"]}, user=user)
    result = _solve(loop, problem)
    answer = result.iterations[0].answer
    assert answer is not None and answer.revealed == ["sum"] and answer.text == "Actually they must sum to 9."
    assert result.iterations[0].updates and result.iterations[1].version == 1
    assert result.outcome is Outcome.CERTIFIED and result.best_plan == [4, 5]


def test_hidden_information_never_reaches_a_planner_prompt() -> None:
    problem = (
        toy.Toy()
        .load("dev")[0]
        .model_copy(
            update={
                "hidden": {"secret": "ZEBRA-42 is my password", "pref": {"text": "QUOKKA-7 hates 1", "add": {"x": 1}}},
                "updates": [ProblemUpdate(after=1, add={"y": 2}, text="WOMBAT-9 arrives")],
            }
        )
    )
    user_llm = ScriptedModel({"*": ["I have no preference. [REVEALED: none]"]}).client()
    loop, _ = _loop(
        {"toy-0": ["QUESTION: any preference about the order?", "[1, 1]", "[2, 3]"]},
        user=LLMUser(benchmark=loop_bench()),
        user_llm=user_llm,
    )
    result = _solve(loop, problem)
    planner = _prompts(result)
    assert "ZEBRA" not in planner and "QUOKKA" not in planner
    assert "WOMBAT" not in result.iterations[1].prompt[-1].content  # a scheduled update is hidden until applied
    assert "WOMBAT-9 arrives" in (result.iterations[1].backprompt or "")
    # the simulator held it (stage "user", recorded with the question's turn) and gave nothing away
    user_calls = [c for it in result.iterations for c in it.calls if c.stage == "user"]
    assert len(user_calls) == 1 and "ZEBRA-42" in user_calls[0].messages[0].content
    assert result.iterations[0].answer is not None and result.iterations[0].answer.text == "I have no preference."
    assert "ZEBRA" not in result.model_dump_json().replace(user_calls[0].model_dump_json(), "")


def loop_bench() -> toy.Toy:
    return toy.Toy()


def test_abstention_stops_with_its_reason() -> None:
    loop, client = _loop({"toy-0": ["ABSTAIN: no two digits can do this"]}, abstain=True)
    result = _solve(loop, toy.Toy().load("dev")[0].model_copy(update={"solvable": False}))
    assert result.outcome is Outcome.ABSTAINED and result.stop_reason == "abstained"
    assert result.abstention is not None and result.abstention.reason == "no two digits can do this"
    assert result.abstention.verified is None  # the toy cannot check reasons
    assert result.solvable is False and client.calls == 1
    assert "ABSTAIN:" in result.iterations[0].prompt[0].content  # abstain=true tells the planner how


def test_records_round_trip_and_old_records_load() -> None:
    update = ProblemUpdate(after=0, add={"target": 7}, text="Now 7.")
    user = ScriptedUser(script={"default": "No."})
    loop, _ = _loop({"toy-0": ["QUESTION: ?", "[2, 3]", "[3, 4]"]}, user=user, updates=(update,))
    result = _solve(loop)
    again = ProblemResult.model_validate_json(result.model_dump_json())
    assert again == result and again.questions == 1 and again.updates == [update]
    old = {
        "problem_id": "p",
        "benchmark": "toy",
        "outcome": "certified",
        "stop_reason": "all_passed",
        "iterations": [{"index": 0, "plan": [2, 3]}],
    }
    loaded = ProblemResult.model_validate(old)
    assert loaded.iterations[0].act == "plan" and loaded.questions == 0 and loaded.abstention is None
