"""Domain-agnostic critics."""

from __future__ import annotations

from modulo.benchmark import Benchmark
from modulo.critic import FORMAT_GROUP, critic
from modulo.types import PlanJSON, Problem, Verdict


@critic(
    "format",
    group=FORMAT_GROUP,
    priority=0,
    description="the reply became a plan that fits the benchmark's schema and structure",
)
def format_critic(problem: Problem, plan: PlanJSON, *, benchmark: Benchmark) -> Verdict:
    """The plan validates against the benchmark's schema and passes its structural checks.

    It runs the benchmark's own checks, so it is not declared ``inline``: the binding makes the instance
    bound for a benchmark that declares them quick (``Benchmark.quick_format``) run inline."""
    if plan is None:
        return Verdict.fail("No plan could be read from your answer.")
    error = benchmark.plan_error(plan)
    if error is not None:
        return Verdict.fail(f"The plan does not follow the required format: {error}.", error_text=error)
    problems = benchmark.check_format(problem, plan)
    if problems:
        return Verdict.fail(
            "The plan does not follow the required format: " + "; ".join(problems) + ".", issues=problems
        )
    return Verdict(critic="format", group=FORMAT_GROUP, passed=True)  # labelled here: the core need not copy it
