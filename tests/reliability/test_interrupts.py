"""Ctrl-C and SIGTERM (issue 14 items 5 and 8): stop within a second, keep the records, exit 130 / 143,
say how to resume; terminal control characters from a model are escaped by ``modulo show``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from modulo.runs import read_records

from .conftest import DrillFactory, start_run


@pytest.mark.slow  # whole modulo runs, signalled and resumed
@pytest.mark.parametrize(
    ("sig", "code", "said"), [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "SIGTERM")]
)
def test_the_first_signal_stops_the_run_keeps_records_and_says_how_to_resume(
    drill: DrillFactory, tmp_path: Path, sig: int, code: int, said: str
) -> None:
    d = drill(latency_s=0.5)
    overrides = d.overrides("run", n=12, concurrency=2, max_iterations=1)
    d.script(overrides)
    run_dir = tmp_path / "run"
    env = {**os.environ, "OPENAI_API_KEY": "test-key-not-secret"}
    records = run_dir / "records.jsonl"
    proc = start_run(overrides, lambda: records.exists() and records.stat().st_size > 0)
    try:
        sent = time.monotonic()
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=30)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    text = out.decode()
    assert proc.returncode == code, text[-2000:]
    assert took < 5, took  # within a second on an idle machine; generous for a loaded one
    assert said in text and f"modulo resume {run_dir}" in text and "Traceback" not in text
    kept = list(read_records(run_dir))
    assert 0 < len(kept) < 12  # finished problems recorded, the rest left for the resume
    resumed = subprocess.run(
        [sys.executable, "-m", "modulo.cli.main", "resume", str(run_dir)], env=env, capture_output=True, text=True
    )
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert len({r.problem_id for r in read_records(run_dir)}) == 12


def test_show_escapes_terminal_control_sequences_from_model_output() -> None:
    from modulo.terminal import safe_text

    hostile = "plan\x1b]0;pwned\x07 and \x1b[2J\x1b[H cleared\u202eevil\ttab\nline"
    safe = safe_text(hostile)
    assert "\x1b" not in safe and "\x07" not in safe and "\u202e" not in safe
    assert "\\x1b]0;pwned\\x07" in safe and "\\u202e" in safe
    assert "\ttab\nline" in safe  # newlines and tabs are kept
