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
- **Off the event loop.** Critics run in worker threads, so a slow critic never stalls other
  problems' HTTP requests (no spurious client timeouts) and a hanging one never freezes the run.
  The workers are daemon threads: a critic that never returns cannot keep the process alive at exit.
- **Nothing escapes.** ``SystemExit``, ``KeyboardInterrupt`` and any other ``BaseException`` raised
  inside a critic become :class:`~modulo.errors.CriticError`; ``on_critic_error`` (record | stop)
  then decides, in the loop, what an error does.

Executor kinds. :class:`CriticExecutor` is the interface: ``await executor.run(critic, problem,
frozen, timeout_s)`` returns a labelled :class:`~modulo.types.Verdict` or raises CriticError. The
built-in kind is :class:`ThreadExecutor`. Further kinds plug in behind the same interface without
touching the loop: :class:`modulo.sandbox.SandboxExecutor` for untrusted critics (worker processes with
rlimits and no network, which can also *kill* a critic past its deadline, where a thread can only be
abandoned; ``metacontroller.sandbox``), and
issue 15's scale work, which routes critics that declare ``heavy = True`` (CPU-bound, see
:class:`~modulo.critic.Critic`) to a process pool so they do not contend for the GIL. Which kind
runs a critic is chosen by :meth:`CriticExecutor.for_critic`; the thread kind runs them all.

A thread past its deadline cannot be stopped in Python: it is abandoned (its result is ignored) and
keeps its CPU until it returns. That is why the timeout is generous by default and why killing is the
sandbox kind's job.
"""

from __future__ import annotations

import asyncio
import json
import queue
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field

from .critic import Critic
from .errors import CriticError
from .types import PlanJSON, Problem, Verdict, canonical_json

#: seconds a critic may take by default (generous: a z3 check on a large problem takes seconds)
DEFAULT_CRITIC_TIMEOUT_S = 120.0


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
        plan: PlanJSON = json.loads(self.text)
        return plan

    def unchanged(self, copy: PlanJSON) -> bool:
        try:
            return canonical_json(copy) == self.text
        except (TypeError, ValueError):
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
    plan = frozen.copy()
    try:
        verdict = critic(problem, plan)
    except CriticError:
        raise
    except BaseException as exc:  # SystemExit, KeyboardInterrupt, GeneratorExit: the critic's error
        raise CriticError(critic.name, exc) from exc
    if not frozen.unchanged(plan):
        raise CriticError(
            critic.name, PlanMutatedError("mutated the plan it was given (critics must not change plans)")
        )
    return verdict


class CriticExecutor(ABC):
    """Runs critic calls; see the module docstring for the contract every kind keeps."""

    kind: str = ""

    @abstractmethod
    async def run(self, critic: Critic, problem: Problem, frozen: FrozenPlan, timeout_s: float) -> Verdict:
        """The critic's labelled verdict, or CriticError (crash, mutation, deadline)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release workers (called when the session closes)."""


class _DaemonPool:
    """Daemon worker threads that grow on demand: an idle worker takes the next call, a new one is
    started when none is idle. A worker stuck in a hanging critic is simply never idle again."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self._workers = 0

    def submit(self, job: Callable[[], None]) -> None:
        with self._lock:
            if self._idle == 0:
                self._workers += 1
                threading.Thread(target=self._work, name=f"{self._name}-{self._workers}", daemon=True).start()
            else:
                self._idle -= 1
        self._jobs.put(job)

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            job()
            with self._lock:
                self._idle += 1

    def close(self) -> None:
        with self._lock:
            for _ in range(self._idle):
                self._jobs.put(None)
            self._idle = 0


class ThreadExecutor(CriticExecutor):
    """Critics in daemon worker threads, each call under its deadline."""

    kind = "thread"

    def __init__(self) -> None:
        self._pool = _DaemonPool("modulo-critic")

    async def run(self, critic: Critic, problem: Problem, frozen: FrozenPlan, timeout_s: float) -> Verdict:
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

    def close(self) -> None:
        self._pool.close()
