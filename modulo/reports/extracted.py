"""LLM-extracted critics against the built-ins they stand for, in ``modulo report RUN_A RUN_B``.

A run that used extracted critics records, per critic, the built-in it stands for (``run.json``
``critic_provenance[NAME].reference``, from the gate report). For each such critic:

- **agreement**: on every plan the extracted critic judged in its run, the built-in is run again here
  (in-process: it is trusted; the extracted critic is never re-run outside the sandbox, its recorded
  verdicts are used) and the two verdicts are compared. "extracted accepts, built-in rejects" counts the
  permissive disagreements, the ones that inflate pass rates;
- **pass-rate difference**: the share of checked plans the extracted critic accepted in its run against
  the share the built-in accepted in each other run of the report that ran it (on that run's own plans).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..binding import bind_critics
from ..errors import CriticError, ModuloError
from .load import RECORDS_FILE, RunData, iter_records


def extracted_references(run: RunData) -> dict[str, str]:
    """Extracted critic -> the built-in it stands for, for the critics of ``run`` that record one."""
    out = {}
    for name, info in run.info.critic_provenance.items():
        if info.get("reference") and name in run.critics:
            out[name] = str(info["reference"])
    return out


def pass_rate(run: RunData, critic: str) -> tuple[int, int]:
    """(plans ``critic`` accepted, plans it judged) over every iteration of ``run`` (errors are not judgements)."""
    accepted = judged = 0
    for record in iter_records(run.path / RECORDS_FILE):
        for it in record.iterations:
            for v in it.verdicts:
                if v.critic == critic and v.error is None:
                    judged += 1
                    accepted += v.accepts
    return accepted, judged


def agreement(run: RunData, critic: str, reference: str) -> dict[str, Any]:
    """The recorded verdicts of ``critic`` in ``run`` against ``reference`` re-run on the same plans."""
    counts = {"plans": 0, "agree": 0, "extracted_accepts_builtin_rejects": 0, "extracted_rejects_builtin_accepts": 0}
    counts["extracted_errors"] = 0
    try:
        bench = run.benchmark()
        options = {"mode": run.info.critic_options.mode}
        [builtin] = bind_critics([reference], bench, options)
    except (ModuloError, ValueError) as exc:  # RunError: the benchmark cannot be re-created here
        return {**counts, "note": f"the built-in {reference} could not be bound here: {exc}"}
    problems = {p.id: p for p in run.problems()}
    for record in iter_records(run.path / RECORDS_FILE):
        problem = problems.get(record.problem_id)
        if problem is None:
            continue
        for it in record.iterations:
            mine = next((v for v in it.verdicts if v.critic == critic), None)
            if mine is None or it.plan is None:
                continue
            if mine.error is not None:
                counts["extracted_errors"] += 1
                continue
            try:
                theirs = builtin(problem, it.plan).accepts
            except CriticError:
                continue
            counts["plans"] += 1
            if mine.accepts == theirs:
                counts["agree"] += 1
            elif mine.accepts:
                counts["extracted_accepts_builtin_rejects"] += 1
            else:
                counts["extracted_rejects_builtin_accepts"] += 1
    return counts


def extracted_rows(runs: Sequence[RunData]) -> list[dict[str, Any]]:
    """One row per (run with an extracted critic, extracted critic, other run that ran its built-in)."""
    rows: list[dict[str, Any]] = []
    for run in runs:
        for critic, reference in extracted_references(run).items():
            agree = agreement(run, critic, reference)
            acc, judged = pass_rate(run, critic)
            rate = acc / judged if judged else None
            others: list[RunData | None] = [r for r in runs if r is not run and reference in r.critics] or [None]
            for other in others:
                row: dict[str, Any] = {
                    "run": run.name,
                    "extracted": critic,
                    "builtin": reference,
                    **agree,
                    "agreement": agree["agree"] / agree["plans"] if agree["plans"] else None,
                    "extracted_pass_rate": rate,
                    "extracted_judged": judged,
                    "builtin_run": None,
                    "builtin_pass_rate": None,
                    "builtin_judged": None,
                    "pass_rate_difference_points": None,
                }
                if other is not None:
                    o_acc, o_judged = pass_rate(other, reference)
                    o_rate = o_acc / o_judged if o_judged else None
                    row.update(builtin_run=other.name, builtin_pass_rate=o_rate, builtin_judged=o_judged)
                    if rate is not None and o_rate is not None:
                        row["pass_rate_difference_points"] = 100 * (rate - o_rate)
                rows.append(row)
    return rows
