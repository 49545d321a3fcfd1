"""Backprompt strategies: turn failing verdicts and the history into the next prompt.

A strategy is registered under ``modulo.backprompts`` as a class whose constructor takes its options
as keyword arguments (checked against the signature). Built-ins:

``all``      every failing critic's feedback concatenated under the original prompt, with the previous
             plan (the LLM-Modulo paper's setting)
``first``    only the highest-priority failure (lowest critic priority, then critic order)
``grouped``  failures grouped by critic group, in a configurable group order
``history``  a conversation keeping the last ``k`` attempts and their feedback

Templates live in ``prompts/core/backprompt_*.j2`` (a benchmark may override them under its own
namespace) and their versions land in the run record.
"""

from __future__ import annotations

import operator
import weakref
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from .benchmark import Benchmark
from .prompts import Template, keyed
from .types import IterationRecord, Message, Problem, Verdict

GROUP_TITLES = {"format": "Format", "commonsense": "Commonsense constraints", "hard": "Hard constraints"}


@keyed  # templates read its keys at once (modulo.prompts.keyed)
class Row(dict[str, Any]):
    """A dict whose keys read as attributes too: a row a template reads as ``f.feedback`` (or
    ``f["feedback"]``). Jinja looks an attribute up first and only then the key: on a plain dict the
    attribute lookup raises (and catches) an AttributeError for every field read, on every backprompt.
    Otherwise a dict: its methods come first (``f.items`` is the method, as on a plain dict)."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


@dataclass
class BackpromptContext:
    """What a strategy may use to write the next prompt."""

    problem: Problem
    benchmark: Benchmark
    #: the messages of the first prompt (iteration 0)
    first_prompt: list[Message]
    #: every iteration so far; the last one is the one just judged
    history: list[IterationRecord]
    #: critic name -> priority (lower first) and order of the active critics
    priorities: dict[str, int] = field(default_factory=dict)

    @property
    def last(self) -> IterationRecord:
        return self.history[-1]


@dataclass
class Backprompt:
    """The next generator prompt and the backprompt text recorded for it."""

    messages: list[Message]
    text: str


class BackpromptStrategy(ABC):
    """Base class of strategies. ``templates`` lists the template labels a strategy used."""

    #: template role under prompts/ (benchmark namespace first, then core)
    role: str = "backprompt_all"

    def __init__(self, *, include_plan: bool = True, hints: bool = True, max_plan_chars: int = 20_000) -> None:
        self.include_plan = include_plan
        self.hints = hints
        self.max_plan_chars = max_plan_chars

    def template(self, benchmark: Benchmark, role: str | None = None) -> Template:
        return benchmark.template(role or self.role)

    def templates(self, benchmark: Benchmark) -> dict[str, str]:
        t = self.template(benchmark)
        return {t.id.split("/", 1)[-1]: t.label}

    @abstractmethod
    def build(self, ctx: BackpromptContext) -> Backprompt:
        """The messages for the next generation."""

    # -- shared pieces -------------------------------------------------------------------------
    def selected(self, ctx: BackpromptContext) -> list[Verdict]:
        """Failing verdicts to report (crashed critics are never pasted into a prompt): the last turn's
        ``failing`` less the crashed (a verdict's own ``accepts`` decides, a subclass's included)."""
        return [v for v in ctx.last.failing if v.error is None]

    def failures(self, verdicts: list[Verdict]) -> list[dict[str, Any]]:
        hints = self.hints
        return [
            Row(critic=v.critic, group=v.group, feedback=v.feedback, hint=v.hint if hints else None) for v in verdicts
        ]

    def plan_text(self, ctx: BackpromptContext) -> str:
        if not self.include_plan:
            return ""
        last = ctx.last
        if last.plan is not None:
            text = ctx.benchmark.plan_text(last.plan, ctx.problem)
        else:
            text = last.raw_reply or ""
        if len(text) > self.max_plan_chars:
            text = text[: self.max_plan_chars] + "\n[... cut ...]"
        return text

    def original(self, ctx: BackpromptContext) -> str:
        return "\n\n".join(m.content for m in ctx.first_prompt if m.role == "user")

    def _single_turn(self, ctx: BackpromptContext, text: str) -> Backprompt:
        system = [m for m in ctx.first_prompt if m.role == "system"]
        return Backprompt(messages=[*system, Message(role="user", content=text)], text=text)


def _window(k: int) -> int:
    """A strategy's ``k`` (the failures, or the past attempts, it keeps), checked to be at least 1."""
    if k < 1:
        raise ValueError("k must be at least 1")
    return k


def _sorted_by_priority(verdicts: list[Verdict], priorities: dict[str, int]) -> list[Verdict]:
    """``verdicts`` by their critics' priority (100 for a critic not listed), ties in the order ``priorities``
    lists the critics (an unlisted one last), then as given (a stable sort)."""
    if len(verdicts) < 2:
        return list(verdicts)  # nothing to order (the usual backprompt names a few failures; often one)
    order = {name: i for i, name in enumerate(priorities)}
    return sorted(verdicts, key=lambda v: (priorities.get(v.critic, 100), order.get(v.critic, 10**6)))


class AllStrategy(BackpromptStrategy):
    """Every failing critic's feedback, concatenated under the original prompt, with the previous plan."""

    role = "backprompt_all"

    def build(self, ctx: BackpromptContext) -> Backprompt:
        verdicts = _sorted_by_priority(self.selected(ctx), ctx.priorities)
        text = self.template(ctx.benchmark).render(
            original=self.original(ctx),
            plan_text=self.plan_text(ctx),
            failures=self.failures(verdicts),
            repeat_of=ctx.last.repeat_of,
        )
        return self._single_turn(ctx, text)


class FirstStrategy(AllStrategy):
    """Only the highest-priority failure (format before commonsense before hard by default)."""

    def selected(self, ctx: BackpromptContext) -> list[Verdict]:
        return _sorted_by_priority(super().selected(ctx), ctx.priorities)[:1]


class TopKStrategy(AllStrategy):
    """The ``k`` highest-priority failures."""

    def __init__(
        self, *, k: int = 3, include_plan: bool = True, hints: bool = True, max_plan_chars: int = 20_000
    ) -> None:
        super().__init__(include_plan=include_plan, hints=hints, max_plan_chars=max_plan_chars)
        self.k = _window(k)

    def selected(self, ctx: BackpromptContext) -> list[Verdict]:
        return _sorted_by_priority(super().selected(ctx), ctx.priorities)[: self.k]


class GroupedStrategy(BackpromptStrategy):
    """Failures grouped by critic group, groups in ``order`` (unlisted groups follow, alphabetically)."""

    role = "backprompt_grouped"

    def __init__(
        self,
        *,
        order: tuple[str, ...] | list[str] = ("format", "commonsense", "hard"),
        include_plan: bool = True,
        hints: bool = True,
        max_plan_chars: int = 20_000,
    ) -> None:
        super().__init__(include_plan=include_plan, hints=hints, max_plan_chars=max_plan_chars)
        self.order = list(order)

    def build(self, ctx: BackpromptContext) -> Backprompt:
        verdicts = _sorted_by_priority(self.selected(ctx), ctx.priorities)
        names = sorted(
            {v.group for v in verdicts}, key=lambda g: (self.order.index(g) if g in self.order else 10**6, g)
        )
        groups = [
            Row(
                title=GROUP_TITLES.get(g, g.capitalize()), failures=self.failures([v for v in verdicts if v.group == g])
            )
            for g in names
        ]
        text = self.template(ctx.benchmark).render(
            original=self.original(ctx), plan_text=self.plan_text(ctx), groups=groups, repeat_of=ctx.last.repeat_of
        )
        return self._single_turn(ctx, text)


class HistoryStrategy(BackpromptStrategy):
    """A conversation: the first prompt, then the last ``k`` attempts each followed by its feedback."""

    role = "backprompt_feedback"

    def __init__(
        self, *, k: int = 3, include_plan: bool = True, hints: bool = True, max_plan_chars: int = 20_000
    ) -> None:
        super().__init__(include_plan=include_plan, hints=hints, max_plan_chars=max_plan_chars)
        self.k = _window(k)
        #: id of an attempt's record -> (a weak reference to it, what its turn was made from, the turn): an
        #: attempt stays in the window for k prompts, and its messages are made once, the same objects each
        #: time (the prompt hash then reuses their encoding)
        self._turns: dict[int, tuple[weakref.ref[IterationRecord], tuple[Any, ...], tuple[Message, Message]]] = {}

    def _feedback(self, ctx: BackpromptContext, it: IterationRecord) -> str:
        verdicts = _sorted_by_priority([v for v in it.failing if v.error is None], ctx.priorities)
        return self.template(ctx.benchmark).render(failures=self.failures(verdicts), repeat_of=it.repeat_of)

    def _turn(self, ctx: BackpromptContext, it: IterationRecord) -> tuple[Message, Message]:
        """The attempt's reply and the feedback on it, made again only when what they are made of changed."""
        basis = (it.raw_reply, it.plan, it.verdicts, it.repeat_of, ctx.problem, ctx.benchmark, ctx.priorities)
        known = self._turns.get(id(it))
        if known is not None and known[0]() is it and all(map(operator.is_, known[1], basis)):
            return known[2]
        reply = Message(role="assistant", content=it.raw_reply or ctx.benchmark.plan_text(it.plan, ctx.problem))
        turn = (reply, Message(role="user", content=self._feedback(ctx, it)))
        key = id(it)

        def forget(_: object) -> None:  # the record is gone: its id may be another's
            self._turns.pop(key, None)

        self._turns[key] = (weakref.ref(it, forget), basis, turn)
        return turn

    def build(self, ctx: BackpromptContext) -> Backprompt:
        messages = list(ctx.first_prompt)
        for it in ctx.history[-self.k :]:
            messages.extend(self._turn(ctx, it))
        return Backprompt(messages=messages, text=messages[-1].content)
