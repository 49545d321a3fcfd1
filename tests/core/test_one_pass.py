"""The loop's cheaper iteration keeps its meaning: critics that all run on the event loop's thread are
judged in one pass (the format critics gating the others in it) exactly as the two stages judge them,
the best plan kept as iterations end is :func:`best_position`'s, and ``assign`` sets fields as ``=`` does."""

from __future__ import annotations

import asyncio
import json
import random
import struct
from collections.abc import Sequence
from typing import Any

import pytest

from modulo.critic import Critic
from modulo.executor import FrozenPlan, ThreadExecutor, never_stop
from modulo.metacontroller import Metacontroller, RunAborted, _BestSoFar, best_position
from modulo.sandbox import SandboxExecutor, SandboxSpec
from modulo.types import IterationRecord, Message, ProblemUpdate, Verdict, assign, canonical_json

from .test_loop import make_loop, solve

pytestmark = pytest.mark.usefixtures("toy_registered")

#: every kind of turn: a format failure, a plan failing both critics, one failing one, a passing one
REPLIES = ["[1, 2, 3]", "no json here", "[4, 4]", "[1, 2]", "[2, 3]"]


class Counting(ThreadExecutor):
    """The thread kind, counting the batches that go through ``run_all`` (the coroutine path)."""

    def __init__(self, *, inline: bool = True) -> None:
        super().__init__(inline=inline)
        self.batches = 0

    async def run_all(self, critics: Sequence[Critic], *args: Any, **kwargs: Any) -> Any:
        self.batches += 1
        return await super().run_all(critics, *args, **kwargs)


def _loop(inline: bool, critics: tuple[str, ...] = ("toy_sum", "toy_distinct"), **settings: Any) -> Metacontroller:
    loop, _ = make_loop({"toy-0": REPLIES}, critics=critics, max_iterations=len(REPLIES), **settings)
    for c in loop.critics:
        c.inline = True  # type: ignore[misc]  # declared quick: the instance's own value, as the binding sets it
    loop.executor = Counting(inline=inline)
    # the format critic last in the list given: the loop still runs it first, and it gates the others
    loop.critics = [*loop.critics[1:], loop.critics[0]]
    return loop


def _judged(loop: Metacontroller) -> list[Any]:
    result = solve(loop)
    loop.executor.close()
    turns = [
        (it.plan, [(v.critic, v.passed, (v.error or "")[:40]) for v in it.verdicts], it.gated, it.all_accept)
        for it in result.iterations
    ]
    return [turns, result.outcome, result.best_iteration, result.best_rejected_by]


def test_critics_all_on_the_loops_thread_are_judged_in_one_pass_as_the_two_stages_judge_them() -> None:
    one_pass, two_stages = _loop(inline=True), _loop(inline=False)
    assert _judged(one_pass) == _judged(two_stages)
    assert one_pass.executor.batches == 0  # type: ignore[attr-defined]  # no coroutine batch at all
    # the two stages: the format critic's batch, then the others' (none after a failed format, none without a plan)
    assert two_stages.executor.batches == 1 + 0 + 2 * 3  # type: ignore[attr-defined]
    turns = _judged(_loop(inline=True))[0]
    assert [name for name, _, _ in turns[0][1]] == ["format"] and sorted(turns[0][2]) == ["toy_distinct", "toy_sum"]
    assert turns[1][0] is None and turns[1][2]  # no plan read: the format verdict alone, the others gated


def test_a_crash_in_one_pass_is_an_errored_verdict_or_stops_the_run() -> None:
    crashing = ("toy_sum", "toy_crash", "toy_distinct")
    one_pass, two_stages = _loop(True, crashing), _loop(False, crashing)
    judged = _judged(one_pass)
    assert judged == _judged(two_stages)
    assert ("toy_crash", False, "critic 'toy_crash' crashed: RuntimeError") in judged[0][2][1]
    with pytest.raises(RunAborted) as aborted:
        solve(_loop(True, crashing, on_critic_error="stop"))
    assert "boom" in (aborted.value.result.error or "")


def _record(rng: random.Random, index: int) -> IterationRecord:
    verdicts = [
        Verdict(critic=f"c{k}", passed=rng.random() < 0.6, applicable=rng.random() < 0.8)
        for k in range(rng.randint(0, 4))
    ]
    if verdicts and rng.random() < 0.1:
        verdicts[0] = verdicts[0].model_copy(update={"error": "crashed"})
    plan = None if rng.random() < 0.2 else [index]
    gated = ["c9"] if plan is not None and rng.random() < 0.1 else []
    return IterationRecord(index=index, plan=plan, verdicts=verdicts, gated=gated)


def test_the_best_plan_kept_as_iterations_end_is_best_positions() -> None:
    rng = random.Random(7)
    for _ in range(400):
        history: list[IterationRecord] = []
        best = _BestSoFar()
        for index in range(rng.randint(0, 6)):
            history.append(_record(rng, index))
            assert best.add(history[-1]) == history[-1].all_accept
        assert best.position(history) == best_position(history)
    # an iteration it did not count (a problem ended by an error), or an update: worked out afresh
    history = [_record(rng, 0), IterationRecord(index=1, plan=[1], verdicts=[Verdict(passed=True)])]
    best = _BestSoFar()
    best.add(history[0])
    assert best.position(history) == best_position(history) == 1
    update = IterationRecord(index=0, plan=[0], verdicts=[], updates=[ProblemUpdate(text="t")])
    kept = _BestSoFar()
    kept.add(update)
    assert kept.position([update]) == best_position([update])


def test_assign_sets_fields_as_assignment_does() -> None:
    by_assign = IterationRecord(index=0, prompt=[Message(role="user", content="q")])
    by_setattr = by_assign.model_copy(deep=True)
    assign(by_assign, raw_reply="r", plan=[1], verdicts=[Verdict(passed=True)])
    by_setattr.raw_reply, by_setattr.plan, by_setattr.verdicts = "r", [1], [Verdict(passed=True)]
    assert by_assign == by_setattr and by_assign.model_fields_set == by_setattr.model_fields_set
    assert list(by_assign.__dict__) == list(by_setattr.__dict__) == list(IterationRecord.model_fields)
    assert by_assign.model_dump_json() == by_setattr.model_dump_json()


def test_a_sandbox_runs_here_through_its_inner_executor_unless_a_critic_goes_aside(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loop = _loop(inline=True)
    critics = loop._staged[0]
    view = loop.benchmark.load("dev")[0]
    sandbox = SandboxExecutor([], SandboxSpec(benchmark="toy"), inner=ThreadExecutor())
    here = sandbox.run_here(critics, view, FrozenPlan.of([2, 3]), [5.0] * len(critics))
    assert here is not None and [type(v) for v in here] == [Verdict] * len(critics)
    aside = SandboxExecutor([critics[-1].name], SandboxSpec(benchmark="toy"), inner=ThreadExecutor())
    assert aside.run_here(critics, view, FrozenPlan.of([2, 3]), [5.0] * len(critics)) is None
    assert asyncio.run(aside.run_all([], view, FrozenPlan.of([1]), [])) == []

    def no_copy(self: FrozenPlan) -> Any:
        raise AssertionError("an empty batch decoded a copy of the plan")

    monkeypatch.setattr(FrozenPlan, "copy", no_copy)
    assert ThreadExecutor().run_inline([], view, FrozenPlan.of([1]), [], never_stop) == []
    for ex in (sandbox, aside):
        ex.close()


def test_verdicts_are_counted_by_their_own_accepts() -> None:
    """The counts read each verdict's ``accepts``, a subclass's own included, as ``v.accepts`` does."""

    class Strict(Verdict):
        @property
        def accepts(self) -> bool:
            return False

    it = IterationRecord(index=0, plan=[1], verdicts=[Strict(passed=True), Verdict(passed=True), Verdict(passed=False)])
    assert it.passed_count == sum(1 for v in it.verdicts if v.accepts) == 1
    assert it.failing == [v for v in it.verdicts if not v.accepts] and not it.all_accept
    best = _BestSoFar()
    assert not best.add(it) and best.count == 1


def _typed(value: Any) -> Any:
    """``value`` with every number's type spelt out (``1 == 1.0 == True`` in Python)."""
    if isinstance(value, float):
        return ("float", repr(value))
    if isinstance(value, bool | int):
        return (type(value).__name__, value)
    if isinstance(value, list):
        return [_typed(v) for v in value]
    if isinstance(value, dict):
        return [(k, _typed(v)) for k, v in value.items()]
    return value


def _value(rng: random.Random, depth: int = 0) -> Any:
    if depth > 3 or rng.random() < 0.35:
        double = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]  # any double: NaN, inf too
        return rng.choice(
            [
                double,
                rng.randint(-(2**63), 2**63 - 1),
                rng.randint(-(10**25), 10**25),  # past 64 bits mostly
                "".join(chr(rng.randint(1, 0x10FFFF)) for _ in range(rng.randint(0, 6))),  # lone surrogates too
                None,
                rng.random() < 0.5,
                rng.randint(-9, 9),
            ]
        )
    if rng.random() < 0.5:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {
        "".join(chr(rng.randint(32, 0x2FF)) for _ in range(rng.randint(0, 5))): _value(rng, depth + 1) for _ in range(4)
    }


def test_a_plans_copy_is_what_the_standard_json_reader_reads() -> None:
    """The critics' copy is decoded by orjson where that gives json.loads's value: never an integer past 64
    bits (orjson reads it as a float), NaN, an infinity or a lone surrogate, which go to json.loads."""
    rng = random.Random(3)
    values = [2**63, -(2**63) - 1, 10**30, float("nan"), float("inf"), "\ud800", "é\u2028\x01", 1e16, 5e-324, -0.0]
    values += [_value(rng) for _ in range(3000)]
    for value in values:
        text = canonical_json(value)
        assert _typed(FrozenPlan(text).copy()) == _typed(json.loads(text)), text
