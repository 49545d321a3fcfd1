"""Critic mutation testing of the synthesized benchmarks: ``modulo critics audit synth/FAMILY``.

Every witness plan is mutated (swap, shift by one or two steps, drop, duplicate, collide, and
boundary mutants that land exactly one step outside a window or one unit over a limit, or exactly on
it) and each critic's verdict is compared with Z3's evaluation of the constraints that critic is
responsible for. The report (:class:`modulo.audit.AuditReport`) gives, per critic and per mutation
kind, how many invalid plans were rejected (the mutation score) and how many valid plans were wrongly
rejected. Critics are bound by :func:`modulo.audit.load_critics`, the way the loop binds them.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TextIO

import click

from modulo import components
from modulo.audit import ALL, AuditReport, finish, load_critics, rejects
from modulo.critic import Critic
from modulo.errors import ModuloError
from modulo.types import Problem

from .benchmark import SynthBenchmark
from .common import rng_for

__all__ = ["ALL", "audit_command", "audit_main", "audit_synth", "load_critics"]


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
def audit_command(benchmark: str) -> click.Command:
    """``modulo critics audit synth/FAMILY [OPTIONS]``; exit 0 when every critic agrees with Z3."""

    @click.command(help=__doc__.split("\n\n")[1])
    @click.option("--n", type=int, default=100, show_default=True, help="synthesized problems to mutate")
    @click.option("--seed", type=int, default=0, show_default=True)
    @click.option("--difficulty", type=click.Choice(("easy", "medium", "hard")), default="medium", show_default=True)
    @click.option("--critic", multiple=True, help="audit only this critic (repeatable)")
    @click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), help="also write the report")
    def audit(n: int, seed: int, difficulty: str, critic: tuple[str, ...], json_path: Path | None) -> int:
        return audit_main(benchmark, n=n, seed=seed, difficulty=difficulty, critics=critic, json_path=json_path)

    return audit


def audit_main(
    benchmark: str,
    *,
    n: int = 100,
    seed: int = 0,
    difficulty: str = "medium",
    critics: Sequence[str] = (),
    json_path: Path | None = None,
    out: TextIO | None = None,
) -> int:
    """Audit the critics of ``benchmark`` (``synth/FAMILY``) on ``n`` problems and print the report (and write
    it to ``json_path``); 0 when every critic agrees with Z3, 1 when not."""
    factory = components.benchmarks.get(benchmark)
    if not (isinstance(factory, type) and issubclass(factory, SynthBenchmark)):
        raise ModuloError(f"{benchmark!r} is not a synthesized benchmark (synth/tasks, synth/calendar, ...)")
    bench = factory(n=n, seed=seed, difficulty=difficulty)
    report = audit_synth(bench, load_critics(bench, list(critics) or None))
    return finish(report, out or sys.stdout, json_path)
