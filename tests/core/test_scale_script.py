"""``benchmarks/scale.py`` tells the truth in its exit status: issue 15's targets checked where the sizes
measured allow it, and a run that did not make its iterations (or failed) is not measured as if it had."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "scale.py"


def _script() -> Any:
    spec = importlib.util.spec_from_file_location("scale_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _result(rss: float, wall: float = 1.0) -> dict[str, Any]:
    return {"run": {"peak_rss_mb": rss, "wall_s": wall}}


def test_the_targets_are_checked_for_the_sizes_measured() -> None:
    scale = _script()
    assert scale.targets({1000: _result(100)}) == []  # nothing to compare with
    [(what, met)] = scale.targets({1000: _result(100), 10000: _result(119)})
    assert met and "1.19x" in what
    [(_, met)] = scale.targets({1000: _result(100), 10000: _result(121)})
    assert not met  # more than 20 % above
    [(_, met)] = scale.targets({1000: _result(260), 10000: _result(301)})
    assert not met  # within 20 % but over 300 MB
    [(what, met)] = scale.targets({5000: _result(100, wall=59.0)})
    assert met and "59.0 s" in what
    [(_, met)] = scale.targets({5000: _result(100, wall=61.0)})
    assert not met


def _small_run(work: Path) -> subprocess.CompletedProcess[str]:
    """The script on 20 problems at budget 2, kept in ``work``, without the report."""
    argv = [sys.executable, str(SCRIPT), "--n", "20", "--budget", "2", "--keep", str(work), "--no-report"]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_a_small_run_is_measured_and_a_failed_run_is_not(tmp_path: Path) -> None:
    """20 problems at budget 2: measured, no target to check, exit 0. Then the problem set damaged (a problem
    without its id): the run exits 2, and the script says it measured nothing instead of printing a table
    row as if it had, and exits 2."""
    done = _small_run(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "| 20 | 2 |" in done.stdout and "target:" not in done.stdout
    # a damaged problem set: the run errs on it, and the script says so instead of printing figures as measured
    problems = tmp_path / "calendar-20.jsonl"
    problems.write_text(problems.read_text().replace('"id"', '"identity"', 1))
    broken = _small_run(tmp_path)
    assert broken.returncode == 2, broken.stdout + broken.stderr
    assert "not measured: the run of 20 problems" in broken.stdout
