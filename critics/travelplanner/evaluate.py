"""Evaluation of TravelPlanner plans, aggregated exactly as the official ``eval.py`` does.

Per plan (:func:`evaluate_plan`): a plan is *delivered* when ``bool(plan)`` holds; the 8 commonsense
checks run on every delivered plan; the 5 hard checks run only behind the official gate (the plan was
delivered, no commonsense check crashed, and both ``is_not_absent`` and
``is_valid_information_in_sandbox`` passed). Where the official script would crash, the check that
raised is reported failed with the exception as its reason, and the hard gate stays closed.

Aggregation (:func:`aggregate`), for N queries:

* delivery rate = delivered / N;
* commonsense micro = number of True over the commonsense results of delivered plans / 8N;
* hard micro = number of True in the hard boxes / the hard total (one budget check per query plus the
  applicable local constraints: house rule, cuisine and room type for medium queries, and also
  transportation for hard ones), hard-coded as 105 / 420 / 2290 for train / validation / test;
* commonsense macro, hard macro, final = plans with a hard box and no False (None passes) / N; a plan
  without a hard box counts for neither macro, an undelivered plan for nothing.

On a whole official split the hard-coded denominators are used; on any other set of queries (a subset,
the 129 validation-ref rows, a corpus of plans, a whole split whose queries an update changed) the same
quantities are computed from the queries.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from modulo.errors import ConfigError

from . import official, strict
from .checks import ALL_KEYS, COMMONSENSE_KEYS, HARD_KEYS, PAPER_NAMES, CheckResult
from .data import LEVELS, SPLIT_SIZES
from .store import Store

Mode = Literal["official", "strict"]
MODES: tuple[str, ...] = ("official", "strict")

#: eval.py's hard-coded (N, commonsense total, hard total) per split
OFFICIAL_DENOMINATORS: dict[str, tuple[int, int, int]] = {
    "train": (45, 360, 105),
    "validation": (180, 1440, 420),
    "test": (1000, 8000, 2290),
}
METRIC_KEYS: tuple[str, ...] = (
    "delivery_rate",
    "commonsense_micro",
    "commonsense_macro",
    "hard_micro",
    "hard_macro",
    "final_pass_rate",
)
#: eval.py's names of the six figures
OFFICIAL_METRIC_NAMES: dict[str, str] = {
    "delivery_rate": "Delivery Rate",
    "commonsense_micro": "Commonsense Constraint Micro Pass Rate",
    "commonsense_macro": "Commonsense Constraint Macro Pass Rate",
    "hard_micro": "Hard Constraint Micro Pass Rate",
    "hard_macro": "Hard Constraint Macro Pass Rate",
    "final_pass_rate": "Final Pass Rate",
}
#: the local constraints a query may state (each one stated is a hard check in the micro rates)
_LOCAL_KEYS = ("house rule", "cuisine", "room type", "transportation")


def check_module(mode: str) -> Any:
    if mode == "official":
        return official
    if mode == "strict":
        return strict
    raise ConfigError(f"travelplanner: mode must be 'official' or 'strict', not {mode!r}")


class _Counted(NamedTuple):
    values: dict[str, bool | None]
    commonsense_true: int
    hard_true: int
    commonsense_pass: bool
    hard_pass: bool


@dataclass
class PlanEvaluation:
    """The verdicts on one plan."""

    id: str
    query: Mapping[str, Any]
    delivered: bool
    commonsense: dict[str, CheckResult] | None = None
    hard: dict[str, CheckResult] | None = None
    idx: Any = None
    note: str | None = None

    @property
    def raised(self) -> bool:
        """Some commonsense check crashed (the official eval.py would stop here)."""
        return self.commonsense is not None and any(r.error is not None for r in self.commonsense.values())

    @property
    def hard_evaluated(self) -> bool:
        return self.hard is not None

    #: what :meth:`_counted` worked out, with the boxes it read
    _counts: tuple[Any, Any, _Counted] | None = field(default=None, init=False, repr=False, compare=False)

    def _counted(self) -> _Counted:
        """:meth:`values` and the counts the rows and the figures read, worked out once for the boxes held
        (again if a box is replaced; the results in a box are never changed)."""
        cs, hard = self.commonsense, self.hard
        kept = self._counts
        if kept is not None and kept[0] is cs and kept[1] is hard:
            return kept[2]
        values: dict[str, bool | None] = {}
        for keys, box in ((COMMONSENSE_KEYS, cs), (HARD_KEYS, hard)):
            for key in keys:
                values[key] = box[key].verdict if box is not None else None
        cs_values = [values[key] for key in COMMONSENSE_KEYS]
        hard_values = [values[key] for key in HARD_KEYS]
        counted = _Counted(
            values,
            cs_values.count(True) if cs is not None else 0,
            hard_values.count(True) if hard is not None else 0,
            cs is not None and False not in cs_values,
            hard is not None and False not in hard_values,
        )
        self._counts = (cs, hard, counted)
        return counted

    @property
    def commonsense_pass(self) -> bool:
        return self._counted().commonsense_pass

    @property
    def hard_pass(self) -> bool:
        return self._counted().hard_pass

    @property
    def passed(self) -> bool:
        """Both macros: the plan counts for the final pass rate."""
        counted = self._counted()
        return counted.commonsense_pass and counted.hard_pass

    def values(self) -> dict[str, bool | None]:
        """The 13 official keys: True / False (a crash reads False) / None (not applicable, not evaluated)."""
        return dict(self._counted().values)

    def reasons(self) -> dict[str, str]:
        """Key -> message for every failed (or crashed) check."""
        out: dict[str, str] = {}
        for box in (self.commonsense, self.hard):
            for key, result in (box or {}).items():
                if not result.passed:
                    out[key] = result.message or ("crashed: " + (result.error or "") if result.error else "failed")
        return out

    def row(self) -> dict[str, Any]:
        """A per-problem dict for :class:`~modulo.benchmark.EvalResult`.

        ``commonsense_micro`` and ``hard_micro`` hold this plan's [passes, denominator share], so the
        micro rates (and their bootstrap intervals) are sums of per-problem parts.
        """
        counted = self._counted()
        return {
            "problem_id": self.id,
            "passed": counted.commonsense_pass and counted.hard_pass,
            **counted.values,
            "commonsense_micro": [counted.commonsense_true, 8],
            "hard_micro": [counted.hard_true, computed_denominators([self.query])[2]],
            "delivered": self.delivered,
            "hard_evaluated": self.hard_evaluated,
            "commonsense_pass": counted.commonsense_pass,
            "hard_pass": counted.hard_pass,
            "level": self.query.get("level"),
            "days": self.query.get("days"),
            "reasons": self.reasons(),
            **({"note": self.note} if self.note else {}),
        }


def evaluate_plan(
    query: Mapping[str, Any],
    plan: Any,
    store: Store,
    *,
    mode: str = "official",
    id: str = "",
    idx: Any = None,
    note: str | None = None,
    passing: Collection[str] = (),
) -> PlanEvaluation:
    """Run the commonsense checks (if delivered) and the hard checks (behind the gate).

    ``passing`` (official mode; ignored in strict mode): the official keys whose check is known to pass on
    this very plan, query and store (a critic that checks it passed it: see
    :meth:`~critics.travelplanner.benchmark.TravelPlanner.evaluate_final`); they are not run again, their
    results are the pass the check would give (see :func:`official.commonsense`)."""
    checks = check_module(mode)
    known = passing if checks is official else ()
    result = PlanEvaluation(id=id, query=query, delivered=bool(plan), idx=idx, note=note)
    if not result.delivered:
        return result
    if known:
        result.commonsense = official.commonsense(query, plan, store, known)
    else:
        result.commonsense = checks.commonsense(query, plan, store)
    box = result.commonsense
    if (
        not result.raised
        and box["is_not_absent"].value is True
        and box["is_valid_information_in_sandbox"].value is True
    ):
        result.hard = official.hard(query, plan, store, known) if known else checks.hard(query, plan, store)
    return result


# -- aggregation -----------------------------------------------------------------------------------------
def computed_denominators(queries: Iterable[Mapping[str, Any]]) -> tuple[int, int, int]:
    """(N, 8N, N + applicable local constraints), as eval.py derives them for its splits.

    eval.py counts the local constraints its levels ask for (medium: house rule, cuisine, room type;
    hard: all four), while its numerator counts a True for any stated one. On the official rows the two
    agree (no easy query states a local constraint, no medium one a transportation rule); on a query
    changed by a mutation or an update they do not, and the level's count would let the rate pass 100%.
    So every stated local constraint is counted: on the official splits this is eval.py's total."""
    n = hard_total = 0
    for q in queries:
        n += 1
        hard_total += 1
        local = q.get("local_constraint") or {}
        for key in _LOCAL_KEYS:
            if local.get(key) is not None:
                hard_total += 1
    return n, 8 * n, hard_total


def aggregate(evaluations: Sequence[PlanEvaluation], denominators: tuple[int, int, int]) -> dict[str, float]:
    """The six official rates (fractions)."""
    n, cs_total, hard_total = denominators
    delivered = cs_true = hard_true = cs_macro = hard_macro = final = 0
    for ev in evaluations:
        if ev.delivered:
            delivered += 1
        counted = ev._counted()
        cs_true += counted.commonsense_true
        hard_true += counted.hard_true
        if ev.commonsense is None or ev.hard is None:
            continue
        cs_ok, hard_ok = counted.commonsense_pass, counted.hard_pass
        cs_macro += cs_ok
        hard_macro += hard_ok
        final += cs_ok and hard_ok

    def rate(count: int, total: int) -> float:
        return count / total if total else 0.0

    return {
        "delivery_rate": rate(delivered, n),
        "commonsense_micro": rate(cs_true, cs_total),
        "commonsense_macro": rate(cs_macro, n),
        "hard_micro": rate(hard_true, hard_total),
        "hard_macro": rate(hard_macro, n),
        "final_pass_rate": rate(final, n),
    }


def per_constraint_table(evaluations: Sequence[PlanEvaluation]) -> list[dict[str, Any]]:
    rows = []
    for key in ALL_KEYS:
        counts = {"true": 0, "false": 0, "error": 0, "not_applicable": 0, "not_evaluated": 0, "not_delivered": 0}
        for ev in evaluations:
            box = ev.commonsense if key in COMMONSENSE_KEYS else ev.hard
            if not ev.delivered:
                counts["not_delivered"] += 1
            elif box is None:
                counts["not_evaluated"] += 1
            else:
                r = box[key]
                if r.error is not None:
                    counts["error"] += 1
                elif r.value is None:
                    counts["not_applicable"] += 1
                else:
                    counts["true" if r.value else "false"] += 1
        judged = counts["true"] + counts["false"] + counts["error"]
        rows.append(
            {
                "constraint": key,
                "name": PAPER_NAMES[key],
                "group": "commonsense" if key in COMMONSENSE_KEYS else "hard",
                **counts,
                "pass_rate_of_judged": counts["true"] / judged if judged else None,
            }
        )
    return rows


def per_level_days_table(evaluations: Sequence[PlanEvaluation]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, int], list[PlanEvaluation]] = {}
    for ev in evaluations:
        groups.setdefault((str(ev.query.get("level")), int(ev.query.get("days") or 0)), []).append(ev)
    order = {lvl: i for i, lvl in enumerate(LEVELS)}
    rows = []
    for (level, days), evs in sorted(groups.items(), key=lambda kv: (order.get(kv[0][0], 9), kv[0][1])):
        row: dict[str, Any] = {
            "level": level,
            "days": days,
            "n": len(evs),
            "delivered": sum(ev.delivered for ev in evs),
            "commonsense_macro": sum(ev.commonsense_pass and ev.hard is not None for ev in evs),
            "hard_macro": sum(ev.hard_pass for ev in evs),
            "final": sum(ev.passed for ev in evs),
        }
        values = [ev._counted().values for ev in evs]
        for key in ALL_KEYS:
            row[f"{key}_true"] = sum(1 for v in values if v[key] is True)
        rows.append(row)
    return rows


def official_split_of(split_names: set[str], n: int) -> str | None:
    """The official split whose hard-coded denominators apply, when the set is exactly that whole split."""
    if len(split_names) == 1:
        split = next(iter(split_names))
        if split in OFFICIAL_DENOMINATORS and SPLIT_SIZES.get(split) == n:
            return split
    return None


@dataclass
class Aggregate:
    metrics: dict[str, float]
    denominators: tuple[int, int, int]
    denominator_source: str
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def summarise(evaluations: Sequence[PlanEvaluation], *, split: str | None) -> Aggregate:
    """Metrics and tables; hard-coded denominators for a whole official split, computed ones otherwise.

    The hard-coded ones count the official rows' constraints: where the queries differ (an update added or
    dropped a local constraint), the rate is over the constraints the queries state, computed."""
    denominators, source = computed_denominators(ev.query for ev in evaluations), "computed from the queries"
    if split is not None:
        if denominators == OFFICIAL_DENOMINATORS[split]:
            source = f"eval.py ({split})"
        else:
            source = f"computed from the queries (they state other constraints than eval.py's {split} rows)"
    metrics = aggregate(evaluations, denominators)
    tables = {
        "per_constraint": per_constraint_table(evaluations),
        "per_level_days": per_level_days_table(evaluations),
        "denominators": [
            {
                "n": denominators[0],
                "commonsense_total": denominators[1],
                "hard_total": denominators[2],
                "source": source,
            }
        ],
    }
    return Aggregate(metrics, denominators, source, tables)
