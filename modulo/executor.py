"""The critic executor: the one door through which the loop calls every critic.

What it guarantees, for every critic call:

- **The plan is fixed first.** The loop records the plan and its fingerprint before any critic runs;
  the executor is handed the plan's canonical JSON text (:class:`FrozenPlan`) and gives each critic
  its *own copy*, decoded from that text. A critic that changes its copy is a critic error
  ("mutated the plan"), recorded like any crash; the recorded plan, later critics, the backprompt and
  the evaluator never see the change.
- **A deadline.** Each call has a timeout (``metacontroller.critic_timeout_s``, generous by default;
  per critic ``metacontroller.critic_timeouts.NAME``; a critic class may declare its own
  ``timeout_s``). A critic past it is a recorded critic error and the problem goes on.
- **Off the event loop where it could stall it.** Critics run in worker threads, so a slow critic never
  stalls other problems' HTTP requests (no spurious client timeouts) and a hanging one never freezes the
  run. The workers are daemon threads: a critic that never returns cannot keep the process alive at exit.
  A critic that *declares* itself quick and never blocking (``inline``, see :class:`~modulo.critic.Critic`)
  runs on the event loop's thread instead, with no hand-off (``metacontroller.inline_critics=false`` turns
  that off): its deadline is checked when it returns (a late verdict is a recorded timeout and the critic
  goes to the worker thread for the rest of the run), so its declaration, not a watchdog, is what keeps
  the loop turning. Untrusted, sandboxed and CPU-heavy critics never run inline.
- **Nothing escapes.** ``SystemExit``, ``KeyboardInterrupt`` and any other ``BaseException`` raised
  inside a critic become :class:`~modulo.errors.CriticError`; ``on_critic_error`` (record | stop)
  then decides, in the loop, what an error does. (One exception: a ``KeyboardInterrupt`` inside an
  inline critic, which runs on the thread that receives Ctrl-C, is the user's interrupt and goes on up.)

Executor kinds. :class:`CriticExecutor` is the interface: ``await executor.run(critic, problem, frozen,
timeout_s)`` returns a labelled :class:`~modulo.types.Verdict` or raises CriticError, and ``await
executor.run_all(critics, problem, frozen, timeouts, stop)`` runs a plan's critics in order and returns
their outcomes (a Verdict or a CriticError each), ending early where ``stop`` says (the loop stops at
the first crash under ``on_critic_error=stop``); ``executor.run_here(...)`` gives those outcomes at once,
with no coroutine, when the kind runs every one of the critics on the calling thread (the inline ones),
None otherwise, and may end the batch after its first ``gate`` critics when they do not all accept (the
loop's format critics gating the others in one pass). ``run_all`` is written once: a kind says which critics
it takes aside (``aside``), how it runs them (``run_aside``) and how it runs the others meanwhile
(``run_rest``). The built-in kind is :class:`ThreadExecutor`: the critics declared ``inline`` run on the
event loop's thread, one after another on one copy of the plan; the others run as one batch in one
worker thread (one hand-off to the event loop per plan, not one per critic), one copy of the plan
serving every critic that leaves it unchanged, each critic under its own deadline counted from its
start. The batches of all problems share one worker (``batch_workers``: their work holds the GIL, and
more threads only take turns), queued in order; a worker abandoned past a deadline is replaced, so a
batch behind a hung critic runs. A critic declared CPU-heavy (``heavy``, see
:class:`~modulo.critic.Critic`) runs aside: ``"thread"`` (its work releases the GIL) in a thread of its
own meanwhile, ``True``/``"process"`` in a worker process when the run has
:class:`modulo.sandbox.HeavyExecutor` (``metacontroller.heavy``, on by default for declared critics), so
it does not contend for the GIL. :class:`modulo.sandbox.SandboxExecutor` runs untrusted critics in
isolated worker processes with rlimits and no network (``metacontroller.sandbox``). Worker processes can
*kill* a critic past its deadline, where a thread can only be abandoned.

A thread past its deadline cannot be stopped in Python: it is abandoned (its result is ignored) and
keeps its CPU until it returns. That is why the timeout is generous by default and why killing is the
sandbox kind's job.
"""

from __future__ import annotations

import asyncio
import functools
import json
import math
import queue
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .config import DEFAULT_CRITIC_TIMEOUT_S as DEFAULT_CRITIC_TIMEOUT_S  # a z3 check on a large problem takes seconds
from .critic import Critic
from .errors import CriticError
from .types import PlanJSON, Problem, Verdict, canonical_json, text_fingerprint

try:  # a plan's copy for its critics, decoded by orjson where that gives the same value (about 2.5 times faster)
    from orjson import loads as _orjson_loads
except ImportError:  # pragma: no cover - orjson is a dependency; without it every copy is json's
    _orjson_loads = None  # type: ignore[assignment]

#: every ASCII digit as "9" (a UTF-8 byte that is no ASCII digit stays as it is): a run of 19 digits is then
#: a run of 19 nines
_DIGITS_AS_NINES = bytes.maketrans(b"0123456789", b"9" * 10)
_NINETEEN_NINES = b"9" * 19


class PlanMutatedError(RuntimeError):
    """The critic changed the plan it was given (critics must treat plans as read-only)."""


class CriticTimeoutError(TimeoutError):
    """The critic did not return within its deadline."""


@dataclass(frozen=True)
class FrozenPlan:
    """A plan fixed before any critic runs: its canonical JSON text, from which each critic's copy
    is decoded, and against which each copy is compared afterwards."""

    text: str

    @classmethod
    def of(cls, plan: PlanJSON) -> FrozenPlan:
        return cls(canonical_json(plan))

    def copy(self) -> PlanJSON:
        """A fresh decoding of the text: ``json.loads(text)``, read by orjson where that gives the same
        value (orjson decodes about 2.5 times faster; with the once-per-plan check of :attr:`_orjson_reads`, a
        1.5 KB plan's copy costs about 15-20 % less)."""
        if self._orjson_reads:
            try:
                return _orjson_loads(self.text)
            except ValueError:  # NaN, an infinity, a lone surrogate: the standard reader's value (or error)
                pass
        return json.loads(self.text)

    @functools.cached_property
    def _orjson_reads(self) -> bool:
        """Whether orjson may read the text (decided once per plan): it reads JSON as the standard reader
        does (checked on random values: every double, every character, 64-bit integers), except an
        integer past 64 bits, which it reads as a float. No run of 19 digits anywhere in the text: no such
        integer (a float's text has at most 17 digits in a row)."""
        if _orjson_loads is None:
            return False
        digits = self.text.encode("utf-8", "surrogatepass").translate(_DIGITS_AS_NINES)
        return _NINETEEN_NINES not in digits

    def lend(self) -> PlanJSON:
        """A copy for a batch of critics on the event loop's thread: the one the batch before handed back
        (checked unchanged after each of its critics), else a fresh one. Only that thread lends."""
        spare = self.__dict__.pop("_spare", None)
        return spare if spare is not None else self.copy()

    def hand_back(self, plan: PlanJSON) -> None:
        """Keep ``plan``, a copy checked unchanged after the last critic that had it, for :meth:`lend`."""
        self.__dict__["_spare"] = plan

    @property
    def fingerprint(self) -> str:
        """The plan's :func:`~modulo.types.plan_fingerprint`, from the text (no second encoding)."""
        return text_fingerprint(self.text)

    @functools.cached_property
    def _reference(self) -> PlanJSON:
        """A private decoding of the text, never handed out: what an unchanged copy equals."""
        return self.copy()

    def unchanged(self, copy: PlanJSON) -> bool:
        """Whether ``copy`` still holds the plan. A deep comparison with a private decoding (fast, in C),
        then, only where that differs (a NaN is never equal to itself), the canonical text. (A change
        that keeps every value equal, such as 1 to 1.0 or True, is not seen.)"""
        try:
            if copy == self._reference:
                return True
            return canonical_json(copy) == self.text
        except (TypeError, ValueError, RecursionError):
            return False


@dataclass
class CriticDeadlines:
    """Per-critic timeouts: configured per name, else the critic's own ``timeout_s``, else the default."""

    default_s: float = DEFAULT_CRITIC_TIMEOUT_S
    per_critic: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, value in {"default": self.default_s, **self.per_critic}.items():
            if not value > 0:
                raise ValueError(f"critic timeout for {name} must be positive seconds, not {value!r}")

    def for_critic(self, critic: Critic) -> float:
        if critic.name in self.per_critic:
            return float(self.per_critic[critic.name])
        own = getattr(critic, "timeout_s", None)
        return float(own) if own else self.default_s


def call_critic(critic: Critic, problem: Problem, frozen: FrozenPlan) -> Verdict:
    """Run one critic on its own copy of the plan (in whatever thread or process calls this)."""
    outcome, _ = call_on_copy(critic, problem, frozen, frozen.copy())
    if isinstance(outcome, CriticError):
        raise outcome
    return outcome


def call_on_copy(
    critic: Critic, problem: Problem, frozen: FrozenPlan, plan: PlanJSON
) -> tuple[Verdict | CriticError, PlanJSON]:
    """Run one critic on ``plan``, a copy of ``frozen``: its verdict or error, and a copy for the next
    critic (``plan`` itself when the critic left it unchanged, else a fresh one). One copy thus serves
    a whole batch of well-behaved critics, and a critic that changes it is an error, as ever."""
    try:
        verdict = critic(problem, plan)
    except CriticError as exc:
        outcome: Verdict | CriticError = exc
    except BaseException as exc:  # SystemExit, KeyboardInterrupt, GeneratorExit: the critic's error
        outcome = CriticError(critic.name, exc)
        outcome.__cause__ = exc
    else:
        outcome = verdict
    if frozen.unchanged(plan):
        return outcome, plan
    if not isinstance(outcome, CriticError):
        outcome = CriticError(
            critic.name, PlanMutatedError("mutated the plan it was given (critics must not change plans)")
        )
    return outcome, frozen.copy()


_T = TypeVar("_T")

#: what the executor gives back for one critic of a batch: its verdict or its error
Outcome = Verdict | CriticError
#: decides, after each critic of a batch, whether the batch stops there
StopRule = Callable[[Critic, Outcome], bool]


def all_accept(outcomes: Sequence[Outcome]) -> bool:
    """Whether every outcome is a verdict that accepts (no failure, no crash)."""
    return all(not isinstance(o, CriticError) and o.accepts for o in outcomes)


def never_stop(critic: Critic, outcome: Outcome) -> bool:
    """The stop rule of a batch that runs to its end."""
    return False


def stop_at_error(critic: Critic, outcome: Outcome) -> bool:
    """The stop rule of ``on_critic_error=stop``: the batch stops at the first critic error."""
    return isinstance(outcome, CriticError)


class CriticExecutor(ABC):
    """Runs critic calls; see the module docstring for the contract every kind keeps."""

    kind: str = ""

    @abstractmethod
    async def run(self, critic: Critic, problem: Problem, frozen: FrozenPlan, timeout_s: float) -> Verdict:
        """The critic's labelled verdict, or CriticError (crash, mutation, deadline)."""

    async def run_all(
        self,
        critics: Sequence[Critic],
        problem: Problem,
        frozen: FrozenPlan,
        timeouts: Sequence[float],
        stop: StopRule = never_stop,
    ) -> list[Outcome]:
        """Run ``critics`` in order on one plan, each under its own deadline (``timeouts``), until
        ``stop(critic, outcome)`` says so: the outcomes of the critics that ran, in order. The critics
        this kind takes aside (:meth:`aside`) run with :meth:`run_aside` while the others run with
        :meth:`run_rest`, at the same time (:func:`run_beside`); a kind overrides those three, not this."""
        if len(critics) != len(timeouts):
            raise ValueError("run_all: one timeout per critic")
        critics = critics if isinstance(critics, list) else list(critics)
        timeouts = timeouts if isinstance(timeouts, list) else list(timeouts)
        aside = self._aside_of(critics)
        if not aside:  # the usual batch: no hand-off to a second runner, no merge
            return await self.run_rest(critics, problem, frozen, timeouts, stop)

        async def side(some: list[Critic], some_timeouts: list[float]) -> list[Outcome]:
            return await self.run_aside(some, problem, frozen, some_timeouts, stop)

        async def rest(others: list[Critic], other_timeouts: list[float]) -> list[Outcome]:
            return await self.run_rest(others, problem, frozen, other_timeouts, stop)

        return await run_beside(critics, timeouts, stop, list(aside), side, rest)

    def run_here(
        self,
        critics: list[Critic],
        problem: Problem,
        frozen: FrozenPlan,
        timeouts: list[float],
        stop: StopRule = never_stop,
        gate: int = 0,
    ) -> list[Outcome] | None:
        """The outcomes of ``critics`` as :meth:`run_all` gives them, when this kind runs every one of them on
        the calling thread (the event loop's) with no hand-off: then at once, with no coroutine to await;
        None when it does not (:meth:`run_all` runs them). ``gate``: when the first ``gate`` critics do not
        all accept (a failing or crashed verdict), the batch ends there (the loop's format critics gating
        the others in one pass). A kind opts in through :meth:`_inline_for` (the thread executor, and
        :class:`InnerExecutor`'s kinds when they take none of the critics aside); by default it does not."""
        here = self._inline_for(critics)
        return None if here is None else here.run_inline(critics, problem, frozen, timeouts, stop, gate)

    def _inline_for(self, critics: list[Critic]) -> ThreadExecutor | None:
        """The executor that runs every one of ``critics`` on the calling thread, if any (by default none:
        every batch goes through :meth:`run_all`)."""
        return None

    def _aside_of(self, critics: list[Critic]) -> tuple[int, ...]:
        """The positions of the critics :meth:`aside` takes, remembered per sequence of critics (a loop asks
        for the same lists on every iteration; :meth:`aside` depends on a critic's declarations only)."""
        return _remembered(self, "_asides", critics, lambda: tuple(i for i, c in enumerate(critics) if self.aside(c)))

    def aside(self, critic: Critic) -> bool:
        """Whether :meth:`run_all` runs ``critic`` with :meth:`run_aside` (default: none)."""
        return False

    async def run_aside(
        self, critics: list[Critic], problem: Problem, frozen: FrozenPlan, timeouts: list[float], stop: StopRule
    ) -> list[Outcome]:
        """The critics taken aside, in order up to ``stop``; by default the same as :meth:`run_rest`."""
        return await CriticExecutor.run_rest(self, critics, problem, frozen, timeouts, stop)

    async def run_rest(
        self, critics: list[Critic], problem: Problem, frozen: FrozenPlan, timeouts: list[float], stop: StopRule
    ) -> list[Outcome]:
        """The other critics, in order up to ``stop``. This default calls :meth:`run` one critic at a
        time; a kind may batch or spread the calls."""
        out: list[Outcome] = []
        for critic, timeout_s in zip(critics, timeouts, strict=True):
            try:
                outcome: Outcome = await self.run(critic, problem, frozen, timeout_s)
            except CriticError as exc:
                outcome = exc
            out.append(outcome)
            if stop(critic, outcome):
                break
        return out

    async def each(
        self, critics: Sequence[Critic], problem: Problem, frozen: FrozenPlan, timeouts: Sequence[float]
    ) -> list[Outcome]:
        """The outcomes of ``critics``, each called on its own with :meth:`run`, all at the same time."""

        async def one(critic: Critic, timeout_s: float) -> Outcome:
            try:
                return await self.run(critic, problem, frozen, timeout_s)
            except CriticError as exc:
                return exc

        return list(await asyncio.gather(*(one(c, t) for c, t in zip(critics, timeouts, strict=True))))

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release workers (called when the session closes)."""


class _DaemonPool:
    """Daemon worker threads that grow on demand: an idle worker takes the next call, a new one is
    started when none is idle, up to ``max_workers`` (None: no bound); past it a call waits in the queue
    for the next worker free. A worker stuck in a hanging critic is simply never idle again: its call's
    waiter reports it :meth:`lost`, and it no longer counts against the bound (a new worker takes over)."""

    def __init__(self, name: str, max_workers: int | None = None) -> None:
        self._name = name
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self._workers = 0
        self._max = max_workers
        self._active = 0  # workers counted against the bound (started, not lost)
        self._waiting = 0  # calls queued for a busy worker

    def submit(self, job: Callable[[], None]) -> None:
        with self._lock:
            if self._idle:
                self._idle -= 1
            elif self._max is None or self._active < self._max:
                self._start()
            else:
                self._waiting += 1
        self._jobs.put(job)

    def _start(self) -> None:  # with the lock held
        self._workers += 1
        self._active += 1
        threading.Thread(target=self._work, name=f"{self._name}-{self._workers}", daemon=True).start()

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            job()
            with self._lock:
                if self._waiting:  # the next queued call is this worker's
                    self._waiting -= 1
                else:
                    self._idle += 1

    def lost(self) -> None:
        """A worker's call was abandoned past its deadline: the worker may never return, so it stops
        counting against the bound, and a new worker starts when calls are waiting."""
        with self._lock:
            if self._max is None:
                return
            self._active -= 1
            if self._waiting:
                self._waiting -= 1
                self._start()

    def close(self) -> None:
        with self._lock:
            for _ in range(self._idle):
                self._jobs.put(None)
            self._idle = 0


class InnerExecutor(CriticExecutor):
    """A kind that runs the critics it takes aside (:meth:`aside`) its own way and every other one in its
    ``inner`` executor, as one batch (the sandbox's and the heavy pool's kinds); a batch it takes none of
    runs on the calling thread where ``inner`` would run it there (:meth:`run_here`)."""

    inner: CriticExecutor

    async def run_rest(
        self, critics: list[Critic], problem: Problem, frozen: FrozenPlan, timeouts: list[float], stop: StopRule
    ) -> list[Outcome]:
        return await self.inner.run_all(critics, problem, frozen, timeouts, stop)

    def _inline_for(self, critics: list[Critic]) -> ThreadExecutor | None:
        return None if self._aside_of(critics) else self.inner._inline_for(critics)


class ThreadExecutor(CriticExecutor):
    """Critics in daemon worker threads, each call under its deadline."""

    kind = "thread"
    #: worker threads running batches of light critics: their work holds the GIL, so more threads only
    #: take turns with each other and with the event loop (one worker per problem in flight made 2.3x
    #: the futex calls of one worker on TravelPlanner); a worker stuck past a deadline does not count:
    #: another one takes over
    batch_workers = 1

    def __init__(self, *, inline: bool = True) -> None:
        self._pool = _DaemonPool("modulo-critic")  # single calls: heavy="thread" critics, each on its own
        self._batches = _DaemonPool("modulo-critics", max_workers=self.batch_workers)
        self._inline = inline
        #: critics declared inline that overran a deadline there: they run in the worker thread from then on
        self.demoted: set[str] = set()

    @property
    def inline(self) -> bool:
        """Whether the critics declared ``inline`` run on the event loop's thread (False: every one in a worker)."""
        return self._inline

    @inline.setter
    def inline(self, value: bool) -> None:
        self._inline = value
        self.__dict__.pop("_runs", None)

    def demote(self, critic: Critic) -> None:
        """``critic`` overran its deadline inline: it runs in the worker thread from now on."""
        self.demoted.add(critic.name)
        self.__dict__.pop("_runs", None)  # the runs remembered per list of critics change with it

    def run_inline(
        self,
        critics: Sequence[Critic],
        problem: Problem,
        frozen: FrozenPlan,
        timeouts: Sequence[float],
        stop: StopRule,
        gate: int = 0,
    ) -> list[Outcome]:
        """``critics`` in order on this thread, on one copy of the plan while none changes it, until ``stop``
        (or, ``gate``, the first ``gate`` critics ended without all accepting); each deadline checked when
        the critic returns (past it: a timeout error, and the critic demoted)."""
        out: list[Outcome] = []
        if not critics:
            return out
        plan = frozen.lend()
        clock = time.perf_counter
        stops = stop is not never_stop
        started = clock()  # one clock read a critic: each critic's end is the next one's start
        for critic, timeout_s in zip(critics, timeouts, strict=True):
            outcome, plan = call_on_copy(critic, problem, frozen, plan)
            ended = clock()
            if ended - started > timeout_s or isinstance(outcome, CriticError):  # the rare cases, in one test
                outcome = self._inline_outcome(critic, outcome, ended - started, timeout_s)
            started = ended
            out.append(outcome)
            if stops and stop(critic, outcome):
                break
            if len(out) == gate and not all_accept(out):
                break
        frozen.hand_back(plan)
        return out

    def _inline_outcome(self, critic: Critic, outcome: Outcome, took: float, timeout_s: float) -> Outcome:
        """An inline critic's error or late verdict: Ctrl-C is raised (it is the user's), a call past its
        deadline is a timeout error (the critic demoted), any other outcome is kept."""
        if isinstance(outcome, CriticError) and isinstance(outcome.cause, KeyboardInterrupt):
            raise outcome.cause  # Ctrl-C while the critic ran on the loop's thread: the user's interrupt
        if took <= timeout_s:
            return outcome
        self.demote(critic)
        return CriticError(
            critic.name,
            CriticTimeoutError(
                f"took {took:.3g} s, over its deadline of {timeout_s:g} s (it runs inline, on the event "
                "loop's thread: its verdict is ignored, and it runs in a worker thread from now on)"
            ),
        )

    def runs_inline(self, critic: Critic) -> bool:
        """Whether this executor runs ``critic`` on the event loop's thread."""
        return self._inline and critic.name not in self.demoted and runs_inline(critic)

    async def run(self, critic: Critic, problem: Problem, frozen: FrozenPlan, timeout_s: float) -> Verdict:
        if self.runs_inline(critic):
            [outcome] = self.run_inline([critic], problem, frozen, [timeout_s], never_stop)
            if isinstance(outcome, CriticError):
                raise outcome
            return outcome
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Verdict] = loop.create_future()

        def settle(result: Verdict | None, error: BaseException | None) -> None:
            if future.done():  # abandoned after its deadline, or cancelled
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)  # type: ignore[arg-type]

        def job() -> None:
            try:
                result: Verdict | None = call_critic(critic, problem, frozen)
                error: BaseException | None = None
            except BaseException as exc:  # call_critic wraps everything; keep the worker alive regardless
                result, error = None, exc
            try:
                loop.call_soon_threadsafe(settle, result, error)
            except RuntimeError:  # the loop has closed (the run ended while this critic hung)
                pass

        self._pool.submit(job)
        try:
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow a cancellation (Ctrl-C)
            # that arrives just as the verdict does, and the run would then carry on
            async with asyncio.timeout(timeout_s):
                return await asyncio.shield(future)
        except TimeoutError:
            raise CriticError(
                critic.name,
                CriticTimeoutError(f"did not finish within {timeout_s:g} s (abandoned; its verdict is ignored)"),
            ) from None

    def _inline_for(self, critics: list[Critic]) -> ThreadExecutor | None:
        """This executor when every critic of ``critics`` runs inline (declared so, not demoted, inline
        critics on; an empty list too), else None."""
        runs = _remembered(self, "_runs", critics, lambda: _runs(critics, self.runs_inline))
        return self if not runs or (len(runs) == 1 and runs[0][0]) else None

    # run_all: the critics declared inline run on the event loop's thread (no hand-off at all); the other
    # light critics run one after another in *one* worker thread, on one copy of the plan while none
    # changes it, and report back once: one hand-off per batch instead of one per critic.
    # Critics declared ``heavy = "thread"`` (their work releases the GIL) run each in its own thread
    # meanwhile. Each critic keeps its own deadline, counted from its start: past it, the critic is a
    # recorded timeout, its worker is abandoned and the rest of the batch goes on in another worker.
    def aside(self, critic: Critic) -> bool:
        return heavy_kind(critic) is not None

    async def run_aside(
        self, critics: list[Critic], problem: Problem, frozen: FrozenPlan, timeouts: list[float], stop: StopRule
    ) -> list[Outcome]:
        return await self.each(critics, problem, frozen, timeouts)

    async def run_rest(
        self, critics: list[Critic], problem: Problem, frozen: FrozenPlan, timeouts: list[float], stop: StopRule
    ) -> list[Outcome]:
        """Runs of consecutive inline critics on this thread, the runs between them as worker batches."""
        runs = _remembered(self, "_runs", critics, lambda: _runs(critics, self.runs_inline))
        if len(runs) == 1:  # the usual batch: all inline (or all in the worker), no slicing
            if runs[0][0]:
                return self.run_inline(critics, problem, frozen, timeouts, stop)
            return await self._run_batches(critics, problem, frozen, timeouts, stop)
        out: list[Outcome] = []
        for inline, start, end in runs:
            if inline:
                ran = self.run_inline(critics[start:end], problem, frozen, timeouts[start:end], stop)
            else:
                ran = await self._run_batches(critics[start:end], problem, frozen, timeouts[start:end], stop)
            out.extend(ran)
            if len(ran) < end - start or (ran and stop(critics[end - 1], ran[-1])):
                break  # stopped inside this run
        return out

    async def _run_batches(
        self, critics: list[Critic], problem: Problem, frozen: FrozenPlan, timeouts: list[float], stop: StopRule
    ) -> list[Outcome]:
        out: list[Outcome] = []
        while critics:
            batch = _Batch(critics)
            loop = asyncio.get_running_loop()
            done: asyncio.Future[None] = loop.create_future()

            def settle(done: asyncio.Future[None] = done) -> None:
                if not done.done():
                    done.set_result(None)

            def job(
                batch: _Batch = batch, settle: Callable[[], None] = settle, loop: asyncio.AbstractEventLoop = loop
            ) -> None:
                batch.work(problem, frozen, stop)
                try:
                    loop.call_soon_threadsafe(settle)
                except RuntimeError:  # the loop has closed (the run ended while a critic hung)
                    pass

            self._batches.submit(job)
            late = await batch.wait(done, timeouts)
            out.extend(batch.outcomes)
            if late is None:
                break
            self._batches.lost()
            # critic number `late` of this batch is past its deadline: record it, go on with the rest
            critic = critics[late]
            outcome = CriticError(
                critic.name,
                CriticTimeoutError(f"did not finish within {timeouts[late]:g} s (abandoned; its verdict is ignored)"),
            )
            out.append(outcome)
            if stop(critic, outcome):
                break
            critics, timeouts = critics[late + 1 :], timeouts[late + 1 :]
        return out

    def close(self) -> None:
        self._pool.close()
        self._batches.close()


Runs = Callable[[list[Critic], list[float]], Awaitable[list[Outcome]]]


async def run_beside(
    critics: Sequence[Critic],
    timeouts: Sequence[float],
    stop: StopRule,
    aside: list[int],
    run_aside: Runs,
    run_rest: Runs,
) -> list[Outcome]:
    """Run the critics at positions ``aside`` with ``run_aside`` while the others run with ``run_rest``
    (both given critics and timeouts in order; either may stop early), and put the outcomes back in
    the critics' order, up to the first that ``stop`` stops at."""
    if len(aside) == len(critics):  # all of them aside: nothing runs beside them, so no task to start
        done = dict(enumerate(await run_aside(list(critics), list(timeouts))))
    else:
        rest = [i for i in range(len(critics)) if i not in aside]
        side = asyncio.ensure_future(run_aside([critics[i] for i in aside], [timeouts[i] for i in aside]))
        try:
            ran = await run_rest([critics[i] for i in rest], [timeouts[i] for i in rest])
            side_ran = await side
        finally:
            side.cancel()
        done = {**dict(zip(rest, ran, strict=False)), **dict(zip(aside, side_ran, strict=False))}
    out: list[Outcome] = []
    for i, critic in enumerate(critics):
        if i not in done:  # a batch stopped before this critic
            break
        out.append(done[i])
        if stop(critic, done[i]):
            break
    return out


def _remembered(owner: object, slot: str, critics: list[Critic], make: Callable[[], _T]) -> _T:
    """``make()``, remembered in ``owner``'s dict ``slot`` under the critics themselves (a tuple of them:
    a list changed in place is another key); at most 64 kept (a loop asks for the same few lists)."""
    memo: dict[tuple[Critic, ...], Any] = owner.__dict__.setdefault(slot, {})
    key = tuple(critics)
    known = memo.get(key)
    if known is None:
        if len(memo) >= 64:
            memo.clear()
        known = memo[key] = make()
    result: _T = known
    return result


def _runs(critics: list[Critic], inline: Callable[[Critic], bool]) -> tuple[tuple[bool, int, int], ...]:
    """The runs of consecutive critics that ``inline`` says alike: (inline?, start, end) each, in order."""
    out: list[tuple[bool, int, int]] = []
    start = 0
    while start < len(critics):
        kind = inline(critics[start])
        end = start + 1
        while end < len(critics) and inline(critics[end]) == kind:
            end += 1
        out.append((kind, start, end))
        start = end
    return tuple(out)


def runs_inline(critic: Critic) -> bool:
    """Whether a critic declared itself quick enough to run on the event loop's thread (``inline``); an
    untrusted or CPU-heavy one never is, whatever it declares."""
    return getattr(critic, "inline", False) is True and heavy_kind(critic) is None and not critic.untrusted


def heavy_kind(critic: Critic) -> str | None:
    """How a critic declared CPU-heavy wants to run: ``"process"`` (``heavy=True`` or ``"process"``),
    ``"thread"`` (its work releases the GIL), or None (a light critic)."""
    heavy = getattr(critic, "heavy", False)
    if heavy is True or heavy == "process":
        return "process"
    if heavy == "thread":
        return "thread"
    return None


class _Batch:
    """Critics run one after another in a worker thread, and what the event loop may read of it."""

    def __init__(self, critics: list[Critic]) -> None:
        self.critics = critics
        self.outcomes: list[Outcome] = []
        self.started: float | None = None  # when the critic now running started (None: still queued)
        self.abandoned = False
        self._lock = threading.Lock()

    def work(self, problem: Problem, frozen: FrozenPlan, stop: StopRule) -> None:
        """In the worker thread: every critic in turn, until ``stop`` or until abandoned."""
        plan = frozen.copy()
        for critic in self.critics:
            with self._lock:
                if self.abandoned:
                    return
                self.started = time.monotonic()
            try:
                outcome, plan = call_on_copy(critic, problem, frozen, plan)
            except BaseException as exc:  # call_on_copy catches the critic's errors; this is the check's own
                outcome = CriticError(critic.name, exc)
            with self._lock:
                if self.abandoned:  # its deadline passed meanwhile: the loop no longer waits for it
                    return
                self.outcomes.append(outcome)
            if stop(critic, outcome):
                return

    async def wait(self, done: asyncio.Future[None], timeouts: list[float]) -> int | None:
        """On the event loop: wait for the batch to finish; the index of a critic past its deadline
        (the batch is then abandoned), or None when it finished. The worker reports only at the end,
        so the loop wakes at the running critic's deadline, or sooner, at the shortest deadline of the
        critics after it (one of them may start and hang meanwhile): a batch that ends in time (the
        usual case, milliseconds) never wakes it. The wake-up is one timer handle, cancelled when the
        batch reports (no timeout context, no shielded copy of ``done``: ``done`` is only ever read)."""
        later = _later_deadlines(timeouts)
        first = min(timeouts)
        loop = asyncio.get_running_loop()
        while True:
            with self._lock:
                running, started = len(self.outcomes), self.started
            if done.done() or running >= len(self.critics):
                await done
                return None
            if started is None:  # queued behind other batches: no deadline runs yet; look again later
                left = first
            else:
                left = started + timeouts[running] - time.monotonic()
                if left <= 0:
                    with self._lock:
                        if len(self.outcomes) == running and not done.done():
                            self.abandoned = True
                            return running
                    continue
            waker: asyncio.Future[None] = loop.create_future()
            timer = loop.call_later(min(left, later[running]), _settle, waker)
            done.add_done_callback(lambda _, waker=waker: _settle(waker))  # type: ignore[misc]
            try:
                await waker
            finally:
                timer.cancel()
            if done.done():
                return None


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _later_deadlines(timeouts: list[float]) -> list[float]:
    """For each critic of a batch, the shortest deadline of the critics after it (inf for the last)."""
    out = [math.inf] * len(timeouts)
    for i in range(len(timeouts) - 2, -1, -1):
        out[i] = min(out[i + 1], timeouts[i + 1])
    return out
