"""The :class:`User` interface and the pieces every user shares."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import ValidationError

from ..errors import ConfigError
from ..types import LLMCall, Problem, ProblemUpdate, UserAnswer

if TYPE_CHECKING:
    from ..benchmark import Benchmark
    from ..llm.client import LLMClient

#: what the planner is told when it asks a question and no user is configured
NO_USER_REPLY = "No user is available to answer questions. Make reasonable assumptions and propose a plan."
#: what the planner is told when it asks past ``user.max_questions``
NO_MORE_QUESTIONS = "No more questions can be answered. Propose a plan with what you know."


@dataclass(frozen=True)
class DialogueTurn:
    """One question the planner asked and the answer it got."""

    turn: int
    question: str
    answer: str


@dataclass
class UserContext:
    """What a user may use besides the problem and the question."""

    #: the turn the question was asked at (0-based, counting plan iterations and questions)
    turn: int
    #: the questions asked and answered before this one
    dialogue: list[DialogueTurn] = field(default_factory=list)
    #: the model client a simulated user calls (stage ``user``: cached, accounted and recorded like any call)
    llm: LLMClient | None = None


@dataclass
class UserReply:
    """A user's answer and the model calls it took (recorded in the turn's calls)."""

    answer: UserAnswer
    calls: list[LLMCall] = field(default_factory=list)


class User(ABC):
    """A user the planner can ask. Subclasses implement :meth:`answer`; :meth:`updates` is optional.

    A user is registered under ``modulo.users`` as a class (or factory) taking keyword arguments checked
    against its signature; it may ask for ``benchmark`` by name. It must never reveal more of
    ``problem.hidden`` than the question asks for, and it reports (``UserAnswer.unnecessary``) when the
    answer was already in the query or the context.
    """

    #: registry name, recorded with each answer
    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    #: True when the user calls a model (``user=llm``): the run then binds an LLM client for it
    needs_llm: ClassVar[bool] = False

    @abstractmethod
    async def answer(self, problem: Problem, question: str, ctx: UserContext) -> UserReply:
        """Answer the planner's ``question`` about ``problem`` (the full problem: ``hidden`` included)."""

    def scheduled(self, problem: Problem) -> list[ProblemUpdate]:
        """Updates this user schedules for ``problem`` (each with ``after`` set), read once when the problem
        starts and applied like ``user.updates``: after turn ``after``, or at once when the loop certifies a
        plan before that turn (the user changes the request after seeing a plan). Default: none."""
        return []

    def updates(self, problem: Problem, turn: int) -> list[ProblemUpdate]:
        """Updates this user decides on after ``turn`` (``problem``: the problem in force), applied at once.
        Default: none (``user.updates`` and :meth:`scheduled` are applied anyway)."""
        return []

    def templates(self) -> dict[str, str]:
        """Template labels used, for the run record."""
        return {}


def in_force(benchmark: Benchmark, problem: Problem, updates: Iterable[ProblemUpdate]) -> Problem:
    """``problem`` as the recorded ``updates`` left it at the end of the loop (what the final plan is
    judged and evaluated against); ``problem`` itself when there were none."""
    for update in updates:
        problem = benchmark.apply_update(problem, update)
    return problem


def updates_from(items: Iterable[Any], where: str, *, source: str = "config") -> list[ProblemUpdate]:
    """ProblemUpdates from config-like dicts ``{after: k, add: {...}, text: ..., query: ..., context: ...}``.

    Each needs ``after`` (an integer >= 0); a wrong key or type is a ConfigError naming ``where``."""
    out: list[ProblemUpdate] = []
    for i, item in enumerate(items or []):
        if isinstance(item, ProblemUpdate):
            update = item
        elif isinstance(item, Mapping):
            unknown = sorted(set(item) - {"after", "add", "text", "query", "context"})
            if unknown:
                raise ConfigError(
                    f"{where}[{i}]: unknown key(s) {', '.join(map(str, unknown))}; an update takes after, add, "
                    "text, query, context"
                )
            after = item.get("after")
            if isinstance(after, bool) or not isinstance(after, int | None):
                # pydantic would read `after: true` (YAML's yes/on too) as turn 1, and "2" as 2
                raise ConfigError(f"{where}[{i}].after must be an integer >= 0 (a turn), not {after!r}")
            try:
                update = ProblemUpdate.model_validate({"source": source, **dict(item)})
            except ValidationError as exc:
                err = exc.errors()[0]
                raise ConfigError(f"{where}[{i}].{'.'.join(map(str, err['loc']))}: {err['msg']}") from None
        else:
            raise ConfigError(f"{where}[{i}] must be a mapping {{after: k, add: {{...}}, text: ...}}, not {item!r:.60}")
        if update.after is None or update.after < 0:
            raise ConfigError(f"{where}[{i}]: 'after' (the turn the update follows, 0 or more) is required")
        if not update.add and update.query is None and update.context is None and not update.text:
            raise ConfigError(f"{where}[{i}]: the update changes nothing (give add, text, query or context)")
        out.append(update)
    return out
