"""A plugin benchmark outside modulo: pick numbers from a pool that sum to a target.

It reaches modulo only through the public door: entry points for the benchmark and its critic, its
own templates (``template_dir``), its own ``modulo synth`` and ``modulo critics audit`` commands (click
commands its hooks return) and a subcommand of its own (``modulo bench toybench/sum stats``).
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any, ClassVar

import click
from pydantic import BaseModel

from modulo.audit import AuditReport, finish, load_critics, rejects
from modulo.benchmark import Benchmark, EvalResult, MetricSpec
from modulo.critic import critic
from modulo.types import PlanJSON, Problem, Verdict


class SumPlan(BaseModel):
    numbers: list[int]


class SumBench(Benchmark):
    name: ClassVar[str] = "toybench/sum"
    description: ClassVar[str] = "pick numbers from a pool that sum to a target"
    plan_model: ClassVar[type[BaseModel] | None] = SumPlan
    template_dir: ClassVar[Path | None] = Path(__file__).parent / "templates"
    metrics: ClassVar[tuple[MetricSpec, ...]] = (MetricSpec("solved", "solved"),)
    primary_metric: ClassVar[str] = "solved"

    def __init__(self, data_dir: Path | None = None, *, n: int = 3, seed: int = 0) -> None:
        super().__init__(data_dir)
        self.n, self.seed = n, seed

    def splits(self) -> list[str]:
        return ["generated"]

    def load(self, split: str) -> list[Problem]:
        rng = random.Random(self.seed)
        out = []
        for i in range(self.n):
            pool = sorted(rng.sample(range(1, 20), 5))
            target = pool[0] + pool[1]
            out.append(
                Problem(
                    id=f"sum-{self.seed}-{i}",
                    benchmark=self.name,
                    query=f"Pick two numbers that sum to {target}.",
                    constraints={"pool": pool, "target": target},
                    metadata={"witness": {"numbers": pool[:2]}},
                )
            )
        return out

    def prompt_variables(self, problem: Problem) -> dict[str, Any]:
        return {**super().prompt_variables(problem), "pool": ", ".join(map(str, problem.constraints["pool"]))}

    def critic_names(self) -> list[str]:
        return ["format", "toybench/sum_ok"]

    def evaluate(self, problems: Any, plans: Any) -> EvalResult:
        per = [
            {"problem_id": p.id, "passed": plan is not None and _ok(p, plan)}
            for p, plan in zip(problems, plans, strict=True)
        ]
        return EvalResult(metrics={"solved": sum(r["passed"] for r in per) / max(1, len(per))}, per_problem=per)

    def fuzz_cases(self, n: int) -> list[tuple[Problem, PlanJSON]]:
        return [(p, p.metadata["witness"]) for p in self.load("generated")[:n]]

    # -- the benchmark's commands (click commands the modulo CLI mounts) --------------------------
    def synth_command(self) -> click.Command:
        @click.command(help="Write N generated problems to OUT (JSONL).")
        @click.option("--n", type=int, default=3, show_default=True, help="problems")
        @click.option("--seed", type=int, default=0, show_default=True)
        @click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True)
        def synth(n: int, seed: int, out: Path) -> None:
            problems = SumBench(n=n, seed=seed).load("generated")
            out.write_text("".join(q.model_dump_json() + "\n" for q in problems), encoding="utf-8")
            click.echo(f"toybench wrote {len(problems)} problems to {out}")

        return synth

    def audit_command(self) -> click.Command:
        @click.command(help="Each critic on the witness (must accept) and on a broken witness (must reject).")
        def audit() -> int:
            report = AuditReport(benchmark=self.name, reference="the witness and a broken witness")
            critics = load_critics(self)
            for problem, good in self.fuzz_cases(self.n):
                report.problems += 1
                bad = {"numbers": [good["numbers"][0] + 1, good["numbers"][1]]}
                for kind, plan, invalid in (("identity", good, False), ("plus_one", bad, True)):
                    report.plans += 1
                    for name, c in critics.items():
                        rejected, feedback = rejects(c, problem, plan)
                        report.add(name, kind, invalid=invalid, rejected=rejected, example={"feedback": feedback})
            return finish(report, sys.stdout, None)

        return audit

    def commands(self) -> list[click.Command]:
        @click.command(help="How many problems the benchmark holds, as JSON.")
        @click.option("--limit", type=int, default=None, help="count at most this many")
        def stats(limit: int | None) -> None:
            problems = self.load("generated")[:limit]
            click.echo(json.dumps({"benchmark": self.name, "problems": len(problems)}))

        return [stats]


def _ok(problem: Problem, plan: PlanJSON) -> bool:
    nums = plan["numbers"]
    return set(nums) <= set(problem.constraints["pool"]) and sum(nums) == problem.constraints["target"]


@critic("toybench/sum_ok", group="hard", benchmarks=("toybench/sum",), options=("hints",))
def sum_ok(problem: Problem, plan: PlanJSON, *, hints: bool = False) -> Verdict:
    """the numbers come from the pool and sum to the target"""
    if _ok(problem, plan):
        return Verdict.ok()
    hint = f"Try {problem.metadata['witness']['numbers']}." if hints else None
    return Verdict.fail(f"{plan['numbers']} does not sum to {problem.constraints['target']} from the pool.", hint=hint)
