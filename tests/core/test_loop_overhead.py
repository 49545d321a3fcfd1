"""``benchmarks/loop_overhead.py`` says what its wall waits on: the parts add up to the wall, every call is
traced, and the exit status says whether the bound was met (a tiny run: 24 calls)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "loop_overhead.py"


def test_the_walls_parts_add_up_and_the_exit_status_says_whether_the_bound_was_met() -> None:
    args = ["--problems", "8", "--budget", "3", "--latency", "0.01", "--concurrency", "4", "--json"]
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)
    figures = json.loads(done.stdout)
    assert figures["calls"] == 24 and figures["ideal_s"] == 24 * 0.01 / 4
    parts = figures["before_first_request_s"] + figures["first_request_to_last_reply_s"] + figures["after_last_reply_s"]
    assert abs(parts - figures["wall_s"]) <= 0.003  # each part rounded to a millisecond
    end = figures["last_reply_to_last_records_s"] + figures["last_records_to_end_s"]
    assert abs(end - figures["after_last_reply_s"]) <= 0.003 and figures["last_records_to_end_s"] > 0
    assert figures["latency_as_seen_ms_mean"] >= 10.0  # a reply is never seen before its latency
    assert figures["reply_to_next_request_ms_mean"] >= 0.0
    assert done.returncode == (0 if figures["ratio"] <= 1.05 else 1), done.stderr
