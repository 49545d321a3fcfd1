"""No llama.cpp server outlives the run that started it: normal end, exception, Ctrl-C, SIGKILL, no aclose.

Each test starts its own server (a second or two with SmolLM2) and checks by process id that it is gone.
All are marked slow (2.5-6 s each: every one starts a server). The fast lane checks the normal end on
the server test_local_server shares (started the same way, gone after ``async with``); the exception,
the restart and the drills that start a second Python process (Ctrl-C, SIGKILL, no aclose) run in the
full suite only.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from modulo.llm.base import LLMRequest, LLMSettings
from modulo.llm.local import LocalBackend, free_port
from modulo.types import Message

from .local_support import (
    kill_if_alive,
    needs_model,
    process_gone,
    read_line,
    sigkill_parent,
    spawn_script,
    wait_gone,
)

pytestmark = needs_model

SETTINGS = LLMSettings(name="local", max_tokens=4)
REQUEST = LLMRequest(messages=(Message(role="user", content="Say yes."),), max_tokens=4)

SCRIPT = """
import asyncio, os, sys
from modulo.llm.base import LLMSettings
from modulo.llm.local import LocalBackend

async def main() -> None:
    backend = LocalBackend(LLMSettings(name="local"), n_ctx=512)
    {body}

asyncio.run(main())
"""


@contextmanager
def _script_server(tmp_path: Path, body: str) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """Run SCRIPT with ``body`` (which prints the server's pid) in a child process: (the child, the server's
    pid); afterwards neither is left running, whatever the test did."""
    path = tmp_path / "use_backend.py"
    path.write_text(SCRIPT.format(body=textwrap.indent(textwrap.dedent(body), "    ").strip()))
    proc = spawn_script(path)
    pid = None
    try:
        pid = int(read_line(proc))
        yield proc, pid
    finally:
        proc.kill()
        proc.communicate()
        kill_if_alive(pid)


@pytest.mark.slow  # the fast lane checks this normal end on test_local_server's shared server (its fixture)
async def test_normal_end_stops_the_server() -> None:
    # a server_url where nothing answers: the backend starts its own server instead
    backend = LocalBackend(SETTINGS, n_ctx=512, server_url=f"http://127.0.0.1:{free_port()}")
    pid = None
    try:
        async with backend:
            pid = backend.server_pid
            assert pid is not None and not process_gone(pid)
            assert (await backend.complete(REQUEST)).text
        assert wait_gone(pid, 5.0)
    finally:
        kill_if_alive(pid)


@pytest.mark.slow
async def test_exception_inside_the_loop_stops_the_server() -> None:
    pid = None
    try:
        with pytest.raises(RuntimeError, match="critic crashed"):
            async with LocalBackend(SETTINGS, n_ctx=512) as backend:
                pid = backend.server_pid
                raise RuntimeError("critic crashed")
        assert pid is not None
        assert wait_gone(pid, 5.0)
    finally:
        kill_if_alive(pid)


@pytest.mark.slow
async def test_a_dead_server_is_restarted() -> None:
    pid = second = None
    try:
        async with LocalBackend(SETTINGS, n_ctx=512) as backend:
            pid = backend.server_pid
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            assert backend.process is not None
            deadline = time.monotonic() + 5
            while backend.process.running() and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert (await backend.complete(REQUEST)).text
            second = backend.server_pid
            assert second is not None and second != pid
        assert wait_gone(second, 5.0)
    finally:
        kill_if_alive(pid)
        kill_if_alive(second)


@pytest.mark.slow
def test_ctrl_c_stops_the_server(tmp_path: Path) -> None:
    body = """
        async with backend:
            print(backend.server_pid, flush=True)
            await asyncio.sleep(60)
        """
    with _script_server(tmp_path, body) as (proc, pid):
        assert not process_gone(pid)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=10)
        assert proc.returncode != 0  # KeyboardInterrupt
        assert wait_gone(pid, 5.0)


@pytest.mark.slow
def test_sigkill_of_the_parent_stops_the_server(tmp_path: Path) -> None:
    body = """
        await backend.start()
        print(backend.server_pid, flush=True)
        await asyncio.sleep(60)
        """
    with _script_server(tmp_path, body) as (proc, pid):
        sigkill_parent(proc, pid, "the server")


@pytest.mark.slow
def test_forgotten_aclose_still_stops_the_server_at_exit(tmp_path: Path) -> None:
    body = """
        await backend.start()
        print(backend.server_pid, flush=True)
        sys.stdin.readline()
        """
    with _script_server(tmp_path, body) as (proc, pid):
        proc.communicate(timeout=15)  # closes stdin: the script returns without aclose()
        assert proc.returncode == 0
        assert wait_gone(pid, 5.0)
