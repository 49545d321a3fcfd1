"""Critic mutation testing of the synthesized benchmarks: ``modulo critics audit synth/FAMILY``.

Every witness plan is mutated (swap, shift by one or two steps, drop, duplicate, collide, and
boundary mutants that land exactly one step outside a window or one unit over a limit, or exactly on
it) and each critic's verdict is compared with Z3's evaluation of the constraints that critic is
responsible for. The report (:class:`modulo.audit.AuditReport`) gives, per critic and per mutation
kind, how many invalid plans were rejected (the mutation score) and how many valid plans were wrongly
rejected. Critics are bound by :func:`modulo.audit.load_critics`, the way the loop binds them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TextIO

from modulo import components
from modulo.audit import ALL, AuditReport, finish, load_critics, rejects
from modulo.benchmark import CommandParser
from modulo.critic import Critic
from modulo.errors import ModuloError
from modulo.types import Problem

from .benchmark import SynthBenchmark
from .common import rng_for

__all__ = ["ALL", "audit_main", "audit_synth", "load_critics"]


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
                rejected, feedback = rejects(crit, problem, plan)
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


# -- command line ------------------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    p = CommandParser(prog="modulo critics audit", description=__doc__.split("\n\n")[0])
    p.add_argument("benchmark", help="synth/tasks, synth/calendar or synth/trip")
    p.add_argument("--n", type=int, default=100, help="synthesized problems to mutate (default 100)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--difficulty", default="medium", choices=("easy", "medium", "hard"))
    p.add_argument("--critic", action="append", default=None, help="audit only this critic (repeatable)")
    p.add_argument("--json", type=Path, default=None, help="also write the report as JSON")
    return p


def audit_main(argv: list[str], out: TextIO | None = None) -> int:
    """``modulo critics audit synth/FAMILY [options]``; exit 0 when every critic agrees with Z3."""
    out = out or sys.stdout
    args = _parser().parse_args(argv)
    factory = components.benchmarks.get(args.benchmark)
    if not (isinstance(factory, type) and issubclass(factory, SynthBenchmark)):
        raise ModuloError(f"{args.benchmark!r} is not a synthesized benchmark (synth/tasks, synth/calendar, ...)")
    bench = factory(n=args.n, seed=args.seed, difficulty=args.difficulty)
    report = audit_synth(bench, load_critics(bench, args.critic))
    return finish(report, out, args.json)
