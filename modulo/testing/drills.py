"""Reliability drills: whole runs against the fake provider, with faults, kills, budgets and rate limits.

The drills drive the real stack (the ``modulo run`` configuration, the OpenAI backend with the
official SDK, the response cache, the run directory) against :class:`~modulo.testing.FakeProvider`
on 127.0.0.1, and measure at the server what the client did. The project's reliability tests and
``benchmarks/reliability_*.py`` are built from these pieces; a plugin author can run the same drills
on another benchmark.

Pieces:

- :class:`PlanModel`: the fake provider's answers, a pure function of (problem, iteration, stage)
  read from the ``X-Modulo-*`` headers (``llm.args.tag_headers=true``), so retries, cache hits and
  resumed runs all see the same answers. :func:`witness_answers` fills it from a benchmark's known
  plans: some problems are certified at once, some after one backprompt, some never (a plan that
  fails a critic), some never produce a plan.
- :func:`drill_overrides`, :func:`compose` and :func:`run_in_process`: one list of ``modulo run``
  overrides, used both by a subprocess (``modulo run ...``) and in process (Hydra's compose API,
  then :func:`modulo.runner.run_session`), so both run exactly the same configuration.
- :func:`comparable`, :func:`trace_faults`, :func:`expected_trace_faults`: what must match between
  two runs, and faults counted by class in the traces and at the server; :func:`fault_pattern`
  (exactly one request in ``1/rate`` faulted) and :func:`paid_repeats` (requests sent again after a
  normal answer).
- :class:`Launcher` / :class:`ForkServer`: ``modulo`` commands as separate processes, plainly or as
  children of a fork server that imported everything once (milliseconds per start).
- :func:`kill_drill`: a run killed with SIGKILL at random moments and resumed each time; every
  request is classified at the server (:class:`Send`), so that a request sent again after its reply
  was recorded shows up as a repeated paid request.
- :func:`max_in_window`: the most requests the server saw in any window of a given length.

Example (a run with one request in five faulted, against a fault-free one)::

    model = PlanModel()
    with FakeProvider(model, retry_after_s=0.01) as fake:
        clean = drill_overrides(fake.openai_base_url, tmp / "clean", tmp / "clean-cache", n=40)
        session = build_session(compose(clean))
        model.answers, _ = witness_answers(session.problems, session.critics)
        run_in_process(clean)
        fake.push_faults(*fault_pattern(1000, 0.2))
        faulted = drill_overrides(fake.openai_base_url, tmp / "faulted", tmp / "faulted-cache", n=40)
        result = run_in_process(faulted)
        assert comparable(tmp / "faulted") == comparable(tmp / "clean")
        assert trace_faults(result.results) == expected_trace_faults(fake.stats().by_fault)
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import ModuloConfig
from ..llm.base import LLM, LLMRequest
from ..llm.cache import ResponseCache
from ..types import PlanJSON, Problem, ProblemResult, canonical_json
from .fake_server import PROBLEM_HEADER, FakeProvider, FakeRequest, ReplyFn, ReplyItem, reply_fn
from .models import FunctionModel

ITERATION_HEADER = "x-modulo-iteration"
STAGE_HEADER = "x-modulo-stage"

#: the class a fault injected at the server is recorded under in the traces (``LLMCall.faults[].kind``)
TRACE_CLASS: dict[str, str] = {
    "rate_limit": "rate_limit",
    "rate_limit_bare": "rate_limit",
    "server_error": "server_error",
    "unavailable": "server_error",
    "overloaded": "overloaded",
    "reset": "connection",
    "timeout": "timeout",
    "empty": "empty_reply",
}

#: faults the client retries until the request succeeds: with enough retries a run ends as if there were none
RETRIED_FAULTS: tuple[str, ...] = tuple(TRACE_CLASS)


def no_plan(problem_id: str) -> str:
    """What the scripted model says when it has no plan (neither stage can read a plan from it).

    It names the problem: the reformulation prompt holds only the reply, and identical requests from
    two problems would share one cache entry.
    """
    return f"I could not work out a plan for request {problem_id}."


# -- scripted answers ---------------------------------------------------------------------------------
class PlanModel(FunctionModel):
    """A function-backed model proposing known plans: a pure function of (problem, iteration, stage),
    read from the request's tags (over HTTP, the ``X-Modulo-*`` headers).

    ``answers[problem_id][i]`` is what the model proposes at iteration ``i`` (the last entry repeats):
    a plan (any JSON value) or a string, a reply with no plan in it. With ``stages=2`` (an LLM
    reformulator) the generate stage answers prose around the plan and the reformulate stage its
    JSON; with ``stages=1`` the generate stage answers the JSON itself.
    """

    def __init__(self, answers: Mapping[str, Sequence[PlanJSON]] | None = None, *, stages: int = 2) -> None:
        self.answers: dict[str, list[PlanJSON]] = {k: list(v) for k, v in (answers or {}).items()}
        self.stages = stages
        super().__init__(self._answer)

    def reply(self, problem_id: str, iteration: int, stage: str) -> str:
        script = self.answers.get(problem_id)
        if not script:
            return f"(no scripted answer for problem {problem_id!r})"
        answer = script[min(iteration, len(script) - 1)]
        if isinstance(answer, str):
            return answer if stage == "generate" else f"There is no plan in that text ({problem_id})."
        text = json.dumps(answer)
        if stage == "generate" and self.stages == 2:
            return f"Attempt {iteration + 1}. Here is my plan:\n{text}\nI hope it works."
        return text

    def _answer(self, request: LLMRequest) -> str:
        tags = request.tags
        try:
            iteration = int(tags.get("iteration", "0"))
        except ValueError:
            iteration = 0
        return self.reply(tags.get("problem_id", ""), iteration, tags.get("stage", "generate"))


#: how a drill problem behaves, by position: certified at once, after one backprompt, never, no plan
KINDS: tuple[str, ...] = ("first", "second", "wrong", "none")


def _paths(value: Any, path: tuple[Any, ...] = ()) -> Iterable[tuple[tuple[Any, ...], Any]]:
    yield path, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*path, i))


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copy: Any = json.loads(json.dumps(value))
    target = copy
    for key in path[:-1]:
        target = target[key]
    if new is _DROP:
        del target[path[-1]]
    else:
        target[path[-1]] = new
    return copy


_DROP = object()
_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})$")


def _mutations(plan: PlanJSON) -> Iterable[PlanJSON]:
    """Small edits of a plan: drop a list's last item, move a clock time by an hour, change a number."""
    for path, value in _paths(plan):
        if isinstance(value, list) and len(value) >= 2:
            yield _replace(plan, (*path, len(value) - 1), _DROP)
    for path, value in _paths(plan):
        if isinstance(value, str) and (m := _CLOCK.match(value)):
            hour = (int(m.group(1)) + 1) % 24
            yield _replace(plan, path, f"{hour}:{m.group(2)}")
        elif isinstance(value, int) and not isinstance(value, bool):
            yield _replace(plan, path, value + 1)


def wrong_plan(problem: Problem, plan: PlanJSON, critics: Sequence[Any]) -> PlanJSON | None:
    """A small edit of ``plan`` that every format critic accepts and some other critic rejects."""
    for candidate in _mutations(plan):
        verdicts = [c(problem, candidate) for c in critics]
        fmt_ok = all(v.accepts for c, v in zip(critics, verdicts, strict=True) if c.group == "format")
        if fmt_ok and any(not v.accepts for v in verdicts):
            return candidate
    return None


def witness_answers(
    problems: Sequence[Problem],
    critics: Sequence[Any],
    *,
    plan_of: Callable[[Problem], PlanJSON] = lambda p: p.metadata.get("witness"),
    kinds: Sequence[str] = KINDS,
) -> tuple[dict[str, list[PlanJSON]], dict[str, str]]:
    """Answers for :class:`PlanModel` from each problem's known plan, and each problem's kind.

    Problem ``i`` gets kind ``kinds[i % len(kinds)]``: ``first`` proposes the plan at once,
    ``second`` has no plan at first and the plan after one backprompt, ``wrong`` keeps proposing a
    plan that some critic rejects, ``none`` never gives a plan. A problem without a known plan (or
    without a wrong variant) gets ``none``.
    """
    answers: dict[str, list[PlanJSON]] = {}
    kind_of: dict[str, str] = {}
    for i, problem in enumerate(problems):
        kind = kinds[i % len(kinds)]
        plan = plan_of(problem)
        if plan is None:
            kind = "none"
        script: list[PlanJSON]
        if kind == "first":
            script = [plan]
        elif kind == "second":
            script = [no_plan(problem.id), plan]
        elif kind == "wrong":
            bad = wrong_plan(problem, plan, critics)
            script, kind = ([bad], kind) if bad is not None else ([no_plan(problem.id)], "none")
        else:
            script = [no_plan(problem.id)]
        answers[problem.id] = script
        kind_of[problem.id] = kind
    return answers, kind_of


# -- configurations -------------------------------------------------------------------------------------
def benchmark_override(name: str) -> list[str]:
    """``benchmark=NAME`` when the benchmark has a config file, else ``benchmark=custom benchmark.name=NAME``
    (so the default benchmark's own arguments do not leak into it)."""
    from ..cli.hydra_app import group_options
    from ..resources import resource_dir

    group = name in group_options(resource_dir("conf"), "benchmark")
    return [f"benchmark={name}"] if group else ["benchmark=custom", f"benchmark.name={name}"]


def drill_overrides(
    base_url: str,
    run_dir: Path,
    cache_dir: Path,
    *,
    benchmark: str = "synth/tasks",
    split: str = "generated",
    n: int | None = 24,
    max_iterations: int = 3,
    reformulator: str = "llm",
    concurrency: int = 8,
    max_retries: int = 12,
    timeout_s: float = 5.0,
    critics: str = "all",
    report: bool = False,
    extra: Sequence[str] = (),
) -> list[str]:
    """``modulo run`` overrides of a drill run against the fake provider at ``base_url`` (its /v1 URL)."""
    out = [
        *benchmark_override(benchmark),
        f"benchmark.split={split}",
        *([f"++benchmark.n={n}"] if n is not None else []),
        "llm=openai",
        f"llm.base_url={base_url}",
        "llm.model=fake-model",
        "++llm.args.tag_headers=true",
        f"llm.timeout_s={timeout_s}",
        f"llm.max_retries={max_retries}",
        "llm.backoff_base_s=0.01",
        "llm.max_backoff_s=0.05",
        f"llm.concurrency={concurrency}",
        "generator.prompt=" + ("direct" if reformulator == "llm" else "json"),
        f"reformulator={reformulator}",
        f"critics={critics}",
        f"metacontroller.max_iterations={max_iterations}",
        f"run.concurrency={concurrency}",
        "run.progress=false",
        f"run.report={str(report).lower()}",
        f"cache.dir={cache_dir}",
        "cache.mode=read-write",
        f"run.dir={run_dir}",
        f"hydra.run.dir={run_dir}",
    ]
    return [*out, *extra]


def compose(overrides: Sequence[str]) -> ModuloConfig:
    """The :class:`ModuloConfig` that ``modulo run OVERRIDES`` would run (``hydra.*`` overrides dropped)."""
    from ..cli.hydra_app import compose_config

    return compose_config([o for o in overrides if not o.startswith("hydra.")])


def run_in_process(overrides: Sequence[str]) -> Any:
    """Run ``modulo run OVERRIDES`` in this process (no Hydra app, same configuration); the RunResult."""
    from ..build import build_session
    from ..cli.hydra_app import config_yaml
    from ..runner import run_session
    from ..runs import RunDir

    cfg = compose(overrides)
    if not cfg.run.dir:
        raise ValueError("run_in_process needs run.dir=... among the overrides")
    session = build_session(cfg)
    return asyncio.run(run_session(session, RunDir(Path(cfg.run.dir)), config_yaml=config_yaml(cfg)))


def cli_command(overrides: Sequence[str]) -> list[str]:
    """The ``modulo run`` command line, run with this interpreter."""
    return [sys.executable, "-m", "modulo.cli.main", "run", *overrides]


# -- comparing runs ---------------------------------------------------------------------------------------
def records(run_dir: Path) -> dict[str, ProblemResult]:
    """The last record of each problem in ``run_dir``."""
    from ..runs import latest_records

    return latest_records(Path(run_dir))


def comparable(results: Mapping[str, ProblemResult] | Path) -> dict[str, Any]:
    """What must be equal between two runs of the same answers: per problem, the outcome, stop reason,
    best plan and, per iteration, the reply, the plan and every verdict (timings, usage and faults aside)."""
    by_id = records(results) if isinstance(results, Path) else results
    out: dict[str, Any] = {}
    for pid, r in sorted(by_id.items()):
        iterations = [
            (
                it.raw_reply,
                canonical_json(it.plan),
                it.format_error,
                tuple((v.critic, v.passed, v.applicable, v.error is None) for v in it.verdicts),
                it.backprompt,
            )
            for it in r.iterations
        ]
        out[pid] = (r.outcome.value, r.stop_reason, canonical_json(r.best_plan), r.best_iteration, iterations)
    return out


def trace_faults(results: Iterable[ProblemResult]) -> Counter[str]:
    """Faults recorded in the traces (every call of every iteration), counted by class."""
    counts: Counter[str] = Counter()
    for r in results:
        for it in r.iterations:
            for call in it.calls:
                counts.update(f.kind for f in call.faults)
    return counts


def expected_trace_faults(server_faults: Mapping[str, int]) -> Counter[str]:
    """The trace classes that faults injected at the server (``FakeStats.by_fault``) should show up as."""
    counts: Counter[str] = Counter()
    for kind, n in server_faults.items():
        if kind in TRACE_CLASS and n:
            counts[TRACE_CLASS[kind]] += n
    return counts


def fault_pattern(n: int, rate: float, kinds: Sequence[str] = RETRIED_FAULTS, *, seed: int = 0) -> list[str | None]:
    """A fault queue for ``n`` requests (FakeProvider's ``faults``): in every block of ``1/rate`` requests
    exactly one, at a random place, gets a random fault of ``kinds``; so exactly ``rate`` of them."""
    if not 0.0 < rate <= 1.0:
        raise ValueError(f"rate must be in (0, 1], not {rate}")
    rng = random.Random(seed)
    block = max(1, round(1.0 / rate))
    out: list[str | None] = []
    while len(out) < n:
        chunk: list[str | None] = [None] * block
        chunk[rng.randrange(block)] = rng.choice(list(kinds))
        out.extend(chunk)
    return out[:n]


def fault_rates(total: float, kinds: Sequence[str] = RETRIED_FAULTS) -> dict[str, float]:
    """``total`` spread evenly over ``kinds`` (FakeProvider's ``fault_rates``)."""
    return {k: total / len(kinds) for k in kinds}


def request_digest(messages: Iterable[Mapping[str, Any]]) -> str:
    """Identity of a request by its messages (role and text), as the server and the cache both see it."""
    plain = [{"role": str(m.get("role")), "content": str(m.get("content"))} for m in messages]
    return hashlib.sha256(canonical_json(plain).encode()).hexdigest()[:24]


def answered(req: FakeRequest) -> bool:
    """True when the server sent a normal reply to ``req`` (no fault, HTTP 200)."""
    return req.fault is None and req.status == 200


def paid_repeats(requests: Sequence[FakeRequest]) -> list[FakeRequest]:
    """Requests sent again after an earlier identical request had been answered normally."""
    seen: set[str] = set()
    out: list[FakeRequest] = []
    for req in sorted(requests, key=lambda r: r.arrived):
        digest = request_digest(req.messages)
        if digest in seen:
            out.append(req)
        if answered(req):
            seen.add(digest)
    return out


def recorded_digests(run_dir: Path, cache_file: Path) -> set[str]:
    """Requests whose reply this run has recorded: in the response cache or in the run's records."""
    out: set[str] = set()
    if cache_file.exists():
        cache = ResponseCache(cache_file, readonly=True)
        try:  # (no table yet: nothing recorded)
            out.update(request_digest(json.loads(payload)["messages"]) for _, payload in cache.requests())
        finally:
            cache.close()
    for r in records(run_dir).values():
        for it in r.iterations:
            for call in it.calls:
                if call.reply is not None:
                    out.add(request_digest(m.model_dump() for m in call.messages))
    return out


# -- SIGKILL and resume -------------------------------------------------------------------------------------
class KillSwitch:
    """Wraps a reply policy (or a model double); once armed, SIGKILLs a process some time after its
    ``at``-th request.

    ``delay_s=0`` kills before the reply is written (the request is in flight); a positive delay
    lets the reply go out and kills while the client handles it (parsing, cache write, critics,
    the record's fsync, the next requests). ``killed_at`` is the kill's time on ``clock``.
    """

    def __init__(self, inner: ReplyFn | LLM, clock: Callable[[], float] = time.monotonic) -> None:
        self.inner = reply_fn(inner)
        self.clock = clock
        self.fired = threading.Event()
        self.killed_at: float | None = None
        self._lock = threading.Lock()
        self._pid: int | None = None
        self._at = 0
        self._delay = 0.0
        self._seen = 0

    def arm(self, pid: int, at: int, delay_s: float) -> None:
        with self._lock:
            self._pid, self._at, self._delay, self._seen = pid, at, delay_s, 0
            self.killed_at = None
            self.fired.clear()

    def disarm(self) -> None:
        with self._lock:
            self._pid = None

    def _kill(self, pid: int) -> None:
        self.killed_at = self.clock()
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            self.killed_at = None
            return
        self.fired.set()

    def __call__(self, req: FakeRequest) -> ReplyItem:
        reply = self.inner(req)
        with self._lock:
            self._seen += 1
            pid = self._pid if self._seen == self._at else None
            if pid is not None:
                self._pid = None
        if pid is not None:
            if self._delay <= 0:
                self._kill(pid)
            else:
                threading.Timer(self._delay, self._kill, args=(pid,)).start()
        return reply


_FORK_SERVER = r"""
import json, os, sys
for name in sys.argv[1:]:
    __import__(name)
from modulo.cli.main import cli
# what every child would otherwise do again (seconds of imports when no bytecode is cached): read the
# entry points, import the console and Hydra's plugins, and (with openai preloaded) the SDK's HTTP stack,
# which it imports when its first client is built; the client connects to nothing
import modulo.cli.console
from hydra.core.plugins import Plugins
from modulo.cli.hydra_app import CONFIG_GROUP
from modulo.registry import KINDS, group_entry_points
for group in (*KINDS.values(), CONFIG_GROUP):
    group_entry_points(group)
Plugins.instance()
if "openai" in sys.modules:
    sys.modules["openai"].AsyncOpenAI(api_key="fork-server-warm-up", base_url="http://127.0.0.1:9/v1")
for line in sys.stdin:
    job = json.loads(line)
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            fd = os.open(job["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            cli.main(args=job["args"], prog_name="modulo", standalone_mode=True)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            import traceback
            traceback.print_exc()
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    print(pid, flush=True)
    _, status = os.waitpid(pid, 0)
    print(os.waitstatus_to_exitcode(status), flush=True)
"""


class ForkServer:
    """Starts ``modulo run`` processes fast: a server process imports modulo (and ``preload``) once and
    forks a child per run, so each child starts in milliseconds instead of seconds of imports.

    A child is a separate process running the real command line (Hydra, the run, the backends) with
    its own pid: SIGKILL treats it exactly like a ``modulo run`` started from a shell.
    """

    def __init__(
        self,
        preload: Sequence[str] = ("openai", "modulo.build", "modulo.runner"),
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _FORK_SERVER, "modulo.cli.hydra_app", *preload],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=dict(os.environ if env is None else env),
            cwd=cwd,
        )

    def start(self, args: Sequence[str], log: Path) -> int:
        """Fork a child running ``modulo ARGS`` (output to ``log``); its pid."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(json.dumps({"args": list(args), "log": str(log)}) + "\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the fork server died (exit {self._proc.poll()})")
        return int(line)

    def wait(self) -> int:
        """The exit code of the last child (negative: killed by that signal)."""
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the fork server died (exit {self._proc.poll()})")
        return int(line)

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Launcher:
    """How a drill starts ``modulo run``: a plain subprocess per run, or a child of a :class:`ForkServer`."""

    def __init__(
        self,
        *,
        fork: bool = False,
        env: Mapping[str, str] | None = None,
        preload: Sequence[str] = (),
        cwd: Path | None = None,
    ) -> None:
        self.env = dict(os.environ if env is None else env)
        self.cwd = cwd
        self.fork = ForkServer(("openai", "modulo.build", "modulo.runner", *preload), self.env, cwd) if fork else None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: Path | None = None

    def start(self, overrides: Sequence[str], log: Path) -> int:
        """Start ``modulo run OVERRIDES`` (output to ``log``); its pid."""
        return self.command(["run", *overrides], log)

    def command(self, args: Sequence[str], log: Path) -> int:
        """Start ``modulo ARGS`` (any subcommand; output to ``log``); its pid."""
        self._log = log
        if self.fork is not None:
            return self.fork.start(list(args), log)
        with log.open("w") as fh:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "modulo.cli.main", *args],
                env=self.env,
                stdout=fh,
                stderr=subprocess.STDOUT,
                cwd=self.cwd,
            )
        return self._proc.pid

    def __call__(self, args: Sequence[str], log: Path, timeout_s: float = 300.0) -> tuple[int, str]:
        """Run ``modulo ARGS`` to the end: (exit code, output)."""
        self.command(args, log)
        return self.wait(timeout_s)

    def wait(self, timeout_s: float) -> tuple[int, str]:
        """(exit code, output) of the run started last; negative codes are signals."""
        if self.fork is not None:
            code = self.fork.wait()
        else:
            assert self._proc is not None
            try:
                code = self._proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                code = self._proc.wait()
        out = self._log.read_text(errors="replace") if self._log is not None and self._log.exists() else ""
        return code, out

    def close(self) -> None:
        if self.fork is not None:
            self.fork.close()


@dataclass
class Phase:
    """One process of a kill drill: from its start to its kill (or to the end of the run)."""

    started: float
    ended: float = 0.0
    killed: bool = False
    kill_at: int = 0
    delay_s: float = 0.0
    #: when the kill was sent (provider clock)
    killed_at: float | None = None
    requests: int = 0
    #: requests whose reply was recorded (cache or records) when this process died
    recorded: int = 0
    records: int = 0
    returncode: int | None = None


@dataclass(frozen=True)
class Send:
    """One request as the server saw it, classified.

    ``kind``: ``first`` (never sent before), ``resent_after_kill`` (sent by an earlier process that
    was killed before recording its reply), ``retried_after_fault`` (sent again by the same process
    after a fault), ``repeated_paid`` (sent again although its reply had been recorded: a bug) or
    ``repeated_answered`` (sent again by the same process after a normal reply: a bug).
    """

    phase: int
    problem_id: str
    iteration: str
    stage: str
    digest: str
    kind: str
    #: for a resent request: whether the server had written its earlier reply before the kill
    reply_written_before_kill: bool = False


def classify_sends(
    by_phase: Sequence[Sequence[FakeRequest]], recorded_after: Sequence[set[str]], kill_times: Sequence[float | None]
) -> list[Send]:
    """Classify every request of a kill drill (see :class:`Send`)."""
    sends: list[Send] = []
    last: dict[str, tuple[int, FakeRequest]] = {}
    for j, reqs in enumerate(by_phase):
        answered_here: set[str] = set()
        for req in reqs:
            digest = request_digest(req.messages)
            written = False
            if j > 0 and digest in recorded_after[j - 1]:
                kind = "repeated_paid"
            elif digest in answered_here:
                kind = "repeated_answered"
            elif digest not in last:
                kind = "first"
            elif last[digest][0] == j:
                kind = "retried_after_fault"
            else:
                kind = "resent_after_kill"
                before, killed = last[digest][1], kill_times[last[digest][0]]
                written = (
                    answered(before) and before.finished is not None and killed is not None and before.finished < killed
                )
            if answered(req):
                answered_here.add(digest)
            last[digest] = (j, req)
            sends.append(
                Send(
                    phase=j,
                    problem_id=req.headers.get(PROBLEM_HEADER, "?"),
                    iteration=req.headers.get(ITERATION_HEADER, "?"),
                    stage=req.headers.get(STAGE_HEADER, "?"),
                    digest=digest,
                    kind=kind,
                    reply_written_before_kill=written,
                )
            )
    return sends


@dataclass
class KillReport:
    phases: list[Phase]
    sends: list[Send]
    seconds: float = 0.0
    output: str = ""

    @property
    def kills(self) -> int:
        return sum(p.killed for p in self.phases)

    @property
    def requests(self) -> int:
        return len(self.sends)

    @property
    def digests(self) -> set[str]:
        return {s.digest for s in self.sends}

    def count(self, kind: str) -> int:
        return sum(s.kind == kind for s in self.sends)

    @property
    def repeated_paid(self) -> int:
        """Requests sent again although their reply had been recorded (the goal: zero)."""
        return self.count("repeated_paid") + self.count("repeated_answered")

    @property
    def resent_reply_written(self) -> int:
        """Resent requests whose reply the server had written before the kill (the client died before recording it)."""
        return sum(s.reply_written_before_kill for s in self.sends)


def kill_drill(
    fake: FakeProvider,
    switch: KillSwitch,
    overrides: Sequence[str],
    *,
    run_dir: Path,
    cache_file: Path,
    kills: int = 10,
    expected_requests: int,
    seed: int = 0,
    launcher: Launcher | None = None,
    timeout_s: float = 300.0,
) -> KillReport:
    """Start ``modulo run OVERRIDES``, SIGKILL it at ``kills`` random moments, resume it each time, and
    let the last process finish. ``fake`` must answer through ``switch``.

    A kill comes a random number of server requests into a process (spread so that the kills cover
    the run) plus a random delay (zero, so that the request is in flight, or up to 50 ms, so that the
    kill lands while the client handles replies). After each kill, the requests whose reply was
    recorded (response cache, run records) are noted, and every request is classified (:class:`Send`):
    none may be sent again once its reply was recorded.
    """
    rng = random.Random(seed)
    started = time.monotonic()
    own = launcher is None
    launch = launcher if launcher is not None else Launcher()
    switch.clock = fake.elapsed
    phases: list[Phase] = []
    recorded_after: list[set[str]] = []
    output: list[str] = []
    fake.reset_stats()
    run_dir.mkdir(parents=True, exist_ok=True)
    try:
        for k in range(kills + 1):
            final = k == kills
            phase = Phase(started=fake.elapsed())
            pid = launch.start(overrides, run_dir.parent / f"{run_dir.name}-phase{k}.log")
            if not final:
                done = len(recorded_after[-1]) if recorded_after else 0
                remaining = max(2, expected_requests - done)
                phase.kill_at = rng.randint(1, max(1, remaining // (kills - k + 1)))
                phase.delay_s = 0.0 if rng.random() < 0.3 else rng.uniform(0.0, 0.05)
                switch.arm(pid, phase.kill_at, phase.delay_s)
            code, out = launch.wait(timeout_s)
            switch.disarm()
            time.sleep(0.05)  # let the handler threads of the dead process's last requests finish
            phase.ended = fake.elapsed()
            phase.returncode = code
            phase.killed = code == -signal.SIGKILL
            phase.killed_at = switch.killed_at if phase.killed else None
            output.append(out)
            recorded = recorded_digests(run_dir, cache_file)
            recorded_after.append(recorded)
            phase.recorded = len(recorded)
            phase.records = len(records(run_dir))
            phases.append(phase)
            if not phase.killed:
                if code != 0:
                    raise RuntimeError(f"drill run exited with {code}:\n{out[-3000:]}")
                break  # finished (before the chosen request came, if it was not the last process)
    finally:
        switch.disarm()
        if own:
            launch.close()
    requests = sorted(fake.requests, key=lambda r: r.arrived)
    by_phase = [[r for r in requests if p.started <= r.arrived <= p.ended] for p in phases]
    for p, reqs in zip(phases, by_phase, strict=True):
        p.requests = len(reqs)
    sends = classify_sends(by_phase, recorded_after, [p.killed_at for p in phases])
    return KillReport(phases=phases, sends=sends, seconds=time.monotonic() - started, output="\n".join(output))


# -- rates ----------------------------------------------------------------------------------------------
def max_in_window(arrivals: Sequence[float], window_s: float) -> int:
    """The most arrivals in any half-open window ``[t, t + window_s)``."""
    times = sorted(arrivals)
    best = lo = 0
    for hi, t in enumerate(times):
        while times[lo] <= t - window_s:
            lo += 1
        best = max(best, hi - lo + 1)
    return best
