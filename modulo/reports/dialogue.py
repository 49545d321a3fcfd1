"""Multi-turn and abstention metrics of a run: the report's "User in the loop" and "Abstention" tables.

Multi-turn (runs with a user, questions or updates): certified after the last update (among the
problems whose request changed during the loop), turns and questions per problem, unnecessary
questions (those the user reported the query or context already answered), and updates never reached.

Abstention is scored both ways, on the problems whose ground truth is known (``ProblemResult.solvable``,
else the ``solvable`` column of the benchmark's per-problem evaluation, as synth writes it): *recall* is
the share of unsolvable problems the system declined, *false abstention* the share of solvable controls
it declined. A decline is the planner's abstention (outcome ``abstained``, with a reason) or the
benchmark's proof (outcome ``unsolvable``: the loop declined before asking the model); a failed problem
(no plan read) is no decline. The planner's reasons are counted as verified, refuted or not checkable
(``Benchmark.check_abstention``). Problems that ended in error are left out, as everywhere.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..types import Outcome, ProblemResult
from .load import RunData
from .stats import Interval, bootstrap_ratio

DECLINED = (Outcome.ABSTAINED, Outcome.UNSOLVABLE)


@dataclass(frozen=True)
class DialogueRow:
    run: str
    n: int
    #: problems with a user configured, whose request changed, and those of them certified at the end
    with_updates: int
    certified_after_update: int
    #: problems that ended with scheduled updates never applied
    pending: int
    turns_mean: float
    questions: int
    questions_mean: float
    unnecessary: int
    certified: Interval


@dataclass(frozen=True)
class AbstentionRow:
    run: str
    unsolvable: int
    declined_unsolvable: int
    recall: Interval
    solvable: int
    declined_solvable: int
    false_abstention: Interval
    #: the planner's own abstentions (outcome abstained), and how their reasons fared
    planner: int
    verified: int
    refuted: int
    unchecked: int
    #: declines by the benchmark's proof (outcome unsolvable)
    proofs: int
    #: where the ground truth came from: "records", "evaluation" or "records+evaluation"
    source: str


def _scored(run: RunData) -> Iterator[ProblemResult]:
    """The scored problems' records, read one at a time."""
    return (run.records[i] for i in run.scored_ids)


def is_dialogue_run(run: RunData) -> bool:
    """Whether the run had a user in the loop, or a problem with a question or an update (decided once
    per run: it reads the records)."""
    if run.info.user.name or run.info.user.updates:
        return True
    if "dialogue" not in run.derived:
        run.derived["dialogue"] = any(
            r.user is not None or r.questions or r.updates or r.pending_updates for r in _scored(run)
        )
    return bool(run.derived["dialogue"])


def dialogue_row(run: RunData, *, n_resamples: int, seed: int) -> DialogueRow:
    records = list(_scored(run))  # a dialogue run's (read for its own table only)
    updated = [r for r in records if r.updates]
    questions = sum(r.questions for r in records)
    n = len(records)
    return DialogueRow(
        run=run.name,
        n=n,
        with_updates=len(updated),
        certified_after_update=sum(1 for r in updated if r.certified),
        pending=sum(1 for r in records if r.pending_updates),
        turns_mean=float(np.mean([r.turns for r in records])) if records else float("nan"),
        questions=questions,
        questions_mean=questions / n if n else float("nan"),
        unnecessary=sum(r.unnecessary_questions for r in records),
        certified=bootstrap_ratio([float(r.certified) for r in records], n_resamples=n_resamples, seed=seed),
    )


def ground_truth(run: RunData) -> tuple[dict[str, bool], str]:
    """Problem id -> solvable, from the records (``solvable``) and else the evaluation's per-problem rows."""
    truth: dict[str, bool] = {}
    sources: set[str] = set()
    rows = {str(row.get("problem_id")): row for row in (run.evaluation or {}).get("per_problem", []) or []}
    for record in _scored(run):
        if record.solvable is not None:
            truth[record.problem_id] = record.solvable
            sources.add("records")
        elif isinstance(rows.get(record.problem_id, {}).get("solvable"), bool):
            truth[record.problem_id] = bool(rows[record.problem_id]["solvable"])
            sources.add("evaluation")
    return truth, "+".join(sorted(sources, key=["records", "evaluation"].index))


def abstention_row(run: RunData, *, n_resamples: int, seed: int) -> AbstentionRow | None:
    """The run's abstention scored both ways (None when no problem's ground truth is known)."""
    truth, source = ground_truth(run)
    if not truth:
        return None
    # one pass over the records (read one at a time): whether each declined, by ground truth
    declined: dict[bool, array[float]] = {True: array("d"), False: array("d")}
    checks: list[bool | None] = []  # the planner's own abstentions: was its reason verified?
    proofs = 0
    for r in _scored(run):
        if r.problem_id not in truth:
            continue
        declined[truth[r.problem_id]].append(float(r.outcome in DECLINED))
        if r.outcome is Outcome.ABSTAINED:
            checks.append(r.abstention.verified if r.abstention is not None else None)
        proofs += r.outcome is Outcome.UNSOLVABLE
    unsolv, solv = declined[False], declined[True]
    opts: dict[str, Any] = {"n_resamples": n_resamples, "seed": seed}
    return AbstentionRow(
        run=run.name,
        unsolvable=len(unsolv),
        declined_unsolvable=int(sum(unsolv)),
        recall=bootstrap_ratio(unsolv, **opts),
        solvable=len(solv),
        declined_solvable=int(sum(solv)),
        false_abstention=bootstrap_ratio(solv, **opts),
        planner=len(checks),
        verified=sum(1 for c in checks if c is True),
        refuted=sum(1 for c in checks if c is False),
        unchecked=sum(1 for c in checks if c is None),
        proofs=proofs,
        source=source,
    )
