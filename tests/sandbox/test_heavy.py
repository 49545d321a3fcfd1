"""CPU-heavy critics run in worker processes (HeavyExecutor): the same verdicts as in-process; a crash,
an exit, a changed plan or a hang there is a critic error of that critic, and the others go on."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from modulo.binding import bind_benchmark, bind_critics
from modulo.errors import ConfigError, CriticError
from modulo.executor import FrozenPlan, ThreadExecutor, heavy_kind
from modulo.sandbox import HeavyExecutor, SandboxSpec, heavy_names
from modulo.types import Problem, Verdict

from . import heavy_plugin

pytestmark = pytest.mark.slow  # worker processes start (seconds on a loaded machine)

BENCH = "synth/tasks"
NAMES = ["heavy_count", "heavy_raise", "heavy_exit", "heavy_mutate", "heavy_hang", "heavy_slow", "heavy_thread"]


@pytest.fixture(scope="module")
def bench() -> Any:
    return bind_benchmark(BENCH)


@pytest.fixture(scope="module")
def critics(bench: Any) -> dict[str, Any]:
    return {c.name: c for c in bind_critics([*NAMES, "synth_task_coverage"], bench)}


@pytest.fixture(scope="module")
def executor() -> Iterator[HeavyExecutor]:
    spec = SandboxSpec(benchmark=BENCH, imports=(heavy_plugin.__name__,))
    ex = HeavyExecutor([*NAMES[:-1], "synth_task_coverage"], spec, workers=1)
    yield ex
    ex.close()


def run_all(executor: Any, critics: list[Any], problem: Problem, plan: Any, timeout_s: float = 30.0) -> list[Any]:
    frozen = FrozenPlan.of(plan)
    outcomes: list[Any] = asyncio.run(executor.run_all(critics, problem, frozen, [timeout_s] * len(critics)))
    return outcomes


def _without_pid(verdict: Any) -> Any:
    return verdict.model_copy(update={"details": {k: v for k, v in verdict.details.items() if k != "pid"}})


def test_declared_and_named_heavy_critics_are_chosen(critics: dict[str, Any]) -> None:
    active = list(critics.values())
    assert heavy_kind(critics["heavy_count"]) == "process" and heavy_kind(critics["heavy_thread"]) == "thread"
    assert heavy_kind(critics["synth_task_coverage"]) is None
    declared = heavy_names("declared", active)
    assert "heavy_count" in declared and "heavy_thread" not in declared and "synth_task_coverage" not in declared
    assert heavy_names("none", active) == []
    assert heavy_names(["synth_task_coverage"], active) == ["synth_task_coverage"]
    with pytest.raises(ConfigError, match="heavy_cuont"):
        heavy_names(["heavy_cuont"], active)


def test_heavy_critics_give_the_in_process_verdicts_from_a_worker(
    executor: HeavyExecutor, critics: dict[str, Any], bench: Any
) -> None:
    problem = bench.select("generated", limit=1)[0]
    chosen = [critics["heavy_count"], critics["synth_task_coverage"], critics["heavy_thread"]]
    thread = ThreadExecutor()
    try:
        for plan in (problem.metadata["witness"], {"schedule": []}, [1, 2, 3, 4, 5, 6], None):
            inside = run_all(executor, chosen, problem, plan)
            outside = run_all(thread, chosen, problem, plan)
            assert all(isinstance(v, Verdict) for v in inside), inside
            assert inside[0].details["pid"] != os.getpid()  # judged in a worker process
            assert outside[0].details["pid"] == os.getpid()
            assert inside[2].details["pid"] == os.getpid()  # heavy="thread": a thread of this process
            # (verdicts are frozen values, which a worker's numbered replies may share: compared, not changed)
            assert [_without_pid(v) for v in inside] == [_without_pid(v) for v in outside]
        assert executor._pool._idle  # the worker went back to the pool
    finally:
        thread.close()


def test_a_crash_an_exit_and_a_changed_plan_in_a_worker_are_critic_errors(
    executor: HeavyExecutor, critics: dict[str, Any], bench: Any
) -> None:
    problem = bench.select("generated", limit=1)[0]
    names = ["heavy_raise", "heavy_count", "heavy_mutate", "heavy_count", "heavy_exit", "heavy_count"]
    outcomes = run_all(executor, [critics[n] for n in names], problem, [1, 2])
    assert len(outcomes) == len(names)
    raised, ok1, mutated, ok2, exited, ok3 = outcomes
    assert isinstance(raised, CriticError) and "ValueError: heavy critic bug" in str(raised)
    assert isinstance(mutated, CriticError) and "mutated the plan" in str(mutated)
    assert isinstance(exited, CriticError) and "exit code 3" in str(exited)
    for ok in (ok1, ok2, ok3):  # the critics after each failure still ran, on the unchanged plan
        assert isinstance(ok, Verdict) and ok.passed and ok.details["values"] == 2


def test_a_hanging_heavy_critic_is_killed_at_its_deadline_and_the_rest_go_on(
    executor: HeavyExecutor, critics: dict[str, Any], bench: Any
) -> None:
    problem = bench.select("generated", limit=1)[0]
    chosen = [critics["heavy_count"], critics["heavy_hang"], critics["heavy_count"]]
    frozen = FrozenPlan.of([1])
    timeouts = [30.0, 1.0, 30.0]
    outcomes = asyncio.run(executor.run_all(chosen, problem, frozen, timeouts))
    assert isinstance(outcomes[1], CriticError) and "did not finish within 1 s (worker killed)" in str(outcomes[1])
    assert isinstance(outcomes[0], Verdict) and isinstance(outcomes[2], Verdict) and outcomes[2].passed


def test_a_critic_slower_than_an_earlier_ones_deadline_is_no_timeout_of_either(
    executor: HeavyExecutor, critics: dict[str, Any], bench: Any
) -> None:
    """The worker holds the quick critic's reply while the slow one runs, past the quick one's deadline: the
    parent cannot tell them apart then, so the two run again with a reply each, and both verdicts stand."""
    problem = bench.select("generated", limit=1)[0]
    chosen = [critics["heavy_count"], critics["heavy_slow"], critics["heavy_count"]]
    outcomes = asyncio.run(executor.run_all(chosen, problem, FrozenPlan.of([1]), [0.5, 10.0, 0.5]))
    assert all(isinstance(o, Verdict) and o.passed for o in outcomes), outcomes


def test_stop_ends_a_heavy_batch_at_the_first_error(
    executor: HeavyExecutor, critics: dict[str, Any], bench: Any
) -> None:
    problem = bench.select("generated", limit=1)[0]
    chosen = [critics["heavy_count"], critics["heavy_raise"], critics["heavy_count"]]
    outcomes = asyncio.run(
        executor.run_all(chosen, problem, FrozenPlan.of([1]), [30.0] * 3, stop=lambda c, o: isinstance(o, CriticError))
    )
    assert len(outcomes) == 2 and isinstance(outcomes[1], CriticError)


def test_a_run_sends_declared_heavy_critics_to_workers_and_records_it(tmp_path: Any) -> None:
    from modulo.build import build_session
    from modulo.config import ModuloConfig
    from modulo.runner import run_session
    from modulo.runs import RunDir

    def run(heavy: Any, name: str) -> list[Any]:
        cfg = ModuloConfig()
        cfg.benchmark.name = BENCH
        cfg.benchmark.args = {"n": 2}
        cfg.critics = ["format", "synth_task_coverage", "heavy_count"]
        cfg.reformulator.mode = "none"
        cfg.generator.prompt = "json"
        cfg.metacontroller.max_iterations = 2
        cfg.metacontroller.heavy = heavy
        cfg.llm.args = {"replies": {"*": [json.dumps({"schedule": []}), json.dumps({"schedule": [], "x": 1})]}}
        cfg.cache.mode = "off"
        cfg.run.dir = str(tmp_path / name)
        cfg.run.progress = False
        cfg.run.report = False
        session = build_session(cfg)
        result = asyncio.run(run_session(session, RunDir(tmp_path / name)))
        info = json.loads((tmp_path / name / "run.json").read_text())
        assert (info["heavy"] is not None) is (heavy == "declared")  # run.json version 2: null when none
        if heavy == "declared":
            assert info["heavy"] == {"critics": ["heavy_count"], "workers": 2}
        return [[v.model_dump(exclude={"details"}) for v in it.verdicts] for r in result.results for it in r.iterations]

    pooled = run("declared", "pooled")
    assert any(v["critic"] == "heavy_count" for verdicts in pooled for v in verdicts)  # it did judge plans
    assert pooled == run("none", "in-process")


def test_a_batch_cancelled_while_its_worker_starts_gives_the_worker_back(critics: dict[str, Any], bench: Any) -> None:
    """Ctrl-C (or a stopped run) while a worker is being started in a thread: the worker, once up, goes
    back to the pool (with one worker allowed, a lost one would leave every later batch waiting forever)."""
    problem = bench.select("generated", limit=1)[0]
    ex = HeavyExecutor(["heavy_count"], SandboxSpec(benchmark=BENCH, imports=(heavy_plugin.__name__,)), workers=1)
    chosen = [critics["heavy_count"]]

    async def main() -> list[Any]:
        batch = asyncio.ensure_future(ex.run_all(chosen, problem, FrozenPlan.of([1]), [30.0]))
        await asyncio.sleep(0.2)  # the worker is starting (an interpreter and the benchmark: seconds)
        assert not batch.done()
        batch.cancel()
        with pytest.raises(asyncio.CancelledError):
            await batch
        for _ in range(600):  # the start goes on in its thread; the worker comes back when it is up
            if ex._pool._idle:
                break
            await asyncio.sleep(0.1)
        assert len(ex._pool._idle) == 1
        return await asyncio.wait_for(ex.run_all(chosen, problem, FrozenPlan.of([1]), [30.0]), 60)

    try:
        [verdict] = asyncio.run(main())
        assert isinstance(verdict, Verdict) and verdict.passed
    finally:
        ex.close()


def test_a_verdict_a_worker_sent_before_comes_back_as_its_number(
    executor: HeavyExecutor, critics: dict[str, Any], bench: Any
) -> None:
    """A pass says the same on every plan: the worker numbers each verdict it sends and sends a repeat as
    its number alone; the parent gives back the verdict it kept, labelled as the in-process one."""
    problem = bench.select("generated", limit=1)[0]
    chosen = [critics["synth_task_coverage"]]
    thread = ThreadExecutor()
    try:
        first = run_all(executor, chosen, problem, {"schedule": []})
        again = run_all(executor, chosen, problem, {"schedule": []})
        assert first == again == run_all(thread, chosen, problem, {"schedule": []})
    finally:
        thread.close()
    [worker] = executor._pool._idle
    assert first[0] in worker.verdicts.values()


def test_a_reply_line_naming_an_unknown_number_or_not_a_reply_is_that_critics_error(critics: dict[str, Any]) -> None:
    critic = critics["heavy_count"]
    unknown = HeavyExecutor._outcome(critic, b'{"same": 7}', {})
    assert isinstance(unknown, CriticError) and "never sent" in str(unknown)
    garbage = HeavyExecutor._outcome(critic, b"not json", {})
    assert isinstance(garbage, CriticError) and "not a reply" in str(garbage)
    numbered: dict[int, Verdict] = {}
    line = b'{"verdict": {"critic": "other", "group": "x", "passed": true}, "id": 0}'
    verdict = HeavyExecutor._outcome(critic, line, numbered)
    assert isinstance(verdict, Verdict) and (verdict.critic, verdict.group) == (critic.name, critic.group)
    assert HeavyExecutor._outcome(critic, b'{"same": 0}', numbered) == verdict


def test_warm_starts_as_many_workers_as_asked_up_to_the_pools_size() -> None:
    ex = HeavyExecutor(["heavy_count"], SandboxSpec(benchmark=BENCH, imports=(heavy_plugin.__name__,)), workers=2)
    try:
        ex.warm(3)
        assert len(ex._pool._idle) == 2 and len({w.proc.pid for w in ex._pool._idle}) == 2
    finally:
        ex.close()


def test_closing_kills_every_worker_at_once_and_reaps_each() -> None:
    """Close signals every idle worker before it waits for the first (their exits overlap), and returns with
    each reaped (no zombie) and its scratch directory gone."""
    ex = HeavyExecutor(["heavy_count"], SandboxSpec(benchmark=BENCH, imports=(heavy_plugin.__name__,)), workers=2)
    ex.warm(2)
    workers = list(ex._pool._idle)
    steps: list[str] = []
    for w in workers:
        for step in ("signal", "reap"):
            plain = getattr(w, step)
            setattr(w, step, lambda plain=plain, step=step, w=w: (steps.append(f"{step} {w.proc.pid}"), plain())[1])
    ex.close()
    a, b = (w.proc.pid for w in workers)
    assert steps == [f"signal {a}", f"signal {b}", f"reap {a}", f"reap {b}"]
    assert all(w.proc.returncode is not None and not os.path.exists(w.scratch) for w in workers)
