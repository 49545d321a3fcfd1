"""Shared helpers of the llm=local tests: the skip condition and process checks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from modulo.errors import ConfigError
from modulo.llm.local import INSTALL_MODEL, INSTALL_SERVER, default_model_path, missing_server_modules

REPO = Path(__file__).resolve().parents[2]


def skip_reason() -> str | None:
    """Why the real-model tests cannot run here, or None when they can."""
    missing = missing_server_modules()
    if missing:
        return f"llama.cpp server not installed ({', '.join(missing)} cannot be imported): {INSTALL_SERVER}"
    try:
        default_model_path()
    except ConfigError:
        return f"the SmolLM2 model file is not installed: {INSTALL_MODEL}"
    return None


SKIP_REASON = skip_reason()
#: marks a test (or module) that needs llama-cpp-python[server] and the SmolLM2 GGUF file
needs_model = [
    pytest.mark.local_model,
    pytest.mark.skipif(SKIP_REASON is not None, reason=SKIP_REASON or ""),
]


def process_gone(pid: int) -> bool:
    """True when ``pid`` no longer runs (absent, or a zombie nobody has reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False
    state = stat.rsplit(")", 1)[1].split()[0]
    return state in ("Z", "X")


def wait_gone(pid: int, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process_gone(pid):
            return True
        time.sleep(0.05)
    return process_gone(pid)


def kill_if_alive(pid: int | None) -> None:
    """Test clean-up: never leave a server behind, whatever the test did."""
    if pid is not None and not process_gone(pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def sigkill_parent(parent: subprocess.Popen[Any], child_pid: int, child: str) -> None:
    """SIGKILL ``parent`` and check that ``child_pid``, a process it started (alive until then), goes too."""
    assert not process_gone(child_pid)
    parent.send_signal(signal.SIGKILL)
    parent.wait(timeout=5)
    assert wait_gone(child_pid, 5.0), f"{child} outlived its SIGKILLed parent"


def spawn_script(path: Path, *, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Run a Python script in its own process, its stdout readable line by line."""
    full_env = {**os.environ, **(env or {})}
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), full_env.get("PYTHONPATH", "")]))
    return subprocess.Popen(
        [sys.executable, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=full_env,
    )


def read_line(proc: subprocess.Popen[str], timeout_s: float = 60.0) -> str:
    """The next stdout line of ``proc`` (fails the test when it exits or stays silent)."""
    import selectors

    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    try:
        if not sel.select(timeout_s):
            proc.kill()
            _, err = proc.communicate()
            pytest.fail(f"no output from the script within {timeout_s} s; stderr:\n{err}")
        line = proc.stdout.readline()
    finally:
        sel.close()
    if not line:
        _, err = proc.communicate()
        pytest.fail(f"the script exited early (code {proc.returncode}); stderr:\n{err}")
    return line.strip()
