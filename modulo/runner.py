"""Run many problems concurrently into a run directory, resumably.

Problems run as asyncio tasks, at most ``concurrency`` at a time. Each finished problem is appended to
``records.jsonl`` and fsync'ed before it counts as done (by a writer thread, while the worker goes on
to its next problem; problems finishing within 50 ms of each other share one write and one fsync), so
a run killed at any moment (even with SIGKILL) and started again into the same directory skips every
finished problem and repeats no paid call (a problem finished but not yet on disk runs again, its
replies answered by the response cache). Problems whose last record is
``error`` or ``skipped`` are run again (``run.retry_errors``).

A run-level dollar budget stops the run cleanly: problems not started by then are recorded with the
``skipped`` outcome, so every problem has an outcome.

Memory stays flat in the number of problems: a finished problem's full record goes to disk and leaves
memory; the runner keeps a :class:`Finished` digest of it (outcome, the plans the evaluation needs,
counts) on disk too, in a temporary spool, and in memory only where each problem's digest lies (8
bytes a problem). The summary, the benchmark's evaluation and the console's budget table are computed
from the digests by streaming passes in run order (the summary's counts in the evaluation's pass), the
evaluation of the final plans once for all of them (a benchmark that streams its evaluation hands its
per-problem rows back on disk as well, and ``evaluation.json`` is written from them as they are read).
``RunResult.results`` reads the full records back from disk when asked.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import logging
import threading
import time
import uuid
from array import array
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .benchmark import FinalPlan
from .build import Session
from .llm.client import ATTEMPT, Attempt, attempt_id, attempt_key
from .metacontroller import RunAborted, RunBudget, best_iteration
from .problems import Spool
from .runs import RunDir, RunLock, error_digest, latest_records
from .types import (
    Abstention,
    IterationRecord,
    Judgement,
    Outcome,
    PlanJSON,
    Problem,
    ProblemResult,
    ProblemUpdate,
    Usage,
)
from .users import in_force

ProgressFn = Callable[["RunState"], None]
log = logging.getLogger("modulo.runner")
T = TypeVar("T")


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
    #: the critics that passed the delivered plan / the first plan, judged in this process against the
    #: problem in force at the end (see :attr:`modulo.benchmark.FinalPlan.passed_by`); empty when unknown
    best_passed_by: tuple[str, ...] = ()
    first_passed_by: tuple[str, ...] = ()
    #: the run's decline (:attr:`ProblemResult.decline`: the planner's, outcome ``abstained``, with the benchmark's
    #: check of its reason, or the benchmark's proof, outcome ``unsolvable``)
    abstention: Abstention | None = None
    #: (critic, how many of its verdicts on this problem's plans were errors: crashed, timed out, changed
    #: the plan, refused by the sandbox), by critic name; empty when none was
    critic_errors: tuple[tuple[str, int], ...] = ()

    @classmethod
    def of(cls, result: ProblemResult, *, judged_here: bool = True) -> Finished:
        """The digest of ``result``; ``judged_here``: its verdicts were given in this process (else, a
        problem resumed from an earlier process, no critic's pass is handed to the evaluation)."""
        first = best_iteration(result.iterations, 1)
        final = result.iterations[-1].version_after if result.iterations else 0
        judged = result.iterations[0].judged_at(final) if result.iterations else None
        best_passed_by: tuple[str, ...] = ()
        first_passed_by: tuple[str, ...] = ()
        if judged_here and result.iterations:
            # the first plan is mostly the first iteration's (judged above), the delivered plan mostly the first
            first_judged = judged if first is result.iterations[0] else _judged(first, final)
            first_passed_by = _passed_by(first_judged)
            best = _at(result.iterations, result.best_iteration)
            best_passed_by = first_passed_by if best is first else _passed_by(_judged(best, final))
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
            best_passed_by=best_passed_by,
            first_passed_by=first_passed_by,
            critic_errors=_critic_errors(result.iterations),
            abstention=result.decline,
        )


def _critic_errors(iterations: list[IterationRecord]) -> tuple[tuple[str, int], ...]:
    """(critic, errored verdicts) of the iterations, by critic name (see :attr:`Finished.critic_errors`)."""
    counts: Counter[str] = Counter()
    for it in iterations:
        for v in it.verdicts:
            if v.error is not None:
                counts[v.critic] += 1
    return tuple(sorted(counts.items()))


def _plan(it: IterationRecord | None) -> PlanJSON:
    return it.plan if it is not None else None


def _at(iterations: list[IterationRecord], index: int | None) -> IterationRecord | None:
    """The iteration numbered ``index`` (None: none)."""
    if index is None:
        return None
    for it in reversed(iterations):  # numbered in order: the delivered plan is mostly a late one
        if it.index == index:
            return it
    return None


def _judged(it: IterationRecord | None, version: int) -> Judgement | None:
    """``it``'s plan's judgement against version ``version`` of the problem (None: none)."""
    return it.judged_at(version) if it is not None else None


def _passed_by(judged: Judgement | None) -> tuple[str, ...]:
    """The critics whose verdict in ``judged`` passed the plan (applicable, no error)."""
    if judged is None:
        return ()
    return tuple(v.critic for v in judged.verdicts if v.passed and v.applicable and v.error is None)


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


class _Earlier:
    """What the records of the run's earlier processes say, read once as the run starts: the usage of every
    record (every attempt at a problem, those a retry replaces too) and which attempts are on record (the
    :func:`~modulo.llm.client.attempt_key` of each one that paid something, by the process that wrote it:
    ``processes``, :meth:`RunDir.processes`; a record written before processes were listed names none)."""

    def __init__(self, processes: list[tuple[str, int]]) -> None:
        self.processes = processes
        self.records = 0
        self.usage = Usage()
        self.recorded: set[int] = set()
        # record i was written by the last process that started with at most i records (one that started with
        # fewer than an earlier one did found records cut: those after its start are its own)
        self._by_start = sorted(range(len(processes)), key=lambda j: processes[j][1])
        self._started = 0  # how many of _by_start had started by the record read next
        self._at = -1  # the process that wrote the record read next (an index into processes)

    def read(self, record: ProblemResult, digest: T) -> T:
        while self._started < len(self._by_start) and self.processes[self._by_start[self._started]][1] <= self.records:
            self._at = max(self._at, self._by_start[self._started])
            self._started += 1
        self.records += 1
        self.usage = self.usage + record.usage
        if self._at >= 0 and record.usage.cost_usd > 0:
            self.recorded.add(attempt_key(attempt_id(self.processes[self._at][0], record.problem_id)))
        return digest


class _Digests:
    """The digests of finished problems, on disk (a :class:`~modulo.problems.Spool`), by problem position:
    memory holds 8 bytes a problem (where its digest lies), whatever the number of problems."""

    def __init__(self, ids: list[str]) -> None:
        self.ids = ids
        self.spool: Spool[Finished] = Spool(prefix="modulo-digests-")
        self.at = array("q", [-1]) * len(ids)  # problem position -> position in the spool (-1: none yet)

    def put(self, pos: int, digest: Finished) -> None:
        self.at[pos] = self.spool.append(digest)

    def done(self, pos: int) -> bool:
        return self.at[pos] >= 0

    def __iter__(self) -> Iterator[tuple[int, Finished | None]]:
        """(position, digest or None) of every problem, in run order, read one at a time."""
        for pos in range(len(self.ids)):
            k = self.at[pos]
            yield pos, (self.spool[k] if k >= 0 else None)


async def run_session(
    session: Session,
    run_dir: RunDir,
    *,
    config_yaml: str = "",
    concurrency: int | None = None,
    progress: ProgressFn | None = None,
) -> RunResult:
    """Solve every problem of ``session`` into ``run_dir`` (resuming what is already there).

    The run directory's lock (:class:`~modulo.runs.RunLock`) is held throughout, from Python as from the
    CLI (which holds it already: it is re-entrant): a directory another process is writing is a
    RunLockedError naming it, before anything is written."""
    with RunLock(run_dir.path):
        return await _run_locked(session, run_dir, config_yaml, concurrency, progress)


async def _run_locked(
    session: Session, run_dir: RunDir, config_yaml: str, concurrency: int | None, progress: ProgressFn | None
) -> RunResult:
    cfg = session.config
    retry = {Outcome.ERROR, Outcome.SKIPPED} if cfg.run.retry_errors else set()
    problems = session.problems
    digests = _Digests(problems.ids)
    earlier = _Earlier(run_dir.processes())
    # the finished problems already there: their records read one at a time, each digest put on disk
    # at once (the id -> spool position map of the resumed problems is the only thing held meanwhile)
    previous = run_dir.prepare_digests(
        session.info, config_yaml, lambda r: digests.spool.append(earlier.read(r, Finished.of(r, judged_here=False)))
    )
    process = uuid.uuid4().hex
    run_dir.start_process(process, earlier.records)
    session.pays_for(run_dir.identity)  # a reply this run paid for before an interruption is spent, not saved
    # every attempt's record counts, those a retry replaces too: each paid call is in the record of the one
    # attempt that counted it (see LLMClient._paid_by_this_run)
    usage = earlier.usage  # of every record in this run directory (the summary's usage)
    spent = usage.cost_usd
    state = RunState(total=len(problems))
    if previous:
        ids = set(problems.ids)
        kept: set[str] = set()  # the resumed problems of this run (each digest read from the spool once)
        for pid, k in previous.items():
            digest = digests.spool[k]
            if pid in ids and digest.outcome not in retry:
                kept.add(pid)
                state.done += 1
                state.resumed += 1
                state.outcomes[digest.outcome.value] += 1
        for pos, pid in enumerate(problems.ids):
            if pid in kept:
                digests.at[pos] = previous[pid]
        del previous, ids, kept
    n_todo = len(problems) - state.resumed
    if n_todo:
        try:  # a model that cannot answer stops the run now, not after every problem has errored
            await session.start()
        except BaseException:
            await session.aclose()
            raise
        run_dir.discard_ending()  # the run goes on: what an earlier process wrote at its end no longer holds
    budget = RunBudget(max_dollars=cfg.run.max_dollars)
    budget.spent = spent
    # the problems still to run, read one at a time as workers take them: only in-flight ones are held
    todo = ((pos, p) for pos, p in enumerate(problems) if not digests.done(pos))
    aborted: list[str] = []
    n_workers = max(1, min(concurrency or cfg.run.concurrency, n_todo or 1))

    def written(group: list[tuple[Outcome, Usage]]) -> None:
        nonlocal usage
        for outcome, used in group:
            usage = usage + used
            state.done += 1
            state.outcomes[outcome.value] += 1
            state.usage = state.usage + used
        if progress is not None:
            progress(state)

    async def finish(pos: int, result: ProblemResult) -> None:
        # encoded, written and fsync'ed in the writer's thread (other problems go on meanwhile); counted
        # once on disk (``written``)
        await writer.put(pos, result)

    async def solved(problem: Problem) -> ProblemResult:
        if aborted or budget.exhausted:
            return _skipped(problem, session, "run_aborted" if aborted else "run_budget")
        ATTEMPT.set(Attempt(process, attempt_id(process, problem.id), earlier.recorded))  # who pays its calls
        try:
            return await session.loop.solve(problem, budget)
        except RunAborted as exc:
            aborted.append(exc.result.error or "critic error")
            return exc.result
        except Exception as exc:  # one problem's failure never takes finished work (or the run) down
            log.exception("problem %s failed", problem.id)
            result = _skipped(problem, session, "error")
            return result.model_copy(update={"outcome": Outcome.ERROR, "error": f"{type(exc).__name__}: {exc}"})

    async def worker() -> None:
        for pos, problem in todo:  # one shared generator: each problem goes to one worker
            writer.solving += 1
            try:
                result = await solved(problem)
            finally:
                writer.solving -= 1
            await finish(pos, result)

    writer = _RecordWriter(run_dir, digests, written)
    thresholds = gc.get_threshold()
    if cfg.run.gc_threshold is not None:  # fewer young collections while the run allocates (run.gc_threshold)
        gc.set_threshold(cfg.run.gc_threshold, *thresholds[1:])
    try:
        try:
            if progress is not None:
                progress(state)
            await asyncio.gather(*(worker() for _ in range(n_workers)))
        except BaseException:
            try:
                await session.aclose()
            finally:
                writer.stop()  # the records handed over are written (a run ending by an error or a signal)
            raise
        writer.stop()  # every record is on disk: each worker waited for its own
        summary, evaluation, rows = await _ended(session, digests, state, usage)
        # the evaluation is written first: summary.json, written last, says the run ended
        if evaluation is not None:
            run_dir.write_json("evaluation.json", evaluation)
        run_dir.write_json("summary.json", summary)
    finally:
        digests.spool.close()
        gc.set_threshold(*thresholds)  # held for the run's end too (the summary, the evaluation, the files)
    return RunResult(
        run_dir,
        list(problems.ids),
        state,
        summary,
        evaluation,
        aborted[0] if aborted else None,
        rows,
    )


async def _ended(
    session: Session, digests: _Digests, state: RunState, usage: Usage
) -> tuple[dict[str, Any], dict[str, Any] | None, list[tuple[int, dict[str, float]]]]:
    """:func:`summarise` the run while the session closes (its model clients, its critics' worker
    processes, whose exits it waits for: meanwhile the summary goes on in its thread).

    The summary runs in a worker thread: Z3 (the synthesized benchmarks' evaluator) pays, for each
    context it creates on the main thread, a cost that grows with the process's heap (~10 ms at 200 MB).
    A session that fails to close fails the run as before (no summary is written); the summary's own
    failure is raised once the session is closed."""
    summarising = asyncio.get_running_loop().run_in_executor(None, summarise, session, digests, state, usage)
    try:
        await session.aclose()
    except BaseException:
        await asyncio.wait([summarising])  # it reads the digests: done before they are deleted
        if not summarising.cancelled():
            summarising.exception()  # retrieved: the session's error is the run's
        raise
    return await summarising


#: how long the writer waits, after a record is handed over while other problems are still being solved,
#: for more records to write with it (one write and one fsync for the group): until :data:`GROUP_RECORDS`
#: are there, no problem is being solved any more, or the run ends
GROUP_SECONDS = 0.02
GROUP_RECORDS = 32


class _RecordWriter:
    """Writes finished problems' records to ``records.jsonl`` in a thread of its own, in groups of one
    write and one fsync (an fsync costs about a quarter of a millisecond of CPU whatever it writes): the
    records handed over while a group is being encoded, written and fsync'ed, and those that finish within
    :data:`GROUP_SECONDS` of the first of a group while other problems are still being solved.

    A finishing worker hands its record over and waits until it is on disk (:meth:`put`): only then does
    the problem count as done and the worker take its next problem, so a run killed during a problem has
    every problem finished before it on disk. Once a group is on disk the writer, in its own thread, puts
    each problem's digest in the spool, and hands ``on_written`` (run on the event loop, once per group)
    the outcome and usage of each record. A failed write (a full disk: RunError) is raised by the
    :meth:`put` of every record of its group. The thread is not a daemon, and :meth:`stop` waits for it:
    a run stopped by an error or a signal still writes every record handed over."""

    def __init__(
        self,
        run_dir: RunDir,
        digests: _Digests,
        on_written: Callable[[list[tuple[Outcome, Usage]]], None],
    ) -> None:
        self.run_dir = run_dir
        self.digests = digests
        self.on_written = on_written
        self.loop = asyncio.get_running_loop()
        #: problems being solved now (the writer waits for more records only while some are)
        self.solving = 0
        self._cond = threading.Condition()
        self._queue: list[tuple[int, ProblemResult, asyncio.Future[None]]] = []
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="modulo-records", daemon=False)
        self._thread.start()

    async def put(self, pos: int, result: ProblemResult) -> None:
        """Hand over the record of the problem at position ``pos``; return once it is on disk."""
        done: asyncio.Future[None] = self.loop.create_future()
        with self._cond:
            self._queue.append((pos, result, done))
            if len(self._queue) == 1 or not self.solving or len(self._queue) >= GROUP_RECORDS:
                self._cond.notify()  # the writer waits for one of these only
        del result
        await done

    def stop(self) -> None:
        """Write what is left and end the thread (at once when nothing is left)."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        self._thread.join()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closing:
                    self._cond.wait()
                deadline = time.monotonic() + GROUP_SECONDS
                while self.solving and len(self._queue) < GROUP_RECORDS and not self._closing:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
                group, self._queue = self._queue, []
            if not group:
                return
            try:
                self.run_dir.append_many([r for _, r, _ in group])
                written = []
                for pos, result, _ in group:  # the full record leaves memory, the digest goes to disk
                    digest = Finished.of(result)
                    digest.usage = None  # summed by on_written
                    self.digests.put(pos, digest)
                    written.append((result.outcome, result.usage))
            except BaseException as exc:  # every record of the group is reported unwritten
                self._call(self._failed, [done for _, _, done in group], exc)
                if not isinstance(exc, Exception):
                    raise
                continue
            self._call(self._written, [done for _, _, done in group], written)
            del group

    def _call(self, fn: Callable[..., None], *args: Any) -> None:
        try:
            self.loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the event loop is closed (a run stopped by a signal): nobody waits any more
            pass

    def _written(self, waiting: list[asyncio.Future[None]], written: list[tuple[Outcome, Usage]]) -> None:
        self.on_written(written)
        for done in waiting:
            if not done.done():
                done.set_result(None)

    @staticmethod
    def _failed(waiting: list[asyncio.Future[None]], exc: BaseException) -> None:
        for done in waiting:
            if not done.done():
                done.set_exception(exc)


def _skipped(problem: Problem, session: Session, reason: str) -> ProblemResult:
    return ProblemResult(
        problem_id=problem.id,
        benchmark=session.benchmark.name,
        outcome=Outcome.SKIPPED,
        stop_reason=reason,
        templates=session.loop.templates(),
    )


def _evaluate(
    session: Session,
    digests: _Digests,
    plan: Callable[[Finished], tuple[PlanJSON, tuple[str, ...], Abstention | None]],
    tally: _Tally | None = None,
) -> Any:
    """The benchmark's evaluation of ``plan(r)`` (the plan, and the critics that passed it) for each scored
    problem (not ended ``error``), the problems and their digests read one at a time in run order (a
    benchmark that streams its evaluation holds none of them); None when no problem is scored or the
    benchmark has no evaluation. ``tally`` counts every digest in the same pass (all of them, whatever
    the evaluation reads)."""
    problems = session.problems
    scored = _scored(digests, tally)

    def finals(first: tuple[int, Finished]) -> Iterator[FinalPlan]:
        for pos, d in itertools.chain([first], scored):
            chosen, passed_by, abstention = plan(d)
            # each problem as the updates of its loop left it: the final plan is judged against that request
            problem = in_force(session.benchmark, problems[pos], d.updates)
            yield FinalPlan(problem, chosen, frozenset(passed_by), abstention)

    first = next(scored, None)  # no evaluation at all of no problem
    try:
        ev = None if first is None else session.benchmark.evaluate_final(finals(first))
    except NotImplementedError:
        ev = None
    for _ in scored:  # the rest of the tally (an evaluation that stopped reading early)
        pass
    return ev


def _scored(digests: _Digests, tally: _Tally | None) -> Iterator[tuple[int, Finished]]:
    """(position, digest) of each scored problem (finished, not ``error`` nor ``skipped``) in run order;
    ``tally`` counts every problem on the way."""
    for pos, d in digests:
        if tally is not None:
            tally.add(digests.ids[pos], d)
        if d is not None and d.outcome not in _NOT_SCORED:
            yield pos, d


#: outcomes of problems that were not run through (an error, or never started: the run's budget was spent
#: or the run was stopped): scored neither as a plan failure nor as an abstention
_NOT_SCORED = frozenset({Outcome.ERROR, Outcome.SKIPPED})


@dataclass
class _Tally:
    """What the summary and the budget rows need of the finished problems, in one pass over the digests."""

    finished: int = 0
    scored: int = 0
    iterations: int = 0
    counts: Counter[str] = field(default_factory=Counter)
    errored: list[Finished] = field(default_factory=list)
    #: errored verdicts per critic, over every finished problem
    critic_errors: Counter[str] = field(default_factory=Counter)
    #: problems recorded ``skipped`` (never started)
    skipped: int = 0
    #: problems not scored (ended ``error``, recorded ``skipped``, or not run), in run order
    excluded: list[str] = field(default_factory=list)
    longest: int = 0
    first_accepted: int = 0
    any_accepted: int = 0
    #: whether every scored problem's first plan is its delivered plan (then Direct's evaluation is the
    #: delivered plans')
    first_is_best: bool = True

    def add(self, pid: str, r: Finished | None) -> None:
        """Count the digest ``r`` of problem ``pid`` (None: not run), the problems taken in run order."""
        if r is None:
            self.excluded.append(pid)
            return
        self.finished += 1
        self.iterations += r.iterations
        self.counts[r.outcome.value] += 1
        for name, count in r.critic_errors:
            self.critic_errors[name] += count
        if r.outcome == Outcome.ERROR:
            self.errored.append(r)
            self.excluded.append(r.problem_id)
            return
        if r.outcome == Outcome.SKIPPED:
            self.skipped += 1
            self.excluded.append(r.problem_id)
            return
        self.scored += 1
        self.longest = max(self.longest, r.iterations)
        self.first_accepted += r.first_accepted
        self.any_accepted += r.any_accepted
        first, best = _first(r), _best(r)
        self.first_is_best = self.first_is_best and first[0] == best[0] and first[2] == best[2]


def summarise(
    session: Session, digests: _Digests, state: RunState, usage: Usage
) -> tuple[dict[str, Any], dict[str, Any] | None, list[tuple[int, dict[str, float]]]]:
    """``summary.json`` and ``evaluation.json`` content for a finished (or stopped) run, and the budget
    rows (see ``RunResult.budget_metrics``), from the digests of the finished problems, read in run
    order by streaming passes (the tally within the benchmark's evaluation of the final plans, once for
    all three; a benchmark that streams its evaluation may hand its rows back on disk).

    Problems that ended ``error``, were recorded ``skipped`` (never started: the run's dollar budget was
    spent) or have no record are left out of the evaluation: a problem that could not be run is neither
    a plan failure nor an abstention. ``summary["errors"]`` counts the errors and names the first (see
    :func:`modulo.runs.error_digest`); ``evaluation["excluded"]`` lists every problem left out.
    """
    tally = _Tally()
    evaluation: dict[str, Any] | None = None
    metrics: dict[str, float] = {}
    ev = _evaluate(session, digests, _best, tally)  # the tally and the evaluation: one pass over the digests
    if ev is not None:
        metrics = dict(ev.metrics)
        evaluation = {"metrics": ev.metrics, "per_problem": ev.per_problem, "tables": ev.tables}
    elif not tally.scored and tally.excluded:
        evaluation = {"metrics": {}, "per_problem": [], "tables": {}}
    if evaluation is not None and tally.excluded:
        evaluation["excluded"] = {"problem_ids": tally.excluded, "reason": "ended with an error or not run"}
    n = len(session.problems)
    errors = error_digest(tally.errored)
    counts = tally.counts
    summary = {
        # a problem recorded skipped never ran: the run is not complete
        "status": "errors" if errors["count"] else ("complete" if tally.finished - tally.skipped == n else "partial"),
        "errors": errors,
        "n_problems": n,
        "finished": tally.finished,
        "evaluated": tally.scored,
        "counts": dict(counts),
        # errored verdicts per critic (never a pass; see metacontroller.on_critic_error)
        "critic_errors": dict(sorted(tally.critic_errors.items())),
        # over the problems evaluated, as the console, the report and the trackers give it (an errored or
        # skipped problem is neither certified nor a failure)
        "certified_rate": counts.get(Outcome.CERTIFIED.value, 0) / tally.scored if tally.scored else 0.0,
        "metrics": metrics,
        "usage": usage.model_dump(),
        # models whose calls count as $0 for want of a price: "usage.cost_usd" is then a lower bound
        "unpriced_models": session.unknown_cost_models(),
        "iterations": tally.iterations,
        "seconds": time.perf_counter() - state.started,
    }
    return summary, evaluation, _budget_rows(session, digests, tally, metrics)


def _best(r: Finished) -> tuple[PlanJSON, tuple[str, ...], Abstention | None]:
    """The delivered plan (none when the run declined: the planner's last word, outcome abstained, or the
    benchmark's proof, outcome unsolvable), the critics that passed it, and the decline."""
    if r.abstention is not None:
        return None, (), r.abstention
    return r.best_plan, r.best_passed_by, None


def _first(r: Finished) -> tuple[PlanJSON, tuple[str, ...], Abstention | None]:
    """The first iteration's plan, the critics that passed it, and the decline when that first turn was one
    (or the benchmark's proof came before it)."""
    declined_at_once = r.abstention is not None and r.abstention.iteration == 0
    return r.first_plan, r.first_passed_by, r.abstention if declined_at_once else None


def _budget_rows(
    session: Session, digests: _Digests, tally: _Tally, final_metrics: dict[str, float]
) -> list[tuple[int, dict[str, float]]]:
    """Metrics of the first iteration alone (Direct) and of the whole budget (LLM-Modulo).

    ``certified`` is the share of problems whose plan every active critic accepted within the first
    k iterations; the other columns are the benchmark evaluator's metrics of the plan at budget k
    (at the whole budget that is the delivered plan, whose evaluation the summary already holds; at
    k = 1 the same numbers when every problem's first plan is its delivered plan, else evaluated).
    """
    if not tally.scored:
        return []
    budget = session.config.metacontroller.max_iterations
    used = max(tally.longest, 1)
    rows: list[tuple[int, dict[str, float]]] = []
    for k in [1, budget] if budget > 1 and used > 1 else [budget]:
        whole = k == budget or used <= 1
        accepted = tally.any_accepted if whole else tally.first_accepted
        row = {"certified": accepted / tally.scored}
        if whole or tally.first_is_best:  # the same plans: the same evaluation
            row.update(final_metrics)
        else:
            ev = _evaluate(session, digests, _first)
            row.update(ev.metrics if ev is not None else {})
            _close(ev)  # only its metrics are kept
        rows.append((k, row))
    return rows


def _close(ev: Any) -> None:
    """Delete the temporary file of an evaluation whose rows were handed back on disk."""
    rows = getattr(ev, "per_problem", None)
    if isinstance(rows, Spool):
        rows.close()
