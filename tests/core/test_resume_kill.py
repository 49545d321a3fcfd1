"""A run killed with SIGKILL and started again resumes without repeating a paid call.

The real stack runs in a subprocess (CLI, openai backend with the official SDK, response cache, run
directory) against the fake provider on 127.0.0.1. The provider holds one request open, the run is
killed while it waits for that reply, and then resumed. Every request whose reply was received before
the kill is answered from the run records or the cache; only the request that was in flight (its
reply never arrived) is sent again. The final records equal those of an uninterrupted run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from modulo.recordformat import expand_record
from modulo.testing.fake_server import FakeProvider, FakeRequest

pytestmark = pytest.mark.slow  # the fast lane (-m 'not slow') leaves this module out

PROBLEMS, BUDGET = 5, 3


class GatedReplies:
    """Replies '[]' (a format failure, so every problem uses its whole budget); holds request ``gate_at``."""

    def __init__(self, gate_at: int | None = None) -> None:
        self.gate_at = gate_at
        self.seen: list[str] = []
        self.holding = threading.Event()
        self.release = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, req: FakeRequest) -> str:
        with self._lock:
            self.seen.append(json.dumps(req.messages, sort_keys=True))
            n = len(self.seen)
        if n == self.gate_at:
            self.holding.set()
            self.release.wait(30)
        return "[]"


def start_run(base_url: str, run_dir: Path, cache: Path) -> subprocess.Popen[str]:
    env = dict(os.environ, OPENAI_API_KEY="sk-fake-for-tests")
    args = [
        sys.executable,
        "-m",
        "modulo.cli.main",
        "run",
        "benchmark=travelplanner",
        f"benchmark.limit={PROBLEMS}",
        "llm=openai",
        f"llm.base_url={base_url}",
        "llm.model=fake-model",
        "llm.concurrency=1",
        "llm.max_retries=0",
        "generator.prompt=json",
        "reformulator=none",
        "critics=json",
        f"metacontroller.max_iterations={BUDGET}",
        "run.concurrency=1",
        "run.progress=false",
        f"cache.dir={cache}",
        "cache.mode=read-write",
        f"run.dir={run_dir}",
        f"hydra.run.dir={run_dir}",
    ]
    return subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def outcomes(run_dir: Path) -> dict[str, Any]:
    out = {}
    for line in (run_dir / "records.jsonl").read_text().splitlines():
        r = expand_record(json.loads(line))
        out[r["problem_id"]] = (r["outcome"], r["best_plan"], [it["raw_reply"] for it in r["iterations"]])
    return out


@pytest.mark.usefixtures("data_dir")
def test_sigkill_then_resume_repeats_no_answered_request(tmp_path: Path) -> None:
    # one uninterrupted run, for reference
    ref = GatedReplies()
    with FakeProvider(ref) as fake:
        proc = start_run(fake.openai_base_url, tmp_path / "ref", tmp_path / "ref-cache")
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, out[-3000:]
    assert len(ref.seen) == PROBLEMS * BUDGET

    # the same run, killed while request 8 (problem 3, iteration 2) is in flight, then resumed
    gated = GatedReplies(gate_at=8)
    with FakeProvider(gated) as fake:
        proc = start_run(fake.openai_base_url, tmp_path / "run", tmp_path / "cache")
        assert gated.holding.wait(120), "the run never reached the held request"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        gated.release.set()
        time.sleep(0.2)
        assert len((tmp_path / "run" / "records.jsonl").read_text().splitlines()) == 2  # problems 1-2 done
        proc = start_run(fake.openai_base_url, tmp_path / "run", tmp_path / "cache")
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, out[-3000:]
        assert "2 resumed" in out

    assert outcomes(tmp_path / "run") == outcomes(tmp_path / "ref")
    # no request whose reply was received is ever sent again: the only repeat is the one in flight
    assert len(gated.seen) == len(ref.seen) + 1
    repeated = [m for m in set(gated.seen) if gated.seen.count(m) > 1]
    assert repeated == [gated.seen[7]]
    assert sorted(set(gated.seen)) == sorted(set(ref.seen))
