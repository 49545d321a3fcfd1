"""What the trace viewer shows, as plain JSON-ready data: a run's overview, its problem index, and one
problem's detail (iteration timeline, verdict matrix with flips, backprompts, plan diffs, LLM calls).

Everything here is data; nothing is HTML. The page (``viewer.js``) builds the DOM from it with text
nodes only, so a model's reply, plan or feedback can never become markup.

Texts repeat a lot in a trace (the backprompt of iteration i is the prompt of iteration i+1, each LLM
call repeats its messages, successive backprompts share the whole reference information), so a
problem's texts go into a :class:`TextTable`: identical strings are stored once, and a long string
that starts like an earlier one is stored as (earlier, shared prefix length, tail).
"""

from __future__ import annotations

import base64
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..benchmark import Benchmark
from ..reports.labels import (
    budget_label,
    critics_label,
    generator_label,
    method_label,
    short_labels,
    strategy_label,
    templates_label,
)
from ..reports.load import RunData
from ..reports.show import abstention_text, critic_state, plan_diff, plan_text, states, update_lines
from ..reports.stats import Interval
from ..reports.tables import (
    UsageRow,
    compare_runs,
    headline_rows,
    outcome_counts,
    same_problems,
    usage_row,
)
from ..types import IterationRecord, LLMCall, Message, ProblemResult, Usage

#: strings at least this long are compared with earlier long strings for a shared prefix
PREFIX_MIN = 512
#: how many earlier long strings are tried as a prefix base
PREFIX_CANDIDATES = 8
#: figures of a run directory shown on its overview (written by the run's own report)
FIGURES = ("critic_firing.png", "budget_curve.png")
FIGURE_MAX_BYTES = 2_000_000

#: IterationRecord / LLMCall fields the page renders by name; any other non-empty field is shown generically
_KNOWN_ITERATION = set(IterationRecord.model_fields)
_KNOWN_CALL = set(LLMCall.model_fields)
_KNOWN_PROBLEM = set(ProblemResult.model_fields)


def unknown_fields(model: BaseModel, known: set[str]) -> dict[str, Any]:
    """Non-empty fields the page does not render by name (tool calls, user turns, ...), as JSON data."""
    dumped = model.model_dump(mode="json")
    return {k: v for k, v in dumped.items() if k not in known and v not in (None, [], {}, "")}


class TextTable:
    """Interned texts of one problem: entry ``i`` is a string or ``[base, prefix_len, tail]``."""

    def __init__(self) -> None:
        self.entries: list[Any] = []
        self._index: dict[str, int] = {}
        self._long: list[tuple[int, str]] = []

    def add(self, text: str | None) -> int | None:
        if text is None:
            return None
        found = self._index.get(text)
        if found is not None:
            return found
        entry: Any = text
        if len(text) >= PREFIX_MIN:
            best, best_len = -1, 0
            for idx, other in self._long[-PREFIX_CANDIDATES:]:
                n = _common_prefix(text, other)
                if n > best_len:
                    best, best_len = idx, n
            if best_len >= PREFIX_MIN:
                entry = [best, best_len, text[best_len:]]
        idx = len(self.entries)
        self.entries.append(entry)
        self._index[text] = idx
        if len(text) >= PREFIX_MIN:
            self._long.append((idx, text))
        return idx


def _common_prefix(a: str, b: str) -> int:
    """Length of the common prefix of ``a`` and ``b`` (binary search over C-speed slice comparisons)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _num(x: float) -> float | None:
    return None if math.isnan(x) else x


def usage_dict(u: Usage) -> dict[str, Any]:
    return {
        "calls": u.calls,
        "failed": u.failed_calls,
        "cached": u.cached_calls,
        "tokens_in": u.input_tokens,
        "tokens_out": u.output_tokens,
        "cost": u.cost_usd,
        "cached_cost": u.cached_cost_usd,
    }


def run_usage(row: UsageRow) -> dict[str, Any]:
    """A run's usage for its page, with the models whose dollars were not counted (the cost then a lower bound)."""
    return {**usage_dict(row.usage), "unpriced": list(row.unpriced_models)}


def _messages(msgs: Sequence[Message], texts: TextTable) -> list[list[Any]]:
    return [[m.role, texts.add(m.content)] for m in msgs]


def _call(call: LLMCall, texts: TextTable) -> dict[str, Any]:
    return {
        "stage": call.stage,
        "model": call.model,
        "cached": call.cached,
        "finish_reason": call.finish_reason,
        "faults": [f.model_dump(mode="json") for f in call.faults],
        "usage": usage_dict(call.usage),
        "seconds": call.seconds,
        "messages": _messages(call.messages, texts),
        "reply": texts.add(call.reply),
        "extra": unknown_fields(call, _KNOWN_CALL),
    }


def critic_order(rec: ProblemResult, declared: Sequence[str]) -> list[str]:
    """Critics of a problem's verdict matrix: the run's declared critics first, then any others seen."""
    seen: list[str] = []
    for it in rec.iterations:
        seen.extend(states(it))
    return list(dict.fromkeys([*[c for c in declared if c in set(seen)], *seen]))


def problem_detail(rec: ProblemResult, declared: Sequence[str], bench: Benchmark | None) -> dict[str, Any]:
    """One problem's page: summary, verdict matrix with flips, and each iteration's texts and calls."""
    texts = TextTable()
    critics = critic_order(rec, declared)
    matrix: list[list[str]] = []
    flips: list[list[bool]] = []
    iterations: list[dict[str, Any]] = []
    prev_states: dict[str, str] | None = None
    prev_plan: Any = None
    prev_plan_at: int | None = None
    n_it = len(rec.iterations)
    for pos, it in enumerate(rec.iterations):
        now = states(it)
        matrix.append([now.get(c, "-") for c in critics])
        # against the last plan iteration: a question or a decline has no critic states to flip
        planned = it.act == "plan"
        flips.append(
            [planned and prev_states is not None and prev_states.get(c, "-") != now.get(c, "-") for c in critics]
        )
        prev_states = now if planned else prev_states
        diff: int | None = None
        diff_against: int | None = None
        same_as: int | None = None
        table = None
        if it.plan is not None:
            if prev_plan is not None and it.plan == prev_plan:
                same_as = prev_plan_at
            elif prev_plan is not None:
                diff = texts.add(plan_diff(prev_plan, it.plan, f"iteration {prev_plan_at}", f"iteration {it.index}"))
                diff_against = prev_plan_at
            prev_plan, prev_plan_at = it.plan, it.index
            if bench is not None:
                rendered = bench.plan_table(it.plan)
                if rendered is not None:
                    table = {"columns": list(rendered.columns), "rows": [list(r) for r in rendered.rows]}
        iterations.append(
            {
                "index": it.index,
                "prompt": _messages(it.prompt, texts),
                "reply": texts.add(it.raw_reply),
                "plan": it.plan,
                "plan_table": table,
                "plan_sha": it.plan_sha256,
                "repeat_of": it.repeat_of,
                "format_error": it.format_error,
                "verdicts": [
                    {
                        "critic": v.critic,
                        "group": v.group,
                        "state": critic_state(v),
                        "feedback": texts.add(v.feedback) if v.feedback else None,
                        "hint": v.hint,
                        "error": v.error,
                        "details": texts.add(plan_text(v.details)) if v.details else None,
                    }
                    for v in it.verdicts
                ],
                "gated": list(it.gated),
                "accepting": it.passed_count,
                "certified": it.all_accept,
                "backprompt": texts.add(it.backprompt),
                "sent": it.backprompt is not None and pos + 1 < n_it,
                "diff": diff,
                "diff_against": diff_against,
                "same_as": same_as,
                "calls": [_call(c, texts) for c in it.calls],
                "usage": usage_dict(it.usage),
                "timings": dict(it.timings),
                "turn": turn_data(it),
                "extra": unknown_fields(it, _KNOWN_ITERATION),
            }
        )
    return {
        "id": rec.problem_id,
        "outcome": rec.outcome.value,
        "stop_reason": rec.stop_reason,
        "best_iteration": rec.best_iteration,
        "explanation": rec.explanation,
        "error": rec.error,
        "seconds": rec.seconds,
        "usage": usage_dict(rec.usage),
        "metadata": rec.model_dump(mode="json", include={"metadata"})["metadata"],
        "extra": unknown_fields(rec, _KNOWN_PROBLEM),
        "dialogue": dialogue_facts(rec),
        "templates": dict(rec.templates),
        "critics": critics,
        "matrix": matrix,
        "flips": flips,
        "iterations": iterations,
        "texts": texts.entries,
    }


def turn_data(it: IterationRecord) -> dict[str, Any] | None:
    """A turn's question and answer, abstention, and the updates applied after it (None: a plain iteration)."""
    if it.act == "plan" and not it.updates:
        return None
    rejudged = None
    if it.rejudged is not None:
        rejudged = {
            "accepting": it.rejudged.passed_count,
            "of": len(it.rejudged.verdicts),
            "certified": it.rejudged.accepts,
            "failing": [f"{v.critic}: {v.feedback}" for v in it.rejudged.verdicts if not v.accepts],
        }
    answer = it.answer
    return {
        "act": it.act,
        "question": it.question,
        "answer": None
        if answer is None
        else {
            "text": answer.text,
            "user": answer.user,
            "unnecessary": answer.unnecessary,
            "revealed": list(answer.revealed),
        },
        "abstain_reason": it.abstain_reason,
        "updates": update_lines(it.updates),
        "rejudged": rejudged,
    }


def dialogue_facts(rec: ProblemResult) -> dict[str, str]:
    """The problem's multi-turn facts for the summary table (empty for a run without a user or updates)."""
    out: dict[str, str] = {}
    if rec.user is not None or rec.questions or rec.updates or rec.pending_updates:
        out["user"] = rec.user or "none"
        out["turns"] = f"{rec.turns}, questions {rec.questions} ({rec.unnecessary_questions} unnecessary)"
        out["updates"] = f"{len(rec.updates)} applied" + (
            f", {len(rec.pending_updates)} never reached" if rec.pending_updates else ""
        )
    if rec.solvable is not None:
        out["solvable (ground truth)"] = "yes" if rec.solvable else "no"
    if rec.abstention is not None:
        out["abstention"] = f"turn {rec.abstention.iteration}: {abstention_text(rec.abstention)}"
    return out


def problem_summary(rec: ProblemResult, critic_index: dict[str, int]) -> list[Any]:
    """One row of the problem list: [id, outcome, iterations, fired critic indexes, final failing, cost, level].

    The page appends where the problem's detail is: [chunk, position in the chunk].
    """
    fired: list[int] = []
    for it in rec.iterations:
        for name, state in states(it).items():
            if state in ("FAIL", "error"):
                fired.append(critic_index.setdefault(name, len(critic_index)))
    final: list[int] = []
    if rec.iterations:
        last = rec.iterations[-1]
        final = [critic_index[n] for n, s in states(last).items() if s in ("FAIL", "error") and n in critic_index]
    level = rec.metadata.get("level")
    return [
        rec.problem_id,
        rec.outcome.value,
        len(rec.iterations),
        sorted(set(fired)),
        sorted(set(final)),
        rec.usage.cost_usd,
        "" if level is None else str(level),
    ]


def _interval(iv: Interval) -> list[float | None]:
    return [_num(iv.value), _num(iv.low), _num(iv.high)]


def run_labels(run: RunData) -> dict[str, str]:
    """The configuration labels a reader needs to know what ran."""
    return {
        "run": run.run_id,
        "benchmark": f"{run.benchmark_name}/{run.split}",
        "method": method_label(run),
        "model": run.model,
        "generator": generator_label(run),
        "critics": critics_label(run),
        "critic source": run.critic_source,
        "backprompt": strategy_label(run),
        "budget": budget_label(run),
        "templates": templates_label(run),
        "git revision": run.git_revision,
        "created": run.info.created or "?",
    }


def metrics_section(run: RunData, n_resamples: int) -> dict[str, Any]:
    specs = run.metric_specs()
    if run.evaluation is None or not specs:
        return {"status": run.evaluation_status, "rows": []}
    row = headline_rows([run], n_resamples=n_resamples)[0]
    return {
        "status": run.evaluation_status,
        "rows": [
            [s.label, s.kind, _interval(row.values[s.key]), row.rules.get(s.key, ""), _counts(row.counts.get(s.key))]
            for s in specs
            if s.key in row.values
        ],
    }


def _counts(kn: tuple[float, float] | None) -> list[float] | None:
    """A rate's numerator and denominator (k/n: the problems it was computed over), None when unknown."""
    return None if kn is None else [kn[0], kn[1]]


def figures(run: RunData) -> list[list[str]]:
    """The run's PNG figures as data URIs (the page must open from disk with no other file)."""
    out = []
    for name in FIGURES:
        path = run.path / name
        if path.is_file() and path.stat().st_size <= FIGURE_MAX_BYTES:
            written = datetime.fromtimestamp(path.stat().st_mtime, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")
            uri = "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")
            out.append([name, uri, f"{name}, written into the run directory by its report at {written}"])
    return out


def _finished(run: RunData) -> int:
    """Problems that finished: recorded, less those recorded ``skipped`` (never started)."""
    return len(run.records) - len(run.skipped_ids)


def run_overview(run: RunData, *, n_resamples: int) -> dict[str, Any]:
    usage = usage_row(run)
    return {
        "kind": "run",
        "title": f"{run.run_id}: {run.benchmark_name}/{run.split}",
        "labels": run_labels(run),
        "outcomes": outcome_counts(run),
        "n_problems": len(run.problem_ids),
        "n_finished": _finished(run),
        "complete": run.complete,
        "status": run.status,
        "metrics": metrics_section(run, n_resamples),
        "usage": run_usage(usage),
        "certified": usage.certified,
        "figures": figures(run),
        "notes": list(run.notes),
    }


def sweep_overview(runs: Sequence[RunData], links: Sequence[str], root: Path, *, n_resamples: int) -> dict[str, Any]:
    """The sweep page: a Table 1 row per job (with a link to its page) and the paired comparisons."""
    rows = headline_rows(list(runs), n_resamples=n_resamples)
    shorts = short_labels(runs)
    jobs = []
    for run, row, link in zip(runs, rows, links, strict=True):
        specs = {s.key: s for s in run.metric_specs()}
        jobs.append(
            {
                "name": run.name,
                "link": link,
                "labels": run_labels(run),
                # what sets this job apart from the others ("" when nothing does)
                "differs": shorts[run.name].removeprefix(f"{run.name}: ") if shorts[run.name] != run.name else "",
                "outcomes": outcome_counts(run),
                "n_problems": len(run.problem_ids),
                "n_finished": _finished(run),
                "status": run.status,
                "metrics": {specs[k].label if k in specs else k: _interval(iv) for k, iv in row.values.items()},
                "counts": {specs[k].label if k in specs else k: _counts(kn) for k, kn in row.counts.items()},
                # a rate is shown in %, a count or a value as it is
                "kinds": {
                    specs[k].label if k in specs else k: specs[k].kind if k in specs else "rate" for k in row.values
                },
                "evaluation": run.evaluation_status,
                "usage": run_usage(usage_row(run)),
                "notes": list(run.notes),
            }
        )
    comparisons: list[dict[str, Any]] = []
    by_bench: dict[str, list[RunData]] = {}
    for run in runs:
        by_bench.setdefault(run.benchmark_name, []).append(run)
    for group in by_bench.values():
        base = group[0]
        # what a comparison's per-problem 'passed' is: the benchmark's primary metric (as in the report)
        key = base.primary_metric() or "passed"
        metric = next((s.label for s in base.metric_specs() if s.key == key), key)
        for other in group[1:]:
            cmp = compare_runs(base, other, n_resamples=n_resamples) if same_problems(base, other) else None
            if cmp is None:
                comparisons.append(
                    {"a": base.name, "b": other.name, "metric": metric, "note": "not the same evaluated problems"}
                )
                continue
            t = cmp.test
            comparisons.append(
                {
                    "a": base.name,
                    "b": other.name,
                    "metric": metric,
                    "n": t.n,
                    "rate_a": t.rate_a,
                    "rate_b": t.rate_b,
                    "only_a": t.only_a,
                    "only_b": t.only_b,
                    "difference": _interval(t.difference),
                    "mcnemar_p": _num(t.mcnemar_p),
                    "bootstrap_p": _num(t.bootstrap_p),
                    "note": cmp.note,
                }
            )
    return {"kind": "sweep", "title": f"sweep {root}", "jobs": jobs, "comparisons": comparisons}
