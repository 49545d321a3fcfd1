"""Fixtures shared with the report tests (the toy benchmark, the run-directory writer) and a toy sweep."""

from __future__ import annotations

from pathlib import Path

from tests.cli_support import invoke
from tests.reports.conftest import make_run, run_a_plans, run_b_plans, scripted_llm, toy_bench, toy_run_args
from tests.reports.test_end_to_end import toy_critics

__all__ = ["make_run", "run_a_plans", "run_b_plans", "toy_bench", "toy_critics", "toy_sweep"]


def toy_sweep(tmp_path: Path, *overrides: str) -> tuple[Path, int, str]:
    """``modulo run -m`` on the toy benchmark with the scripted replies of the report tests (needs
    the ``toy_critics`` fixture): (sweep root, exit code, output)."""
    sweep = tmp_path / "sweep"
    code, out = invoke("run", "-m", *toy_run_args(scripted_llm(tmp_path), f"hydra.sweep.dir={sweep}", *overrides))
    return sweep, code, out
