"""Fixtures shared with the report tests (the toy benchmark, the run-directory writer) and a toy sweep."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tests.reports.conftest import make_run, run_a_plans, run_b_plans, toy_bench
from tests.reports.test_end_to_end import SCRIPT, toy_critics

__all__ = ["make_run", "run_a_plans", "run_b_plans", "toy_bench", "toy_critics", "toy_sweep"]


def toy_sweep(tmp_path: Path, *overrides: str) -> tuple[Path, int, str]:
    """``modulo run -m`` on the toy benchmark with the scripted replies of the report tests (needs
    the ``toy_critics`` fixture): (sweep root, exit code, output)."""
    from modulo.cli.main import cli

    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    sweep = tmp_path / "sweep"
    args = [
        "run",
        "-m",
        "benchmark=custom",
        "benchmark.name=toy_reports",
        "benchmark.split=dev",
        "llm=scripted",
        f"llm.script={script}",
        "reformulator=none",
        "cache.mode=off",
        f"hydra.sweep.dir={sweep}",
        "run.progress=false",
        *overrides,
    ]
    result = CliRunner().invoke(cli, args)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return sweep, result.exit_code, result.output
