"""Final pass rate against iteration budget (the LLM-Modulo paper's Figure 3).

"The plan at budget k" follows the metacontroller's best-so-far rule: among iterations ``0..k-1`` that
produced a plan, the one with the most accepting verdicts, ties going to the earliest iteration. Budgets
run from 1 (the first plan alone) to N. Each budget's plans are scored by the benchmark's own evaluator.
To keep that cheap, the distinct (problem, plan) pairs over all budgets are evaluated in one call when
the primary metric is a per-problem ``passed`` rate (checked against the evaluator's own number); otherwise one call per
budget. Results are cached in the run directory (``report_cache/budget_curve.json``), keyed on the
plans and the benchmark, so a second report costs nothing. Beside the metric, each budget carries the
model calls spent within it: fresh calls apart from cache hits (a cached repeat is not a new draw).
"""

from __future__ import annotations

import hashlib
import json
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..benchmark import FinalPlan
from ..errors import ModuloError, RunError
from ..metacontroller import best_position
from ..types import Abstention, PlanJSON, ProblemResult, canonical_json, plan_fingerprint
from .load import RunData, decline_at, evaluate_final_stream
from .metrics import metric_parts

CACHE_DIR = "report_cache"
CACHE_FILE = "budget_curve.json"
#: 2: ties go to the earliest plan; 3: the key hashes each problem's plans in turn; 4: a decline is told from no plan
CACHE_VERSION = 4


def best_iteration_at(record: ProblemResult, k: int) -> int | None:
    """Index into ``record.iterations`` of the plan at budget ``k`` (None: no plan yet); the loop's rule."""
    return best_position(record.iterations, max(k, 0))


def plan_at_budget(record: ProblemResult, k: int) -> PlanJSON:
    pos = best_iteration_at(record, k)
    return None if pos is None else record.iterations[pos].plan


def max_budget(run: RunData) -> int:
    """The largest budget to plot: the run's max_iterations, else the longest trace."""
    longest = run.longest_trace()
    configured = run.max_iterations
    return max(configured or 0, longest)


@dataclass(frozen=True)
class BudgetCurve:
    run: str
    metric: str
    #: value at budget 1, ..., N (fractions): budget k allows at most k plans (iterations 0..k-1)
    values: list[float]
    n_problems: int
    method: str  # "pairs" (one evaluation call) or "per-budget" or "cached"
    #: mean fresh model calls (answered by the backend, not the cache) per problem within budget k
    fresh_calls: list[float] = field(default_factory=list)
    #: mean cache hits per problem within budget k
    cached_calls: list[float] = field(default_factory=list)
    #: totals over the run's scored problems and all their iterations
    fresh_total: int = 0
    cached_total: int = 0

    @property
    def budgets(self) -> list[int]:
        return list(range(1, len(self.values) + 1))


def calls_by_budget(records: Iterable[ProblemResult], top: int) -> tuple[list[float], list[float], int, int]:
    """Mean fresh and cached model calls per problem within budget k = 1..top, and the two totals, the
    records read once, one at a time.

    A fresh call is one the backend answered (``usage.calls - usage.cached_calls`` of an iteration); a
    cache hit replays an earlier answer and is no new draw. A problem that stopped before k iterations
    counts what it spent.
    """
    n = 0
    fresh = [0.0] * top
    cached = [0.0] * top
    fresh_total = cached_total = 0
    for rec in records:
        n += 1
        f = c = 0
        its = rec.iterations
        for k in range(top):
            if k < len(its):
                c += its[k].usage.cached_calls
                f += its[k].usage.calls - its[k].usage.cached_calls
            fresh[k] += f
            cached[k] += c
        fresh_total += sum(it.usage.calls - it.usage.cached_calls for it in its)
        cached_total += sum(it.usage.cached_calls for it in its)
    n = max(1, n)
    return [v / n for v in fresh], [v / n for v in cached], fresh_total, cached_total


def _read_cache(run: RunData) -> dict[str, Any]:
    path = run.path / CACHE_DIR / CACHE_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}
    if not isinstance(data, dict) or data.get("version") != CACHE_VERSION:
        return {}
    entries = data.get("entries")
    return entries if isinstance(entries, dict) else {}


def _write_cache(run: RunData, key: str, entry: dict[str, Any]) -> None:
    entries = _read_cache(run)
    entries[key] = entry
    path = run.path / CACHE_DIR / CACHE_FILE
    try:
        path.parent.mkdir(exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"version": CACHE_VERSION, "entries": entries}, indent=1), encoding="utf-8")
        tmp.replace(path)
    except OSError:
        pass  # a read-only run directory: no cache, same numbers


def budget_curve(run: RunData, *, max_k: int | None = None, use_cache: bool = True) -> BudgetCurve:
    """Primary metric of the plans at budget 1..N for the run's scored problems (RunError if it cannot).

    Problems that ended in error are left out (they are not plan failures), as in the run's evaluation.
    The records are read one at a time (once for the plans' fingerprints and the calls, once more for
    the plans to score); what is kept is a few bytes per distinct (problem, plan) pair.
    """
    bench = run.benchmark()
    metric = run.primary_metric()
    if not metric:
        raise RunError(f"benchmark {run.benchmark_name!r} declares no primary_metric")
    ids = run.scored_ids
    if not ids:
        raise RunError(f"{run.name}: no finished problem that did not end in error")
    top = max(1, max_budget(run) if max_k is None else max_k)
    pairs = _Pairs(top)
    key = hashlib.sha256()
    key.update(canonical_json(run.info.benchmark.model_dump(mode="json")).encode())
    key.update(metric.encode())
    key.update(canonical_json(list(ids)).encode())

    def read() -> Iterator[ProblemResult]:  # one record at a time: its calls counted, its plans noted
        for pos, pid in enumerate(ids):
            rec = run.records[pid]
            fingerprints = pairs.add(pos, _plans_by_budget(rec, top))
            key.update(canonical_json(fingerprints).encode())
            yield rec

    calls = calls_by_budget(read(), top)
    if use_cache:
        hit = _read_cache(run).get(key.hexdigest())
        if isinstance(hit, dict) and isinstance(hit.get("values"), list):
            return BudgetCurve(run.name, metric, [float(v) for v in hit["values"]], len(ids), "cached", *calls)
    try:
        problems = run.problems(ids)
        values, method = _by_pairs(bench, run, problems, ids, pairs, metric)
        if values is None:
            values = []
            for k in range(1, top + 1):
                finals = (
                    FinalPlan(problems[pos], plan, abstention=declined)
                    for pos, pid in enumerate(ids)
                    for plan, declined in [_at_budget(run.records[pid], k)]
                )
                result = evaluate_final_stream(bench, finals)
                values.append(float(result.metrics[metric]))
            method = "per-budget"
    except (ModuloError, NotImplementedError, KeyError) as exc:
        raise RunError(f"{run.name}: could not evaluate plans by budget: {exc}") from exc
    if use_cache:
        entry = {"metric": metric, "values": values, "n_problems": len(ids), "method": method}
        _write_cache(run, key.hexdigest(), entry)
    return BudgetCurve(run.name, metric, values, len(ids), method, *calls)


#: a problem's plan at some budget: the plan (None: none) and the planner's decline that ends it there
Answer = tuple[PlanJSON, Abstention | None]


def _at_budget(record: ProblemResult, k: int) -> Answer:
    """What one problem delivers at budget k: its decline (no plan) when it declined within its first k turns,
    as the run scores it, else its best plan of those turns."""
    declined = decline_at(record, k)
    return (None, declined) if declined is not None else (plan_at_budget(record, k), None)


def _plans_by_budget(record: ProblemResult, top: int) -> list[Answer]:
    """What one problem delivers at budget k = 1..top."""
    return [_at_budget(record, k) for k in range(1, top + 1)]


def _fingerprint(answer: Answer) -> str | None:
    """An answer's identity among a problem's budgets: its plan's fingerprint, the decline's, None for no plan."""
    plan, declined = answer
    if declined is not None:
        return f"declined:{declined.iteration}:{declined.verified}"
    return None if plan is None else plan_fingerprint(plan)


class _Pairs:
    """The distinct (problem, plan) pairs over all budgets, as numbers: for each budget, the pair of each
    problem (its position among the pairs), and the problem of each pair and whether it has a plan."""

    def __init__(self, top: int) -> None:
        self.at_budget = [array("i") for _ in range(top)]
        self.problem = array("i")
        self.delivered = bytearray()

    def add(self, pos: int, answers: list[Answer]) -> list[str | None]:
        """Note problem ``pos``'s answers by budget; their fingerprints (None: no plan)."""
        fingerprints = [_fingerprint(a) for a in answers]
        own: dict[str | None, int] = {}
        for k, fp in enumerate(fingerprints):
            if fp not in own:
                own[fp] = len(self.problem)
                self.problem.append(pos)
                self.delivered.append(answers[k][0] is not None)
            self.at_budget[k].append(own[fp])
        return fingerprints


def _distinct(answers: list[Answer]) -> Iterator[Answer]:
    """Each distinct answer of one problem's budgets, in the order :meth:`_Pairs.add` numbered them."""
    seen: set[str | None] = set()
    for answer in answers:
        fp = _fingerprint(answer)
        if fp not in seen:
            seen.add(fp)
            yield answer


def _by_pairs(
    bench: Any, run: RunData, problems: Sequence[Any], ids: Sequence[str], pairs: _Pairs, metric: str
) -> tuple[list[float] | None, str]:
    """Evaluate each distinct (problem, plan) once; None when the metric is not a per-problem ratio.
    ``ids[i]`` is the id of ``problems[i]``; each problem and its record are read once, when scored."""
    top = len(pairs.at_budget)

    def stream() -> Iterator[FinalPlan]:
        for pos, pid in enumerate(ids):
            problem = problems[pos]
            for plan, declined in _distinct(_plans_by_budget(run.records[pid], top)):
                yield FinalPlan(problem, plan, abstention=declined)

    result = evaluate_final_stream(bench, stream())
    if len(result.per_problem) != len(pairs.problem) or metric not in result.metrics:
        return None, ""
    if any(
        str(row.get("problem_id", ids[p])) != ids[p] for row, p in zip(result.per_problem, pairs.problem, strict=True)
    ):
        return None, ""  # the evaluator does not keep one row per input in order: score budget by budget
    parts = metric_parts(
        metric,
        metric,
        float(result.metrics[metric]),
        result.per_problem,
        groups={},
        primary=metric,
        delivered_flags=pairs.delivered,
    )
    if parts is None:
        return None, ""
    values: list[float] = []
    for at in pairs.at_budget:
        rows = np.frombuffer(at, dtype=np.int32) if at.itemsize == 4 else np.asarray(at)
        num = float(parts.num[rows].sum())
        den = float(parts.den[rows].sum())
        values.append(num / den if den else float("nan"))
    return values, "pairs"
