"""A worker process's exit is waited for exactly: seen when it happens (not at the next of Popen.wait's
doubling polls), bounded by a timeout for one that does not exit, and reaped (no zombie)."""

from __future__ import annotations

import subprocess
import sys

from modulo.sandbox import exited


def test_a_process_is_seen_exited_and_reaped_and_a_live_one_is_waited_for_no_longer_than_asked() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert exited(proc, 0.05) is False and proc.returncode is None  # still running: not waited on past 50 ms
        proc.kill()
        assert exited(proc, 5.0) is True and proc.returncode == -9  # reaped: no zombie left
        assert exited(proc, 5.0) is True  # already reaped: said at once
    finally:
        proc.kill()
        proc.wait()
