"""A tiny benchmark for testing the core: pick ``k`` distinct integers in [0, 9] summing to ``target``."""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar

from pydantic import RootModel

from modulo.benchmark import Benchmark, EvalResult, MetricSpec
from modulo.critic import critic
from modulo.errors import PlanFormatError
from modulo.types import Problem, Verdict


class ToyPlan(RootModel[list[int]]):
    pass


class Toy(Benchmark):
    name = "toy"
    plan_model = ToyPlan
    metrics = (MetricSpec("solved", "Solved"),)
    primary_metric = "solved"
    prompts: ClassVar[dict[str, str]] = {}

    def __init__(self, data_dir: Any = None, *, n: int = 3, unsolvable: tuple[str, ...] = ()) -> None:
        super().__init__(None)
        self.n = n
        self.unsolvable = set(unsolvable)

    def splits(self) -> list[str]:
        return ["dev", "test"]

    def load(self, split: str) -> list[Problem]:
        return [
            Problem(
                id=f"toy-{i}",
                benchmark="toy",
                query=f"Pick 2 distinct digits summing to {i + 5}.",
                constraints={"k": 2, "target": i + 5},
            )
            for i in range(self.n)
        ]

    def parse(self, text: str, problem: Problem) -> Any:
        nums = [int(x) for x in re.findall(r"-?\d+", text)]
        if not nums:
            raise PlanFormatError("no numbers in the answer")
        return nums

    def check_format(self, problem: Problem, plan: Any) -> list[str]:
        return (
            [f"expected {problem.constraints['k']} numbers, got {len(plan)}"]
            if len(plan) != problem.constraints["k"]
            else []
        )

    def render_plan(self, plan: Any) -> str:
        return json.dumps(plan)

    def critic_names(self) -> list[str]:
        return ["format", "toy_sum", "toy_distinct"]

    def evaluate(self, problems: Any, plans: Any) -> EvalResult:
        per = []
        for p, plan in zip(problems, plans, strict=True):
            ok = plan is not None and len(plan) == 2 and sum(plan) == p.constraints["target"] and len(set(plan)) == 2
            per.append({"problem_id": p.id, "passed": ok})
        n = len(problems) or 1
        return EvalResult(metrics={"solved": sum(r["passed"] for r in per) / n}, per_problem=per)

    def prove_unsolvable(self, problem: Problem) -> str | None:
        return "target out of reach" if problem.id in self.unsolvable else None


@critic("toy_sum", group="hard", benchmarks=("toy",), description="the numbers sum to the target")
def toy_sum(problem: Problem, plan: Any) -> Verdict:
    total, target = sum(plan), problem.constraints["target"]
    if total != target:
        return Verdict.fail(f"The numbers sum to {total}, not {target}.", total=total)
    return Verdict.ok()


@critic("toy_distinct", group="commonsense", benchmarks=("toy",), priority=50, description="no repeated number")
def toy_distinct(problem: Problem, plan: Any) -> Verdict:
    if len(set(plan)) != len(plan):
        return Verdict.fail("The numbers must be distinct.")
    return Verdict.ok()


@critic("toy_crash", group="hard", benchmarks=("toy",), description="always crashes")
def toy_crash(problem: Problem, plan: Any) -> Verdict:
    raise RuntimeError("boom")
