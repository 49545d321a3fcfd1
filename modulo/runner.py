"""Run many problems concurrently into a run directory, resumably.

Problems run as asyncio tasks, at most ``concurrency`` at a time. Each finished problem is appended to
``records.jsonl`` and fsync'ed before it counts as done, so a run killed at any moment (even with
SIGKILL) and started again into the same directory skips every finished problem and repeats no paid
call. Problems whose last record is ``error`` or ``skipped`` are run again (``run.retry_errors``).

A run-level dollar budget stops the run cleanly: problems not started by then are recorded with the
``skipped`` outcome, so every problem has an outcome.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .build import Session
from .metacontroller import RunAborted, RunBudget
from .runs import RunDir, error_digest
from .types import Outcome, PlanJSON, Problem, ProblemResult, Usage

ProgressFn = Callable[["RunState"], None]
log = logging.getLogger("modulo.runner")


@dataclass
class RunState:
    """Live counters (what the progress bar shows)."""

    total: int
    done: int = 0
    resumed: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    usage: Usage = field(default_factory=Usage)
    started: float = field(default_factory=time.perf_counter)

    @property
    def certified(self) -> int:
        return self.outcomes[Outcome.CERTIFIED.value]

    @property
    def failed(self) -> int:
        return self.outcomes[Outcome.FAILED.value] + self.outcomes[Outcome.ERROR.value]


@dataclass(repr=False)
class RunResult:
    run_dir: RunDir
    results: list[ProblemResult]
    state: RunState
    summary: dict[str, Any]
    evaluation: dict[str, Any] | None
    aborted: str | None = None

    def __repr__(self) -> str:  # cheap: asyncio may repr a finished task's result
        return f"<RunResult {self.run_dir.path} {len(self.results)} problems {dict(self.state.outcomes)}>"


async def run_session(
    session: Session,
    run_dir: RunDir,
    *,
    config_yaml: str = "",
    concurrency: int | None = None,
    progress: ProgressFn | None = None,
) -> RunResult:
    """Solve every problem of ``session`` into ``run_dir`` (resuming what is already there)."""
    cfg = session.config
    previous = run_dir.prepare(session.info, config_yaml)
    retry = {Outcome.ERROR, Outcome.SKIPPED} if cfg.run.retry_errors else set()
    done: dict[str, ProblemResult] = {pid: r for pid, r in previous.items() if r.outcome not in retry}
    todo = [p for p in session.problems if p.id not in done]
    if todo:
        try:  # a model that cannot answer stops the run now, not after every problem has errored
            await session.start()
        except BaseException:
            await session.aclose()
            raise
    state = RunState(total=len(session.problems))
    for r in done.values():
        if r.problem_id in {p.id for p in session.problems}:
            state.done += 1
            state.resumed += 1
            state.outcomes[r.outcome.value] += 1
    budget = RunBudget(max_dollars=cfg.run.max_dollars)
    budget.spent = sum((r.usage.cost_usd for r in previous.values()), 0.0)
    results: dict[str, ProblemResult] = dict(done)
    queue: asyncio.Queue[Problem] = asyncio.Queue()
    for p in todo:
        queue.put_nowait(p)
    aborted: list[str] = []
    n_workers = max(1, min(concurrency or cfg.run.concurrency, len(todo) or 1))

    async def finish(result: ProblemResult) -> None:
        # flushed and fsync'ed off the event loop, so other problems keep running meanwhile
        await asyncio.to_thread(run_dir.append, result)
        results[result.problem_id] = result
        state.done += 1
        state.outcomes[result.outcome.value] += 1
        state.usage = state.usage + result.usage
        if progress is not None:
            progress(state)

    async def worker() -> None:
        while True:
            try:
                problem = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            if aborted or budget.exhausted:
                await finish(_skipped(problem, session, "run_aborted" if aborted else "run_budget"))
                continue
            try:
                result = await session.loop.solve(problem, budget)
            except RunAborted as exc:
                aborted.append(exc.result.error or "critic error")
                await finish(exc.result)
                continue
            except Exception as exc:  # one problem's failure never takes finished work (or the run) down
                log.exception("problem %s failed", problem.id)
                result = _skipped(problem, session, "error")
                result = result.model_copy(update={"outcome": Outcome.ERROR, "error": f"{type(exc).__name__}: {exc}"})
            await finish(result)

    if progress is not None:
        progress(state)
    try:
        await asyncio.gather(*(worker() for _ in range(n_workers)))
    finally:
        await session.aclose()

    ordered = [results[p.id] for p in session.problems if p.id in results]
    summary, evaluation = summarise(session, ordered, state)
    run_dir.write_json("summary.json", summary)
    if evaluation is not None:
        run_dir.write_json("evaluation.json", evaluation)
    return RunResult(run_dir, ordered, state, summary, evaluation, aborted[0] if aborted else None)


def _skipped(problem: Problem, session: Session, reason: str) -> ProblemResult:
    return ProblemResult(
        problem_id=problem.id,
        benchmark=session.benchmark.name,
        outcome=Outcome.SKIPPED,
        stop_reason=reason,
        templates=session.loop.templates(),
    )


def final_plans(problems: list[Problem], results: dict[str, ProblemResult]) -> list[PlanJSON | None]:
    """The plan each problem delivers: its best plan (None when failed, unsolvable or not run)."""
    return [results[p.id].best_plan if p.id in results else None for p in problems]


def summarise(
    session: Session, results: list[ProblemResult], state: RunState
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """``summary.json`` and ``evaluation.json`` content for a finished (or stopped) run.

    Problems that ended ``error`` (or have no record) are left out of the evaluation: a problem that
    could not be run is neither a plan failure nor an abstention. ``summary["errors"]`` counts them and
    names the first error (see :func:`modulo.runs.error_digest`); ``evaluation["excluded"]`` lists them.
    """
    by_id = {r.problem_id: r for r in results}
    counts = Counter(r.outcome.value for r in results)
    usage = Usage()
    for r in results:
        usage = usage + r.usage
    scored = [p for p in session.problems if p.id in by_id and by_id[p.id].outcome != Outcome.ERROR]
    excluded = [p.id for p in session.problems if p.id not in {q.id for q in scored}]
    evaluation: dict[str, Any] | None = None
    metrics: dict[str, float] = {}
    try:
        ev = session.benchmark.evaluate(scored, final_plans(scored, by_id)) if scored else None
    except NotImplementedError:
        ev = None
    if ev is not None:
        metrics = dict(ev.metrics)
        evaluation = {"metrics": ev.metrics, "per_problem": ev.per_problem, "tables": ev.tables}
    elif not scored and excluded:
        evaluation = {"metrics": {}, "per_problem": [], "tables": {}}
    if evaluation is not None and excluded:
        evaluation["excluded"] = {"problem_ids": excluded, "reason": "ended with an error or not run"}
    n = len(session.problems)
    errors = error_digest(results)
    summary = {
        "status": "errors" if errors["count"] else ("complete" if len(results) == n else "partial"),
        "errors": errors,
        "n_problems": n,
        "finished": len(results),
        "evaluated": len(scored),
        "counts": dict(counts),
        "certified_rate": counts.get(Outcome.CERTIFIED.value, 0) / n if n else 0.0,
        "metrics": metrics,
        "usage": usage.model_dump(),
        "iterations": sum(len(r.iterations) for r in results),
        "seconds": time.perf_counter() - state.started,
    }
    return summary, evaluation
