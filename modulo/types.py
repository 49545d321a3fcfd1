"""Core data types: problems, verdicts, usage, iteration records and outcomes.

Everything here is plain pydantic data, serialisable to JSON, so that a run record can be written,
read back, replayed and reported on without importing any benchmark.
"""

from __future__ import annotations

import copy
import enum
import json
import operator
from collections.abc import Callable, Iterable, Iterator
from itertools import filterfalse
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .hashing import sha256_hex
from .recordformat import expand_record

#: A plan is the benchmark's JSON value (TravelPlanner: a list of day objects).
PlanJSON = Any


#: what ``json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)`` builds on
#: every call (an encoder keeps no state between calls: one serves every thread)
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def canonical_json(value: Any) -> str:
    """Deterministic JSON text (sorted keys, no spaces) used for hashing and plan comparison."""
    return _CANONICAL.encode(value)


def json_lines(
    lines: Iterable[str], error: Callable[[int, json.JSONDecodeError], Exception]
) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` for each non-blank line of a JSON-lines text, numbered from 1; a line that
    is not JSON raises ``error(number, exc)`` (the reader's own error class and message)."""
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise error(number, exc) from None
        yield number, value


def attributes(obj: Any, *names: str) -> dict[str, Any]:
    """``{name: obj.name}`` for ``names``, in that order: the part of a ``to_json`` that copies attributes
    as they are."""
    return {name: getattr(obj, name) for name in names}


def without_lone_surrogates(text: str) -> str:
    """``text`` with each lone surrogate (half of a UTF-16 pair, as a JSON escape can carry it; UTF-8 cannot
    hold it) replaced by U+FFFD; a pair written as two escapes becomes its character."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def plan_fingerprint(plan: PlanJSON) -> str:
    """A short content hash of a plan, used to notice repeated plans."""
    return text_fingerprint(canonical_json(plan))


def text_fingerprint(canonical: str) -> str:
    """:func:`plan_fingerprint` of the plan whose :func:`canonical_json` text is ``canonical``."""
    return sha256_hex(canonical.encode())[:16]  # a plan's text is often over 2 KB: hashed keeping the GIL


def assign(model: BaseModel, **values: Any) -> None:
    """Set fields of an unfrozen model, unvalidated (values the framework made: what ``model.name = value``
    does for each without ``validate_assignment``, in one call). Only the model's own field names: unlike
    ``=``, a misspelt name is not refused."""
    model.__dict__.update(values)
    model.__pydantic_fields_set__.update(values)


class ProblemUpdate(BaseModel):
    """A change to a problem while the loop runs (a user's new constraint, a budget that moves).

    ``add`` is merged key by key into :attr:`Problem.constraints` (a key already there is replaced);
    ``query`` / ``context``, when set, replace the problem's; ``text`` is what the planner is told (the
    backprompt after the update quotes it, and the default :meth:`~modulo.benchmark.Benchmark.apply_update`
    appends it to the query). ``after`` is the turn after which a scheduled update applies (``None`` for an
    update a user's answer carries, applied at once); ``source`` says where it came from (``config`` for
    ``user.updates``, ``user`` for one a user yields or an answer reveals).
    """

    model_config = ConfigDict(frozen=True)

    add: dict[str, Any] = Field(default_factory=dict)
    query: str | None = None
    context: str | None = None
    text: str = ""
    after: int | None = None
    source: str = "config"


class _ReadOnly:
    """What a read-only container of a problem does: refuse every change, pickle as itself, and copy
    (``copy.copy``, ``copy.deepcopy``) as its plain, changeable kind."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            "the problem's constraints and metadata are read-only here (a critic, the planner's side and the "
            "backprompts share them): change a copy (copy.deepcopy)"
        )


class ReadOnlyDict(_ReadOnly, dict[Any, Any]):
    """A problem's dict as :meth:`Problem.planner_view` hands it out: a ``dict`` (JSON and templates write it
    as one) that no method changes."""

    __slots__ = ()

    def __init__(self, items: Any = ()) -> None:
        dict.__init__(self, ((k, read_only(v)) for k, v in dict(items).items()))

    __setitem__ = __delitem__ = __ior__ = _ReadOnly._refuse
    pop = popitem = setdefault = update = clear = _ReadOnly._refuse

    def __copy__(self) -> dict[Any, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[Any, Any]:
        return {copy.deepcopy(k, memo): copy.deepcopy(v, memo) for k, v in self.items()}

    def __reduce__(self) -> tuple[Any, ...]:
        return (ReadOnlyDict, (dict(self),))


class ReadOnlyList(_ReadOnly, list[Any]):
    """A problem's list as :meth:`Problem.planner_view` hands it out (see :class:`ReadOnlyDict`)."""

    __slots__ = ()

    def __init__(self, items: Any = ()) -> None:
        list.__init__(self, map(read_only, items))

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _ReadOnly._refuse
    append = extend = insert = pop = remove = clear = sort = reverse = _ReadOnly._refuse

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return [copy.deepcopy(v, memo) for v in self]

    def __reduce__(self) -> tuple[Any, ...]:
        return (ReadOnlyList, (list(self),))


def read_only(value: Any) -> Any:
    """``value`` with every plain dict and list in it (inside tuples too) made read-only; every other value
    as it is (of the same type: a subclass of dict or list, a set or an object of another kind is not
    wrapped, so nothing that compares or dispatches on types reads it differently)."""
    kind = type(value)
    if kind is dict:
        return ReadOnlyDict(value)
    if kind is list:
        return ReadOnlyList(value)
    if kind is tuple:
        return tuple(map(read_only, value))
    return value


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
    #: what a user in the loop knows and the planner does not (a clarified intent, a profile, constraints
    #: revealed only when asked): read by :mod:`modulo.users`, never rendered into a generator, reformulator
    #: or backprompt prompt (the loop hands those :meth:`planner_view`), never written to a record. Each
    #: item is a fact told when asked (a string, or any JSON value), or a hidden constraint
    #: ``{"text": what the user says, "add": {constraint: value}}`` whose telling applies that update
    hidden: dict[str, Any] = Field(default_factory=dict, repr=False)
    #: ground truth where the benchmark knows it: False for a problem built to have no valid plan (an
    #: unsolvable split, a synthesized contradiction), True for a solvable control, None when unknown.
    #: Abstention is scored against it (recall on False, false abstention on True).
    solvable: bool | None = None
    #: updates the benchmark schedules for this problem (``after`` set on each), applied by the loop like
    #: ``user.updates``; hidden from the planner until applied
    updates: list[ProblemUpdate] = Field(default_factory=list, repr=False)

    def planner_view(self) -> Problem:
        """This problem as the planner may see it: hidden information and scheduled updates removed, and its
        constraints and metadata read-only (:func:`read_only`): the critics, the generator, the reformulator
        and the backprompts of a problem share them, and the runner scores the final plan against the
        problem itself, so none may change what the others judge or say. Made once per problem and
        version by the loop (a walk of the constraints and metadata, no work per iteration)."""
        return self.model_copy(
            update={
                "hidden": {},
                "updates": [],
                "constraints": read_only(self.constraints),
                "metadata": read_only(self.metadata),
            }
        )


class AbstentionCheck(BaseModel):
    """What a benchmark can say about a planner's reason for declining (``Benchmark.check_abstention``).

    ``verified`` is True when the reason is confirmed (Z3's unsat core names the same constraints, the
    missing tool is indeed missing), False when it is refuted, None when the benchmark cannot check it.
    """

    model_config = ConfigDict(frozen=True)

    verified: bool | None = None
    detail: str = ""


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


#: ``v.accepts`` as a function, for ``map`` and ``filter``: a list of verdicts counted in C, with no generator
#: (a subclass's own ``accepts`` is the one read)
accepts: Callable[[Verdict], bool] = operator.attrgetter("accepts")


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


#: no usage at all (Usage is frozen: one object serves every place that needs a zero)
NO_USAGE = Usage()


class UsageTally:
    """A running sum of :class:`Usage`, added to in place: ``Usage + Usage`` builds and validates a new
    frozen model, which a loop adding one per model call or iteration pays for every time. The figures
    are summed in the order added, as ``+`` would (the same floats); :meth:`usage` is the total so far."""

    __slots__ = (
        "cached_calls",
        "cached_cost_usd",
        "calls",
        "cost_usd",
        "failed_calls",
        "input_tokens",
        "output_tokens",
    )

    def __init__(self) -> None:
        self.calls = self.failed_calls = self.cached_calls = self.input_tokens = self.output_tokens = 0
        self.cost_usd = self.cached_cost_usd = 0.0

    def add(self, usage: Usage) -> None:
        self.calls += usage.calls
        self.failed_calls += usage.failed_calls
        self.cached_calls += usage.cached_calls
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.cost_usd += usage.cost_usd
        self.cached_cost_usd += usage.cached_cost_usd

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def usage(self) -> Usage:
        """The total so far, as a :class:`Usage`."""
        return Usage(**{name: getattr(self, name) for name in self.__slots__})


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
    ABSTAINED = "abstained"
    """the planner declined to plan, with a reason (``ProblemResult.abstention``)"""


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


#: where a model call comes from: the planner, the reformulator, a user simulator (:mod:`modulo.users`), a
#: tool simulator standing in for a benchmark's tools, a judge grading a trajectory, an extraction writing a
#: critic (``modulo critics extract``)
Stage = Literal["generate", "reformulate", "user", "tool", "judge", "extract"]


class LLMCall(BaseModel):
    """One logical call to a model (retries included) as it appears in a trace."""

    stage: Stage
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


class UserAnswer(BaseModel):
    """A user's reply to the planner's question, as recorded (see :mod:`modulo.users`).

    ``unnecessary`` is the user's own report that the answer was already in the query or context (the
    scripted user by the file's marking, the LLM user by its reply's marker); None when it did not say.
    ``revealed`` names the hidden items the answer gave away; ``update`` is the change to the problem the
    answer brought (a hidden constraint now in force), applied by the loop before the next turn.
    """

    model_config = ConfigDict(frozen=True)

    text: str
    unnecessary: bool | None = None
    revealed: list[str] = Field(default_factory=list)
    update: ProblemUpdate | None = None
    #: who answered: the user's registry name, or "none" (no user configured: the loop's default reply)
    user: str = ""


#: :attr:`Abstention.detail` of a decline that is the benchmark's own proof (:attr:`ProblemResult.decline`)
PROOF_DETAIL = "the benchmark's proof before any model call (metacontroller.check_unsolvable)"


class Abstention(BaseModel):
    """A planner that declined to plan: its reason, the turn, and what the benchmark could check of it."""

    model_config = ConfigDict(frozen=True)

    reason: str
    iteration: int
    #: True/False: the benchmark confirmed/refuted the reason; None: it cannot check it
    verified: bool | None = None
    detail: str = ""


class Judgement(BaseModel):
    """The critics' verdicts on a plan (and the critics a failed format check gated)."""

    verdicts: list[Verdict] = Field(default_factory=list)
    gated: list[str] = Field(default_factory=list)

    @property
    def accepts(self) -> bool:
        return not self.gated and all(map(accepts, self.verdicts))

    @property
    def passed_count(self) -> int:
        return sum(map(accepts, self.verdicts))


class IterationRecord(BaseModel):
    """Everything that happened in one turn: a generate -> reformulate -> critique -> backprompt round, or a
    question the planner asked and the user's answer, or the planner's abstention (see ``act``)."""

    index: int
    #: what the planner did at this turn: proposed a plan, asked the user a question, or declined
    act: Literal["plan", "question", "abstain"] = "plan"
    #: act="question": the question asked, and the user's answer
    question: str | None = None
    answer: UserAnswer | None = None
    #: act="abstain": the reason the planner gave
    abstain_reason: str | None = None
    #: updates applied to the problem after this turn (scheduled ones, and one an answer carried)
    updates: list[ProblemUpdate] = Field(default_factory=list)
    #: how many update events came before this turn: the version of the problem its plan was judged against
    version: int = 0
    #: this turn's plan judged again against the problem after this turn's ``updates`` (version + 1)
    rejudged: Judgement | None = None
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
        return list(filterfalse(accepts, self.verdicts))

    @property
    def passed_count(self) -> int:
        return sum(map(accepts, self.verdicts))

    @property
    def all_accept(self) -> bool:
        return self.plan is not None and not self.gated and all(map(accepts, self.verdicts))

    def judged_at(self, version: int) -> Judgement | None:
        """This turn's judgement against version ``version`` of the problem (None: its plan was not judged
        against that version, or it has no plan)."""
        if self.plan is None:
            return None
        if self.version == version:
            return Judgement(verdicts=self.verdicts, gated=self.gated)
        if self.rejudged is not None and self.version + 1 == version:
            return self.rejudged
        return None

    @property
    def version_after(self) -> int:
        """The version of the problem in force after this turn (its updates applied)."""
        return self.version + (1 if self.updates else 0)


class ProblemResult(BaseModel):
    """The record of one finished problem: one line of ``records.jsonl`` (written compact by
    :func:`modulo.recordformat.encode_record`; validation reads a line of any record format)."""

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
    #: the problem's ground truth (:attr:`Problem.solvable`), copied for abstention scoring
    solvable: bool | None = None
    #: the planner's abstention (outcome ``abstained``), with the benchmark's check of its reason
    abstention: Abstention | None = None
    #: the user in the loop (its registry name), None for a run without one
    user: str | None = None
    #: scheduled updates that never applied (the loop ended before their turn)
    pending_updates: list[ProblemUpdate] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _expanded(cls, data: Any) -> Any:
        """A compact record line (format 2: shared texts and verdicts) as format 1 before validation."""
        return expand_record(data)

    @property
    def certified(self) -> bool:
        return self.outcome is Outcome.CERTIFIED

    @property
    def decline(self) -> Abstention | None:
        """The run's decline of this problem: the planner's (outcome ``abstained``: :attr:`abstention`), or the
        benchmark's proof that no plan exists, found before any model call (outcome ``unsolvable``: a
        verified decline at turn 0 whose reason is the proof's explanation); None when it did not decline.
        Every score of a run reads declines through this, so that a proof counts wherever a decline does."""
        if self.outcome is Outcome.ABSTAINED:
            return self.abstention
        if self.outcome is Outcome.UNSOLVABLE:
            return Abstention(
                reason=self.explanation or "the benchmark proved that no plan exists",
                iteration=0,
                verified=True,
                detail=PROOF_DETAIL,
            )
        return None

    @property
    def questions(self) -> int:
        """Clarification questions the planner asked."""
        return sum(1 for it in self.iterations if it.act == "question")

    @property
    def turns(self) -> int:
        """Turns taken: plan iterations, questions and an abstention."""
        return len(self.iterations)

    @property
    def updates(self) -> list[ProblemUpdate]:
        """Every update applied to the problem during the loop, in order."""
        return [u for it in self.iterations for u in it.updates]

    @property
    def unnecessary_questions(self) -> int:
        """Questions whose answer the user reported was already in the query or context."""
        return sum(1 for it in self.iterations if it.answer is not None and it.answer.unnecessary)
