"""Reports over run directories: the papers' tables, figures, statistics, and one problem's story.

Command line: ``modulo report RUN_DIR [RUN_DIR ...]`` and ``modulo show RUN_DIR PROBLEM_ID``
(:mod:`modulo.cli.commands`). In Python::

    from modulo.reports import build_report, ReportOptions, load_runs, build_story, render_plain

    result = build_report(["runs/"], ReportOptions(out=Path("report")))
    print(result.text)
"""

from .budget import BudgetCurve, budget_curve, plan_at_budget
from .labels import critics_label, duplicate_groups, method_label, method_parts, short_labels
from .load import RunData, ensure_evaluation, find_runs, load_run, load_runs
from .report import ReportOptions, ReportResult, build_report
from .show import Story, build_story, render_plain, render_rich
from .stats import Interval, PairedTest, bootstrap_ratio, holm, mcnemar_exact, paired_test
from .tables import (
    compare_runs,
    constraint_rows,
    firing_counts,
    first_vs_final,
    headline_rows,
    usage_row,
)

__all__ = [
    "BudgetCurve",
    "Interval",
    "PairedTest",
    "ReportOptions",
    "ReportResult",
    "RunData",
    "Story",
    "bootstrap_ratio",
    "budget_curve",
    "build_report",
    "build_story",
    "compare_runs",
    "constraint_rows",
    "critics_label",
    "duplicate_groups",
    "ensure_evaluation",
    "find_runs",
    "firing_counts",
    "first_vs_final",
    "headline_rows",
    "holm",
    "load_run",
    "load_runs",
    "mcnemar_exact",
    "method_label",
    "method_parts",
    "paired_test",
    "plan_at_budget",
    "render_plain",
    "render_rich",
    "short_labels",
    "usage_row",
]
