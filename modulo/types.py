"""Core data types: problems, verdicts, usage, iteration records and outcomes.

Everything here is plain pydantic data, serialisable to JSON, so that a run record can be written,
read back, replayed and reported on without importing any benchmark.
"""

from __future__ import annotations

import enum
import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

#: A plan is the benchmark's JSON value (TravelPlanner: a list of day objects).
PlanJSON = Any


def canonical_json(value: Any) -> str:
    """Deterministic JSON text (sorted keys, no spaces) used for hashing and plan comparison."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def plan_fingerprint(plan: PlanJSON) -> str:
    """A short content hash of a plan, used to notice repeated plans."""
    return hashlib.sha256(canonical_json(plan).encode()).hexdigest()[:16]


class Problem(BaseModel):
    """One task for the planner.

    ``query`` is the natural-language request; ``context`` is what the planner is given besides it
    (TravelPlanner's reference information, NATURAL PLAN's facts); ``constraints`` is the structured
    form the critics read; ``metadata`` holds level, days, split and the like.
    """

    model_config = ConfigDict(frozen=True)

    id: str
    benchmark: str
    query: str
    context: str = ""
    constraints: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)


class Verdict(BaseModel):
    """What one critic says about one plan.

    ``passed`` is the binary answer. ``applicable`` is false when the problem does not ask for what
    the critic checks (a hard constraint the query does not state): such a verdict is counted as a
    pass by the loop and left out of micro rates by evaluators. ``feedback`` is the text a backprompt
    may quote; ``details`` is structured evidence (day, field, offending value, rows, ...), ``hint``
    an optional constructive suggestion.
    """

    model_config = ConfigDict(frozen=True)

    critic: str = ""
    group: str = ""
    passed: bool
    applicable: bool = True
    feedback: str = ""
    details: dict[str, Any] = Field(default_factory=dict)
    hint: str | None = None
    #: set when the critic crashed and the run was configured to record the crash and go on
    error: str | None = None

    @property
    def accepts(self) -> bool:
        """True when this verdict does not block certification."""
        return self.error is None and (self.passed or not self.applicable)

    @classmethod
    def ok(cls, feedback: str = "", **details: Any) -> Verdict:
        return cls(passed=True, feedback=feedback, details=details)

    @classmethod
    def fail(cls, feedback: str, *, hint: str | None = None, **details: Any) -> Verdict:
        return cls(passed=False, feedback=feedback, hint=hint, details=details)

    @classmethod
    def not_applicable(cls, feedback: str = "not asked for by the query") -> Verdict:
        return cls(passed=True, applicable=False, feedback=feedback)


class Usage(BaseModel):
    """Tokens, dollars and calls. Cache hits cost nothing but record what they would have cost."""

    model_config = ConfigDict(frozen=True)

    calls: int = 0
    failed_calls: int = 0
    cached_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    #: what cached calls would have cost had they been sent
    cached_cost_usd: float = 0.0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            calls=self.calls + other.calls,
            failed_calls=self.failed_calls + other.failed_calls,
            cached_calls=self.cached_calls + other.cached_calls,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
            cached_cost_usd=self.cached_cost_usd + other.cached_cost_usd,
        )


class Message(BaseModel):
    model_config = ConfigDict(frozen=True)

    role: Literal["system", "user", "assistant"]
    content: str


class Outcome(enum.StrEnum):
    CERTIFIED = "certified"
    """every active critic accepted the plan"""
    EXHAUSTED = "exhausted"
    """the budget ran out; the best plan so far is returned, not certified"""
    FAILED = "failed"
    """no parsable plan was ever produced"""
    UNSOLVABLE = "unsolvable"
    """the benchmark proved that no plan can pass"""
    ERROR = "error"
    """the problem could not be run (a critic crashed with on_critic_error=stop, a permanent LLM error)"""
    SKIPPED = "skipped"
    """never started because a run-level budget was spent first"""


class Fault(BaseModel):
    """A transport failure seen (and retried or not) while calling a model. Never sent to the model."""

    model_config = ConfigDict(frozen=True)

    kind: str
    message: str
    attempt: int = 0
    stage: str = ""


class ToolCall(BaseModel):
    """A tool call a model asked for: ``arguments`` parsed from its JSON (``raw_arguments`` keeps text that
    was not a JSON object; ``arguments`` is then empty)."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    raw_arguments: str | None = None


class LLMCall(BaseModel):
    """One logical call to a model (retries included) as it appears in a trace."""

    stage: Literal["generate", "reformulate"]
    messages: list[Message]
    reply: str | None
    #: the tools the model was asked to call, when it called any (native tool calling)
    tool_calls: list[ToolCall] = Field(default_factory=list)
    model: str = ""
    usage: Usage = Field(default_factory=Usage)
    cached: bool = False
    finish_reason: str | None = None
    faults: list[Fault] = Field(default_factory=list)
    seconds: float = 0.0


class IterationRecord(BaseModel):
    """Everything that happened in one generate -> reformulate -> critique -> backprompt round."""

    index: int
    #: the messages sent to the generator at this iteration (the first prompt or a backprompt)
    prompt: list[Message] = Field(default_factory=list)
    prompt_sha256: str = ""
    raw_reply: str | None = None
    plan: PlanJSON = None
    plan_sha256: str | None = None
    format_error: str | None = None
    verdicts: list[Verdict] = Field(default_factory=list)
    #: critics not run because a format critic failed first
    gated: list[str] = Field(default_factory=list)
    #: index of an earlier iteration that proposed exactly the same plan
    repeat_of: int | None = None
    #: draw number of the generator request: how many earlier iterations of this problem sent the same
    #: messages (a repeat at temperature > 0 is a new sample with its own cache entry)
    draw: int = 0
    #: the sampling temperature of the generator request (None: no model was asked)
    temperature: float | None = None
    #: > 0 when the prompt was varied because it repeated an earlier one (metacontroller.on_fixed_point=vary)
    variation: int = 0
    #: the request built after this iteration repeats the one sent at this earlier iteration (at
    #: temperature 0 it would get the same answer: a fixed point); None when the next request is new
    fixed_point_of: int | None = None
    #: how this iteration's model calls were served: "fresh" (all sent to the model), "cache" (all
    #: answered from the response cache or a recording), "mixed", or "none" (no model call)
    served: Literal["fresh", "cache", "mixed", "none"] = "none"
    #: the backprompt text built from this iteration's verdicts (sent at the next iteration)
    backprompt: str | None = None
    calls: list[LLMCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    timings: dict[str, float] = Field(default_factory=dict)
    #: what a tool-using generator did at this iteration: its tool steps, failure mode, notebook (see
    #: :mod:`modulo.tool_agent`); None for generators without tools
    tool_use: dict[str, Any] | None = None

    @property
    def failing(self) -> list[Verdict]:
        return [v for v in self.verdicts if not v.accepts]

    @property
    def passed_count(self) -> int:
        return sum(1 for v in self.verdicts if v.accepts)

    @property
    def all_accept(self) -> bool:
        return self.plan is not None and not self.gated and all(v.accepts for v in self.verdicts)


class ProblemResult(BaseModel):
    """The record of one finished problem: one line of ``records.jsonl``."""

    problem_id: str
    benchmark: str
    outcome: Outcome
    #: why the loop stopped: all_passed, iterations, tokens, dollars, seconds, fixed_point, repeats,
    #: generator_ignores_feedback, unsolvable, llm_error, critic_error, run_budget
    stop_reason: str
    best_plan: PlanJSON = None
    #: the earliest iteration with the most accepting verdicts
    best_iteration: int | None = None
    #: whether every active critic accepted the best plan
    best_certified: bool = False
    #: critics whose verdict on the best plan rejected it (failed or crashed; gated critics are not listed)
    best_rejected_by: list[str] = Field(default_factory=list)
    iterations: list[IterationRecord] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    explanation: str | None = None
    error: str | None = None
    seconds: float = 0.0
    templates: dict[str, str] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def certified(self) -> bool:
        return self.outcome is Outcome.CERTIFIED
