"""Critic mutation testing: ``modulo critics audit BENCHMARK``.

For a synthesized benchmark, every witness plan is mutated (swap, shift by one or two steps, drop,
duplicate, collide, and boundary mutants that land exactly one step outside a window or one unit
over a limit, or exactly on it) and each critic's verdict is compared with Z3's evaluation of the
constraints that critic is responsible for. For a benchmark with recorded golden verdicts
(TravelPlanner: ``<data_dir>/travelplanner/golden/plans.jsonl``) the critics are compared with those
verdicts instead. Either way the report gives, per critic and per mutation kind, how many invalid
plans were rejected (the mutation score) and how many valid plans were wrongly rejected.

Critics are loaded generically from the registry (``modulo.components.critics``) and bound with
``modulo.registry.bind_arguments(..., inject={"benchmark": bench})``, so any benchmark's critics can
be audited the same way.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from modulo import components
from modulo.benchmark import Benchmark
from modulo.critic import Critic, critic_meta
from modulo.errors import CriticError, ModuloError
from modulo.registry import bind_arguments
from modulo.settings import data_dir
from modulo.types import Problem

from .benchmark import SynthBenchmark
from .common import rng_for

ALL = "(all critics)"

#: TravelPlanner critic name -> the key of the official evaluation in the golden verdicts
TRAVELPLANNER_KEYS: dict[str, str] = {
    "within_sandbox": "is_valid_information_in_sandbox",
    "complete_information": "is_not_absent",
    "within_current_city": "is_valid_information_in_current_city",
    "reasonable_city_route": "is_reasonable_visiting_city",
    "diverse_restaurants": "is_valid_restaurants",
    "diverse_attractions": "is_valid_attractions",
    "non_conflicting_transportation": "is_valid_transportation",
    "minimum_nights_stay": "is_valid_accommodation",
    "budget": "valid_cost",
    "room_rule": "valid_room_rule",
    "room_type": "valid_room_type",
    "cuisine": "valid_cuisine",
    "transportation": "valid_transportation",
}


@dataclass
class Tally:
    """Counts for one (critic, mutation kind) cell."""

    invalid: int = 0
    caught: int = 0
    valid: int = 0
    false_rejects: int = 0

    @property
    def missed(self) -> int:
        return self.invalid - self.caught

    @property
    def mutation_score(self) -> float | None:
        return self.caught / self.invalid if self.invalid else None

    @property
    def false_reject_rate(self) -> float | None:
        return self.false_rejects / self.valid if self.valid else None


@dataclass
class AuditReport:
    """Per critic and per mutation kind: invalid plans rejected, valid plans wrongly rejected."""

    benchmark: str
    reference: str
    cells: dict[tuple[str, str], Tally] = field(default_factory=lambda: defaultdict(Tally))
    problems: int = 0
    plans: int = 0
    unreadable: int = 0
    examples: list[dict[str, Any]] = field(default_factory=list)
    max_examples: int = 20

    def add(self, critic: str, kind: str, *, invalid: bool, rejected: bool, example: dict[str, Any]) -> None:
        cell = self.cells[(critic, kind)]
        if invalid:
            cell.invalid += 1
            cell.caught += rejected
        else:
            cell.valid += 1
            cell.false_rejects += rejected
        if invalid != rejected and len(self.examples) < self.max_examples:
            self.examples.append({"critic": critic, "mutation": kind, "expected_reject": invalid, **example})

    def tally(self, critic: str, kind: str | None = None) -> Tally:
        """One cell, or a critic's total over every mutation kind (``kind=None``)."""
        if kind is not None:
            return self.cells.get((critic, kind), Tally())
        total = Tally()
        for (c, _k), t in self.cells.items():
            if c == critic:
                total.invalid += t.invalid
                total.caught += t.caught
                total.valid += t.valid
                total.false_rejects += t.false_rejects
        return total

    def critics(self) -> list[str]:
        names = sorted({c for c, _k in self.cells if c != ALL})
        return [*names, ALL] if any(c == ALL for c, _k in self.cells) else names

    def kinds(self) -> list[str]:
        return sorted({k for _c, k in self.cells})

    def rows(self) -> list[dict[str, Any]]:
        out = []
        for (c, k), t in sorted(self.cells.items()):
            out.append(
                {
                    "critic": c,
                    "mutation": k,
                    "invalid": t.invalid,
                    "rejected": t.caught,
                    "missed": t.missed,
                    "valid": t.valid,
                    "wrongly_rejected": t.false_rejects,
                    "mutation_score": t.mutation_score,
                    "false_reject_rate": t.false_reject_rate,
                }
            )
        return out

    @property
    def clean(self) -> bool:
        """Every invalid plan rejected and no valid plan rejected, by every critic."""
        return all(t.missed == 0 and t.false_rejects == 0 for t in self.cells.values())

    def render(self) -> str:
        lines = [
            f"# Critic audit: {self.benchmark} (reference: {self.reference})",
            "",
            f"{self.problems} problems, {self.plans} plans checked, {self.unreadable} unreadable plans skipped.",
            "",
        ]
        kinds = self.kinds()
        lines.append("| critic | " + " | ".join(kinds) + " | total |")
        lines.append("|---" * (len(kinds) + 2) + "|")
        for c in self.critics():
            cells = [_cell(self.tally(c, k)) for k in kinds]
            lines.append(f"| {c} | " + " | ".join(cells) + f" | {_cell(self.tally(c))} |")
        lines += [
            "",
            "Each cell: invalid plans rejected / invalid plans; then valid plans wrongly rejected / valid plans.",
        ]
        if self.examples:
            lines += ["", "Disagreements (first ones):"]
            for ex in self.examples:
                want = "reject" if ex["expected_reject"] else "accept"
                lines.append(
                    f"- {ex['critic']} on {ex.get('problem_id')} ({ex['mutation']}): should {want}. "
                    f"{str(ex.get('feedback', ''))[:200]}"
                )
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark,
            "reference": self.reference,
            "problems": self.problems,
            "plans": self.plans,
            "unreadable": self.unreadable,
            "clean": self.clean,
            "rows": self.rows(),
            "examples": self.examples,
        }


def _cell(t: Tally) -> str:
    if not t.invalid and not t.valid:
        return "-"
    return f"{t.caught}/{t.invalid}; {t.false_rejects}/{t.valid}"


# -- loading critics -----------------------------------------------------------------------------
def load_critics(
    benchmark: Benchmark, names: Sequence[str] | None = None, args: Mapping[str, Any] | None = None
) -> dict[str, Critic]:
    """The benchmark's registered critics (format excluded), bound like the loop binds them.

    ``args`` are passed to every critic that accepts them (for example ``mode="official"``).
    """
    wanted = list(names) if names else [n for n in benchmark.critic_names() if n != "format"]
    out: dict[str, Critic] = {}
    for name in wanted:
        factory = components.critics.get(name)
        meta = critic_meta(factory)
        if meta["benchmarks"] and benchmark.name not in meta["benchmarks"]:
            continue
        import inspect

        params = inspect.signature(factory).parameters
        given = {k: v for k, v in (args or {}).items() if k in params}
        kwargs = bind_arguments("critic", name, factory, given, inject={"benchmark": benchmark})
        out[name] = factory(**kwargs)
    return out


def _rejects(c: Critic, problem: Problem, plan: Any) -> tuple[bool, str]:
    try:
        v = c(problem, plan)
    except CriticError as exc:
        return True, f"crashed: {exc}"
    return (not v.accepts), v.feedback


# -- synthesized benchmarks ----------------------------------------------------------------------
def audit_synth(
    benchmark: SynthBenchmark,
    critics: Mapping[str, Critic] | None = None,
    *,
    problems: Iterable[Problem] | None = None,
    kinds_of: Mapping[str, Sequence[str]] | None = None,
) -> AuditReport:
    """Mutate every witness and compare each critic with Z3 on the constraints it is responsible for.

    ``critics`` defaults to the registered ones; ``kinds_of`` maps a critic name to the constraint
    kinds it answers for (default: the family's own mapping).
    """
    family = benchmark.family
    bound = dict(critics) if critics is not None else load_critics(benchmark)
    kinds_map = dict(kinds_of or family.critic_kinds)
    report = AuditReport(benchmark=benchmark.name, reference="Z3 on the full constraint set")
    for problem in problems if problems is not None else benchmark.load("generated"):
        witness = problem.metadata.get("witness")
        if witness is None:
            continue
        report.problems += 1
        spec = problem.constraints
        rng = rng_for("audit", problem.id)
        mutants = [("identity", witness), *((m.kind, m.plan) for m in family.mutants(rng, spec, witness))]
        for kind, plan in mutants:
            if family.check_format(spec, plan):
                report.unreadable += 1
                continue
            truths = family.z3_truths(spec, plan)
            if truths is None:
                report.unreadable += 1
                continue
            report.plans += 1
            any_reject = False
            for name, crit in bound.items():
                mine = [c["id"] for c in spec["constraints"] if c["kind"] in kinds_map.get(name, ())]
                invalid = not all(truths[cid] for cid in mine)
                rejected, feedback = _rejects(crit, problem, plan)
                any_reject = any_reject or rejected
                report.add(
                    name,
                    kind,
                    invalid=invalid,
                    rejected=rejected,
                    example={"problem_id": problem.id, "plan": plan, "feedback": feedback},
                )
            report.add(
                ALL,
                kind,
                invalid=not all(truths.values()),
                rejected=any_reject,
                example={"problem_id": problem.id, "plan": plan},
            )
    return report


# -- benchmarks with golden verdicts ---------------------------------------------------------------
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
    keys: Mapping[str, str],
) -> AuditReport:
    """Compare critics with recorded verdicts: ``false`` or ``"error: ..."`` must be rejected,
    ``true`` and ``null`` (not applicable) accepted. Undelivered plans are skipped. The mutation kind
    is the family of the golden plan's first mutation label (``base`` for unmutated plans)."""
    report = AuditReport(benchmark=benchmark.name, reference="recorded official verdicts")
    seen: set[str] = set()
    maker = getattr(benchmark, "problem_from_golden", None)
    for row in rows:
        if not row.get("delivered"):
            report.unreadable += 1
            continue
        q = row["query"]
        problem = (
            maker(row)
            if callable(maker)
            else Problem(
                id=str(row["plan_id"]), benchmark=benchmark.name, query=str(q.get("query", "")), constraints=dict(q)
            )
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
            rejected, feedback = _rejects(crit, problem, row["plan"])
            report.add(
                name,
                kind,
                invalid=invalid,
                rejected=rejected,
                example={"problem_id": row["plan_id"], "golden": expected, "feedback": feedback},
            )
    report.problems = len(seen)
    return report


# -- command line ------------------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="modulo critics audit", description=__doc__.split("\n\n")[0])
    p.add_argument("benchmark", help="synth/tasks, synth/calendar, synth/trip or travelplanner")
    p.add_argument("--n", type=int, default=100, help="synthesized problems to mutate (default 100)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--difficulty", default="medium", choices=("easy", "medium", "hard"))
    p.add_argument("--critic", action="append", default=None, help="audit only this critic (repeatable)")
    p.add_argument("--mode", default=None, help="critic option mode= (travelplanner: official or strict)")
    p.add_argument("--golden", type=Path, default=None, help="golden verdicts file (default: the data folder's)")
    p.add_argument("--limit", type=int, default=None, help="audit only the first N golden plans")
    p.add_argument("--data-dir", type=Path, default=None)
    p.add_argument("--json", type=Path, default=None, help="also write the report as JSON")
    return p


def audit_main(argv: list[str], out: TextIO | None = None) -> int:
    """``modulo critics audit BENCHMARK [options]``; exit 0 when every critic agrees with the reference."""
    out = out or sys.stdout
    args = _parser().parse_args(argv)
    try:
        factory = components.benchmarks.get(args.benchmark)
        if isinstance(factory, type) and issubclass(factory, SynthBenchmark):
            bench: Benchmark = factory(n=args.n, seed=args.seed, difficulty=args.difficulty)
            assert isinstance(bench, SynthBenchmark)
            report = audit_synth(bench, load_critics(bench, args.critic))
        else:
            kwargs = bind_arguments(
                "benchmark", args.benchmark, factory, {}, inject={"data_dir": data_dir(args.data_dir)}
            )
            bench = factory(**kwargs)
            golden = args.golden or data_dir(args.data_dir) / args.benchmark / "golden" / "plans.jsonl"
            keys = TRAVELPLANNER_KEYS if args.benchmark == "travelplanner" else {}
            if not keys:
                print(f"no golden-verdict key map for {args.benchmark!r}", file=sys.stderr)
                return 2
            crit = load_critics(bench, args.critic, {"mode": args.mode or "official"})
            report = audit_golden(bench, crit, golden_rows(golden, args.limit), keys=keys)
    except ModuloError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out.write(report.render())
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report.to_json(), indent=1, default=str), encoding="utf-8")
    return 0 if report.clean else 1
