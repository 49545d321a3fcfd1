"""The sandbox executor: untrusted critics run in worker processes.

Which critics: ``metacontroller.sandbox`` lists them by name, or is ``plugins`` (every active critic
that did not ship with modulo). The user who runs the experiment decides what else is trusted; a critic
marked ``untrusted`` (every LLM-extracted critic, :mod:`modulo.extract`) is sandboxed in every case and
refuses to run in-process. Built-in critics stay in-process (:class:`~modulo.executor.ThreadExecutor`)
unless named.
``run.json`` records the sandboxed critics and the limits under ``sandbox``.

Each sandboxed critic has its own small pool of worker processes (``metacontroller.sandbox_workers``,
started on first use with ``python -m modulo.sandbox``: a fresh interpreter, never a fork of the
event-loop process). A worker, before it imports the critic's module:

- gets a **scrubbed environment**: only ``PATH``, the locale variables and a few thread-count knobs
  pass; ``HOME`` and ``TMPDIR`` point at its scratch directory. API keys never reach it.
- runs in a **fresh scratch directory** (its cwd, removed when the worker ends) and **writes nowhere
  else**: an audit hook (:func:`sys.addaudithook`, which Python code cannot remove) refuses every
  ``open`` for writing and every file-system change (remove, rename, mkdir, chmod, links, shutil's
  copies and moves) outside it, and every opening of another process's ``/proc/PID`` files (the
  parent's ``environ`` holds the API keys, its ``mem`` everything). A *guard, not a kernel boundary*
  too: native code (ctypes) gets past it; use OS-level isolation (a container, a read-only mount)
  where that matters.
- has **memory and CPU limits** (``RLIMIT_AS`` = ``sandbox_memory_mb``; ``RLIMIT_CPU`` set before
  each call to the worker's CPU time so far plus ``sandbox_cpu_s``, default the call's deadline + 1).
- has **no network**, as a *guard, not a kernel boundary*: socket creation, ``create_connection``
  and name lookups in the ``socket``/``_socket`` modules are replaced by functions that raise. Code
  that reaches the OS another way (ctypes) is not stopped.
- cannot **start processes** through ``os.fork``/``os.system``/``os.posix_spawn``/``subprocess``
  (guard too); it runs in its own session, and the whole process group is killed with it. The same
  audit hook refuses process and socket events as a second layer (so re-importing ``socket`` or
  reaching ``os.fork`` another way is refused as well).
- talks to the parent over a private pipe in JSON (never pickle): stdout and stderr are discarded.

Every call has a wall-clock deadline; a worker past it is killed (SIGKILL to its process group)
and replaced on the next call. A critic that hangs, crashes, raises ``SystemExit``, calls
``os._exit``, returns something that is not a Verdict, or changes its copy of the plan is a
:class:`~modulo.errors.CriticError` (never a pass), handled per ``on_critic_error``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from pydantic import BaseModel

from .benchmark import PerProblem
from .critic import Critic
from .errors import ConfigError, CriticError
from .executor import (
    CriticExecutor,
    CriticTimeoutError,
    FrozenPlan,
    InnerExecutor,
    Outcome,
    PlanMutatedError,
    StopRule,
    ThreadExecutor,
    heavy_kind,
    never_stop,
)
from .types import Problem, Verdict, canonical_json

#: environment variables a worker inherits (everything else, API keys included, is dropped)
ENV_ALLOW = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")
#: the largest reply a worker may send (bytes); a bigger one is a critic error
MAX_FRAME = 16 * 1024 * 1024
NO_NETWORK = "network access is disabled in the modulo sandbox"
NO_PROCESSES = "starting processes is disabled in the modulo sandbox"


class SandboxError(RuntimeError):
    """A sandboxed critic failed: its own error as reported by the worker, or the worker's death."""


@dataclass(frozen=True)
class SandboxLimits:
    memory_mb: int = 2048
    #: CPU seconds per call; None: the call's deadline + 1
    cpu_s: float | None = None
    #: worker processes per sandboxed critic
    workers: int = 2
    #: seconds a worker may take to start and bind its critic
    startup_timeout_s: float = 60.0
    #: False: a trusted worker (CPU-heavy critics, see :class:`HeavyExecutor`): the parent's environment
    #: and working directory, no limits and no guards; killed at its deadline all the same
    isolated: bool = True

    def __post_init__(self) -> None:
        if self.memory_mb < 64 or self.workers < 1 or (self.cpu_s is not None and self.cpu_s <= 0):
            raise ConfigError(
                "metacontroller.sandbox_memory_mb must be at least 64, sandbox_workers at least 1 and "
                f"sandbox_cpu_s positive; got {self.memory_mb}, {self.workers}, {self.cpu_s}"
            )


@dataclass(frozen=True)
class SandboxSpec:
    """What a worker needs to bind a critic the way the loop did (by registry name plus arguments)."""

    benchmark: str
    benchmark_args: Mapping[str, Any] = field(default_factory=dict)
    data_dir: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    critic_args: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: modules that register critics in-process (not through entry points); imported by the worker.
    #: An absolute path to a ``.py`` file is loaded from that file (the parent never imports it)
    imports: tuple[str, ...] = ()


def sandboxed_names(request: Any, critics: Sequence[Critic]) -> list[str]:
    """The critics to sandbox: ``request`` is a list of names, ``plugins`` or ``none``/empty; critics
    marked ``untrusted`` (LLM-extracted ones) are sandboxed in every case."""
    from . import components

    active = [c.name for c in critics]
    untrusted = {c.name for c in critics if c.untrusted}  # always sandboxed, whatever was requested
    if request in (None, "", "none", []):
        return [n for n in active if n in untrusted]
    if request == "plugins":
        entries = components.critics.entries()
        return [n for n in active if not entries[n].builtin or n in untrusted]
    named = named_critics(request, active, "sandbox", "plugins")
    return [n for n in active if n in named or n in untrusted]


def named_critics(request: Any, active: list[str], key: str, keyword: str | None) -> list[str]:
    """The active critics ``request`` (a name or a list of names) names, in their order; a ConfigError
    naming ``metacontroller.<key>`` for a name that is not active (the other values: ``keyword``, none;
    no ``keyword``: only critic names)."""
    names = [request] if isinstance(request, str) else [str(n) for n in request]
    unknown = [n for n in names if n not in active]
    if unknown:
        raise ConfigError(
            f"metacontroller.{key} names {unknown}, which are not among the active critics {active} "
            + (f"(give critic names, {keyword}, or none)" if keyword else "(give the names of active critics)")
        )
    return [n for n in active if n in names]


def in_process_modules(names: Iterable[str]) -> tuple[str, ...]:
    """The modules a worker must import for critics registered in this process (tests, notebooks)."""
    from . import components

    entries = components.critics.entries()
    out: list[str] = []
    for name in names:
        if entries[name].value != "<registered in process>":
            continue
        module = getattr(components.critics.get(name), "__module__", None)
        if not module or module == "__main__":
            raise ConfigError(
                f"critic {name!r} is registered from {module or 'an unknown module'}; a sandboxed critic must "
                "live in an importable module (or be a plugin entry point)"
            )
        if module not in out:
            out.append(module)
    return tuple(out)


#: one thread per numeric library in a worker (the pool is the parallelism)
THREAD_KNOBS = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def worker_env(scratch: str) -> dict[str, str]:
    env = {k: os.environ[k] for k in ENV_ALLOW if k in os.environ}
    env.update(HOME=scratch, TMPDIR=scratch, PYTHONNOUSERSITE="1", PYTHONDONTWRITEBYTECODE="1", **THREAD_KNOBS)
    return env


class _WorkerGone(Exception):
    """The worker exited or sent something that is not a reply."""


class _Worker:
    """One worker process bound to one critic."""

    def __init__(self, critic: str | tuple[str, ...], spec: SandboxSpec, limits: SandboxLimits) -> None:
        critics = (critic,) if isinstance(critic, str) else critic
        self.scratch = tempfile.mkdtemp(prefix="modulo-sandbox-" if limits.isolated else "modulo-worker-")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "modulo.sandbox"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=self.scratch if limits.isolated else None,
            env=worker_env(self.scratch) if limits.isolated else {**os.environ, **THREAD_KNOBS},
            start_new_session=True,
        )
        self._buf = b""
        #: the problems this worker holds (sent once, then named by key; see HeavyExecutor)
        self.known: set[str] = set()
        #: the verdicts this worker numbered (a reply the worker sends again comes as its number alone)
        self.verdicts: dict[int, Verdict] = {}
        init = {
            "critics": list(critics),
            "benchmark": spec.benchmark,
            "benchmark_args": dict(spec.benchmark_args),
            "data_dir": spec.data_dir,
            "options": dict(spec.options),
            "critic_args": {k: dict(v) for k, v in spec.critic_args.items() if k in critics},
            "imports": list(spec.imports),
            "sys_path": [p for p in sys.path if p],
            "memory_mb": limits.memory_mb,
            "isolated": limits.isolated,
        }
        reply = self.exchange(init, limits.startup_timeout_s)
        if "error" in reply:
            self.kill()
            raise _WorkerGone(f"the sandbox worker could not bind the critic: {reply['error']}")

    def exchange(self, message: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """Send one message and wait for the reply; TimeoutError past ``timeout_s``."""
        self.send(message)
        return self.receive(timeout_s)

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(message).encode() + b"\n")
            self.proc.stdin.flush()
        except OSError as exc:
            raise _WorkerGone(f"the sandbox worker is gone ({self._exit()})") from exc

    def receive(self, timeout_s: float) -> dict[str, Any]:
        """The next reply line; TimeoutError past ``timeout_s``."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                self._read(fd)
        return self._line()

    def ready_line(self) -> bytes | None:
        """A reply line already read (None when none is complete): no wait, no event-loop round."""
        if b"\n" not in self._buf:
            return None
        line, self._buf = self._buf.split(b"\n", 1)
        return line

    async def receive_line_async(self, timeout_s: float) -> bytes:
        """:meth:`receive` on the event loop, the reply line unparsed: it waits for the pipe without a thread
        (a thread would have to win the GIL back from the busy loop for every reply line)."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while b"\n" not in self._buf:
            left = deadline - loop.time()
            if left <= 0:
                raise TimeoutError
            ready: asyncio.Future[bool] = loop.create_future()
            loop.add_reader(fd, _settle, ready, True)
            timer = loop.call_later(left, _settle, ready, False)
            try:
                readable = await ready
            finally:
                timer.cancel()
                loop.remove_reader(fd)
            if readable:
                self._read(fd)
        line, self._buf = self._buf.split(b"\n", 1)
        return line

    def _read(self, fd: int) -> None:
        """What the worker sent (the pipe is readable)."""
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            raise _WorkerGone(f"the sandbox worker exited during the call ({self._exit()})")
        self._buf += chunk
        if len(self._buf) > MAX_FRAME:
            raise _WorkerGone(f"the sandbox worker's reply is over {MAX_FRAME} bytes")

    def _line(self) -> dict[str, Any]:
        """The first reply line read, parsed."""
        line, self._buf = self._buf.split(b"\n", 1)
        try:
            reply = json.loads(line)
        except ValueError as exc:
            raise _WorkerGone("the sandbox worker sent something that is not a reply") from exc
        if not isinstance(reply, dict):
            raise _WorkerGone("the sandbox worker sent something that is not a reply")
        return reply

    def _exit(self) -> str:
        try:
            code = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return "still running"
        return f"killed by signal {-code}" if code < 0 else f"exit code {code}"

    def kill(self) -> None:
        self.signal()
        self.reap()

    def signal(self) -> None:
        """SIGKILL to the worker and anything it started (its process group); no wait (see :meth:`reap`)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.kill()
        except OSError:
            pass

    def reap(self) -> None:
        """After :meth:`signal`: wait for the process's exit (no zombie left; up to 5 s, the kernel tearing
        down its memory), close the pipes, remove the scratch directory."""
        exited(self.proc, 5.0)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        shutil.rmtree(self.scratch, ignore_errors=True)


def exited(proc: subprocess.Popen[bytes], timeout_s: float) -> bool:
    """Wait up to ``timeout_s`` for ``proc`` to exit and reap it; whether it did. Woken by the exit itself
    (a pidfd where the system has them): ``Popen.wait``'s polling sleeps double up to 50 ms, so a worker
    that took 17 ms to die was seen dead after 31."""
    if proc.returncode is not None:  # reaped already: its pid may now be another process's
        return True
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfd here, or the process already reaped
        try:
            proc.wait(timeout=timeout_s)
        except (OSError, subprocess.TimeoutExpired):
            return False
        return True
    try:
        select.select([fd], [], [], timeout_s)  # readable once the process has exited
    finally:
        os.close(fd)
    return proc.poll() is not None


class _Pool:
    """Up to ``size`` workers for one critic (or several); a killed worker is replaced on the next call."""

    def __init__(self, critic: str | tuple[str, ...], spec: SandboxSpec, limits: SandboxLimits) -> None:
        self.critic, self.spec, self.limits = critic, spec, limits
        self._idle: list[_Worker] = []
        self._count = 0
        self._cond = threading.Condition()
        self._closed = False

    def acquire(self) -> _Worker:
        with self._cond:
            while not self._idle and self._count >= self.limits.workers:
                self._cond.wait()
            if self._idle:
                return self._idle.pop()
            self._count += 1
        try:
            return _Worker(self.critic, self.spec, self.limits)
        except BaseException:
            self.discard(None)
            raise

    def take_idle(self) -> _Worker | None:
        """An idle worker, or None (no waiting, no start)."""
        with self._cond:
            return self._idle.pop() if self._idle else None

    def release(self, worker: _Worker) -> None:
        with self._cond:
            if self._closed:
                worker.kill()
                return
            self._idle.append(worker)
            self._cond.notify()

    def discard(self, worker: _Worker | None) -> None:
        if worker is not None:
            worker.kill()
        with self._cond:
            self._count -= 1
            self._cond.notify()

    def close(self) -> None:
        """Kill the idle workers (a busy one is killed when it is given back), all at once: every one is
        signalled before the first is waited for, so their exits overlap."""
        kill_all(self.closed())

    def closed(self) -> list[_Worker]:
        """Close the pool (a worker given back from now on is killed) and hand over its idle workers."""
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
        return idle


def kill_all(workers: Iterable[_Worker]) -> None:
    """Kill ``workers`` together: SIGKILL to each, then each reaped (:meth:`_Worker.reap`)."""
    workers = list(workers)
    for worker in workers:
        worker.signal()
    for worker in workers:
        worker.reap()


class SandboxExecutor(InnerExecutor):
    """Sandboxed critics in worker processes (see the module docstring); the others in ``inner``."""

    kind = "sandbox"

    def __init__(
        self,
        sandboxed: Iterable[str],
        spec: SandboxSpec,
        limits: SandboxLimits | None = None,
        inner: CriticExecutor | None = None,
    ) -> None:
        self.sandboxed = frozenset(sandboxed)
        self.spec = spec
        self.limits = limits or SandboxLimits()
        self.inner = inner or ThreadExecutor()
        self._pools: dict[str, _Pool] = {}
        self._lock = threading.Lock()

    # one critic: a sandboxed one in its worker, the others in ``inner``; a batch (run_all): the
    # sandboxed critics one after another in their workers (the interface's default run_aside, through
    # run), beside the in-process ones, which go to ``inner.run_all`` as one batch
    def aside(self, critic: Critic) -> bool:
        return critic.name in self.sandboxed

    async def run(self, critic: Critic, problem: Problem, frozen: FrozenPlan, timeout_s: float) -> Verdict:
        if critic.name not in self.sandboxed:
            return await self.inner.run(critic, problem, frozen, timeout_s)
        return await asyncio.to_thread(self._call, critic, problem, frozen, timeout_s)

    def warm(self, name: str) -> None:
        """Start one worker for the sandboxed critic ``name`` now, so that its first call does not wait
        for the worker to start (a worker's start is not part of a call's deadline either way)."""
        pool = self._pool(name)
        pool.release(self._acquire(pool))

    @staticmethod
    def _acquire(pool: _Pool) -> _Worker:
        try:
            return pool.acquire()
        except (_WorkerGone, TimeoutError, OSError) as exc:
            message = str(exc) or "the sandbox worker did not start in time"
            name = pool.critic if isinstance(pool.critic, str) else ", ".join(pool.critic)
            raise CriticError(name, SandboxError(message)) from exc

    def _pool(self, name: str) -> _Pool:
        with self._lock:
            if name not in self._pools:
                self._pools[name] = _Pool(name, self.spec, self.limits)
            return self._pools[name]

    def _call(self, critic: Critic, problem: Problem, frozen: FrozenPlan, timeout_s: float) -> Verdict:
        pool = self._pool(critic.name)
        worker = self._acquire(pool)
        cpu_s = self.limits.cpu_s if self.limits.cpu_s is not None else timeout_s + 1
        request = {"problem": problem.model_dump(mode="json"), "plan": frozen.text, "cpu_s": cpu_s}
        try:
            reply = worker.exchange(request, timeout_s)
        except TimeoutError:
            pool.discard(worker)
            raise CriticError(
                critic.name, CriticTimeoutError(f"did not finish within {timeout_s:g} s (sandbox worker killed)")
            ) from None
        except _WorkerGone as exc:
            pool.discard(worker)
            raise CriticError(critic.name, SandboxError(str(exc))) from None
        pool.release(worker)
        return self._verdict(critic, frozen, reply)

    @staticmethod
    def _verdict(critic: Critic, frozen: FrozenPlan, reply: dict[str, Any]) -> Verdict:
        if "error" in reply:
            raise CriticError(critic.name, SandboxError(str(reply["error"])))
        if reply.get("plan") != frozen.text:
            raise CriticError(
                critic.name, PlanMutatedError("mutated the plan it was given (critics must not change plans)")
            )
        try:
            verdict = Verdict.model_validate(reply.get("verdict"))
        except ValueError as exc:
            raise CriticError(critic.name, SandboxError(f"returned something that is not a Verdict: {exc}")) from None
        return verdict.model_copy(update={"critic": critic.name, "group": critic.group})

    def close(self) -> None:
        with self._lock:
            pools = list(self._pools.values())
        kill_all(worker for pool in pools for worker in pool.closed())
        self.inner.close()


class HeavyExecutor(InnerExecutor):
    """CPU-heavy critics in worker processes, so they neither hold the event loop's GIL nor wait for
    it; the other critics in ``inner`` (the thread kind), at the same time.

    Which critics: those declared ``heavy=True`` (or ``"process"``) by their author, or whose benchmark
    declares its critics heavy (``Benchmark.heavy_critics``); ``metacontroller.heavy`` decides (see
    :func:`heavy_names`). The workers are *trusted*: started like the sandbox's (``python -m
    modulo.sandbox``, a fresh interpreter, never a fork of the event-loop process) but with the
    parent's environment and working directory and without limits or guards; each binds every heavy
    critic by registry name plus arguments, the way the loop did. A plan's heavy critics go to one
    worker as one request (the plan as its canonical JSON text, the problem sent once per worker and
    named by a key afterwards), which answers one line per critic as each ends (a verdict it sent
    before as its number alone: a pass says the same on every plan, and the parent keeps what it
    parsed): a critic's deadline counts from the end of the one before it, and past it the worker is
    killed and the remaining critics go to another. The replies are read on the event loop (no thread
    has to win the GIL back from a busy loop for each line), at most one batch in flight per worker. A
    crash (an exception, ``os._exit``, a signal) or a changed plan is a
    :class:`~modulo.errors.CriticError` of that critic, as in-process.

    Held replies: the worker holds the replies of the critics that start within :data:`HOLD_S` of the
    batch's start and sends them together (a quick batch, TravelPlanner's 13 critics in well under a
    millisecond, then wakes the parent once instead of once or more per critic: about 40% of the
    parent's CPU per plan). While replies are held the parent cannot tell which critic is running, so
    it waits for the next reply as long as the least deadline of the critics from there on (plus
    ``HOLD_S``); past that, or when the worker dies, nothing of the cut try is guessed: the worker is
    killed and the critics without a reply run again in another worker, each reply sent as its critic
    ends, which names the one that overran or crashed (a hang is thus recorded after at most about
    twice its deadline; a batch slower than one of its critics' deadlines runs twice, with the same
    verdicts).
    """

    kind = "heavy"
    #: problems a worker keeps before the parent tells it to forget them all
    MAX_KNOWN = 256

    def __init__(
        self, names: Iterable[str], spec: SandboxSpec, workers: int = 2, inner: CriticExecutor | None = None
    ) -> None:
        self.names = tuple(dict.fromkeys(names))
        self.spec = spec
        self.limits = SandboxLimits(workers=workers, isolated=False)
        self.inner = inner or ThreadExecutor()
        self._pool = _Pool(self.names, spec, self.limits)
        self._problems = PerProblem(_problem_message)
        #: batches in flight, at most one per worker (so a batch never waits for a worker in a thread)
        self._slots: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = None

    # one critic, or a batch (run_all): the heavy critics in a worker process, the others in ``inner``
    # (one batch), at the same time
    def aside(self, critic: Critic) -> bool:
        return critic.name in self.names

    async def run(self, critic: Critic, problem: Problem, frozen: FrozenPlan, timeout_s: float) -> Verdict:
        if critic.name not in self.names:
            return await self.inner.run(critic, problem, frozen, timeout_s)
        [outcome] = await self.run_aside([critic], problem, frozen, [timeout_s], never_stop)
        if isinstance(outcome, CriticError):
            raise outcome
        return outcome

    async def run_aside(
        self, critics: list[Critic], problem: Problem, frozen: FrozenPlan, timeouts: list[float], stop: StopRule
    ) -> list[Outcome]:
        loop = asyncio.get_running_loop()
        if self._slots is None or self._slots[0] is not loop:  # asyncio primitives belong to one loop
            self._slots = (loop, asyncio.Semaphore(self.limits.workers))
        async with self._slots[1]:
            return await self._batch(critics, problem, frozen, timeouts, stop)

    def warm(self, workers: int = 1) -> None:
        """Start ``workers`` workers now (at most the pool's size; a start, seconds for a benchmark with a
        database, is never part of a critic's deadline either way)."""
        started = [self._acquire() for _ in range(min(workers, self.limits.workers))]
        for worker in started:
            self._pool.release(worker)

    def _acquire(self) -> _Worker:
        try:
            return self._pool.acquire()
        except (_WorkerGone, TimeoutError, OSError) as exc:
            raise WorkerError(str(exc) or "the critic worker did not start in time") from exc

    async def _acquire_async(self) -> _Worker:
        """A worker, started (or waited for) in a thread. Cancelled meanwhile (Ctrl-C, a stopped batch), the
        thread still gets its worker: it goes back to the pool when it comes, so no slot is lost."""
        loop = asyncio.get_running_loop()
        acquiring = loop.run_in_executor(None, self._acquire)
        try:
            return await asyncio.shield(acquiring)
        except asyncio.CancelledError:
            acquiring.add_done_callback(self._release_unwanted)
            raise

    def _release_unwanted(self, acquiring: asyncio.Future[_Worker]) -> None:
        if not acquiring.cancelled() and acquiring.exception() is None:
            self._pool.release(acquiring.result())

    async def _batch(
        self, critics: list[Critic], problem: Problem, frozen: FrozenPlan, timeouts: list[float], stop: StopRule
    ) -> list[Outcome]:
        """On the event loop: ``critics`` in order in one worker (another after a kill), each outcome as it
        ends; a worker is started (or waited for) in a thread, its replies read on the loop."""
        out: list[Outcome] = []
        key, message = self._problems(problem)
        hold = True  # the first try: the worker holds the replies of a quick batch and sends them together
        while critics:
            try:
                idle = self._pool.take_idle()
                worker = idle if idle is not None else await self._acquire_async()
            except WorkerError as exc:  # no worker would start: this critic's error; the next tries again
                out.append(CriticError(critics[0].name, exc))
                if stop(critics[0], out[-1]):
                    return out
                critics, timeouts = critics[1:], timeouts[1:]
                continue
            request: dict[str, Any] = {"batch": [c.name for c in critics], "problem_key": key, "plan": frozen.text}
            if hold:
                request["hold"] = True
            if key not in worker.known:
                if len(worker.known) >= self.MAX_KNOWN:
                    worker.known.clear()
                    request["reset"] = True
                request["problem"] = message
                worker.known.add(key)
            done = 0
            try:
                worker.send(request)
                for critic, timeout_s in zip(critics, timeouts, strict=True):
                    line = worker.ready_line()  # a batch's replies mostly come in one read
                    if line is None:
                        # held replies: any critic from this one on may be running, so the wait is the least
                        # of their deadlines (a wait past it is no verdict: see the fall-back below)
                        wait = min(timeouts[done:]) + HOLD_S if hold else timeout_s
                        line = await worker.receive_line_async(wait)
                    outcome = self._outcome(critic, line, worker.verdicts)
                    out.append(outcome)
                    done += 1
                    if stop(critic, outcome):
                        self._pool.discard(worker)  # it is still working on the rest of the batch
                        return out
            except (TimeoutError, _WorkerGone) as exc:
                await asyncio.to_thread(self._pool.discard, worker)  # a kill waits for the process: off the loop
                if hold:
                    # replies held: which critic overran or ended the worker is not known. The critics from
                    # the first without a reply run again in another worker, each reply sent as its critic
                    # ends, which names it (no verdict comes from the try that was cut short)
                    hold = False
                    critics, timeouts = critics[done:], timeouts[done:]
                    continue
                critic, timeout_s = critics[done], timeouts[done]
                if isinstance(exc, TimeoutError):
                    error = CriticTimeoutError(f"did not finish within {timeout_s:g} s (worker killed)")
                    out.append(CriticError(critic.name, error))
                else:
                    out.append(CriticError(critic.name, WorkerError(str(exc))))
            except BaseException:  # cancelled (Ctrl-C) mid-batch: the worker is busy with it, so it goes
                self._pool.discard(worker)
                raise
            else:
                self._pool.release(worker)
                return out
            if stop(critics[done], out[-1]):
                return out
            critics, timeouts = critics[done + 1 :], timeouts[done + 1 :]
        return out

    @staticmethod
    def _outcome(critic: Critic, line: bytes, numbered: dict[int, Verdict]) -> Outcome:
        """A reply line as the critic's outcome, labelled with the critic's name and group (a copy only where
        the worker's label differs). A verdict the worker sent before comes as its number (``numbered``,
        this worker's); a new one is parsed and validated in one pass (pydantic's JSON parser) and kept
        under the number the worker gave it; a line that pass refuses is read the long way, which says
        what is wrong with it."""
        if line.startswith(SAME_VERDICT):
            try:
                verdict: Verdict | None = numbered.get(int(line[len(SAME_VERDICT) : -1]))
            except ValueError:
                verdict = None
            if verdict is None:
                return CriticError(critic.name, WorkerError("the critic worker named a verdict it never sent"))
        else:
            try:
                reply = _Reply.model_validate_json(line)
            except ValueError:
                return HeavyExecutor._outcome_of(critic, line, numbered)
            if reply.error is not None:
                return CriticError(critic.name, WorkerError(reply.error))
            if reply.verdict is None:
                return HeavyExecutor._outcome_of(critic, line, numbered)
            verdict = reply.verdict
            if reply.id is not None:
                numbered[reply.id] = verdict
        if verdict.critic != critic.name or verdict.group != critic.group:
            verdict = verdict.model_copy(update={"critic": critic.name, "group": critic.group})
        return verdict

    @staticmethod
    def _outcome_of(critic: Critic, line: bytes, numbered: dict[int, Verdict]) -> Outcome:
        try:
            reply = json.loads(line)
        except ValueError:
            return CriticError(critic.name, WorkerError("the critic worker sent something that is not a reply"))
        if not isinstance(reply, dict):
            return CriticError(critic.name, WorkerError("the critic worker sent something that is not a reply"))
        if "error" in reply:
            return CriticError(critic.name, WorkerError(str(reply["error"])))
        data = reply.get("verdict")
        if isinstance(data, dict):  # labelled as it is read: one validation, no copy
            data = {**data, "critic": critic.name, "group": critic.group}
        try:
            verdict = Verdict.model_validate(data)
        except ValueError as exc:
            return CriticError(critic.name, WorkerError(f"returned something that is not a Verdict: {exc}"))
        if isinstance(reply.get("id"), int):
            numbered[reply["id"]] = verdict
        return verdict

    def close(self) -> None:
        self._pool.close()
        self.inner.close()


def _settle(future: asyncio.Future[bool], value: bool) -> None:
    if not future.done():
        future.set_result(value)


class _Reply(BaseModel):
    """One reply line of a heavy-critic worker: a verdict, or the critic's error."""

    verdict: Verdict | None = None
    error: str | None = None
    #: the number the worker gave this verdict: the same verdict again comes as ``{"same": id}``
    id: int | None = None


#: how a heavy-critic worker's reply line starts when it names a verdict it sent before by its number
SAME_VERDICT = b'{"same": '
#: a heavy-critic worker holds the replies of a batch's critics that start within this many seconds of the
#: batch's start, and sends them together (see HeavyExecutor)
HOLD_S = 0.05
#: verdicts a heavy-critic worker numbers (identical verdicts recur: a pass says the same on every plan);
#: past this, new ones are sent whole each time (both sides' tables stay bounded: the parent keeps at most
#: this many verdicts per worker, a few MB)
MAX_NUMBERED = 1024


class WorkerError(RuntimeError):
    """A critic failed in a (trusted) worker process: its own error as the worker reported it, or the
    worker's death."""


def _problem_message(problem: Problem) -> tuple[str, dict[str, Any]]:
    """A problem's key (a hash of its JSON) and its JSON form, computed once per problem object."""
    data = problem.model_dump(mode="json")
    return hashlib.sha256(canonical_json(data).encode()).hexdigest()[:24], data


def heavy_names(request: Any, critics: Sequence[Critic]) -> list[str]:
    """The critics to run in worker processes. ``request`` (``metacontroller.heavy``): ``declared``
    (the default: the critics declared CPU-heavy to run in processes, by themselves or by their
    benchmark's ``heavy_critics``), ``none``, or a list of critic names (these, whatever they declare)."""
    if request in (None, "", "none", [], False):
        return []
    active = [c.name for c in critics]
    if request == "declared":  # (a benchmark's heavy_critics reached its critics when they were bound)
        return [c.name for c in critics if heavy_kind(c) == "process"]
    return named_critics(request, active, "heavy", "declared")


# -- the worker side (python -m modulo.sandbox) ---------------------------------------------------


def _refuse(message: str) -> Any:
    def refused(*args: Any, **kwargs: Any) -> Any:
        raise PermissionError(message)

    return refused


def _guard_network() -> None:
    import _socket
    import socket

    refused = _refuse(NO_NETWORK)

    class NoSocket(socket.socket):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            raise PermissionError(NO_NETWORK)

    socket.socket = NoSocket  # type: ignore[misc]
    for module in (socket, _socket):
        for name in ("create_connection", "create_server", "socketpair", "fromfd", "getaddrinfo", "gethostbyname"):
            if hasattr(module, name):
                setattr(module, name, refused)
    _socket.socket = NoSocket  # type: ignore[misc]


def _guard_processes() -> None:
    import subprocess as sp

    refused = _refuse(NO_PROCESSES)
    for name in ("fork", "forkpty", "system", "popen", "posix_spawn", "posix_spawnp", "spawnv", "spawnve"):
        if hasattr(os, name):
            setattr(os, name, refused)
    sp.Popen = refused  # type: ignore[misc]


NO_WRITES = "writing outside the sandbox's scratch directory is disabled in the modulo sandbox"
#: /proc/PID of another process: the parent's environment holds the API keys, its memory everything else
NO_PROC = "reading another process's files is disabled in the modulo sandbox"
#: audit events that start a process or open a connection (refused, a second layer under the guards above)
_REFUSED_EVENTS = {
    "os.fork": NO_PROCESSES,
    "os.forkpty": NO_PROCESSES,
    "os.system": NO_PROCESSES,
    "os.exec": NO_PROCESSES,
    "os.posix_spawn": NO_PROCESSES,
    "os.spawn": NO_PROCESSES,
    "subprocess.Popen": NO_PROCESSES,
    "socket.connect": NO_NETWORK,
    "socket.bind": NO_NETWORK,
    "socket.sendto": NO_NETWORK,
    "socket.getaddrinfo": NO_NETWORK,
    "socket.gethostbyname": NO_NETWORK,
    "socket.__new__": NO_NETWORK,
}
#: audit events that change the file system, and the positions of their path arguments
_PATH_EVENTS = {
    "os.remove": (0,),
    "os.rename": (0, 1),
    "os.rmdir": (0,),
    "os.mkdir": (0,),
    "os.chmod": (0,),
    "os.chown": (0,),
    "os.link": (0, 1),
    "os.symlink": (1,),
    "os.truncate": (0,),
    "os.utime": (0,),
    "os.chflags": (0,),
    "os.mkfifo": (0,),
    "os.mknod": (0,),
    "shutil.copyfile": (1,),
    "shutil.copytree": (1,),
    "shutil.move": (0, 1),
    "shutil.rmtree": (0,),
}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def _guard_files(scratch: str) -> None:
    """An audit hook (it cannot be removed from Python) that refuses writes outside ``scratch`` and any
    opening of another process's ``/proc/PID`` files, and, as a second layer under :func:`_guard_network`
    and :func:`_guard_processes`, connections and new processes."""
    root = os.path.realpath(scratch)

    def outside(path: object) -> bool:
        if isinstance(path, int) or path is None:  # an open descriptor, or the dir_fd form
            return False
        try:
            full = os.path.realpath(os.fsdecode(path))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return True
        return full != root and not full.startswith(root + os.sep)

    own = str(os.getpid())

    def another_process(path: object) -> bool:
        """Whether ``path`` is under ``/proc/PID`` of another process (its environment, its memory)."""
        if not isinstance(path, (str, bytes)):
            return False
        try:
            parts = os.path.realpath(os.fsdecode(path)).split(os.sep)
        except (TypeError, ValueError):
            return True
        return len(parts) > 2 and parts[1] == "proc" and parts[2].isdigit() and parts[2] != own

    def hook(event: str, args: tuple[Any, ...]) -> None:
        refused = _REFUSED_EVENTS.get(event)
        if refused is not None:
            raise PermissionError(refused)
        if event == "open":
            path, mode, flags = (*tuple(args), None, None, None)[:3]
            if another_process(path):
                raise PermissionError(f"{NO_PROC}: {os.fsdecode(path)}")
            writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & _WRITE_FLAGS
            )
            if writes and outside(path):
                raise PermissionError(f"{NO_WRITES}: {os.fsdecode(path) if isinstance(path, (str, bytes)) else path}")
            return
        positions = _PATH_EVENTS.get(event)
        if positions is not None:
            for i in positions:
                if i < len(args) and outside(args[i]):
                    raise PermissionError(f"{NO_WRITES} ({event})")

    sys.addaudithook(hook)


def _load_module(entry: str) -> None:
    """Import ``entry``: a module name, or an absolute path to a ``.py`` file (loaded from that file)."""
    import importlib

    if not (entry.endswith(".py") and os.path.isabs(entry)):
        importlib.import_module(entry)
        return
    load_file(entry, "modulo_sandboxed_" + os.path.splitext(os.path.basename(entry))[0].replace("-", "_"))


def load_file(path: str, name: str) -> ModuleType:
    """Execute the Python file ``path`` as the module ``name`` (registered in ``sys.modules``)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _worker_main() -> None:  # pragma: no cover - runs in the worker process (tested through the executor)
    import resource

    from .binding import bind_benchmark, bind_critics
    from .critic import enter_sandbox
    from .executor import call_on_copy
    from .types import canonical_json

    out = os.fdopen(os.dup(1), "wb")  # the private reply pipe; fd 1 and 2 now go nowhere
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)

    def send(message: dict[str, Any]) -> None:
        out.write(json.dumps(message, default=str).encode() + b"\n")
        out.flush()

    requests = sys.stdin.buffer
    clock = time.monotonic
    init = json.loads(requests.readline())
    isolated = bool(init.get("isolated", True))
    try:
        if isolated:
            limit = int(init["memory_mb"]) * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            _guard_network()
            _guard_processes()
        sys.path[:] = [*init["sys_path"], *(p for p in sys.path if p not in init["sys_path"])]
        if isolated:  # (a trusted worker for CPU-heavy critics is no sandbox: untrusted critics refuse it)
            _guard_files(os.getcwd())
            enter_sandbox()
        for module in init["imports"]:
            _load_module(module)
        bench = bind_benchmark(init["benchmark"], init["benchmark_args"], init["data_dir"])
        names = list(init["critics"])
        critics = dict(zip(names, bind_critics(names, bench, init["options"], init["critic_args"]), strict=True))
    except BaseException as exc:
        send({"error": f"{type(exc).__name__}: {exc}"})
        return
    send({"ready": True})
    problems: dict[str, Problem] = {}
    numbered: dict[bytes, int] = {}  # a verdict's reply line -> the number it was sent with
    for line in requests:
        request = json.loads(line)
        if isolated:
            usage = resource.getrusage(resource.RUSAGE_SELF)
            soft = int(usage.ru_utime + usage.ru_stime + float(request["cpu_s"])) + 1
            _, hard = resource.getrlimit(resource.RLIMIT_CPU)
            resource.setrlimit(resource.RLIMIT_CPU, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))
        if "batch" in request:  # several critics on one plan: one reply line per critic, as each ends
            if request.get("reset"):
                problems.clear()
            key = request["problem_key"]
            if "problem" in request:
                problems[key] = Problem.model_validate(request["problem"])
            frozen = FrozenPlan(request["plan"])
            plan = frozen.copy()
            # held: the replies of the critics that start within HOLD_S of the batch's start go out together
            # (one wake-up of the parent for a quick batch); each later one goes out as its critic ends
            hold, started = bool(request.get("hold")), clock()
            for name in request["batch"]:
                if hold and clock() - started >= HOLD_S:
                    out.flush()
                    hold = False
                outcome, plan = call_on_copy(critics[name], problems[key], frozen, plan)
                if isinstance(outcome, CriticError):
                    line = json.dumps({"error": f"{type(outcome.cause).__name__}: {outcome.cause}"}).encode()
                else:
                    line = json.dumps({"verdict": outcome.model_dump(mode="json")}, default=str).encode()
                    number = numbered.get(line)
                    if number is not None:  # sent before: its number alone
                        line = SAME_VERDICT + b"%d}" % number
                    elif len(numbered) < MAX_NUMBERED:
                        number = numbered[line] = len(numbered)
                        line = line[:-1] + b', "id": %d}' % number  # (the line is a JSON object: it ends with })
                out.write(line + b"\n")
                if not hold:
                    out.flush()
            out.flush()
            continue
        [critic] = critics.values()
        plan = json.loads(request["plan"])
        try:
            problem = Problem.model_validate(request["problem"])
            verdict = critic(problem, plan)
            reply: dict[str, Any] = {"verdict": verdict.model_dump(mode="json"), "plan": canonical_json(plan)}
        except BaseException as exc:  # SystemExit, MemoryError, a wrong return type: the critic's error
            cause = exc.cause if isinstance(exc, CriticError) else exc
            reply = {"error": f"{type(cause).__name__}: {cause}"}
        send(reply)


if __name__ == "__main__":
    _worker_main()
