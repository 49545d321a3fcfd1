"""Rates against the iteration budget k (budget k allows the plans of iterations 0..k-1).

Two curves per run: ``certified`` (the share of scored problems, finished and not ended in error or
skipped, as in the report, whose plan every active critic accepted within k iterations, read by
streaming the records) and ``pass_rate`` (the benchmark's
primary metric of the plan at budget k, scored by its evaluator through the reports'
:func:`~modulo.reports.budget.budget_curve`, which the run's report has usually cached already).
``pass_rate`` is missing, with the reason in the notes, when the benchmark cannot be had here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from ..errors import ModuloError
from .frames import verdict_accepts
from .records import iter_records
from .runs import RunMeta


def _all_accept(it: Mapping[str, Any]) -> bool:
    verdicts = [v for v in it.get("verdicts") or [] if isinstance(v, dict)]
    return it.get("plan") is not None and not it.get("gated") and all(verdict_accepts(v) for v in verdicts)


#: outcomes left out of every rate (never a failure of the planner): the model call failed, or never started
UNSCORED = ("error", "skipped")


def certified_at_budget(meta: RunMeta) -> list[tuple[int, int, int]]:
    """(k, problems certified within k iterations, scored problems) for k = 1..max (streamed); problems
    that ended in error or were skipped are left out, as the report leaves them out of every rate."""
    first: list[int | None] = []
    longest = 0
    for record in iter_records(meta.path, meta.notes):
        if record.get("outcome") in UNSCORED:
            continue
        its = record.get("iterations") or []
        longest = max(longest, len(its))
        hit = None
        if record.get("outcome") == "certified":
            hit = next((pos for pos, it in enumerate(its) if _all_accept(it)), len(its) - 1)
        first.append(hit)
    top = max(longest, int(meta.labels.get("max_iterations") or 0)) if first else 0
    return [(k, sum(1 for h in first if h is not None and h < k), len(first)) for k in range(1, top + 1)]


def pass_rate_at_budget(meta: RunMeta) -> tuple[str, list[tuple[int, float]]] | None:
    """(primary metric, [(k, value)]) from the benchmark's evaluator; None (reason noted) when unavailable."""
    from ..reports import budget_curve, load_run

    try:
        run = load_run(meta.path, light=True)
        run.name = meta.name
        curve = budget_curve(run)
    except (ModuloError, NotImplementedError) as exc:
        meta.notes.append(f"no pass rate against budget: {exc}")
        return None
    return curve.metric, [(k, v) for k, v in zip(curve.budgets, curve.values, strict=True) if math.isfinite(v)]


def budget_frame(metas: list[RunMeta], *, evaluate: bool = True) -> pd.DataFrame:
    """One row per run per budget k: labels, ``certified`` (rate), its counts, ``pass_rate`` and ``metric``."""
    rows: list[dict[str, Any]] = []
    for meta in metas:
        curve = pass_rate_at_budget(meta) if evaluate else None
        by_k = dict(curve[1]) if curve else {}
        for k, hits, n in certified_at_budget(meta):
            rows.append(
                {
                    **meta.labels,
                    "budget_k": k,
                    "certified": hits / n if n else math.nan,
                    "certified_k": hits,
                    "problems": n,
                    "metric": curve[0] if curve else None,
                    "pass_rate": by_k.get(k, math.nan),
                }
            )
    df = pd.DataFrame(rows)
    for col in ("budget_k", "certified_k", "problems", "max_iterations", "sample"):
        if col in df.columns:
            df[col] = df[col].astype("Int64")
    for col in ("run", "method", "benchmark", "split", "model", "critics", "strategy", "budget", "metric"):
        if col in df.columns:
            df[col] = df[col].astype("category")
    return df
