"""pandas DataFrames at four grains, built by streaming each run's records.jsonl.

Every frame starts with the run's label columns (:data:`~modulo.analysis.runs.LABEL_COLUMNS`) and one
``cfg.<key>`` column for each configuration key that differs between the loaded runs (a sweep's
varied overrides), so ``df.groupby(["critics", "strategy"])`` works across a sweep. Columns are typed:
categoricals for labels and small vocabularies, nullable integers (``Int64``) and booleans
(``boolean``) where a value can be missing, ``string`` for text.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from ..types import Outcome
from .records import iter_records
from .runs import LABEL_COLUMNS, RunMeta, load_metas

Row = dict[str, Any]

#: iteration and verdict status of a critic, in this order
STATUSES = ("pass", "fail", "n/a", "error", "gated")
_CATEGORY = (
    *(c for c in LABEL_COLUMNS if c not in ("max_iterations", "sample")),
    "outcome",
    "stop_reason",
    "act",
    "evaluation",
    "critic",
    "group",
    "status",
    "feedback_level",
    "stage",
    "model_called",
    "finish_reason",
)
_INT = (
    "max_iterations",
    "sample",
    "best_iteration",
    "iterations",
    "iteration",
    "call",
    "calls",
    "failed_calls",
    "cached_calls",
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "n_verdicts",
    "n_rejected",
    "questions",
    "unnecessary_questions",
    "updates",
    "n_gated",
    "flips",
    "repeat_of",
    "faults",
    "attempts",
    "reply_chars",
    "backprompt_chars",
)
_BOOL = (
    "certified",
    "solvable",
    "abstained",
    "abstention_verified",
    "has_plan",
    "all_accept",
    "passed",
    "applicable",
    "accepts",
    "cached",
)
_STRING = (
    "run_dir",
    "problem_id",
    "error",
    "explanation",
    "format_error",
    "plan_sha256",
    "feedback",
    "hint",
    "details",
    "fault_kinds",
    "fault_messages",
)


def _usage(value: Any) -> Row:
    u = value if isinstance(value, dict) else {}
    inp = int(u.get("input_tokens") or 0)
    out = int(u.get("output_tokens") or 0)
    return {
        "calls": int(u.get("calls") or 0),
        "failed_calls": int(u.get("failed_calls") or 0),
        "cached_calls": int(u.get("cached_calls") or 0),
        "input_tokens": inp,
        "output_tokens": out,
        "total_tokens": inp + out,
        "cost_usd": float(u.get("cost_usd") or 0.0),
        "cached_cost_usd": float(u.get("cached_cost_usd") or 0.0),
    }


def _scalar(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return json.dumps(value, sort_keys=True, default=str)


def verdict_status(verdict: dict[str, Any]) -> str:
    if verdict.get("error"):
        return "error"
    if verdict.get("applicable", True) is False:
        return "n/a"
    return "pass" if verdict.get("passed") else "fail"


def verdict_accepts(verdict: dict[str, Any]) -> bool:
    return not verdict.get("error") and (bool(verdict.get("passed")) or verdict.get("applicable", True) is False)


def _feedback_level(meta: RunMeta, critic: str, verdict: dict[str, Any]) -> str | None:
    """The verdict's feedback level as recorded (the verdict's own field, else the run's critic arguments)."""
    for key in ("feedback_level", "level"):
        if isinstance(verdict.get(key), str):
            return str(verdict[key])
    own = meta.info.critic_args.get(critic, {})
    for key in ("feedback", "feedback_level"):
        if isinstance(own.get(key), str):
            return str(own[key])
    return meta.info.critic_options.feedback


# -- row builders (one record in, rows out) -------------------------------------------------------------


def problem_rows(meta: RunMeta, record: dict[str, Any], evaluated: dict[str, dict[str, Any]]) -> Iterator[Row]:
    iterations = record.get("iterations") or []
    row: Row = {
        "problem_id": str(record.get("problem_id")),
        "outcome": record.get("outcome"),
        "stop_reason": record.get("stop_reason"),
        "certified": record.get("outcome") == "certified",
        "best_iteration": record.get("best_iteration"),
        "iterations": len(iterations),
        "has_plan": record.get("best_plan") is not None,
        "seconds": float(record.get("seconds") or 0.0),
        **_usage(record.get("usage")),
        "error": record.get("error"),
        "explanation": record.get("explanation"),
        "evaluation": "recorded" if meta.evaluation is not None else "missing",
        **_dialogue(record, iterations),
    }
    metadata = record.get("metadata")
    if isinstance(metadata, dict):
        for key, value in metadata.items():
            row[f"meta.{key}"] = _scalar(value)
    for key, value in evaluated.get(row["problem_id"], {}).items():
        if key != "problem_id":
            row[f"eval.{key}"] = _scalar(value)
    yield row


def _dialogue(record: dict[str, Any], iterations: list[Any]) -> Row:
    """A problem's multi-turn columns: questions (unnecessary ones), updates, ground truth, abstention."""
    its = [it for it in iterations if isinstance(it, dict)]
    answers = [it.get("answer") for it in its if it.get("act") == "question"]
    abstention = record.get("abstention") if isinstance(record.get("abstention"), dict) else None
    return {
        "questions": len(answers),
        "unnecessary_questions": sum(1 for a in answers if isinstance(a, dict) and a.get("unnecessary")),
        "updates": sum(len(it.get("updates") or []) for it in its),
        "solvable": record.get("solvable"),
        "abstained": record.get("outcome") == "abstained",
        "abstention_verified": abstention.get("verified") if abstention else None,
    }


def iteration_rows(meta: RunMeta, record: dict[str, Any], evaluated: dict[str, dict[str, Any]]) -> Iterator[Row]:
    previous: dict[str, str] | None = None
    pid = str(record.get("problem_id"))
    for it in record.get("iterations") or []:
        verdicts = [v for v in it.get("verdicts") or [] if isinstance(v, dict)]
        gated = [str(g) for g in it.get("gated") or []]
        status = {str(v.get("critic") or ""): verdict_status(v) for v in verdicts}
        status.update({g: "gated" for g in gated})
        planned = it.get("act", "plan") == "plan"  # a question or a decline: no critic state, no flip
        flips = (
            None
            if previous is None or not planned
            else sum(1 for c, s in status.items() if c in previous and previous[c] != s)
        )
        previous = status if planned else previous
        plan = it.get("plan")
        accepted = all(verdict_accepts(v) for v in verdicts)
        row: Row = {
            "problem_id": pid,
            "iteration": it.get("index"),
            "act": it.get("act", "plan"),
            "has_plan": plan is not None,
            "format_error": it.get("format_error"),
            "all_accept": plan is not None and not gated and accepted,
            "n_verdicts": len(verdicts),
            "n_rejected": sum(1 for v in verdicts if not verdict_accepts(v)),
            "n_gated": len(gated),
            "flips": flips,
            "repeat_of": it.get("repeat_of"),
            "plan_sha256": it.get("plan_sha256"),
            "backprompt_chars": len(it["backprompt"]) if isinstance(it.get("backprompt"), str) else None,
            **_usage(it.get("usage")),
        }
        timings = it.get("timings")
        if isinstance(timings, dict):
            for key, value in timings.items():
                row[f"time.{key}"] = float(value) if isinstance(value, int | float) else None
        for critic, state in status.items():
            if critic:
                row[f"critic.{critic}"] = state
        yield row


def verdict_rows(meta: RunMeta, record: dict[str, Any], evaluated: dict[str, dict[str, Any]]) -> Iterator[Row]:
    pid = str(record.get("problem_id"))
    for it in record.get("iterations") or []:
        for v in it.get("verdicts") or []:
            if not isinstance(v, dict):
                continue
            critic = str(v.get("critic") or "")
            details = v.get("details")
            yield {
                "problem_id": pid,
                "iteration": it.get("index"),
                "critic": critic,
                "group": v.get("group") or None,
                "status": verdict_status(v),
                "passed": bool(v.get("passed")),
                "applicable": v.get("applicable", True) is not False,
                "accepts": verdict_accepts(v),
                "feedback_level": _feedback_level(meta, critic, v),
                "feedback": v.get("feedback"),
                "hint": v.get("hint"),
                "details": json.dumps(details, sort_keys=True, default=str) if details else None,
                "error": v.get("error"),
            }
        for gated in it.get("gated") or []:
            yield {
                "problem_id": pid,
                "iteration": it.get("index"),
                "critic": str(gated),
                "group": None,
                "status": "gated",
                "passed": None,
                "applicable": None,
                "accepts": None,
                "feedback_level": None,
                "feedback": None,
                "hint": None,
                "details": None,
                "error": None,
            }


def call_rows(meta: RunMeta, record: dict[str, Any], evaluated: dict[str, dict[str, Any]]) -> Iterator[Row]:
    pid = str(record.get("problem_id"))
    for it in record.get("iterations") or []:
        for n, call in enumerate(it.get("calls") or []):
            if not isinstance(call, dict):
                continue
            faults = [f for f in call.get("faults") or [] if isinstance(f, dict)]
            reply = call.get("reply")
            yield {
                "problem_id": pid,
                "iteration": it.get("index"),
                "call": n,
                "stage": call.get("stage"),
                "model_called": call.get("model") or None,
                "cached": bool(call.get("cached")),
                "finish_reason": call.get("finish_reason"),
                "seconds": float(call.get("seconds") or 0.0),
                "reply_chars": len(reply) if isinstance(reply, str) else None,
                "faults": len(faults),
                "attempts": max([int(f.get("attempt") or 0) for f in faults], default=0) + 1 if faults else 1,
                "fault_kinds": ",".join(str(f.get("kind")) for f in faults) or None,
                "fault_messages": " | ".join(str(f.get("message")) for f in faults) or None,
                **_usage(call.get("usage")),
            }


RowBuilder = Callable[[RunMeta, dict[str, Any], dict[str, dict[str, Any]]], Iterator[Row]]
GRAINS: dict[str, RowBuilder] = {
    "problems": problem_rows,
    "iterations": iteration_rows,
    "verdicts": verdict_rows,
    "calls": call_rows,
}


# -- frames ------------------------------------------------------------------------------------------------


def _typed(df: pd.DataFrame) -> pd.DataFrame:
    for col in df.columns:
        name = str(col)
        if name in _CATEGORY or name.startswith("critic.") or name.startswith("cfg."):
            df[col] = df[col].astype("category")
        elif name in _INT:
            df[col] = df[col].astype("Int64")
        elif name in _BOOL:
            df[col] = df[col].astype("boolean")
        elif name in _STRING:
            df[col] = df[col].astype("string")
        elif name.startswith(("meta.", "eval.")):
            df[col] = _infer(df[col])
    for col in df.columns:
        if str(col).startswith("critic."):
            df[col] = df[col].cat.set_categories(list(STATUSES))
    return df


def _infer(series: pd.Series) -> pd.Series:
    values = [v for v in series.tolist() if v is not None and not (isinstance(v, float) and pd.isna(v))]
    if values and all(isinstance(v, bool) for v in values):
        return series.astype("boolean")
    if values and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return series.astype("Int64")
    if values and all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return series.astype("Float64")
    return series.astype("string")


def varying_params(metas: Iterable[RunMeta]) -> list[str]:
    """Configuration keys whose values differ between the runs (a sweep's varied overrides)."""
    params = [m.params() for m in metas]
    if len(params) < 2:
        return []
    keys = list(dict.fromkeys(k for p in params for k in p))
    return [k for k in keys if len({json.dumps(p.get(k), default=str) for p in params}) > 1]


def build_frame(metas: list[RunMeta], grain: str) -> pd.DataFrame:
    """One grain over all runs: label columns, varied configuration, then the grain's own columns."""
    builder = GRAINS[grain]
    varying = varying_params(metas)
    columns: dict[str, list[Any]] = {}
    n = 0

    def add(row: Row) -> None:
        nonlocal n
        for key, value in row.items():
            col = columns.get(key)
            if col is None:
                col = columns[key] = [None] * n
            col.append(value)
        n += 1
        for col in columns.values():
            if len(col) < n:
                col.append(None)

    for meta in metas:
        evaluated = {
            str(r.get("problem_id")): r
            for r in (meta.evaluation or {}).get("per_problem") or []
            if isinstance(r, dict) and grain == "problems"
        }
        head: Row = {**meta.labels, "run_dir": str(meta.path)}
        params = meta.params()
        head.update({f"cfg.{k}": _scalar(params.get(k)) for k in varying})
        for record in iter_records(meta.path, meta.notes):
            for row in builder(meta, record, evaluated):
                add({**head, **row})
    if not columns:
        cols = [*LABEL_COLUMNS, "run_dir", *(f"cfg.{k}" for k in varying)]
        return pd.DataFrame({c: pd.Series([], dtype="object") for c in cols}).pipe(_typed)
    return _typed(pd.DataFrame(columns))


class Results:
    """Runs loaded for analysis. Each frame is built on demand by streaming the records, then kept.

    ``results.problems()``, ``.iterations()``, ``.verdicts()``, ``.calls()``: the four grains;
    ``results.runs()``: one row per run with its labels, outcome counts, metrics and full configuration.
    ``results.notes``: what a reader should know (skipped lines, runs without evaluation).
    """

    def __init__(self, metas: list[RunMeta]) -> None:
        self.metas = metas
        self._frames: dict[str, pd.DataFrame] = {}

    def __len__(self) -> int:
        return len(self.metas)

    def __repr__(self) -> str:
        return f"<Results: {len(self.metas)} run(s): {', '.join(m.name for m in self.metas[:4])}>"

    @property
    def notes(self) -> list[str]:
        return [f"{m.name}: {note}" for m in self.metas for note in dict.fromkeys(m.notes)]

    def frame(self, grain: str) -> pd.DataFrame:
        if grain == "runs":
            return self.runs()
        if grain not in GRAINS:
            raise KeyError(f"unknown grain {grain!r}; grains: runs, {', '.join(GRAINS)}")
        if grain not in self._frames:
            self._frames[grain] = build_frame(self.metas, grain)
        return self._frames[grain]

    def problems(self) -> pd.DataFrame:
        """One row per finished problem: outcome, best iteration, usage, cost, metadata, the evaluator's columns."""
        return self.frame("problems")

    def iterations(self) -> pd.DataFrame:
        """One row per iteration: the status of every critic (``critic.<name>``), flips, tokens, cache hits, timings."""
        return self.frame("iterations")

    def verdicts(self) -> pd.DataFrame:
        """One row per critic per iteration (gated critics included, status ``gated``)."""
        return self.frame("verdicts")

    def calls(self) -> pd.DataFrame:
        """One row per model call: stage, model, cached, faults, tokens, cost, seconds."""
        return self.frame("calls")

    def budget(self, *, evaluate: bool = True) -> pd.DataFrame:
        """One row per run per iteration budget k: ``certified`` and the evaluator's ``pass_rate`` at k.

        ``evaluate=False`` skips the evaluator (``pass_rate`` left missing); see :mod:`modulo.analysis.budget`.
        """
        key = "budget" if evaluate else "budget-certified"
        if key not in self._frames:
            from .budget import budget_frame

            self._frames[key] = budget_frame(self.metas, evaluate=evaluate)
        return self._frames[key]

    def runs(self) -> pd.DataFrame:
        """One row per run: labels, problem counts, outcome counts, the benchmark's metrics, configuration."""
        if "runs" in self._frames:
            return self._frames["runs"]
        rows: list[Row] = []
        for meta in self.metas:
            summary = meta.summary or {}
            row: Row = {**meta.labels, "run_dir": str(meta.path), "problems": len(meta.problem_ids)}
            raw_counts = summary.get("counts")
            counts: dict[str, Any] = raw_counts if isinstance(raw_counts, dict) else {}
            row["finished"] = summary.get("finished")
            if not summary:  # a run that did not finish (killed, or still running): count what it recorded
                counts = _recorded_outcomes(meta)
                row["finished"] = sum(counts.values())
            # models whose calls counted $0 for want of a price (the run's dollar columns then lower bounds)
            row["unpriced_models"] = " ".join(str(m) for m in summary.get("unpriced_models") or [])
            for outcome in (o.value for o in Outcome):
                row[f"n_{outcome}"] = counts.get(outcome, 0)
            row["evaluation"] = "recorded" if meta.evaluation is not None else "missing"
            for key, value in ((meta.evaluation or {}).get("metrics") or {}).items():
                row[f"metric.{key}"] = _scalar(value)
            row["git_revision"] = meta.info.git_revision
            for key, value in meta.params().items():
                row[f"cfg.{key}"] = _scalar(value)
            rows.append(row)
        df = pd.DataFrame(rows)
        for col in df.columns:
            name = str(col)
            if name.startswith("n_") or name in ("problems", "finished"):
                df[col] = df[col].astype("Int64")
            elif name in _INT:
                df[col] = df[col].astype("Int64")
            elif name in _CATEGORY:
                df[col] = df[col].astype("category")
            elif name.startswith("cfg."):
                df[col] = _infer(df[col])
        self._frames["runs"] = df
        return df


def _recorded_outcomes(meta: RunMeta) -> dict[str, int]:
    """Outcome counts of the problems a run recorded (the last record of each), streamed from its records."""
    counts: dict[str, int] = {}
    for record in iter_records(meta.path, meta.notes):
        outcome = str(record.get("outcome"))
        counts[outcome] = counts.get(outcome, 0) + 1
    meta.notes.append("no summary.json (the run did not finish): its outcome counts are those of its records")
    return counts


def load(*paths: str | Path | Iterable[str | Path]) -> Results:
    """Load one run directory, a sweep root, or several of either (a list works too)."""
    flat: list[str | Path] = []
    for p in paths:
        if isinstance(p, str | Path):
            flat.append(p)
        else:
            flat.extend(p)
    if not flat:
        raise TypeError("load() needs at least one run directory or sweep root")
    return Results(load_metas(flat))
