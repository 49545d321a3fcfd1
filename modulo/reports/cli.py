"""Entry points for ``modulo report`` and ``modulo show`` (argparse; the main CLI forwards argv here)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import ModuloError
from .load import load_run
from .report import ReportOptions, build_report
from .show import build_story, render_plain, render_rich
from .stats import DEFAULT_RESAMPLES, DEFAULT_SEED


def report_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="modulo report",
        description="Tables (Markdown + CSV), figures (PNG) and paired statistics for one or more runs. "
        "Each path is a run directory or any tree holding run directories (a sweep root).",
    )
    p.add_argument("paths", nargs="+", metavar="RUN_DIR", help="run directories or sweep roots")
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="where to write report.md and the CSV/PNG files (default: the single path given, "
        "else the runs' common parent)",
    )
    p.add_argument(
        "--compare",
        action="store_true",
        help="paired tests between every pair of runs over the problems they share "
        "(default: each run against the baseline when both ran the same problems)",
    )
    p.add_argument("--baseline", default=None, help="name or path of the baseline run (default: the first)")
    p.add_argument("--resamples", type=int, default=DEFAULT_RESAMPLES, help="bootstrap resamples (default 10000)")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help="bootstrap seed (default 0)")
    p.add_argument(
        "--no-reevaluate",
        action="store_true",
        help="report runs without evaluation.json as incomplete instead of re-scoring their best plans",
    )
    p.add_argument(
        "--no-budget-curve",
        action="store_true",
        help="skip the pass-rate-against-budget curve (it evaluates the plans of every budget)",
    )
    p.add_argument("--no-figures", action="store_true", help="write no PNG files")
    p.add_argument("--no-cache", action="store_true", help="recompute budget curves even when cached")
    p.add_argument("--quiet", action="store_true", help="print only where the report was written")
    p.add_argument(
        "--format",
        dest="fmt",
        choices=("report", "latex", "markdown", "csv"),
        default="report",
        help="report (default): report.md, CSV tables and figures; latex|markdown|csv: only the paper table of "
        "each benchmark (95%% CIs, k/n counts, best per column in bold), printed and written as paper_table1.*",
    )
    return p


def report_main(argv: list[str]) -> int:
    """``modulo report RUN_DIR [RUN_DIR ...]``: write the report and print the main table. Exit code."""
    args = report_parser().parse_args(argv)
    if args.resamples < 0:
        print("modulo report: --resamples must be >= 0", file=sys.stderr)
        return 2
    options = ReportOptions(
        out=args.out,
        compare=args.compare,
        baseline=args.baseline,
        n_resamples=args.resamples,
        seed=args.seed,
        reevaluate=not args.no_reevaluate,
        budget_curves=not args.no_budget_curve,
        figures=not args.no_figures,
        use_cache=not args.no_cache,
    )
    if args.fmt != "report":
        return _paper_main(args, options)
    try:
        result = build_report(args.paths, options)
    except ModuloError as exc:
        print(f"modulo report: {exc}", file=sys.stderr)
        return 2
    if args.quiet:
        print(result.out_dir / "report.md")
    else:
        sys.stdout.write(result.text)
    return 0


def _paper_main(args: argparse.Namespace, options: ReportOptions) -> int:
    from .paper import paper_tables, write_paper_tables
    from .report import default_out_dir

    try:
        tables = paper_tables(
            args.paths, n_resamples=options.n_resamples, seed=options.seed, reevaluate=options.reevaluate
        )
        out = options.out if options.out is not None else default_out_dir(args.paths)
        files = write_paper_tables(tables, args.fmt, out)
    except ModuloError as exc:
        print(f"modulo report: {exc}", file=sys.stderr)
        return 2
    if args.quiet:
        print("\n".join(str(f) for f in files))
    else:
        sys.stdout.write("\n".join(t.render(args.fmt) for t in tables))
    for table in tables:
        for note in table.notes:
            print(f"note: {note}", file=sys.stderr)
    return 0


def show_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="modulo show",
        description="The story of one problem in a run, iteration by iteration: outcome, critic flips, "
        "backprompts (full text), plan diffs, usage.",
    )
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    p.add_argument("problem_id", metavar="PROBLEM_ID")
    p.add_argument("--plain", action="store_true", help="plain text (no colours or panels)")
    p.add_argument("--prompts", action="store_true", help="also print the full prompt of every iteration")
    p.add_argument("--replies", action="store_true", help="also print the raw model reply of every iteration")
    return p


def show_main(argv: list[str]) -> int:
    """``modulo show RUN_DIR PROBLEM_ID``. Exit code."""
    args = show_parser().parse_args(argv)
    try:
        run = load_run(args.run_dir, only={str(args.problem_id)})  # that one record, in full
        run.name = run.run_id
        story = build_story(run, str(args.problem_id), show_prompt=args.prompts, show_reply=args.replies)
    except ModuloError as exc:
        print(f"modulo show: {exc}", file=sys.stderr)
        return 2
    if args.plain or not sys.stdout.isatty():
        sys.stdout.write(render_plain(story))
    else:
        render_rich(story)
    return 0
