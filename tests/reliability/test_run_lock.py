"""One writer per run directory (issue 14 item 4).

Two ``modulo run`` processes into one run directory: exactly one runs, the other exits non-zero naming
the holder, and the first's files are unchanged. A run refused because its configuration differs
writes nothing, ``.hydra/`` included, so the original run still resumes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from modulo.runs import LOCK_FILE, RunLock
from modulo.testing.drills import cli_command, records
from modulo.testing.fake_server import reply_fn

from .conftest import DrillFactory, start_run

pytestmark = pytest.mark.slow  # whole modulo run processes racing for one directory


def _snapshot(run_dir: Path) -> dict[str, bytes]:
    names = ["config.yaml", "run.json", ".hydra/config.yaml", ".hydra/hydra.yaml", ".hydra/overrides.yaml"]
    return {n: (run_dir / n).read_bytes() for n in names if (run_dir / n).exists()}


def test_two_runs_into_one_directory_one_runs_the_other_is_refused_naming_the_holder(
    drill: DrillFactory, tmp_path: Path
) -> None:
    release = threading.Event()  # the first run's replies wait until the second process has ended

    def held(model: Any) -> Any:
        answer = reply_fn(model)
        return lambda req: answer(req) if release.wait(600) else ""

    d = drill(wrap=held)
    overrides = d.overrides("run", n=4, concurrency=1, max_iterations=1, timeout_s=600)
    d.script(overrides)
    run_dir = tmp_path / "run"
    env = {**os.environ, "OPENAI_API_KEY": "test-key-not-secret"}
    # the first is under way: its run.json written, its first request waiting at the server
    first = start_run(overrides, lambda: (run_dir / "run.json").exists() and d.fake.stats().requests > 0)
    try:
        before = _snapshot(run_dir)
        assert ".hydra/overrides.yaml" in before
        second = subprocess.run(cli_command(overrides), env=env, capture_output=True, text=True, timeout=300)
        out = second.stdout + second.stderr
        assert second.returncode != 0, out
        assert f"pid {first.pid}" in out and "started" in out, out
        assert "Traceback" not in out
        assert first.poll() is None  # refused while the first was still running
        assert _snapshot(run_dir) == before
        release.set()
        rest, _ = first.communicate(timeout=300)
    finally:
        release.set()
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0, rest.decode()[-2000:]
    lines = (run_dir / "records.jsonl").read_text().splitlines()
    assert len(lines) == 4 and len(records(run_dir)) == 4  # every problem recorded once
    paid = sum(r.usage.calls for r in records(run_dir).values())
    assert paid >= 4 and d.fake.stats().requests == paid  # and paid once: no request from the refused run


def test_a_run_refused_for_another_configuration_writes_nothing_and_the_original_resumes(
    drill: DrillFactory, tmp_path: Path
) -> None:
    d = drill()
    overrides = d.overrides("run", n=2, max_iterations=1)
    d.script(overrides)
    run_dir = tmp_path / "run"
    env = {**os.environ, "OPENAI_API_KEY": "test-key-not-secret"}
    ok = subprocess.run(cli_command(overrides), env=env, capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stdout[-2000:] + ok.stderr[-2000:]
    before = _snapshot(run_dir)
    other = [o for o in overrides if not o.startswith("metacontroller.max_iterations=")]
    refused = subprocess.run(
        cli_command([*other, "metacontroller.max_iterations=2"]), env=env, capture_output=True, text=True, timeout=300
    )
    assert refused.returncode == 2 and "another configuration" in refused.stdout + refused.stderr
    assert _snapshot(run_dir) == before  # .hydra/ included
    resumed = subprocess.run(
        [sys.executable, "-m", "modulo.cli.main", "resume", str(run_dir)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    assert "2 resumed" in resumed.stdout


def test_a_stale_lock_from_a_dead_process_is_taken_over(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / LOCK_FILE).write_text('{"pid": 999999, "host": "elsewhere", "started": "yesterday"}')
    with RunLock(run_dir):
        assert f'"pid": {os.getpid()}' in (run_dir / LOCK_FILE).read_text()


def test_the_lock_is_refused_to_another_process_and_reentrant_in_this_one(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    probe = (
        "import sys; from modulo.runs import RunLock; from modulo.errors import RunError\n"
        "try:\n    RunLock(sys.argv[1]).acquire()\nexcept RunError as e:\n    print(e); sys.exit(7)\n"
    )
    with RunLock(run_dir), RunLock(run_dir):  # re-entrant
        other = subprocess.run([sys.executable, "-c", probe, str(run_dir)], capture_output=True, text=True)
        assert other.returncode == 7 and f"pid {os.getpid()}" in other.stdout
    free = subprocess.run([sys.executable, "-c", probe, str(run_dir)], capture_output=True, text=True)
    assert free.returncode == 0, free.stdout
