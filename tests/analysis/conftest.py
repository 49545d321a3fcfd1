"""Fixtures shared with the report tests: the toy benchmark and the run-directory writer."""

from tests.reports.conftest import make_run, run_a_plans, run_b_plans, toy_bench

__all__ = ["make_run", "run_a_plans", "run_b_plans", "toy_bench"]
