"""Per-problem views of an evaluation: constraint columns, critic groups, levels, and metric parts.

A benchmark's ``evaluate`` returns headline metrics and one row per problem. To put a confidence
interval on a headline metric the report needs it per problem, as ``sum(num) / sum(den)``. It finds
that decomposition as follows, and keeps the first candidate whose ratio equals the recorded metric
(so a guess that does not reproduce the benchmark's own number is never used):

1. the row holds the metric's key itself: a bool/number (a macro rate: ``num = value, den = 1``), a
   ``[num, den]`` pair, or ``{"num": .., "den": ..}`` (a micro rate). Benchmarks that want exact
   intervals for every metric should do this;
2. the primary or "final pass" metric: the row's ``passed``;
3. a "delivery" metric: the row's ``delivered``, else whether a plan was delivered;
4. a metric naming a critic group (``commonsense``, ``hard``, ...) and ``micro`` or ``macro``: the
   row's constraint columns of that group, with a few readings of "not applicable" (None).

When nothing reproduces the metric, the report prints it without an interval and says so.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ModuloError
from ..types import PlanJSON
from .load import RunData
from .stats import FloatArray

#: per-problem keys that are never constraint columns
RESERVED_KEYS = frozenset({"problem_id", "passed", "delivered", "level", "id", "plan"})
LEVEL_ORDER = ("easy", "medium", "hard")
_SUMMARY_SUFFIXES = ("_pass", "_passed", "_ok", "_evaluated")
_TOLERANCE = 1e-6


@dataclass(frozen=True)
class Parts:
    """A metric per problem: ``value = num.sum() / den.sum()``; ``rule`` says how it was read."""

    num: FloatArray
    den: FloatArray
    rule: str

    @property
    def value(self) -> float:
        total = float(self.den.sum())
        return float(self.num.sum()) / total if total else float("nan")


def _is_summary_flag(key: str) -> bool:
    """Per-problem roll-ups such as ``hard_pass`` or ``hard_evaluated``: not constraints of their own."""
    return key.endswith(_SUMMARY_SUFFIXES)


def constraint_columns(
    rows: Sequence[Mapping[str, Any]], exclude: Sequence[str] = (), *, require_value: bool = True
) -> list[str]:
    """Keys whose values are all True/False/None (at least one not None, unless ``require_value`` is false).

    Left out: ``problem_id``, ``passed``, ``delivered``, ``level``, metric keys, keys starting with ``_``
    and roll-up flags ending in ``_pass``, ``_passed``, ``_ok`` or ``_evaluated``.
    """
    skip = set(RESERVED_KEYS) | set(exclude)
    order: list[str] = []
    ok: dict[str, bool] = {}
    seen_value: dict[str, bool] = {}
    for row in rows:
        for key, value in row.items():
            if key in skip or key.startswith("_") or _is_summary_flag(key):
                continue
            if key not in ok:
                order.append(key)
                ok[key] = True
                seen_value[key] = False
            if value is None:
                continue
            if isinstance(value, bool):
                seen_value[key] = True
            else:
                ok[key] = False
    return [k for k in order if ok[k] and (seen_value[k] or not require_value)]


@dataclass(frozen=True)
class ConstraintInfo:
    """The constraint columns of an evaluation, their groups and display names."""

    columns: list[str]
    groups: dict[str, str]
    names: dict[str, str]


def constraint_info(run: RunData, metric_keys: Sequence[str] = ()) -> ConstraintInfo:
    """Constraint columns of the run's evaluation.

    When the evaluation has a ``per_constraint`` table whose rows name a ``constraint`` (and its
    ``group`` and display ``name``), those are the columns, in that order (none when no row holds any of
    them); otherwise every True/False/None column of the per-problem rows is one, grouped by the critic
    of the same name.
    """
    evaluation = run.evaluation or {}
    rows = evaluation.get("per_problem") or []
    table = (evaluation.get("tables") or {}).get("per_constraint") or []
    present = set(constraint_columns(rows, exclude=metric_keys, require_value=False)) if rows else set()
    declared = [r for r in table if isinstance(r, dict) and isinstance(r.get("constraint"), str)]
    if declared:
        columns = [str(r["constraint"]) for r in declared if str(r["constraint"]) in present]
        if not columns:  # declared, but no problem was checked against any (every answer abstained)
            return ConstraintInfo([], {}, {})
        groups = {str(r["constraint"]): str(r.get("group") or "") for r in declared}
        names = {str(r["constraint"]): str(r.get("name") or r["constraint"]) for r in declared}
        fallback = critic_groups(run, [c for c in columns if not groups.get(c)])
        groups = {c: groups.get(c) or fallback.get(c, "") for c in columns}
        return ConstraintInfo(columns, groups, {c: names[c] for c in columns})
    columns = constraint_columns(rows, exclude=metric_keys) if rows else []
    known = critic_groups(run, columns)
    return ConstraintInfo(columns, {c: known.get(c, "") for c in columns}, {c: c for c in columns})


def critic_groups(run: RunData, names: Sequence[str] = ()) -> dict[str, str]:
    """Critic name -> group, from the verdicts in the run's records, then from the critic registry."""
    groups = dict(_verdict_groups(run))
    wanted = list(dict.fromkeys([*run.critics, *names]))
    bench = run.benchmark_or_none()
    if bench is not None:
        try:
            wanted.extend(n for n in bench.critic_names() if n not in wanted)
        except (ModuloError, NotImplementedError):
            pass
    for name in wanted:
        if name in groups:
            continue
        group = _registry_group(name)
        if group:
            groups[name] = group
    return groups


def _verdict_groups(run: RunData) -> dict[str, str]:
    """Critic name -> group as the run's verdicts give it (the first verdict naming one), read once per run."""
    if "verdict_groups" not in run.derived:
        groups: dict[str, str] = {}
        for rec in run.records.values():
            for it in rec.iterations:
                for v in it.verdicts:
                    if v.critic and v.group and v.critic not in groups:
                        groups[v.critic] = v.group
        run.derived["verdict_groups"] = groups
    found: dict[str, str] = run.derived["verdict_groups"]
    return found


def _registry_group(name: str) -> str:
    from .. import components
    from ..critic import critic_meta

    try:
        obj = components.critics.get(name)
    except ModuloError:
        return ""
    return str(critic_meta(obj).get("group") or "")


def problem_levels(run: RunData, rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The level of each evaluated problem: the row's ``level``, the record's, else the problem's metadata."""
    levels: list[str | None] = []
    for row in rows:
        level = row.get("level")
        if level is None:
            rec = run.records.get(str(row.get("problem_id")))
            if rec is not None:
                level = rec.metadata.get("level")
        levels.append(None if level is None else str(level))
    if any(lv is None for lv in levels) and run.benchmark_or_none() is not None:
        try:
            wanted = [str(r.get("problem_id")) for r, lv in zip(rows, levels, strict=True) if lv is None]
            meta = {p.id: p.metadata.get("level") for p in run.problems(wanted)}
            levels = [
                lv
                if lv is not None
                else (None if meta.get(str(r.get("problem_id"))) is None else str(meta[str(r.get("problem_id"))]))
                for r, lv in zip(rows, levels, strict=True)
            ]
        except ModuloError:
            pass
    return [lv if lv is not None else "all" for lv in levels]


def order_levels(levels: Sequence[str]) -> list[str]:
    """Distinct levels, easy/medium/hard first, then the others sorted."""
    distinct = list(dict.fromkeys(levels))
    known = [lv for lv in LEVEL_ORDER if lv in distinct]
    rest = sorted(lv for lv in distinct if lv not in LEVEL_ORDER)
    return known + rest


# -- metric decomposition ----------------------------------------------------------------------------


def _arrays(pairs: Sequence[tuple[float, float]], rule: str) -> Parts:
    num = np.array([p[0] for p in pairs], dtype=np.float64)
    den = np.array([p[1] for p in pairs], dtype=np.float64)
    return Parts(num, den, rule)


def _explicit(key: str, rows: Sequence[Mapping[str, Any]]) -> Parts | None:
    pairs: list[tuple[float, float]] = []
    for row in rows:
        if key not in row:
            return None
        v = row[key]
        if v is None:
            pairs.append((0.0, 0.0))
        elif isinstance(v, bool | int | float):
            pairs.append((float(v), 1.0))
        elif isinstance(v, list | tuple) and len(v) == 2:
            pairs.append((float(v[0]), float(v[1])))
        elif isinstance(v, dict) and "num" in v and "den" in v:
            pairs.append((float(v["num"]), float(v["den"])))
        else:
            return None
    return _arrays(pairs, f"per-problem {key!r}")


def _flag(rows: Sequence[Mapping[str, Any]], key: str) -> Parts | None:
    if not rows or any(not isinstance(r.get(key), bool) for r in rows):
        return None
    return _ones((float(bool(r[key])) for r in rows), len(rows), f"per-problem {key!r}")


def _ones(nums: Iterable[float], n: int, rule: str) -> Parts:
    """Parts of a plain mean: ``nums`` over a denominator of 1 each (filled without a list of pairs)."""
    return Parts(np.fromiter(nums, dtype=np.float64, count=n), np.ones(n, dtype=np.float64), rule)


def _group_candidates(
    text: str,
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str],
    groups: Mapping[str, str],
    delivered: Sequence[bool],
) -> Iterator[Parts]:
    for group in sorted(set(groups.values())):
        if not group or not (group in text or (len(group) >= 6 and group[:6] in text)):
            continue
        if "micro" not in text:
            for suffix in _SUMMARY_SUFFIXES[:3]:
                flag = _flag(rows, f"{group}{suffix}")
                if flag is not None:
                    yield flag
        cols = [c for c in columns if groups.get(c) == group]
        if not cols:
            continue
        values = [[r.get(c) for c in cols] for r in rows]
        if "micro" in text:
            yield _arrays(
                [(sum(v is True for v in vs), sum(v is not None for v in vs)) for vs in values],
                f"{group} constraints passed / applicable, per problem",
            )
            yield _arrays(
                [(sum(v is True for v in vs), len(vs)) for vs in values],
                f"{group} constraints passed / all {len(cols)}, per problem",
            )
        if "macro" in text or "micro" not in text:
            yield _arrays(
                [(float(d and not any(v is False for v in vs)), 1.0) for vs, d in zip(values, delivered, strict=True)],
                f"delivered and no {group} constraint failed",
            )
            yield _arrays(
                [(float(not any(v is False for v in vs)), 1.0) for vs in values],
                f"no {group} constraint failed",
            )
            yield _arrays(
                [(float(all(v is True for v in vs)), 1.0) for vs in values],
                f"every {group} constraint passed",
            )


def metric_parts(
    key: str,
    label: str,
    value: float | None,
    rows: Sequence[Mapping[str, Any]],
    *,
    groups: Mapping[str, str],
    plans: Sequence[PlanJSON] | None = None,
    primary: str = "",
    metric_keys: Sequence[str] = (),
    columns: Sequence[str] | None = None,
    delivered_flags: Sequence[int] | None = None,
) -> Parts | None:
    """The per-problem parts of metric ``key`` that reproduce ``value``, or None (see the module notes).
    ``delivered_flags`` (one per row: whether a plan was delivered) stand for ``plans`` when the plans
    themselves are not at hand."""
    if value is None or not rows:
        return None
    text = f"{key} {label}".lower()

    def delivered() -> list[bool]:  # made only when a candidate needs it (one bool per row)
        if all(isinstance(r.get("delivered"), bool) for r in rows):
            return [bool(r["delivered"]) for r in rows]
        if plans is not None and len(plans) == len(rows):
            return [p is not None for p in plans]
        if delivered_flags is not None and len(delivered_flags) == len(rows):
            return [bool(d) for d in delivered_flags]
        return [True] * len(rows)

    def candidates() -> Iterator[Parts | None]:
        yield _explicit(key, rows)
        if key == primary or "final" in text or text.startswith("pass") or key in ("passed", "pass_rate"):
            yield _flag(rows, "passed")
        if "deliver" in text:
            yield _flag(rows, "delivered")
            flags = delivered()
            yield _ones((float(d) for d in flags), len(flags), "plan delivered")
        cols = list(columns) if columns is not None else constraint_columns(rows, exclude=metric_keys)
        yield from _group_candidates(text, rows, cols, groups, delivered())

    for cand in candidates():
        if cand is not None and cand.den.sum() > 0 and abs(cand.value - float(value)) <= _TOLERANCE:
            return cand
    return None


def passed_vector(rows: Sequence[Mapping[str, Any]], ids: Sequence[str]) -> FloatArray | None:
    """0/1 ``passed`` for ``ids`` (None when a row is missing or has no bool ``passed``; a problem with
    several rows: its last). Only each row's ``passed`` is kept, not the row (rows may be read one at a
    time from disk)."""
    by_id = {str(r.get("problem_id")): r.get("passed") for r in rows}
    out = np.empty(len(ids), dtype=np.float64)
    for i, pid in enumerate(ids):
        passed = by_id.get(pid)
        if not isinstance(passed, bool):
            return None
        out[i] = 1.0 if passed else 0.0
    return out
