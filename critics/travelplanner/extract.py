"""What ``modulo critics extract travelplanner`` needs: each critic's constraint in words, what an extracted
critic sees of a query, and gate sets labelled by the golden official verdicts.

The gate set of one critic is the golden corpus (``<data>/travelplanner/golden/plans.jsonl``: plans and
the verdicts the official evaluation scripts gave them, quirks included) restricted to delivered plans
that pass the format checks (once the ``{}`` padding of the annotated train plans is removed: the
official checks skip empty days), each labelled with the official verdict of that critic's key (the hard
constraints ungated, as a lone critic sees them): ``true`` and ``null`` (not applicable) are valid,
``false`` and a raised check are invalid. Plans derived from one base plan form one group (``family``),
so no variant of a held-out plan is ever shown to the model.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from modulo.benchmark import ConstraintInfo, GateCase
from modulo.errors import ConfigError, PlanFormatError
from modulo.types import Problem

from .audit import golden_path, golden_rows, golden_value
from .critics import _SPECS, OFFICIAL_KEYS

if TYPE_CHECKING:
    from .benchmark import TravelPlanner

NOTES = (
    "problem['constraints'] is the structured query: org, dest (a state or a city), days, "
    "visiting_city_number, people_number, budget (US dollars for the whole group), date (the list of dates "
    "as a string), level, and local_constraint {'house rule', 'cuisine', 'room type', 'transportation'} "
    "(null when not asked for). problem['reference_information'] is the text the planner was given: "
    "tables of flights, road trips, restaurants (with cuisines and average costs), attractions and "
    "accommodations (with price, room type, house rules, minimum nights, maximum occupancy) for the trip's "
    "cities. The plan is a list of day objects with the keys days, current_city ('from A to B' on a travel "
    "day), transportation, breakfast, attraction (places separated by ';'), lunch, dinner and "
    "accommodation; '-' means none, and a place is written 'Name, City'. The labels are the verdicts of "
    "TravelPlanner's official evaluation scripts, quirks included, which look places up in the full "
    "database: a place that is not in the reference information is not necessarily wrong."
)


def extraction_constraints(bench: TravelPlanner) -> list[ConstraintInfo]:
    return [
        ConstraintInfo(name=name, description=description, notes=NOTES, reference=name)
        for name, _key, _group, description in _SPECS
    ]


def critic_view(problem: Problem) -> dict[str, Any]:
    return {"query": problem.query, "constraints": problem.constraints, "reference_information": problem.context}


def gate_cases(bench: TravelPlanner, constraint: str, *, problems: int, seed: int) -> list[GateCase]:
    """Golden plans of ``problems`` families (chosen by a hash of the seed), labelled by the official verdict."""
    key = OFFICIAL_KEYS.get(constraint)
    if key is None:
        raise ConfigError(
            f"travelplanner has no constraint {constraint!r}; its constraints: {', '.join(OFFICIAL_KEYS)}"
        )
    by_family: dict[str, list[dict[str, Any]]] = {}
    for row in golden_rows(golden_path(bench)):
        by_family.setdefault(str(row["family"]), []).append(row)
    order = sorted(by_family, key=lambda f: hashlib.sha256(f"{seed}:{f}".encode()).hexdigest())
    problems_of: dict[str, dict[str, Problem]] = {}
    cases: list[GateCase] = []
    families = 0
    for family in order:
        if families >= problems:
            break
        found = [c for row in by_family[family] if (c := _case(bench, key, row, problems_of)) is not None]
        if found:  # a family none of whose plans passes the format checks is skipped
            families += 1
            cases += found
    return cases


def _case(
    bench: TravelPlanner, key: str, row: dict[str, Any], problems_of: dict[str, dict[str, Problem]]
) -> GateCase | None:
    """The gate case of one golden row, or None when its plan was not delivered or fails the format checks."""
    if not row.get("delivered") or not isinstance(row.get("plan"), list):
        return None
    split = str(row["split"])
    if split not in problems_of:
        problems_of[split] = {p.id: p for p in bench.select(split)}
    base = problems_of[split].get(f"{split}-{row['query_idx']}")
    if base is None:
        return None
    problem = base.model_copy(update={"id": str(row["plan_id"]), "constraints": dict(row["query"])})
    raw = list(row["plan"])
    while raw and raw[-1] == {}:  # the annotated train plans are padded to 7 days; the official checks skip {}
        raw.pop()
    try:
        plan = bench.validate_plan(raw)
    except PlanFormatError:
        return None
    if bench.check_format(problem, plan):
        return None
    expected = golden_value(row, key)
    invalid = expected is False or (isinstance(expected, str) and expected.startswith("error"))
    message = ((row.get("messages") or {}).get("commonsense") or {}).get(key) or (
        (row.get("messages") or {}).get("hard_ungated") or {}
    ).get(key)
    oracle = f"official {key}: {expected!r}" + (f" ({message})" if message else "")
    return GateCase(
        problem=problem,
        plan=plan,
        valid=not invalid,
        origin=str(row.get("source") or ""),
        oracle=oracle,
        group=str(row["family"]),
    )
