"""The generator interface: what proposes a plan at each iteration.

A generator is registered under ``modulo.generators`` as a factory taking keyword arguments (checked
against its signature) and, when it asks for them by name, ``benchmark`` (the bound benchmark).
It returns either text (to be reformulated into a plan) or a plan directly (search baselines).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import LLMError
from ..types import LLMCall, Message, PlanJSON, Problem

if TYPE_CHECKING:
    from ..llm.client import LLMClient


@contextmanager
def keep_calls(calls: list[LLMCall], tool_use: Callable[[], dict[str, Any] | None] = lambda: None) -> Iterator[None]:
    """For a generator that makes several model calls in one turn: an :class:`~modulo.errors.LLMError` raised
    inside carries the calls made so far (``calls``, the generator's own list) and what ``tool_use()`` says
    the turn's tool use was, so that the loop records them and counts what they spent (it recorded only the
    failed call: a tool agent's paid steps before a permanent fault were in no record and no total)."""
    try:
        yield
    except LLMError as exc:
        exc.earlier_calls = (*calls, *exc.earlier_calls)
        if exc.tool_use is None:
            exc.tool_use = tool_use()
        raise


@dataclass
class GenerationContext:
    """What a generator may use besides the prompt."""

    iteration: int
    llm: LLMClient | None
    #: JSON Schema of a plan, when the generator is asked for JSON directly (reformulator=none)
    response_schema: dict[str, Any] | None = None
    #: sampling temperature for this iteration (None: the llm settings' temperature); the loop raises it
    #: at a fixed point when metacontroller.on_fixed_point=temperature
    temperature: float | None = None
    #: draw number: how many earlier iterations of this problem sent the same messages; a generator
    #: passes it on (``LLMRequest.draw``) so that a repeat at temperature > 0 is a new sample
    draw: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Generation:
    """A generator's answer: raw text, or a plan (then no reformulation happens), and the calls made."""

    text: str | None = None
    plan: PlanJSON = None
    calls: list[LLMCall] = field(default_factory=list)
    #: "length" when the reply was cut off at the token limit
    finish_reason: str | None = None
    #: a tool-using generator's account of this iteration (steps, outcome, notebook), recorded as is
    tool_use: dict[str, Any] | None = None
    #: set when the planner asked the user a clarification question instead of proposing a plan (the loop
    #: then asks its user, records the answer and counts a turn; ``text`` keeps the whole reply)
    question: str | None = None
    #: set when the planner declined to plan: its reason (the loop stops with outcome ``abstained`` and asks
    #: the benchmark's ``check_abstention`` whether the reason holds)
    abstain: str | None = None


class Generator(ABC):
    """Base class of generators."""

    #: False for search baselines that never call a model (no llm backend is bound then)
    needs_llm: ClassVar[bool] = True
    #: False for generators that ignore backprompts (search baselines): the loop then stops after one plan
    uses_feedback: ClassVar[bool] = True
    #: True when the generator's model requests are a function of the messages the loop gives it (and of
    #: the draw and temperature in the context), so a repeated message list at temperature 0 is a fixed
    #: point; False for generators that carry their own state across iterations (a tool agent's notebook)
    stateless: ClassVar[bool] = True
    #: the prompt role used for the first prompt ("direct", "cot", "json")
    prompt_role: str = "direct"
    #: names of the benchmarks this generator can plan for (a search baseline reads one benchmark's
    #: data); empty: any benchmark. Checked when the run is bound, before anything runs.
    benchmarks: ClassVar[tuple[str, ...]] = ()

    def first_prompt(self, problem: Problem) -> list[Message]:
        """The messages of iteration 0 (search generators may ignore prompts entirely). ``problem`` is the
        planner's view (:meth:`Problem.planner_view`): its hidden information is never given here."""
        return [Message(role="user", content=problem.query)]

    def templates(self) -> dict[str, str]:
        """Template labels used, for the run record."""
        return {}

    async def aclose(self) -> None:
        """Release what the generator opened itself (model clients of its own); the session calls it once,
        at the end of the run. Default: nothing."""
        return None

    @abstractmethod
    async def generate(self, problem: Problem, messages: list[Message], ctx: GenerationContext) -> Generation:
        """Propose a plan (as text or JSON) for ``problem`` given the current ``messages``."""
