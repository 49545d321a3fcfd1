"""The sandbox executor against hostile critics: each is contained and recorded as a critic error."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from modulo.binding import bind_benchmark, bind_critics
from modulo.errors import CriticError
from modulo.executor import FrozenPlan, ThreadExecutor
from modulo.sandbox import SandboxExecutor, SandboxLimits, SandboxSpec
from modulo.types import Problem, Verdict

from . import hostile_plugin

pytestmark = pytest.mark.slow  # each hostile critic starts a worker process

BENCH = "synth/tasks"
PROBLEM = Problem(id="p1", benchmark=BENCH, query="plan something")
NAMES = [
    "sandbox_env",
    "sandbox_socket",
    "sandbox_raw_socket",
    "sandbox_loop",
    "sandbox_alloc",
    "sandbox_fork",
    "sandbox_exit",
    "sandbox_system_exit",
    "sandbox_mutate",
    "sandbox_wrong_type",
    "sandbox_write",
    "sandbox_proc",
    "sandbox_honest",
]


@pytest.fixture(scope="module")
def critics() -> dict[str, Any]:
    bench = bind_benchmark(BENCH)
    return {c.name: c for c in bind_critics(NAMES, bench)}


@pytest.fixture(scope="module")
def executor() -> Iterator[SandboxExecutor]:
    spec = SandboxSpec(benchmark=BENCH, imports=(hostile_plugin.__name__,))
    ex = SandboxExecutor(NAMES, spec, SandboxLimits(memory_mb=1024, workers=1))
    yield ex
    ex.close()


def run(executor: Any, critic: Any, plan: Any, timeout_s: float = 20.0) -> Verdict:
    verdict: Verdict = asyncio.run(executor.run(critic, PROBLEM, FrozenPlan.of(plan), timeout_s))
    return verdict


def error_of(executor: Any, critic: Any, plan: Any, timeout_s: float = 20.0) -> str:
    with pytest.raises(CriticError) as info:
        run(executor, critic, plan, timeout_s)
    assert info.value.critic == critic.name
    return str(info.value)


def test_an_honest_critic_gives_the_same_verdict_as_in_process(executor: SandboxExecutor, critics: dict) -> None:
    thread = ThreadExecutor()
    for plan in ({"ok": True}, {"ok": False, "b": [1, 2]}, None):
        inside = run(executor, critics["sandbox_honest"], plan)
        outside = run(thread, critics["sandbox_honest"], plan)
        assert inside == outside
    assert not inside.passed and inside.critic == "sandbox_honest" and "problem p1" in inside.feedback


def test_no_environment_value_reaches_the_critic(
    executor: SandboxExecutor, critics: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(hostile_plugin.SECRET_VAR, "sk-very-secret-value")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-other-secret")
    verdict = run(executor, critics["sandbox_env"], {})
    assert "sk-" not in verdict.feedback and "secret=None" in verdict.feedback
    assert "modulo-sandbox-" in verdict.feedback  # HOME is the worker's scratch directory


@pytest.mark.parametrize("plan", [{"pid": "parent", "file": "environ"}, {"pid": "parent", "file": "mem"},
                                  {"pid": "1", "file": "environ"},
                                  {"pid": "parent", "file": "environ", "link": True}])  # fmt: skip
def test_another_processs_environment_and_memory_are_out_of_reach(
    executor: SandboxExecutor, critics: dict, plan: dict
) -> None:
    # the parent's /proc/PID/environ holds the API keys the scrubbed environment keeps from the worker, and
    # its memory everything else (the problem's answer, the oracle's labels)
    message = error_of(executor, critics["sandbox_proc"], plan)
    assert "reading another process's files is disabled in the modulo sandbox" in message


@pytest.mark.parametrize("name", ["sandbox_socket", "sandbox_raw_socket"])
def test_a_connection_to_localhost_is_refused(executor: SandboxExecutor, critics: dict, name: str) -> None:
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    port = server.getsockname()[1]
    accepted: list[Any] = []

    def accept() -> None:
        try:
            accepted.append(server.accept())
        except OSError:
            pass

    listener = threading.Thread(target=accept)
    listener.start()
    try:
        message = error_of(executor, critics[name], {"port": port})
    finally:
        listener.join()
        server.close()
    assert "network access is disabled in the modulo sandbox" in message
    assert not accepted


def test_a_critic_that_loops_forever_is_killed_at_its_deadline(executor: SandboxExecutor, critics: dict) -> None:
    executor.warm("sandbox_loop")  # the worker's start is not part of the call's deadline
    started = time.monotonic()
    message = error_of(executor, critics["sandbox_loop"], {}, timeout_s=1.0)
    assert time.monotonic() - started < 3
    assert "did not finish within 1 s (sandbox worker killed)" in message
    assert not executor._pools["sandbox_loop"]._idle  # the killed worker is not reused


def test_unbounded_allocation_is_contained(executor: SandboxExecutor, critics: dict) -> None:
    message = error_of(executor, critics["sandbox_alloc"], {})
    assert "MemoryError" in message or "sandbox worker exited" in message


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("sandbox_fork", "starting processes is disabled in the modulo sandbox"),
        ("sandbox_exit", "the sandbox worker exited during the call (exit code 3)"),
        ("sandbox_system_exit", "SystemExit"),
        ("sandbox_mutate", "mutated the plan it was given"),
        ("sandbox_wrong_type", "returned str, not a Verdict"),
    ],
)
def test_a_misbehaving_critic_is_a_critic_error(
    executor: SandboxExecutor, critics: dict, name: str, expected: str
) -> None:
    message = error_of(executor, critics[name], {"ok": False})
    assert expected in message


@pytest.mark.parametrize("action", ["open", "os_open", "remove", "rename", "copy"])
def test_no_write_outside_the_scratch_directory(
    executor: SandboxExecutor, critics: dict, action: str, tmp_path: Any
) -> None:
    target = tmp_path / "victim.txt"
    target.write_text("original")
    path = str(target if action != "copy" else tmp_path / "copied.py")
    message = error_of(executor, critics["sandbox_write"], {"action": action, "path": path})
    assert "writing outside the sandbox's scratch directory is disabled" in message
    assert target.read_text() == "original" and sorted(p.name for p in tmp_path.iterdir()) == ["victim.txt"]


def test_writes_inside_the_scratch_directory_are_allowed(executor: SandboxExecutor, critics: dict) -> None:
    assert run(executor, critics["sandbox_write"], {"action": "scratch"}).passed


def test_the_same_critic_works_again_after_its_worker_died(executor: SandboxExecutor, critics: dict) -> None:
    error_of(executor, critics["sandbox_exit"], {})
    assert "exit code 3" in error_of(executor, critics["sandbox_exit"], {})


def test_critics_not_named_run_in_process(critics: dict) -> None:
    ex = SandboxExecutor([], SandboxSpec(benchmark=BENCH))
    try:
        # in-process, the mutation is caught by the thread executor's copy check, not by a worker
        assert "mutated the plan" in error_of(ex, critics["sandbox_mutate"], {})
        assert not ex._pools
    finally:
        ex.close()


def test_a_built_in_critic_from_its_entry_point_gives_the_same_verdicts_sandboxed() -> None:
    bench = bind_benchmark(BENCH)
    problem = bench.select("generated", limit=1)[0]
    witness = problem.metadata["witness"]
    [coverage] = bind_critics(["synth_task_coverage"], bench)
    ex = SandboxExecutor(["synth_task_coverage"], SandboxSpec(benchmark=BENCH), SandboxLimits(workers=1))
    thread = ThreadExecutor()
    try:
        verdicts = []
        for plan in (witness, {"schedule": []}, None):
            frozen = FrozenPlan.of(plan)
            inside = asyncio.run(ex.run(coverage, problem, frozen, 20.0))
            outside = asyncio.run(thread.run(coverage, problem, frozen, 20.0))
            assert inside == outside
            verdicts.append(inside)
        assert verdicts[0].passed and not verdicts[1].passed  # the witness passes, an empty schedule does not
        assert ex._pools["synth_task_coverage"]._idle  # it did run in a worker
    finally:
        ex.close()
