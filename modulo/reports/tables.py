"""The report's tables, computed from loaded runs (no formatting here beyond short labels).

* :func:`headline_rows`: one row per run in the layout of the LLM-Modulo paper's Table 1;
* :func:`constraint_rows`: per-constraint pass rates by level (the TravelPlanner paper's Table 4);
* :func:`usage_row`: LLM calls, tokens and dollars per problem and per certified plan;
* :func:`firing_counts`: how often each critic failed at each iteration (Figure 2's data);
* :func:`compare_runs`: paired tests between runs over the same problems.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..errors import ModuloError
from ..types import IterationRecord, Outcome, Usage
from .budget import plan_at_budget
from .load import RunData, evaluate_finals, outcome_of
from .markdown import num
from .metrics import (
    Parts,
    constraint_info,
    metric_parts,
    order_levels,
    passed_vector,
    problem_levels,
)
from .stats import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    Interval,
    PairedTest,
    bootstrap_ratios,
    paired_test,
)

NAN = float("nan")

# -- Table 1 ---------------------------------------------------------------------------------------


@dataclass
class HeadlineRow:
    run: RunData
    #: metric key -> value with 95% CI (value NaN: not available)
    values: dict[str, Interval] = field(default_factory=dict)
    #: metric key -> how the interval was computed, or why there is none
    rules: dict[str, str] = field(default_factory=dict)
    #: metric key -> (k, n): the counts behind a rate (passed, out of how many counted)
    counts: dict[str, tuple[float, float]] = field(default_factory=dict)

    def count_text(self, key: str) -> str:
        """``3/8`` for a rate whose parts are whole counts, else ``""``."""
        kn = self.counts.get(key)
        if kn is None:
            return ""
        return count_text(*kn)


def count_text(k: float, n: float) -> str:
    """``k/n`` when both are whole numbers (``""`` otherwise: a weighted rate has no single count)."""
    if float(k).is_integer() and float(n).is_integer():
        return f"{int(k)}/{int(n)}"
    return ""


def headline_rows(
    runs: Sequence[RunData], *, n_resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED
) -> list[HeadlineRow]:
    """Table 1: the benchmark's declared metrics per run, with bootstrap CIs over problems."""
    out: list[HeadlineRow] = []
    for run in runs:
        row = HeadlineRow(run)
        evaluation = run.evaluation or {}
        metrics = evaluation.get("metrics") or {}
        per_problem = evaluation.get("per_problem") or []
        specs = run.metric_specs()
        keys = [s.key for s in specs]
        info = constraint_info(run, keys)
        # whether each row's problem delivered a plan (a byte each: the plans themselves are not kept)
        delivered = bytearray(_delivered(run, str(r.get("problem_id"))) for r in per_problem)
        found: dict[str, Parts] = {}
        for spec in specs:
            raw = metrics.get(spec.key)
            if not isinstance(raw, int | float) or isinstance(raw, bool):
                row.values[spec.key] = Interval(NAN, NAN, NAN)
                row.rules[spec.key] = "not in the evaluation"
                continue
            value = float(raw)
            if spec.kind != "rate":
                row.values[spec.key] = Interval(value, NAN, NAN)
                row.rules[spec.key] = f"{spec.kind}: no interval"
                continue
            parts = metric_parts(
                spec.key,
                spec.label,
                value,
                per_problem,
                groups=info.groups,
                delivered_flags=delivered,
                primary=run.primary_metric(),
                metric_keys=keys,
                columns=info.columns,
            )
            if parts is None:
                row.values[spec.key] = Interval(value, NAN, NAN)
                row.rules[spec.key] = "no interval: the metric could not be reproduced from per-problem rows"
                continue
            found[spec.key] = parts
            row.rules[spec.key] = parts.rule
            row.counts[spec.key] = (float(parts.num.sum()), float(parts.den.sum()))
        intervals = bootstrap_ratios([(p.num, p.den) for p in found.values()], n_resamples=n_resamples, seed=seed)
        row.values.update(zip(found, intervals, strict=True))
        row.values = {s.key: row.values[s.key] for s in specs}
        out.append(row)
    return out


def _delivered(run: RunData, problem_id: str) -> bool:
    return problem_id in run.records and run.records[problem_id].best_plan is not None


# -- Table 4 ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConstraintCell:
    passed: int
    applicable: int

    @property
    def rate(self) -> float:
        return self.passed / self.applicable if self.applicable else NAN


@dataclass
class ConstraintTable:
    run: RunData
    levels: list[str]
    #: (constraint, group, {level or "all": cell})
    rows: list[tuple[str, str, dict[str, ConstraintCell]]]
    #: constraint -> display name (the paper's name where the evaluation gives one)
    names: dict[str, str] = field(default_factory=dict)


def constraint_rows(run: RunData) -> ConstraintTable | None:
    """Pass rate of every constraint per level (True/False counted, None = not applicable, left out)."""
    evaluation = run.evaluation or {}
    per_problem = evaluation.get("per_problem") or []
    if not per_problem:
        return None
    info = constraint_info(run, [s.key for s in run.metric_specs()])
    columns, groups = info.columns, info.groups
    if not columns:
        return None
    levels = problem_levels(run, per_problem)
    ordered = order_levels(levels)
    table = ConstraintTable(run, ordered if ordered != ["all"] else [], [], dict(info.names))
    # group order: format, commonsense, hard, then others; constraints keep their first-seen order
    rank = {"format": 0, "commonsense": 1, "hard": 2}
    columns = sorted(columns, key=lambda c: (rank.get(groups.get(c, ""), 3), groups.get(c, "")))
    for col in columns:
        cells: dict[str, ConstraintCell] = {}
        for level in [*table.levels, "all"]:
            vals = [row.get(col) for row, lv in zip(per_problem, levels, strict=True) if level == "all" or lv == level]
            cells[level] = ConstraintCell(sum(v is True for v in vals), sum(v is not None for v in vals))
        table.rows.append((col, groups.get(col, ""), cells))
    return table


# -- usage ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class UsageRow:
    run: RunData
    n_problems: int
    certified: int
    usage: Usage
    #: models whose calls counted as $0 for want of a price (summary.json's ``unpriced_models``): the
    #: dollar figures are then lower bounds
    unpriced_models: list[str] = field(default_factory=list)

    def per(self, total: float, count: int) -> float:
        return total / count if count else NAN

    def dollars(self, value: float, digits: int = 4) -> str:
        """A dollar figure of this run as a table shows it: a lower bound (``>=``) when some model had no price."""
        text = num(value, digits)
        return f">={text}" if self.unpriced_models and text != "n/a" else text


def usage_row(run: RunData) -> UsageRow:
    """Total usage of the run's finished problems (from the records, so a killed run counts too), the attempts
    a retry replaced included, as the run's summary counts them (:attr:`RunData.replaced_usage`); problems
    recorded ``skipped`` never started and are not counted among them (errored ones spent, and are)."""
    total = run.replaced_usage
    certified = 0
    finished = 0
    for rec in run.records.values():  # one pass: each record read once
        total = total + rec.usage
        certified += rec.certified
        finished += rec.outcome != Outcome.SKIPPED
    unpriced = [str(m) for m in (run.summary or {}).get("unpriced_models") or []]
    return UsageRow(run, finished, certified, total, unpriced)


# -- critic firing ----------------------------------------------------------------------------------


@dataclass
class Firing:
    run: RunData
    #: critic -> number of problems whose plan that critic rejected, at iteration 0, 1, ...
    counts: dict[str, list[int]]
    #: problems whose plan was critiqued at iteration 0, 1, ...
    active: list[int]
    groups: dict[str, str]
    #: iterations that never reached the critics (the model call failed), at iteration 0, 1, ...
    errored: list[int] = field(default_factory=list)
    #: verdicts of critics that crashed (recorded, not rejections), per critic
    crashed: dict[str, int] = field(default_factory=dict)


def iteration_errored(it: IterationRecord) -> bool:
    """An iteration that never reached the critics: no plan and no verdict (the model call failed).

    The loop always records a ``format`` verdict for a reply it could not read, so an iteration with
    no verdict at all is an error, not a rejection.
    """
    return it.plan is None and not it.verdicts


def firing_counts(run: RunData) -> Firing:
    """How often each critic fired (rejected a plan) at each iteration, over all finished problems.

    An iteration whose reply could not be read as a plan counts as a firing of the ``format`` critic
    even when no format verdict was recorded for it. Iterations that errored before the critics ran,
    and verdicts of critics that crashed, are counted apart (``errored``, ``crashed``), never as
    rejections; turns that asked the user or declined proposed no plan and are neither.
    """
    length = run.longest_trace()
    active = [0] * length
    errored = [0] * length
    crashed: dict[str, int] = {}
    counts: dict[str, list[int]] = {}
    groups: dict[str, str] = {}
    for name in run.critics:
        counts.setdefault(name, [0] * length)
    for rec in run.records.values():
        for pos, it in enumerate(rec.iterations):
            if it.act != "plan":  # a question or a decline: no plan was proposed, none was critiqued
                continue
            if iteration_errored(it):
                errored[pos] += 1
                continue
            active[pos] += 1
            fired: set[str] = set()
            for v in it.verdicts:
                if v.critic:
                    groups.setdefault(v.critic, v.group)
                    counts.setdefault(v.critic, [0] * length)
                if v.error is not None:
                    crashed[v.critic] = crashed.get(v.critic, 0) + 1
                elif not v.accepts and v.critic:
                    fired.add(v.critic)
            if (it.plan is None or it.format_error) and not any(groups.get(c) == "format" for c in fired):
                fired.add("format")
                counts.setdefault("format", [0] * length)
                groups.setdefault("format", "format")
            for name in fired:
                counts[name][pos] += 1
    return Firing(run, counts, active, groups, errored, crashed)


# -- paired comparisons ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Comparison:
    a: RunData
    b: RunData
    ids: list[str]
    test: PairedTest
    note: str = ""


def common_ids(a: RunData, b: RunData) -> list[str]:
    rows_b = {str(r.get("problem_id")) for r in (b.evaluation or {}).get("per_problem") or []}
    return [
        str(r.get("problem_id"))
        for r in (a.evaluation or {}).get("per_problem") or []
        if str(r.get("problem_id")) in rows_b
    ]


def compare_runs(
    a: RunData, b: RunData, *, n_resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED
) -> Comparison | None:
    """B against A on the problems both evaluated, using each problem's ``passed``; None if not possible."""
    ids = common_ids(a, b)
    if not ids:
        return None
    va = passed_vector((a.evaluation or {}).get("per_problem") or [], ids)
    vb = passed_vector((b.evaluation or {}).get("per_problem") or [], ids)
    if va is None or vb is None:
        return None
    test = paired_test(va, vb, n_resamples=n_resamples, seed=seed)
    n_a = len((a.evaluation or {}).get("per_problem") or [])
    n_b = len((b.evaluation or {}).get("per_problem") or [])
    note = "" if n_a == n_b == len(ids) else f"on the {len(ids)} problems both runs evaluated (of {n_a} and {n_b})"
    return Comparison(a, b, ids, test, note)


def first_vs_final(
    run: RunData, *, n_resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED
) -> PairedTest | None:
    """The run's first plans (budget 1: Direct, no backprompt) against its final plans, paired per problem.

    Both are scored by the benchmark's evaluator on the run's scored problems (errors left out); the
    outcome is each problem's ``passed``. A problem whose first plan is its delivered plan (and that did
    not abstain) keeps the run's evaluation of that plan (the same plan, scored once); only the others'
    first plans are scored. None when the run has one iteration, no evaluation, or the benchmark is not
    available here.
    """
    if (run.max_iterations or 0) < 2 or not run.evaluation:
        return None
    rows = run.evaluation.get("per_problem") or []
    ids = [str(r.get("problem_id")) for r in rows if str(r.get("problem_id")) in run.records]
    final = passed_vector(rows, ids)
    bench = run.benchmark_or_none()
    if not ids or final is None or bench is None:
        return None
    first = final.copy()
    changed = [
        (pos, plan)
        for pos, plan in enumerate(plan_at_budget(run.records[i], 1) for i in ids)
        if run.records[ids[pos]].outcome is Outcome.ABSTAINED or plan != run.records[ids[pos]].best_plan
    ]
    if changed:
        others = [ids[pos] for pos, _ in changed]
        try:
            firsts = [plan for _, plan in changed]
            result = evaluate_finals(bench, run.problems(others), firsts, run.declines(others, budget=1))
        except (ModuloError, NotImplementedError):
            return None
        scored = passed_vector(result.per_problem, others)
        if scored is None:
            return None
        first[[pos for pos, _ in changed]] = scored
    return paired_test(first, final, n_resamples=n_resamples, seed=seed)


def same_problems(a: RunData, b: RunData) -> bool:
    ids_a = [str(r.get("problem_id")) for r in (a.evaluation or {}).get("per_problem") or []]
    ids_b = [str(r.get("problem_id")) for r in (b.evaluation or {}).get("per_problem") or []]
    return bool(ids_a) and sorted(ids_a) == sorted(ids_b) and a.benchmark_name == b.benchmark_name


def outcome_counts(run: RunData) -> dict[str, int]:
    counts: dict[str, int] = {}
    for pid in run.records:  # the outcomes, without reading the records
        value = outcome_of(run.records, pid).value
        counts[value] = counts.get(value, 0) + 1
    return counts
