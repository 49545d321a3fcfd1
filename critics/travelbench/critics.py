"""TravelBench's deterministic critic: every tool call of the episode was valid.

The judge's rubric is an LLM's opinion and lives in the episode (:mod:`critics.travelbench.episode`);
what can be checked exactly is the tool-call error count that the paper's score multiplies by.
"""

from __future__ import annotations

from modulo.critic import critic
from modulo.types import PlanJSON, Problem, Verdict

BENCHMARKS = ("travelbench/single_turn", "travelbench/multi_turn", "travelbench/unsolvable")


@critic(
    "travelbench_tool_calls",
    group="hard",
    benchmarks=BENCHMARKS,
    description="every tool call names one of the ten tools with arguments its schema and rules accept",
)
def travelbench_tool_calls(problem: Problem, plan: PlanJSON) -> Verdict:
    """Every tool call of the episode was valid (a tool-call error lowers the TravelBench score)."""
    calls = [c for m in plan.get("messages", []) for c in (m.get("tool_calls") or [])]
    if not calls:
        return Verdict.not_applicable("no tool was called")
    bad = [c for c in calls if c.get("error")]
    if not bad:
        return Verdict.ok(f"all {len(calls)} tool calls were valid")
    listed = "; ".join(str(c["error"]) for c in bad[:5])
    return Verdict.fail(
        f"{len(bad)} of {len(calls)} tool calls were invalid: {listed}", errors=len(bad), calls=len(calls)
    )


@critic(
    "travelbench_unsolved",
    group="hard",
    benchmarks=("travelbench/unsolvable",),
    source="oracle",
    description="an unsolvable request is declined with [Unsolved] in the first assistant message",
)
def travelbench_unsolved(problem: Problem, plan: PlanJSON) -> Verdict:
    """The paper's rule as a critic: answering an unsolvable request is never certified. It reads the
    benchmark's label (``Problem.solvable``); the episode generator ignores feedback, so no label reaches a
    prompt. A declined request is an abstention and never reaches the critics."""
    if problem.solvable is not False:
        return Verdict.not_applicable("a solvable request (a control): answering it is right")
    if plan.get("first_called_tools"):
        return Verdict.fail("This request cannot be completed, but the first assistant message called a tool.")
    return Verdict.fail("This request cannot be completed, but the first assistant message did not decline it.")
