"""``modulo report``: tables (Markdown + CSV), figures (PNG) and paired statistics over runs.

The report groups runs by benchmark (each benchmark declares its own metrics, so each gets its own
table) and writes, into the output directory:

* ``report.md``: everything below, with the labels a reader needs next to each number;
* ``table1.csv``: the benchmark's own headline metrics per run, with k/n and 95% bootstrap CIs;
* ``direct_vs_modulo.csv``: per run, the first plan (Direct) against the final plan, paired tests;
* ``comparisons.csv``: paired tests (exact McNemar, Holm-adjusted over the family, paired bootstrap)
  between runs on the same problems;
* ``table4.csv``: per-constraint pass rates by level (passed/applicable), long format;
* ``usage.csv``: LLM calls, tokens and dollars per problem and per certified plan, cache hits apart;
* ``critic_firing.csv`` / ``critic_firing.png``: how often each critic fired per iteration (0 = first plan);
* ``budget_curve.csv`` / ``budget_curve.png``: primary metric and model calls against budget k = 1..N;
* ``runs.csv``: each run's labels (critic source, split, model, strategy, templates, git revision).

With several benchmarks, the per-benchmark files get a ``_<benchmark>`` suffix.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ..errors import RunError
from .budget import BudgetCurve, budget_curve
from .dialogue import abstention_row, dialogue_row, is_dialogue_run
from .figures import CONVENTION, plot_budget_curve, plot_critic_firing
from .labels import (
    budget_label,
    common_label,
    critic_presets,
    critics_label,
    duplicate_warnings,
    feedback_label,
    generator_label,
    method_label,
    requested_critics_label,
    short_labels,
    strategy_label,
    temperature_label,
    templates_label,
    user_label,
)
from .load import RunData, ensure_evaluation, load_runs
from .markdown import md_table, num, pct, pvalue, slug, text_table
from .stats import DEFAULT_RESAMPLES, DEFAULT_SEED, MIN_BOOTSTRAP_DISCORDANT, Interval, PairedTest, holm
from .tables import (
    Comparison,
    HeadlineRow,
    compare_runs,
    constraint_rows,
    count_text,
    firing_counts,
    first_vs_final,
    headline_rows,
    outcome_counts,
    same_problems,
    usage_row,
)


@dataclass
class ReportOptions:
    out: Path | None = None
    #: compare every pair of runs over the problems they share (default: each run against the baseline,
    #: when both ran exactly the same problems)
    compare: bool = False
    #: name (or path) of the baseline run; default: the first run of each benchmark
    baseline: str | None = None
    n_resamples: int = DEFAULT_RESAMPLES
    seed: int = DEFAULT_SEED
    #: re-score the best plans of runs that have no evaluation.json (else report them incomplete)
    reevaluate: bool = True
    budget_curves: bool = True
    figures: bool = True
    use_cache: bool = True


@dataclass
class ReportResult:
    out_dir: Path
    markdown: str
    #: what the command prints: the main table(s) and comparisons as plain text
    text: str
    files: list[Path] = field(default_factory=list)
    runs: list[RunData] = field(default_factory=list)


def default_out_dir(paths: Sequence[str | Path]) -> Path:
    """The single path given (run dir or sweep root), else the runs' common parent directory."""
    resolved = [Path(p).expanduser().resolve() for p in paths]
    resolved = [p.parent if p.is_file() else p for p in resolved]
    if len(resolved) == 1:
        return resolved[0]
    common = Path(*_common_parts([p.parts for p in resolved]))
    if len(common.parts) <= 2 or common == Path.home():
        raise RunError(
            f"the runs given share no project directory (common parent {common}); choose where to write with --out DIR"
        )
    return common


def _common_parts(parts: list[tuple[str, ...]]) -> tuple[str, ...]:
    out: list[str] = []
    for items in zip(*parts, strict=False):
        if all(x == items[0] for x in items):
            out.append(items[0])
        else:
            break
    return tuple(out)


def build_report(paths: Sequence[str | Path], options: ReportOptions | None = None) -> ReportResult:
    """Load the runs under ``paths`` and write the report files (see the module notes)."""
    options = options or ReportOptions()
    # records without their texts, on disk, each read when used: memory that does not grow with problems
    runs = load_runs(paths, light=True, on_disk=True)
    out_dir = options.out if options.out is not None else default_out_dir(paths)
    out_dir.mkdir(parents=True, exist_ok=True)
    for run in runs:
        ensure_evaluation(run, reevaluate=options.reevaluate)
    groups: dict[str, list[RunData]] = {}
    for run in runs:
        groups.setdefault(run.benchmark_name, []).append(run)
    builder = _Builder(out_dir, options, several=len(groups) > 1)
    builder.header(runs, paths)
    for bench, members in groups.items():
        builder.benchmark_section(bench, members)
    builder.usage_section(runs)
    builder.details_section(runs)
    builder.notes_section(runs)
    markdown = "\n".join(builder.md).rstrip() + "\n"
    report_path = out_dir / "report.md"
    report_path.write_text(markdown, encoding="utf-8")
    builder.files.insert(0, report_path)
    text = "\n".join(builder.text).rstrip() + "\n"
    return ReportResult(out_dir, markdown, text, builder.files, runs)


class _Builder:
    def __init__(self, out_dir: Path, options: ReportOptions, *, several: bool) -> None:
        self.out = out_dir
        self.options = options
        self.several = several
        self.md: list[str] = []
        self.text: list[str] = []
        self.files: list[Path] = []

    # -- helpers ---------------------------------------------------------------------------------
    def _name(self, stem: str, bench: str, ext: str) -> Path:
        return self.out / (f"{stem}_{slug(bench)}.{ext}" if self.several else f"{stem}.{ext}")

    def _csv(self, path: Path, rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        pd.DataFrame(rows).to_csv(path, index=False)
        self.files.append(path)

    def _ci_note(self) -> str:
        return (
            f"Rates in percent; brackets: 95% percentile bootstrap interval over problems "
            f"({self.options.n_resamples:,} resamples, seed {self.options.seed}; micro rates resample problems "
            f"and recompute the ratio)."
        )

    # -- sections --------------------------------------------------------------------------------
    def header(self, runs: list[RunData], paths: Sequence[str | Path]) -> None:
        now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
        self.md += [
            "# modulo report",
            "",
            f"{len(runs)} run(s) from {', '.join(str(p) for p in paths)}; generated {now}.",
            "",
        ]
        failed = error_lines(runs)
        if failed:
            what = "Jobs with errors" if len(runs) > 1 else "Errors"
            self.md += [
                f"**Status: errors.** {what} (problems that ended in error are left out of every metric, "
                "comparison and figure count; they are not plan failures):",
                "",
                *[f"- {line}" for line in failed],
                "",
            ]
            self.text += [f"STATUS: ERRORS. {what}:", *[f"- {line}" for line in failed], ""]
        dups = duplicate_warnings(runs)
        if dups:
            self.md += ["**Warning: runs that are one configuration.**", "", *[f"- {line}" for line in dups], ""]
            self.text += ["WARNING: runs that are one configuration:", *[f"- {line}" for line in dups], ""]

    def benchmark_section(self, bench: str, runs: list[RunData]) -> None:
        splits = sorted({r.split for r in runs})
        self.md += [f"## {bench} ({', '.join(splits)})", ""]
        self.text += [f"== {bench} ({', '.join(splits)}) =="]
        self._table1(bench, runs)
        self._first_vs_final(bench, runs)
        self._comparisons(bench, runs)
        self._extracted(bench, runs)
        self._table4(bench, runs)
        self._dialogue(bench, runs)
        self._abstention(bench, runs)
        self._figures(bench, runs)

    def _table1(self, bench: str, runs: list[RunData]) -> None:
        rows = headline_rows(runs, n_resamples=self.options.n_resamples, seed=self.options.seed)
        specs = runs[0].metric_specs()
        for run in runs[1:]:
            for spec in run.metric_specs():
                if spec.key not in {s.key for s in specs}:
                    specs.append(spec)
        shorts = short_labels(runs)
        shared = common_label(runs)
        several = len(runs) > 1
        headers = ["Run", "Method (what differs)" if several else "Method", "n", "Status"]
        headers += [s.label + (" (%, k/n)" if s.kind == "rate" else "") for s in specs]
        md_rows: list[list[Any]] = []
        csv_rows: list[dict[str, Any]] = []
        for row in rows:
            run = row.run
            n = len((run.evaluation or {}).get("per_problem") or []) or len(run.scored_ids)
            label = shorts[run.name].removeprefix(f"{run.name}: ") if several else method_label(run)
            first = [run.name, label if label != run.name else "(same as the others)", n, run.status]
            md_rows.append(first + [_fmt_metric(row, s.key, s.kind) for s in specs])
            record: dict[str, Any] = {
                "benchmark": bench,
                "run": run.name,
                "path": str(run.path),
                "method": method_label(run),
                "label": user_label(run),
                "generator": generator_label(run),
                "critics_requested": requested_critics_label(run),
                "critics": critics_label(run),
                "strategy": strategy_label(run),
                "feedback": feedback_label(run),
                "budget": budget_label(run),
                "model": run.model,
                "temperature": temperature_label(run),
                "n": n,
                "errored": len(run.errored_ids),
                "status": run.status,
                "split": run.split,
                "critic_source": run.critic_source,
            }
            for s in specs:
                iv = row.values.get(s.key)
                scale = 100.0 if s.kind == "rate" else 1.0
                record[s.key] = None if iv is None or math.isnan(iv.value) else scale * iv.value
                record[f"{s.key}_ci_low"] = None if iv is None or math.isnan(iv.low) else scale * iv.low
                record[f"{s.key}_ci_high"] = None if iv is None or math.isnan(iv.high) else scale * iv.high
                kn = row.counts.get(s.key)
                record[f"{s.key}_k"] = None if kn is None else kn[0]
                record[f"{s.key}_n"] = None if kn is None else kn[1]
                record[f"{s.key}_ci_rule"] = row.rules.get(s.key, "")
            csv_rows.append(record)
        self.md += [f"### Headline metrics ({bench}'s own metrics)", "", self._ci_note() + _points_note(runs), ""]
        if several and shared:
            self.md += [f"Shared by every run below: {shared}.", ""]
        self.md += [md_table(headers, md_rows, ["l", "l", "r", "l"] + ["r"] * len(specs)), ""]
        no_ci = sorted(
            {
                f"{s.label}: {row.rules[s.key]}"
                for row in rows
                for s in specs
                if row.rules.get(s.key, "").startswith("no interval")
            }
        )
        if no_ci:
            self.md += ["Without an interval: " + "; ".join(no_ci) + ".", ""]
        presets = critic_presets(runs[0])
        if presets:
            self.md += [
                f"Critic presets on {bench}: "
                + "; ".join(f"{label} = {', '.join(members)}" for label, members in presets)
                + ". A request is shown with what it resolved to, e.g. `hard (= [All])` when the benchmark has "
                "no commonsense critics.",
                "",
            ]
        self.text += [
            "Headline metrics (%, k/n, 95% bootstrap CI over problems):",
            *([f"Shared by every run: {shared}"] if several and shared else []),
            text_table(headers, md_rows),
            "",
            *[line.replace("**", "") for line in _run_labels(runs)],
            "",
        ]
        path = self._name("table1", bench, "csv")
        self._csv(path, csv_rows)

    def _first_vs_final(self, bench: str, runs: list[RunData]) -> None:
        """Direct (the first plan, budget 1) against LLM-Modulo (the final plan), paired, per run."""
        headers = [
            "Run",
            "n",
            "Direct: first plan (%, k/n)",
            "LLM-Modulo: final plan (%, k/n)",
            "difference (points) [95% CI]",
            "Direct only",
            "LLM-Modulo only",
            "McNemar exact p",
            "paired bootstrap p",
        ]
        rows: list[list[Any]] = []
        csv_rows: list[dict[str, Any]] = []
        for run in runs:
            t = first_vs_final(run, n_resamples=self.options.n_resamples, seed=self.options.seed)
            if t is None:
                continue
            rows.append([run.name, *_test_cells(t), pvalue(t.bootstrap_p)])
            csv_rows.append(
                {
                    "benchmark": bench,
                    "run": run.name,
                    "method": method_label(run),
                    **_test_record(t, "direct", "modulo"),
                    "bootstrap_p": t.bootstrap_p,
                }
            )
        if not rows:
            return
        metric = runs[0].primary_metric() or "passed"
        label = next((s.label for s in runs[0].metric_specs() if s.key == metric), metric)
        self.md += [
            f"### Direct against LLM-Modulo: {label}, paired per problem",
            "",
            "Within each run: the first plan (budget 1, no backprompt) against the final plan of the whole "
            "budget, both scored by the benchmark's evaluator on the same problems. Exact McNemar test on the "
            "discordant problems and a paired bootstrap of the difference (LLM-Modulo - Direct); the "
            f"bootstrap p is n/a below {MIN_BOOTSTRAP_DISCORDANT} discordant problems, where it understates the "
            "exact p badly: read McNemar's there.",
            "",
            md_table(headers, rows, ["l"] + ["r"] * 8),
            "",
        ]
        self.text += [f"Direct against LLM-Modulo ({label}):", text_table(headers, rows), ""]
        self._csv(self._name("direct_vs_modulo", bench, "csv"), csv_rows)

    def _dialogue(self, bench: str, runs: list[RunData]) -> None:
        """The user in the loop: certified after the last update, turns, questions, unnecessary questions."""
        chosen = [r for r in runs if is_dialogue_run(r)]
        if not chosen:
            return
        headers = [
            "Run",
            "n",
            "certified (%, k/n) [95% CI]",
            "requests changed",
            "certified after the last update",
            "updates never reached",
            "turns / problem",
            "questions (per problem)",
            "unnecessary questions",
        ]
        rows: list[list[Any]] = []
        csv_rows: list[dict[str, Any]] = []
        opts = {"n_resamples": self.options.n_resamples, "seed": self.options.seed}
        for run in chosen:
            d = dialogue_row(run, **opts)
            rows.append(
                [
                    run.name,
                    d.n,
                    _interval_kn(d.certified, d.n),
                    d.with_updates,
                    _count_of(d.certified_after_update, d.with_updates),
                    d.pending,
                    num(d.turns_mean),
                    f"{d.questions} ({num(d.questions_mean)})",
                    _count_of(d.unnecessary, d.questions),
                ]
            )
            csv_rows.append(
                {
                    "benchmark": bench,
                    "run": run.name,
                    "method": method_label(run),
                    **vars(d),
                    "certified": d.certified.value,
                }
            )
        self._table_section(
            bench,
            "User in the loop",
            "Per run, over the problems that did not end in error. A turn is a plan iteration, a question to the "
            "user or an abstention. *Certified after the last update*: among the problems whose request changed "
            "during the loop, those whose final plan every critic accepted against the request as it ended. "
            "*Unnecessary*: questions the user reported the request already answered. *Updates never reached*: "
            "problems whose loop ended before a scheduled update's turn.",
            (headers, rows, csv_rows),
            "user_in_the_loop",
        )

    def _abstention(self, bench: str, runs: list[RunData]) -> None:
        """Abstention scored both ways: recall on unsolvable problems beside false abstention on solvable ones."""
        opts = {"n_resamples": self.options.n_resamples, "seed": self.options.seed}
        found = [(run, abstention_row(run, **opts)) for run in runs]
        pairs = [(run, a) for run, a in found if a is not None]
        if not pairs:
            return
        headers = [
            "Run",
            "recall on unsolvable (%, k/n) [95% CI]",
            "false abstention on solvable (%, k/n) [95% CI]",
            "planner abstentions",
            "reasons verified / refuted / not checkable",
            "declined by the benchmark's proof",
            "ground truth from",
        ]
        rows: list[list[Any]] = []
        csv_rows: list[dict[str, Any]] = []
        for run, a in pairs:
            rows.append(
                [
                    run.name,
                    _interval_kn(a.recall, a.unsolvable),
                    _interval_kn(a.false_abstention, a.solvable),
                    a.planner,
                    f"{a.verified} / {a.refuted} / {a.unchecked}",
                    a.proofs,
                    a.source,
                ]
            )
            record = {k: v for k, v in vars(a).items() if not isinstance(v, Interval)}
            csv_rows.append(
                {
                    "benchmark": bench,
                    "run": run.name,
                    "method": method_label(run),
                    **record,
                    "recall": a.recall.value,
                    "false_abstention": a.false_abstention.value,
                }
            )
        self._table_section(
            bench,
            "Abstention, scored both ways",
            "Over the problems whose ground truth is known (solvable or not) and that did not end in error. "
            "Recall: unsolvable problems declined; false abstention: solvable controls declined. A decline is "
            "the planner's abstention (with a reason, checked by the benchmark where it can) or the benchmark's "
            "own proof of unsolvability before any model call; a problem with no plan read is not a decline. "
            "n/a: no problem of that kind in the run.",
            (headers, rows, csv_rows),
            "abstention",
        )

    def _table_section(
        self,
        bench: str,
        title: str,
        explanation: str,
        table: tuple[list[str], list[list[Any]], list[dict[str, Any]]],
        csv_stem: str,
    ) -> None:
        """A report section: a heading, what the table means, the table (Markdown and console) and its CSV."""
        headers, rows, csv_rows = table
        self.md += [
            f"### {title}",
            "",
            explanation,
            "",
            md_table(headers, rows, ["l"] + ["r"] * (len(headers) - 1)),
            "",
        ]
        self.text += [f"{title}:", text_table(headers, rows), ""]
        self._csv(self._name(csv_stem, bench, "csv"), csv_rows)

    def _pairs(self, runs: list[RunData]) -> list[tuple[RunData, RunData]]:
        if len(runs) < 2:
            return []
        if self.options.compare:
            return [(runs[i], runs[j]) for i in range(len(runs)) for j in range(i + 1, len(runs))]
        base = runs[0]
        if self.options.baseline:
            wanted = self.options.baseline
            hits = [
                r
                for r in runs
                if wanted in (r.name, r.run_id, str(r.path)) or r.path.resolve() == Path(wanted).resolve()
            ]
            if hits:
                base = hits[0]
        return [(base, r) for r in runs if r is not base and same_problems(base, r)]

    def _comparisons(self, bench: str, runs: list[RunData]) -> None:
        comps: list[Comparison] = []
        for a, b in self._pairs(runs):
            comp = compare_runs(a, b, n_resamples=self.options.n_resamples, seed=self.options.seed)
            if comp is not None:
                comps.append(comp)
        if not comps:
            return
        metric = runs[0].primary_metric() or "passed"
        label = next((s.label for s in runs[0].metric_specs() if s.key == metric), metric)
        adjusted = holm([c.test.mcnemar_p for c in comps])
        family = len(comps)
        headers = [
            "A",
            "B",
            "n",
            "A (%, k/n)",
            "B (%, k/n)",
            "B - A (points) [95% CI]",
            "A only",
            "B only",
            "McNemar exact p",
            f"Holm-adjusted p (family of {family})",
            "paired bootstrap p",
            "note",
        ]
        rows: list[list[Any]] = []
        csv_rows: list[dict[str, Any]] = []
        for c, p_holm in zip(comps, adjusted, strict=True):
            t = c.test
            rows.append([c.a.name, c.b.name, *_test_cells(t), pvalue(float(p_holm)), pvalue(t.bootstrap_p), c.note])
            csv_rows.append(
                {
                    "benchmark": bench,
                    "a": c.a.name,
                    "b": c.b.name,
                    "a_method": method_label(c.a),
                    "b_method": method_label(c.b),
                    "metric": metric,
                    **_test_record(t, "a", "b"),
                    "mcnemar_p_holm": float(p_holm),
                    "holm_family": family,
                    "bootstrap_p": t.bootstrap_p,
                    "note": c.note,
                }
            )
        if self.options.compare:
            what = "every pair of runs"
        else:
            what = f"each run against the baseline {comps[0].a.name} (same problems)"
        self.md += [
            f"### Paired comparisons: {label}, {what}",
            "",
            "Per problem: whether the final plan passed. Exact McNemar test (two-sided binomial on the "
            "discordant problems: A only / B only) and a paired bootstrap over problems (percentile interval "
            "of B - A; p-value from the null-shifted bootstrap distribution, n/a below "
            f"{MIN_BOOTSTRAP_DISCORDANT} discordant problems, where it understates the exact p badly). The "
            "McNemar p-values of the "
            f"{family} comparison(s) below form one family, Holm-adjusted (family-wise error rate); choose the "
            "baseline with `modulo report --baseline RUN`.",
            "",
            md_table(headers, rows, ["l", "l"] + ["r"] * 9 + ["l"]),
            "",
        ]
        self.text += [f"Paired comparisons ({label}):", text_table(headers[:-1], [r[:-1] for r in rows]), ""]
        self._csv(self._name("comparisons", bench, "csv"), csv_rows)

    def _extracted(self, bench: str, runs: list[RunData]) -> None:
        """LLM-extracted critics against the built-ins they stand for (see :mod:`modulo.reports.extracted`)."""
        from .extracted import extracted_rows

        rows = extracted_rows(runs)
        if not rows:
            return

        def share(x: Any) -> str:
            return "-" if x is None else f"{100 * x:.1f}"

        headers = [
            "run",
            "extracted critic",
            "built-in",
            "plans re-checked",
            "agreement (%)",
            "extracted accepts, built-in rejects",
            "extracted rejects, built-in accepts",
            "extracted errors",
            "extracted pass rate (% of n)",
            "built-in run",
            "built-in pass rate (% of n)",
            "difference (points)",
        ]
        table = [
            [
                r["run"],
                r["extracted"],
                r["builtin"],
                r["plans"],
                share(r["agreement"]),
                r["extracted_accepts_builtin_rejects"],
                r["extracted_rejects_builtin_accepts"],
                r["extracted_errors"],
                f"{share(r['extracted_pass_rate'])} (of {r['extracted_judged']})",
                r["builtin_run"] or "-",
                "-" if r["builtin_run"] is None else f"{share(r['builtin_pass_rate'])} (of {r['builtin_judged']})",
                "-" if r["pass_rate_difference_points"] is None else f"{r['pass_rate_difference_points']:+.1f}",
            ]
            for r in rows
        ]
        self.md += [
            "### LLM-extracted critics against the built-ins",
            "",
            "Agreement: on every plan an extracted critic judged in its run, the built-in it stands for (from its "
            "gate report) is run again and the verdicts compared; the recorded verdicts of the extracted critic "
            "are used (it is never re-run outside the sandbox). 'Extracted accepts, built-in rejects' are the "
            "permissive disagreements. Pass rates: the share of the plans each critic judged that it accepted, "
            "each in its own run (the plans differ between runs).",
            "",
            md_table(headers, table, ["l", "l", "l"] + ["r"] * 6 + ["l", "r", "r"]),
            "",
        ]
        self.text += ["LLM-extracted critics against the built-ins:", text_table(headers, table), ""]
        self._csv(self._name("extracted_critics", bench, "csv"), rows)

    def _table4(self, bench: str, runs: list[RunData]) -> None:
        csv_rows: list[dict[str, Any]] = []
        blocks: list[str] = []
        for run in runs:
            table = constraint_rows(run)
            if table is None:
                continue
            cols = [*table.levels, "all"]
            headers = ["Constraint", "Group", *[f"{c} (%, k/n)" for c in cols], "applicable (all)"]
            rows: list[list[Any]] = []
            for name, group, cells in table.rows:
                shown = table.names.get(name, name)
                label = name if shown == name else f"{shown} ({name})"
                rows.append(
                    [
                        label,
                        group,
                        *[_rate_kn(cells[c].rate, cells[c].applicable) for c in cols],
                        cells["all"].applicable,
                    ]
                )
                for c in cols:
                    csv_rows.append(
                        {
                            "benchmark": bench,
                            "run": run.name,
                            "constraint": name,
                            "group": group,
                            "level": c,
                            "passed": cells[c].passed,
                            "applicable": cells[c].applicable,
                            "pass_rate_pct": None if math.isnan(cells[c].rate) else 100 * cells[c].rate,
                        }
                    )
            blocks += [
                f"#### {run.name}: {method_label(run)} ({run.status})",
                "",
                md_table(headers, rows, ["l", "l"] + ["r"] * (len(cols) + 1)),
                "",
            ]
        if not blocks:
            return
        self.md += [
            f"### Per-constraint pass rates by level ({bench}'s constraints)",
            "",
            "Share of evaluated final plans that pass each constraint; problems where the constraint does not "
            "apply are left out (applicable = how many counted).",
            "",
            *blocks,
        ]
        self._csv(self._name("table4", bench, "csv"), csv_rows)

    def _figures(self, bench: str, runs: list[RunData]) -> None:
        subtitle = _figure_subtitle(bench, runs)
        titles = short_labels(runs) if len(runs) > 1 else {r.name: f"{r.name}: {method_label(r)}" for r in runs}
        firings = [firing_counts(r) for r in runs if r.records]
        overlaps: list[tuple[str, str]] = []
        csv_rows: list[dict[str, Any]] = []
        for f in firings:
            for critic, counts in f.counts.items():
                for i, c in enumerate(counts):
                    csv_rows.append(
                        {
                            "benchmark": bench,
                            "run": f.run.name,
                            "iteration": i,
                            "critic": critic,
                            "group": f.groups.get(critic, ""),
                            "fired": c,
                            "problems_at_iteration": f.active[i],
                            "errored_at_iteration": f.errored[i],
                        }
                    )
        self._csv(self._name("critic_firing", bench, "csv"), csv_rows)
        self.md += ["### Figures", "", f"{CONVENTION}", ""]
        if firings and self.options.figures:
            png = plot_critic_firing(
                firings, self._name("critic_firing", bench, "png"), titles=titles, subtitle=subtitle, check=overlaps
            )
            self.files.append(png)
            self.md += [
                f"![critic firing per iteration]({png.name})",
                "",
                f"*How often each critic rejected the plan at each iteration; iteration 0 is the first plan. "
                f"Iterations that errored before the critics ran are not counted ({subtitle}).*",
                "",
            ]
        if self.options.budget_curves:
            self._budget_figure(bench, runs, titles, subtitle, overlaps)
        if overlaps:
            shown = "; ".join(f"{a!r} / {b!r}" for a, b in overlaps[:5])
            self.md += [f"Figure layout note: {len(overlaps)} pair(s) of texts overlap: {shown}.", ""]
        self.md += ["Runs in these figures:", "", *_run_labels(runs), ""]

    def _budget_figure(
        self, bench: str, runs: list[RunData], titles: dict[str, str], subtitle: str, overlaps: list[tuple[str, str]]
    ) -> None:
        curves: list[BudgetCurve] = []
        labels: list[str] = []
        problems: list[str] = []
        for run in runs:
            try:
                curve = budget_curve(run, use_cache=self.options.use_cache)
            except RunError as exc:
                problems.append(f"{run.name}: no budget curve: {exc}")
                continue
            curves.append(curve)
            labels.append(titles.get(run.name, run.name))
        metric = runs[0].primary_metric()
        label = next((s.label for s in runs[0].metric_specs() if s.key == metric), metric or "primary metric")
        rows = [
            {
                "benchmark": bench,
                "run": c.run,
                "metric": c.metric,
                "budget": k,
                "value_pct": 100 * v,
                "fresh_calls_per_problem": c.fresh_calls[k - 1] if c.fresh_calls else None,
                "cached_calls_per_problem": c.cached_calls[k - 1] if c.cached_calls else None,
                "n_problems": c.n_problems,
                "method": c.method,
            }
            for c in curves
            for k, v in zip(c.budgets, c.values, strict=True)
        ]
        self._csv(self._name("budget_curve", bench, "csv"), rows)
        if curves and self.options.figures:
            png = plot_budget_curve(
                curves,
                labels,
                self._name("budget_curve", bench, "png"),
                metric_label=label,
                subtitle=subtitle,
                check=overlaps,
            )
            self.files.append(png)
            self.md += [
                f"![{label} against iteration budget]({png.name})",
                "",
                f"*{label} of the best plan within budget k (at most k plans), scored by the benchmark's "
                f"evaluator, and the fresh model calls per problem spent within it; cache hits are counted apart "
                f"in the legend ({subtitle}).*",
                "",
            ]
        for run, curve in zip([r for r in runs if r.name in {c.run for c in curves}], curves, strict=False):
            final = ((run.evaluation or {}).get("metrics") or {}).get(curve.metric)
            if isinstance(final, int | float) and curve.values and abs(float(final) - curve.values[-1]) > 1e-9:
                problems.append(
                    f"{run.name}: the budget curve ends at {pct(curve.values[-1])}% but the run's evaluation says "
                    f"{pct(float(final))}% (the recorded best plan is not the best-so-far plan of the trace)"
                )
        if problems:
            self.md += ["Budget curve notes: " + "; ".join(problems), ""]
            self.text += ["Budget curve notes:", *[f"- {p}" for p in problems], ""]

    def usage_section(self, runs: list[RunData]) -> None:
        headers = [
            "Run",
            "problems",
            "certified",
            "LLM calls",
            "of which cache hits",
            "failed calls",
            "tokens in",
            "tokens out",
            "$ paid",
            "$ cache hits would have cost",
            "calls / problem",
            "tokens / problem",
            "$ / problem",
            "calls / certified",
            "tokens / certified",
            "$ / certified",
        ]
        rows: list[list[Any]] = []
        csv_rows: list[dict[str, Any]] = []
        unpriced: list[str] = []
        for run in runs:
            u = usage_row(run)
            tok = u.usage.total_tokens
            per = [
                u.per(u.usage.calls, u.n_problems),
                u.per(tok, u.n_problems),
                u.per(u.usage.cost_usd, u.n_problems),
                u.per(u.usage.calls, u.certified),
                u.per(tok, u.certified),
                u.per(u.usage.cost_usd, u.certified),
            ]
            rows.append(
                [
                    run.name,
                    u.n_problems,
                    u.certified,
                    u.usage.calls,
                    u.usage.cached_calls,
                    u.usage.failed_calls,
                    u.usage.input_tokens,
                    u.usage.output_tokens,
                    u.dollars(u.usage.cost_usd),
                    u.dollars(u.usage.cached_cost_usd),
                    num(per[0], 1),
                    num(per[1], 0),
                    u.dollars(per[2]),
                    num(per[3], 1),
                    num(per[4], 0),
                    u.dollars(per[5]),
                ]
            )
            if u.unpriced_models:
                unpriced.append(f"{run.name} ({', '.join(u.unpriced_models)})")
            csv_rows.append(
                {
                    "run": run.name,
                    "benchmark": run.benchmark_name,
                    "problems": u.n_problems,
                    "certified": u.certified,
                    "calls": u.usage.calls,
                    "cached_calls": u.usage.cached_calls,
                    "failed_calls": u.usage.failed_calls,
                    "input_tokens": u.usage.input_tokens,
                    "output_tokens": u.usage.output_tokens,
                    "cost_usd": u.usage.cost_usd,
                    "cached_cost_usd": u.usage.cached_cost_usd,
                    "calls_per_problem": per[0],
                    "tokens_per_problem": per[1],
                    "usd_per_problem": per[2],
                    "calls_per_certified": per[3],
                    "tokens_per_certified": per[4],
                    "usd_per_certified": per[5],
                    # the dollar figures are lower bounds when a model had no price
                    "unpriced_models": " ".join(u.unpriced_models),
                    **{f"outcome_{k}": v for k, v in outcome_counts(run).items()},
                }
            )
        self.md += [
            "## LLM usage",
            "",
            'Totals over finished problems. "$ paid" excludes cache hits; cache hits are counted apart, with '
            "what they would have cost. Per certified plan = the run's whole spend divided by the number of "
            "certified plans.",
            "",
            md_table(headers, rows, ["l"] + ["r"] * (len(headers) - 1)),
            "",
        ]
        if unpriced:
            self.md += [
                "No price was known for the models of "
                + "; ".join(unpriced)
                + ": their calls count as $0, so those runs' dollar figures are lower bounds (>=). Set "
                "llm.price_input_per_mtok and llm.price_output_per_mtok (USD per million tokens) for such a model.",
                "",
            ]
        self._csv(self.out / "usage.csv", csv_rows)

    def details_section(self, runs: list[RunData]) -> None:
        headers = [
            "Run",
            "Directory",
            "Benchmark/split",
            "Critic source",
            "Model",
            "Generator",
            "Critics",
            "Backprompt strategy",
            "Templates",
            "Git",
            "Created",
            "Outcomes",
        ]
        rows: list[list[Any]] = []
        csv_rows: list[dict[str, Any]] = []
        for run in runs:
            outcomes = ", ".join(f"{k} {v}" for k, v in sorted(outcome_counts(run).items()))
            values = [
                run.name,
                str(run.path),
                f"{run.benchmark_name}/{run.split}",
                run.critic_source,
                run.model,
                generator_label(run),
                ", ".join(run.critics) or "-",
                strategy_label(run),
                templates_label(run),
                run.git_revision,
                run.info.created or "?",
                outcomes,
            ]
            rows.append(values)
            csv_rows.append(
                dict(zip([h.lower().replace(" ", "_").replace("/", "_") for h in headers], values, strict=True))
            )
        self.md += ["## Runs", "", md_table(headers, rows), ""]
        self._csv(self.out / "runs.csv", csv_rows)

    def notes_section(self, runs: list[RunData]) -> None:
        lines = [f"- {run.name}: {note}" for run in runs for note in run.notes]
        if lines:
            self.md += ["## Notes", "", *lines, ""]
            self.text += ["Notes:", *lines, ""]
        self.text += [f"Wrote {len(self.files) + 1} file(s) to {self.out}"]


def error_lines(runs: Sequence[RunData]) -> list[str]:
    """One line per run with errored problems: how many, and the first error's class and message."""
    lines: list[str] = []
    for run in runs:
        digest = run.errors()
        if digest["count"]:
            lines.append(
                f"{run.name}: {digest['count']} of {len(run.problem_ids)} problems ended in error; "
                f"first ({digest['problem_id']}): {digest['class']}: {digest['message']}"
            )
    return lines


def _fmt_metric(row: HeadlineRow, key: str, kind: str) -> str:
    """``37.5 (3/8) [12.5, 75.0]``: the rate, the counts behind it, and its interval."""
    iv = row.values.get(key)
    if iv is None or math.isnan(iv.value):
        return "n/a"
    if kind != "rate":
        return num(iv.value)
    text = pct(iv.value)
    kn = row.count_text(key)
    if kn:
        text += f" ({kn})"
    if not math.isnan(iv.low):
        text += f" [{pct(iv.low)}, {pct(iv.high)}]"
    return text


def _rate_kn(rate: float, n: int) -> str:
    """A 0/1 rate over n problems as ``37.5 (3/8)``."""
    if n == 0 or math.isnan(rate):
        return "n/a"
    return f"{pct(rate)} ({count_text(round(rate * n), n)})"


def _interval_kn(iv: Interval, n: int) -> str:
    """A rate over n problems with k/n and its interval: ``37.5 (3/8) [12.5, 75.0]``; n/a when n is 0."""
    if n == 0 or math.isnan(iv.value):
        return "n/a"
    text = _rate_kn(iv.value, n)
    return text + (f" [{pct(iv.low)}, {pct(iv.high)}]" if not math.isnan(iv.low) else "")


def _count_of(k: int, n: int) -> str:
    return f"{k}/{n}" if n else "-"


def _diff_text(iv: Interval) -> str:
    return f"{100 * iv.value:+.1f} [{100 * iv.low:+.1f}, {100 * iv.high:+.1f}]"


def _test_cells(t: PairedTest) -> list[Any]:
    """n, both rates with k/n, the difference with its interval, the discordant counts, McNemar's p."""
    return [
        t.n,
        _rate_kn(t.rate_a, t.n),
        _rate_kn(t.rate_b, t.n),
        _diff_text(t.difference),
        t.only_a,
        t.only_b,
        pvalue(t.mcnemar_p),
    ]


def _test_record(t: PairedTest, a: str, b: str) -> dict[str, Any]:
    """The CSV columns of one paired test, the two sides named ``a`` and ``b``."""
    return {
        "n": t.n,
        f"{a}_k": round(t.rate_a * t.n),
        f"{b}_k": round(t.rate_b * t.n),
        f"{a}_pct": 100 * t.rate_a,
        f"{b}_pct": 100 * t.rate_b,
        "diff_points": 100 * t.difference.value,
        "diff_ci_low": 100 * t.difference.low,
        "diff_ci_high": 100 * t.difference.high,
        f"{a}_only": t.only_a,
        f"{b}_only": t.only_b,
        "mcnemar_p": t.mcnemar_p,
    }


def _points_note(runs: list[RunData]) -> str:
    sizes = {len((r.evaluation or {}).get("per_problem") or []) for r in runs} - {0}
    if len(sizes) == 1:
        n = sizes.pop()
        return f" One problem is {100 / n:.2f} points of a macro rate (n = {n})."
    return ""


def _figure_subtitle(bench: str, runs: list[RunData]) -> str:
    splits = sorted({r.split for r in runs})
    sources = sorted({r.critic_source for r in runs})
    models = sorted({r.model for r in runs})
    revs = sorted({r.git_revision for r in runs})
    text = (
        f"{bench}/{','.join(splits)}; critic source: {', '.join(sources)}; "
        f"model: {', '.join(models[:3])}{', ...' if len(models) > 3 else ''}; git {', '.join(revs[:2])}"
    )
    return text


def _run_labels(runs: list[RunData]) -> list[str]:
    """One honest label line per run: what produced the numbers next to it."""
    return [
        f"- **{r.name}**: {method_label(r)}; {r.benchmark_name}/{r.split}; critics resolved: "
        f"{', '.join(r.critics) or 'none'} (source: {r.critic_source}); templates {templates_label(r)}; "
        f"git {r.git_revision}; {r.status}"
        for r in runs
    ]
