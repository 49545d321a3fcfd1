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
