"""TravelPlanner's critic audit (``modulo critics audit travelplanner``) and its fuzzing seeds.

The reference is the recorded official verdicts of the golden corpus
(``<data_dir>/travelplanner/golden/plans.jsonl``): each critic, bound in ``official`` mode by
default, must reject exactly the plans the official evaluator failed on its constraint. The mutation
kind of a golden plan is the family of its first mutation label (``base`` for unmutated plans).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from modulo.audit import AuditReport, finish, load_critics, rejects
from modulo.benchmark import Benchmark
from modulo.critic import Critic
from modulo.errors import ModuloError, PlanFormatError
from modulo.types import PlanJSON, Problem

from .critics import OFFICIAL_KEYS

if TYPE_CHECKING:
    from .benchmark import TravelPlanner


def golden_path(benchmark: TravelPlanner) -> Path:
    return benchmark.root / "golden" / "plans.jsonl"


def golden_rows(path: Path, limit: int | None = None) -> list[dict[str, Any]]:
    if not path.is_file():
        raise ModuloError(f"golden verdicts not found: {path}")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return rows[:limit] if limit else rows


def golden_value(row: Mapping[str, Any], key: str) -> Any:
    """The official verdict of ``key`` for one golden plan, the hard ones ungated (as a lone critic sees them)."""
    for box in ("commonsense", "hard_ungated"):
        values = row.get(box) or {}
        if key in values:
            return values[key]
    return None


def audit_golden(
    benchmark: Benchmark,
    critics: Mapping[str, Critic],
    rows: Iterable[Mapping[str, Any]],
    *,
    keys: Mapping[str, str] = OFFICIAL_KEYS,
) -> AuditReport:
    """Compare critics with recorded verdicts: ``false`` or ``"error: ..."`` must be rejected,
    ``true`` and ``null`` (not applicable) accepted. Undelivered plans are skipped."""
    report = AuditReport(benchmark=benchmark.name, reference="recorded official verdicts")
    seen: set[str] = set()
    for row in rows:
        if not row.get("delivered"):
            report.unreadable += 1
            continue
        q = row["query"]
        problem = Problem(
            id=str(row["plan_id"]), benchmark=benchmark.name, query=str(q.get("query", "")), constraints=dict(q)
        )
        seen.add(str(row.get("family", row["plan_id"])))
        labels = row.get("mutations") or []
        kind = "base" if not labels else ("multi" if len(labels) > 1 else str(labels[0]).split(".")[0])
        report.plans += 1
        for name, crit in critics.items():
            key = keys.get(name)
            if key is None:
                continue
            expected = golden_value(row, key)
            invalid = expected is False or (isinstance(expected, str) and expected.startswith("error"))
            rejected, feedback = rejects(crit, problem, row["plan"])
            report.add(
                name,
                kind,
                invalid=invalid,
                rejected=rejected,
                example={"problem_id": row["plan_id"], "golden": expected, "feedback": feedback},
            )
    report.problems = len(seen)
    return report


def audit_command(benchmark: TravelPlanner) -> click.Command:
    """``modulo critics audit travelplanner [OPTIONS]``; exit 0 when every critic agrees with the golden verdicts."""

    @click.command(help=__doc__.split("\n\n")[1])
    @click.option("--critic", multiple=True, help="audit only this critic (repeatable)")
    @click.option(
        "--mode", type=click.Choice(("official", "strict")), default="official", show_default=True, help="critic mode"
    )
    @click.option(
        "--golden", type=click.Path(dir_okay=False, path_type=Path), help="golden verdicts file (default: the data's)"
    )
    @click.option("--limit", type=int, default=None, help="audit only the first N golden plans")
    @click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), help="also write the report")
    def audit(
        critic: tuple[str, ...], mode: str, golden: Path | None, limit: int | None, json_path: Path | None
    ) -> int:
        critics = load_critics(benchmark, list(critic) or None, {"mode": mode})
        report = audit_golden(benchmark, critics, golden_rows(golden or golden_path(benchmark), limit))
        return finish(report, sys.stdout, json_path)

    return audit


def golden_plans(benchmark: TravelPlanner, n: int) -> list[tuple[Problem, PlanJSON]]:
    """Up to ``n`` validation problems, each with a golden plan that passes the format checks."""
    by_id = {p.id: p for p in benchmark.select("validation")}
    plans: dict[str, PlanJSON] = {}
    with golden_path(benchmark).open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            pid = f"validation-{row.get('query_idx')}"
            good = row.get("split") == "validation" and pid in by_id and isinstance(row.get("plan"), list)
            if good and pid not in plans and _format_ok(benchmark, by_id[pid], row["plan"]):
                plans[pid] = row["plan"]
            if len(plans) >= n:
                break
    return [(by_id[pid], plan) for pid, plan in plans.items()]


def _format_ok(bench: Benchmark, problem: Problem, plan: PlanJSON) -> bool:
    try:
        value = bench.validate_plan(plan)
    except PlanFormatError:
        return False
    return not bench.check_format(problem, value)
