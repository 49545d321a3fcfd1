"""The critic executor: own copies of the plan, deadlines, off the event loop, nothing escapes."""

from __future__ import annotations

import asyncio
import itertools
import sys
import threading
import time
from typing import Any

import pytest

from modulo.critic import Critic
from modulo.errors import CriticError
from modulo.executor import CriticDeadlines, FrozenPlan, ThreadExecutor
from modulo.metacontroller import RunAborted
from modulo.types import Outcome, PlanJSON, Problem, Verdict

from .test_loop import make_loop, solve

pytestmark = pytest.mark.usefixtures("toy_registered")


class Mutator(Critic):
    name = "mutator"
    group = "hard"

    def check(self, problem: Problem, plan: PlanJSON) -> Verdict:
        plan.append(99)  # type: ignore[union-attr]
        plan[0] = 5  # type: ignore[index]
        return Verdict.ok()


class Seer(Critic):
    """Records the plan it is shown (runs after the mutator)."""

    name = "seer"
    group = "hard"
    priority = 200

    def __init__(self) -> None:
        self.seen: list[Any] = []
        self.threads: list[int] = []

    def check(self, problem: Problem, plan: PlanJSON) -> Verdict:
        self.threads.append(threading.get_ident())
        self.seen.append(list(plan))  # type: ignore[call-overload]
        return Verdict.ok()


class Hang(Critic):
    name = "hang"
    group = "hard"

    def __init__(self) -> None:
        self.release = threading.Event()

    def check(self, problem: Problem, plan: PlanJSON) -> Verdict:
        self.release.wait(30)
        return Verdict.ok()


class Exit(Critic):
    name = "exit"
    group = "hard"

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def check(self, problem: Problem, plan: PlanJSON) -> Verdict:
        raise self.exc


def _with(loop: Any, *extra: Critic) -> Any:
    from modulo.metacontroller import order_critics

    loop.critics = order_critics([*loop.critics, *extra])
    loop.priorities = {c.name: c.priority for c in loop.critics}
    return loop


def test_a_mutating_critic_is_an_error_and_the_recorded_plan_is_the_generators() -> None:
    loop, _ = make_loop({"toy-0": ["[2, 3]"]}, max_iterations=1)
    seer = Seer()
    _with(loop, Mutator(), seer)
    result = solve(loop)
    it = result.iterations[0]
    assert it.plan == [2, 3] and result.best_plan == [2, 3]
    from modulo.types import plan_fingerprint

    assert it.plan_sha256 == plan_fingerprint([2, 3])
    bad = next(v for v in it.verdicts if v.critic == "mutator")
    assert bad.error and "mutated the plan" in bad.error and not bad.passed
    assert seer.seen == [[2, 3]]  # later critics see the generator's plan
    assert result.outcome is Outcome.EXHAUSTED  # an errored critic never certifies


class Loosener(Critic):
    """Rewrites the problem it is shown to fit the plan (runs before the toy critics)."""

    name = "loosener"
    group = "hard"
    priority = 0

    def __init__(self, inline: bool = False) -> None:
        self.inline = inline

    def check(self, problem: Problem, plan: PlanJSON) -> Verdict:
        problem.constraints["target"] = sum(plan)  # type: ignore[arg-type]
        return Verdict.ok()


@pytest.mark.parametrize("inline", [False, True])
def test_a_critic_that_changes_the_problem_is_an_error_and_the_others_judge_the_problem_as_given(
    inline: bool,
) -> None:
    # [1, 2] does not sum to toy-0's target 5: a critic rewriting the target in place must not get it certified
    loop, _ = make_loop({"toy-0": ["[1, 2]"]}, max_iterations=2)
    _with(loop, Loosener(inline))
    problem = next(p for p in loop.benchmark.load("dev") if p.id == "toy-0")
    result = asyncio.run(loop.solve(problem))
    assert result.outcome is Outcome.EXHAUSTED
    for it in result.iterations:
        by = {v.critic: v for v in it.verdicts}
        assert by["loosener"].error and "read-only" in by["loosener"].error and not by["loosener"].passed
        assert not by["toy_sum"].passed
    assert problem.constraints["target"] == 5  # what the runner scores the final plan against


def test_the_planner_view_is_read_only_and_copies_pickles_and_renders_as_the_problem() -> None:
    import copy
    import json
    import pickle

    problem = Problem(id="p", benchmark="b", query="q", constraints={"a": [1, {"b": (2, [3])}]}, metadata={"m": [1]})
    view = problem.planner_view()
    for change in (
        lambda: view.constraints.update(x=1),
        lambda: view.constraints["a"].append(4),
        lambda: view.constraints["a"][1]["b"][1].sort(),
        lambda: view.metadata.pop("m"),
    ):
        with pytest.raises(TypeError, match="read-only"):
            change()
    assert json.dumps(view.constraints) == json.dumps(problem.constraints) and view == problem
    assert repr(view.constraints) == repr(problem.constraints)
    assert pickle.loads(pickle.dumps(view)) == view  # as a sandboxed critic's worker receives it
    mine = copy.deepcopy(view.constraints)
    mine["a"][1]["b"][1].append(4)  # a deep copy is the caller's to change
    assert problem.constraints == {"a": [1, {"b": (2, [3])}]}


def test_a_mutating_critic_stops_the_run_under_on_critic_error_stop() -> None:
    loop, _ = make_loop({"toy-0": ["[2, 3]"]}, max_iterations=1, on_critic_error="stop")
    _with(loop, Mutator())
    with pytest.raises(RunAborted) as info:
        solve(loop)
    assert "mutated the plan" in (info.value.result.error or "")


def test_a_hanging_critic_is_a_recorded_error_within_its_timeout() -> None:
    loop, _ = make_loop({"toy-0": ["[2, 3]"]}, max_iterations=2, critic_timeouts={"hang": 0.3})
    hang = Hang()
    _with(loop, hang)
    t0 = time.perf_counter()
    result = solve(loop)
    elapsed = time.perf_counter() - t0
    hang.release.set()
    errors = [v.error for it in result.iterations for v in it.verdicts if v.critic == "hang"]
    assert len(errors) == 2 and all(e and "did not finish within 0.3 s" in e for e in errors)
    assert result.outcome is Outcome.EXHAUSTED
    assert elapsed < 5


def test_a_hanging_critic_does_not_block_the_event_loop() -> None:
    loop, _ = make_loop({"toy-0": ["[2, 3]"]}, max_iterations=1, critic_timeout_s=0.5)
    hang = Hang()
    _with(loop, hang)
    ticks: list[float] = []

    async def main() -> Any:
        async def ticker() -> None:
            while True:
                ticks.append(time.perf_counter())
                await asyncio.sleep(0.02)

        t = asyncio.create_task(ticker())
        problem = loop.benchmark.load("dev")[0]
        result = await loop.solve(problem)
        t.cancel()
        return result

    result = asyncio.run(main())
    hang.release.set()
    assert result.iterations[0].verdicts[-1].error
    assert len(ticks) > 10  # the loop kept turning while the critic hung
    assert max(b - a for a, b in itertools.pairwise(ticks)) < 0.3


@pytest.mark.parametrize("exc", [SystemExit(0), KeyboardInterrupt(), GeneratorExit()])
def test_system_exit_and_interrupts_inside_a_critic_are_critic_errors(exc: BaseException) -> None:
    loop, _ = make_loop({"toy-0": ["[2, 3]"]}, max_iterations=1)
    _with(loop, Exit(exc))
    result = solve(loop)
    bad = next(v for v in result.iterations[0].verdicts if v.critic == "exit")
    assert bad.error and type(exc).__name__ in bad.error


def test_sys_exit_in_a_critic_does_not_end_the_process() -> None:
    loop, _ = make_loop({"toy-0": ["[2, 3]"]}, max_iterations=1)

    class CallsExit(Critic):
        name = "callsexit"

        def check(self, problem: Problem, plan: PlanJSON) -> Verdict:
            sys.exit(0)

    _with(loop, CallsExit())
    result = solve(loop)
    assert any(v.error for v in result.iterations[0].verdicts)


def test_deadlines_per_critic_then_declared_then_default() -> None:
    class Declared(Critic):
        name = "declared"
        timeout_s = 7.0

        def check(self, problem: Problem, plan: PlanJSON) -> Verdict:
            return Verdict.ok()

    d = CriticDeadlines(30.0, {"hang": 2.0})
    assert d.for_critic(Hang()) == 2.0
    assert d.for_critic(Declared()) == 7.0
    assert d.for_critic(Mutator()) == 30.0
    with pytest.raises(ValueError, match="positive"):
        CriticDeadlines(0)
    with pytest.raises(ValueError, match="hang"):
        CriticDeadlines(5, {"hang": -1})


def test_executor_gives_each_call_its_own_copy() -> None:
    frozen = FrozenPlan.of({"a": [1, 2]})
    seen: list[PlanJSON] = []  # the copies themselves: an id could be reused once the first copy is freed

    class Peek(Critic):
        name = "peek"

        def check(self, problem: Problem, plan: PlanJSON) -> Verdict:
            seen.append(plan)
            return Verdict.ok()

    problem = Problem(id="p", benchmark="toy", query="q")
    ex = ThreadExecutor()

    async def main() -> None:
        for _ in range(2):
            v = await ex.run(Peek(), problem, frozen, 5)
            assert v.passed and v.critic == "peek"

    asyncio.run(main())
    ex.close()
    assert len(seen) == 2 and seen[0] is not seen[1] and seen[0] == seen[1] == {"a": [1, 2]}


def test_critic_error_type() -> None:
    loop, _ = make_loop({"toy-0": ["[2, 3]"]}, max_iterations=1, on_critic_error="stop", critic_timeout_s=0.2)
    _with(loop, Hang())
    with pytest.raises(RunAborted) as info:
        solve(loop)
    assert isinstance(info.value.__cause__, CriticError)


def test_a_modulo_run_with_a_hanging_and_a_mutating_critic_completes(tmp_path: Any) -> None:
    """Issue 14: a critic that hangs ends as a recorded critic error within its timeout and the run
    completes; a critic that mutates the plan is an error and the recorded plan is the generator's."""
    from modulo import components
    from modulo.critic import critic
    from modulo.runs import read_records

    from .test_cli import invoke, toy_args

    release = threading.Event()

    @critic("toy_hang", benchmarks=("toy",))
    def toy_hang(problem: Problem, plan: Any) -> Verdict:
        release.wait(60)
        return Verdict.ok()

    @critic("toy_mutate", benchmarks=("toy",))
    def toy_mutate(problem: Problem, plan: Any) -> Verdict:
        plan.clear()
        return Verdict.ok()

    components.critics.register("toy_hang", toy_hang, replace=True)
    components.critics.register("toy_mutate", toy_mutate, replace=True)
    try:
        args = toy_args(
            tmp_path,
            {"*": ["[2, 3]"]},
            "critics=[format,toy_sum,toy_hang,toy_mutate]",
            "metacontroller.max_iterations=1",
            "+metacontroller.critic_timeouts.toy_hang=0.5",
            "run.report=false",
        )
        started = time.perf_counter()
        code, out = invoke("run", *args)
        elapsed = time.perf_counter() - started
    finally:
        release.set()
        components.critics.unregister("toy_hang")
        components.critics.unregister("toy_mutate")
    assert code == 0, out
    assert elapsed < 30
    records = list(read_records(tmp_path / "run"))
    assert len(records) == 2
    for rec in records:
        it = rec.iterations[0]
        by = {v.critic: v for v in it.verdicts}
        assert "did not finish within 0.5 s" in (by["toy_hang"].error or "")
        assert "mutated the plan" in (by["toy_mutate"].error or "")
        assert it.plan == [2, 3] and rec.best_plan == [2, 3]


class Where(Critic):
    """Declared inline: notes the thread it runs on (and sleeps ``sleep_s`` first)."""

    name = "where"
    group = "hard"
    inline = True

    def __init__(self, sleep_s: float = 0.0, mutate: bool = False) -> None:
        self.threads: list[int] = []
        self.sleep_s = sleep_s
        self.mutate = mutate

    def check(self, problem: Problem, plan: PlanJSON) -> Verdict:
        self.threads.append(threading.get_ident())
        time.sleep(self.sleep_s)
        if self.mutate:
            plan.append(7)  # type: ignore[union-attr]
        return Verdict.ok()


def _solve_on_this_thread(loop: Any) -> Any:
    here: list[int] = []

    async def main() -> Any:
        here.append(threading.get_ident())
        return await loop.solve(loop.benchmark.load("dev")[0])

    return asyncio.run(main()), here[0]


def test_a_critic_declared_inline_runs_on_the_event_loops_thread_and_the_others_do_not() -> None:
    loop, _ = make_loop({"toy-0": ["[2, 2]", "[3, 3]"]}, max_iterations=2)  # repeats: never certified
    where, seer = Where(), Seer()
    _with(loop, where, seer)
    result, loop_thread = _solve_on_this_thread(loop)
    assert len(result.iterations) == 2 and where.threads == [loop_thread, loop_thread]
    assert seer.seen == [[2, 2], [3, 3]]  # an undeclared critic after it: in the worker, the same plan
    assert len(seer.threads) == 2 and loop_thread not in seer.threads
    assert all(v.error is None for it in result.iterations for v in it.verdicts)


def test_an_inline_critic_past_its_deadline_is_a_timeout_and_then_runs_in_the_worker() -> None:
    loop, _ = make_loop({"toy-0": ["[2, 3]", "[2, 4]"]}, max_iterations=2, critic_timeouts={"where": 0.05})
    where = Where(sleep_s=0.1)
    _with(loop, where)
    result, loop_thread = _solve_on_this_thread(loop)
    first, second = ([v for v in it.verdicts if v.critic == "where"][0] for it in result.iterations)
    assert first.error and "over its deadline of 0.05 s" in first.error and "inline" in first.error
    assert second.error and "did not finish within 0.05 s" in second.error  # in the worker: abandoned
    assert where.threads[0] == loop_thread and where.threads[1] != loop_thread
    assert result.outcome is Outcome.EXHAUSTED


def test_an_inline_critic_that_mutates_the_plan_is_an_error_and_the_next_sees_the_plan() -> None:
    loop, _ = make_loop({"toy-0": ["[2, 3]"]}, max_iterations=1)

    class LaterInline(Seer):
        name = "later"
        inline = True
        priority = 300

    later = LaterInline()
    _with(loop, Where(mutate=True), later)
    result = solve(loop)
    bad = next(v for v in result.iterations[0].verdicts if v.critic == "where")
    assert bad.error and "mutated the plan" in bad.error
    assert later.seen == [[2, 3]] and result.iterations[0].plan == [2, 3]


def test_inline_critics_off_runs_every_critic_in_the_worker() -> None:
    loop, _ = make_loop({"toy-0": ["[2, 3]"]}, max_iterations=1, inline_critics=False)
    where = Where()
    _with(loop, where)
    _, loop_thread = _solve_on_this_thread(loop)
    assert where.threads and where.threads[0] != loop_thread


def test_ctrl_c_inside_an_inline_critic_is_the_users_interrupt() -> None:
    """Other exceptions become critic errors; a KeyboardInterrupt on the loop's thread goes on up."""
    loop, _ = make_loop({"toy-0": ["[2, 3]"]}, max_iterations=1)

    class InlineExit(Exit):
        inline = True

    _with(loop, InlineExit(SystemExit(0)))
    bad = next(v for v in solve(loop).iterations[0].verdicts if v.critic == "exit")
    assert bad.error and "SystemExit" in bad.error
    loop, _ = make_loop({"toy-0": ["[2, 3]"]}, max_iterations=1)
    _with(loop, InlineExit(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        solve(loop)


def test_the_format_critic_runs_inline_only_where_the_benchmark_declares_its_format_checks_quick() -> None:
    """It runs the benchmark's own plan checks: a third-party benchmark's may be slow, so it stays in the
    worker thread (under a deadline that can abandon it) unless the benchmark says they are quick."""
    from modulo.binding import bind_critics

    from . import toy

    class QuickToy(toy.Toy):
        quick_format = True

    [undeclared] = bind_critics(["format"], toy.Toy())
    [quick] = bind_critics(["format"], QuickToy())
    assert not ThreadExecutor().runs_inline(undeclared)
    assert ThreadExecutor().runs_inline(quick)
    assert not ThreadExecutor(inline=False).runs_inline(quick)
    assert not type(quick).inline  # the instance bound for that benchmark, not the critic for every benchmark


def test_a_list_of_critics_changed_in_place_is_routed_afresh() -> None:
    """The executor remembers how it routes a list of critics; a list changed in place is routed again."""
    ex = ThreadExecutor()
    where, seer = Where(), Seer()
    critics: list[Critic] = [where]
    problem = Problem(id="p", benchmark="toy", query="q")

    async def both() -> tuple[int, Any]:
        here = threading.get_ident()
        first = await ex.run_all(critics, problem, FrozenPlan.of([1]), [5.0])
        critics[0] = seer  # same list, same length, another critic (not declared inline)
        second = await ex.run_all(critics, problem, FrozenPlan.of([1]), [5.0])
        return here, (first, second)

    try:
        here, (first, second) = asyncio.run(both())
    finally:
        ex.close()
    assert where.threads == [here] and seer.threads and seer.threads[0] != here
    assert all(isinstance(o, Verdict) and o.passed for o in [*first, *second])
