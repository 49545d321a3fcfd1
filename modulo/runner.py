"""Run many problems concurrently into a run directory, resumably.

Problems run as asyncio tasks, at most ``concurrency`` at a time. Each finished problem is appended to
``records.jsonl`` and fsync'ed before it counts as done (problems that finish together share one write
and one fsync), so a run killed at any moment (even with SIGKILL) and started again into the same
directory skips every finished problem and repeats no paid call. Problems whose last record is
``error`` or ``skipped`` are run again (``run.retry_errors``).

A run-level dollar budget stops the run cleanly: problems not started by then are recorded with the
``skipped`` outcome, so every problem has an outcome.

Memory stays flat in the number of problems times iterations: a finished problem's full record goes to
disk and leaves memory; the runner keeps only a :class:`Finished` digest of it (outcome, the plans the
evaluation needs, counts), from which the summary, the benchmark's evaluation and the console's budget
table are computed, the evaluation of the final plans once for all of them. ``RunResult.results``
reads the full records back from disk when asked.
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
from .metacontroller import RunAborted, RunBudget, best_iteration
from .runs import RunDir, error_digest, latest_records
from .types import IterationRecord, Outcome, PlanJSON, Problem, ProblemResult, ProblemUpdate, Usage
from .users import in_force

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


@dataclass(slots=True)
class Finished:
    """What the runner keeps of a finished problem once its record is on disk (not its iterations)."""

    problem_id: str
    outcome: Outcome
    stop_reason: str
    error: str | None
    iterations: int
    #: the delivered plan (the best over the whole budget) and the best plan of the first iteration alone
    best_plan: PlanJSON
    first_plan: PlanJSON
    #: whether every active critic accepted the first iteration's plan / some iteration's plan, judged
    #: against the problem in force at the end (after the last update)
    first_accepted: bool
    any_accepted: bool
    #: the problem's usage, read when a run resumes (summed at once, then dropped: None)
    usage: Usage | None
    #: the updates applied to the problem during the loop (the evaluator scores the problem they made)
    updates: tuple[ProblemUpdate, ...] = ()

    @classmethod
    def of(cls, result: ProblemResult) -> Finished:
        first = best_iteration(result.iterations, 1)
        final = result.iterations[-1].version_after if result.iterations else 0
        judged = result.iterations[0].judged_at(final) if result.iterations else None
        return cls(
            problem_id=result.problem_id,
            outcome=result.outcome,
            stop_reason=result.stop_reason,
            error=result.error,
            iterations=len(result.iterations),
            best_plan=result.best_plan,
            # the same object when equal (the common case): one plan kept, not two
            first_plan=result.best_plan if first is not None and first.plan == result.best_plan else _plan(first),
            first_accepted=judged is not None and judged.accepts,
            any_accepted=result.best_certified,
            updates=tuple(result.updates),
            usage=result.usage,
        )


def _plan(it: IterationRecord | None) -> PlanJSON:
    return it.plan if it is not None else None


@dataclass(repr=False)
class RunResult:
    run_dir: RunDir
    #: the problems of the run, in order (``results`` follows this order)
    problem_ids: list[str]
    state: RunState
    summary: dict[str, Any]
    evaluation: dict[str, Any] | None
    aborted: str | None = None
    #: (k, metrics) of the plans delivered within the first k iterations, for k = 1 and the budget
    #: (``certified`` plus the benchmark evaluator's metrics), on the problems that did not error
    budget_metrics: list[tuple[int, dict[str, float]]] = field(default_factory=list)

    @property
    def results(self) -> list[ProblemResult]:
        """The full record of every finished problem, in problem order, read from ``records.jsonl``."""
        records = latest_records(self.run_dir.path)
        return [records[pid] for pid in self.problem_ids if pid in records]

    def __repr__(self) -> str:  # cheap: asyncio may repr a finished task's result
        return f"<RunResult {self.run_dir.path} {self.state.done} problems {dict(self.state.outcomes)}>"


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
    # the finished problems already there, as digests (their records are read one at a time, never held)
    previous = run_dir.prepare_digests(session.info, config_yaml, Finished.of)
    retry = {Outcome.ERROR, Outcome.SKIPPED} if cfg.run.retry_errors else set()
    problems = session.problems
    ids = set(problems.ids)
    spent = sum((r.usage.cost_usd for r in previous.values() if r.usage is not None), 0.0)
    results: dict[str, Finished] = {pid: r for pid, r in previous.items() if r.outcome not in retry}
    del previous
    usage = Usage()  # of the problems finished in this run directory (the summary's usage)
    for pid in results.keys() & ids:
        usage = usage + (results[pid].usage or Usage())
    for r in results.values():
        r.usage = None  # summed: the digests keep no usage (a finishing problem's is added as it comes)
    n_todo = sum(1 for pid in problems.ids if pid not in results)
    if n_todo:
        try:  # a model that cannot answer stops the run now, not after every problem has errored
            await session.start()
        except BaseException:
            await session.aclose()
            raise
    state = RunState(total=len(problems))
    for pid in results.keys() & ids:
        state.done += 1
        state.resumed += 1
        state.outcomes[results[pid].outcome.value] += 1
    budget = RunBudget(max_dollars=cfg.run.max_dollars)
    budget.spent = spent
    # the problems still to run, read one at a time as workers take them: only in-flight ones are held
    todo = (p for p in problems if p.id not in results)
    aborted: list[str] = []
    n_workers = max(1, min(concurrency or cfg.run.concurrency, n_todo or 1))

    commits = _GroupCommit(run_dir)

    async def finish(result: ProblemResult) -> None:
        nonlocal usage
        # flushed and fsync'ed off the event loop, so other problems keep running meanwhile
        await commits.append(result)
        digest = Finished.of(result)  # the full record leaves memory
        digest.usage = None  # summed just below
        results[result.problem_id] = digest
        usage = usage + result.usage
        state.done += 1
        state.outcomes[result.outcome.value] += 1
        state.usage = state.usage + result.usage
        if progress is not None:
            progress(state)

    async def worker() -> None:
        for problem in todo:  # one shared generator: each problem goes to one worker
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

    ordered = [results[pid] for pid in problems.ids if pid in results]
    # the evaluation runs in a worker thread: Z3 (the synthesized benchmarks' evaluator) pays, for each
    # context it creates on the main thread, a cost that grows with the process's heap (~10 ms at 200 MB)
    summary, evaluation, rows = await asyncio.to_thread(summarise, session, ordered, state, usage)
    run_dir.write_json("summary.json", summary)
    if evaluation is not None:
        run_dir.write_json("evaluation.json", evaluation)
    return RunResult(
        run_dir,
        list(problems.ids),
        state,
        summary,
        evaluation,
        aborted[0] if aborted else None,
        rows,
    )


class _GroupCommit:
    """Appends finished records to ``records.jsonl`` off the event loop, in groups: the records that
    finish while one group is being written and fsync'ed go out together in the next write and fsync.
    ``append`` returns once its record is on disk (it counts as done only then) and raises what the
    write raised (a full disk: RunError)."""

    def __init__(self, run_dir: RunDir) -> None:
        self.run_dir = run_dir
        self.waiting: list[tuple[ProblemResult, asyncio.Future[None]]] = []
        self.writer: asyncio.Task[None] | None = None

    async def append(self, result: ProblemResult) -> None:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiting.append((result, done))
        if self.writer is None or self.writer.done():
            self.writer = asyncio.create_task(self._write())
        await done

    async def _write(self) -> None:
        while self.waiting:
            group, self.waiting = self.waiting, []
            try:
                await asyncio.to_thread(self.run_dir.append_many, [r for r, _ in group])
            except BaseException as exc:  # every record of the group is reported unwritten
                for _, done in group:
                    if not done.done():
                        done.set_exception(exc)
                if not isinstance(exc, Exception):
                    raise
                continue
            for _, done in group:
                if not done.done():
                    done.set_result(None)


def _skipped(problem: Problem, session: Session, reason: str) -> ProblemResult:
    return ProblemResult(
        problem_id=problem.id,
        benchmark=session.benchmark.name,
        outcome=Outcome.SKIPPED,
        stop_reason=reason,
        templates=session.loop.templates(),
    )


def _evaluate(session: Session, scored: list[Finished], plan: Callable[[Finished], PlanJSON]) -> Any:
    """The benchmark's evaluation of ``plan(r)`` for each scored problem, the problems read one at a
    time in run order (a benchmark that streams its evaluation holds none of them)."""
    if not scored:
        return None
    by_id = {r.problem_id: r for r in scored}
    # each problem as the updates of its loop left it: the final plan is judged against that request
    pairs = (
        (in_force(session.benchmark, p, by_id[p.id].updates), plan(by_id[p.id]))
        for p in session.problems
        if p.id in by_id
    )
    try:
        return session.benchmark.evaluate_stream(pairs)
    except NotImplementedError:
        return None


def summarise(
    session: Session, results: list[Finished], state: RunState, usage: Usage
) -> tuple[dict[str, Any], dict[str, Any] | None, list[tuple[int, dict[str, float]]]]:
    """``summary.json`` and ``evaluation.json`` content for a finished (or stopped) run, and the budget
    rows (see ``RunResult.budget_metrics``), from the digests of the finished problems (in run order).
    The benchmark evaluates the final plans once, for all three.

    Problems that ended ``error`` (or have no record) are left out of the evaluation: a problem that
    could not be run is neither a plan failure nor an abstention. ``summary["errors"]`` counts them and
    names the first error (see :func:`modulo.runs.error_digest`); ``evaluation["excluded"]`` lists them.
    """
    counts = Counter(r.outcome.value for r in results)
    scored = [r for r in results if r.outcome != Outcome.ERROR]
    scored_ids = {r.problem_id for r in scored}
    excluded = [pid for pid in session.problems.ids if pid not in scored_ids]
    evaluation: dict[str, Any] | None = None
    metrics: dict[str, float] = {}
    ev = _evaluate(session, scored, _best)
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
        "iterations": sum(r.iterations for r in results),
        "seconds": time.perf_counter() - state.started,
    }
    return summary, evaluation, _budget_rows(session, scored, metrics)


def _best(r: Finished) -> PlanJSON:
    """The delivered plan: none when the planner's last word was to decline (outcome abstained)."""
    return None if r.outcome == Outcome.ABSTAINED else r.best_plan


def _first(r: Finished) -> PlanJSON:
    return r.first_plan


def _budget_rows(
    session: Session, finished: list[Finished], final_metrics: dict[str, float]
) -> list[tuple[int, dict[str, float]]]:
    """Metrics of the first iteration alone (Direct) and of the whole budget (LLM-Modulo).

    ``certified`` is the share of problems whose plan every active critic accepted within the first
    k iterations; the other columns are the benchmark evaluator's metrics of the plan at budget k
    (at the whole budget that is the delivered plan, whose evaluation the summary already holds; at
    k = 1 the same numbers when every problem's first plan is its delivered plan, else evaluated).
    """
    if not finished:
        return []
    budget = session.config.metacontroller.max_iterations
    used = max((r.iterations for r in finished), default=1)
    rows: list[tuple[int, dict[str, float]]] = []
    for k in [1, budget] if budget > 1 and used > 1 else [budget]:
        whole = k == budget or used <= 1
        accepted = sum(1 for r in finished if (r.any_accepted if whole else r.first_accepted))
        row = {"certified": accepted / len(finished)}
        if whole or all(_first(r) == _best(r) for r in finished):  # the same plans: the same evaluation
            row.update(final_metrics)
        else:
            ev = _evaluate(session, finished, _first)
            row.update(ev.metrics if ev is not None else {})
        rows.append((k, row))
    return rows
