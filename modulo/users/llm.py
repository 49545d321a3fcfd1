"""``user=llm``: a user simulator. A model plays the user, holding the problem's hidden intent and profile.

It is given the request, the context the planner was given, and ``problem.hidden`` (the items only the
user knows), and answers each clarification question under the rules of the ``user`` template
(``prompts/core/user.j2``, or a benchmark's ``<name>/user``): answer only what is asked, never reveal an
item the question does not ask about, start with ``[ALREADY STATED]`` when the answer was already in the
request (the loop counts the question as unnecessary), end with ``[REVEALED: key, ...]`` naming the
items told. A revealed hidden constraint (``{"text", "add"}``) is applied as an update.

Its calls go through the run's LLM client (or a second client built from ``user.llm``), with stage
``user``: cached, accounted and recorded like every other call. The markers are removed from what the
planner reads; the recorded call keeps the model's reply as it came.
"""

from __future__ import annotations

import re
from typing import Any

from ..benchmark import Benchmark
from ..errors import ConfigError
from ..llm.base import LLMRequest
from ..prompts import Template
from ..types import Message, Problem, ProblemUpdate, UserAnswer
from .base import User, UserContext, UserReply
from .scripted import hidden_item

ALREADY_STATED = "[ALREADY STATED]"
_ALREADY = re.compile(re.escape(ALREADY_STATED), re.IGNORECASE)
_REVEALED = re.compile(r"\[REVEALED:\s*([^\]]*)\]", re.IGNORECASE)
#: what a marker followed at the end of the reply ("Room B. [REVEALED: room]." leaves "Room B. .")
_DANGLING = re.compile(r"\s+[.!。]+$")


def read_markers(reply: str) -> tuple[str, bool, list[str]]:
    """(text for the planner, unnecessary, revealed keys) from a simulator's reply. The markers are read
    and removed wherever the model put them (the template asks for the first at the start and the
    second at the end; a reply that ends ``[REVEALED: room].`` still told the room)."""
    unnecessary = _ALREADY.search(reply) is not None
    revealed: list[str] = []
    for found in _REVEALED.finditer(reply):
        names = [n.strip().strip("[]'\"") for n in found.group(1).split(",")]
        revealed += [n for n in names if n and n.lower() != "none" and n not in revealed]
    text, markers = _REVEALED.subn("", _ALREADY.sub("", reply))
    text = text.strip()
    return (_DANGLING.sub("", text) if markers else text), unnecessary, revealed


class LLMUser(User):
    """A user simulator: a model holding the hidden intent and profile answers the planner's questions."""

    name = "llm"
    description = "a model plays the user: holds the hidden intent/profile, answers only what is asked"
    needs_llm = True

    def __init__(self, *, benchmark: Benchmark, temperature: float = 0.0, max_tokens: int | None = 512) -> None:
        self.benchmark = benchmark
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.template: Template = benchmark.template("user")

    def templates(self) -> dict[str, str]:
        return {"user": self.template.label}

    def messages(self, problem: Problem, question: str, ctx: UserContext) -> list[Message]:
        """The simulator's messages: its role and knowledge, the dialogue so far, the new question."""
        hidden: list[tuple[str, str]] = []
        for key in problem.hidden:
            told = hidden_item(problem, key)
            if told is not None:
                hidden.append((key, told[0]))
        variables: dict[str, Any] = {
            **self.benchmark.prompt_variables(problem.planner_view()),
            "query": problem.query,
            "context": problem.context,
            "hidden": hidden,
            "problem": problem,
        }
        out = [Message(role="system", content=self.template.render(**variables))]
        for turn in ctx.dialogue:
            out.append(Message(role="user", content=turn.question))
            out.append(Message(role="assistant", content=turn.answer))
        out.append(Message(role="user", content=question))
        return out

    async def answer(self, problem: Problem, question: str, ctx: UserContext) -> UserReply:
        if ctx.llm is None:
            raise ConfigError("user=llm needs an LLM backend (the run's llm, or user.llm)")
        request = LLMRequest(
            messages=tuple(self.messages(problem, question, ctx)),
            model=ctx.llm.settings.model,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            tags={"problem_id": problem.id, "iteration": str(ctx.turn), "stage": "user"},
        )
        call = await ctx.llm.call(request, "user")
        text, unnecessary, revealed = read_markers(call.reply or "")
        known = [k for k in revealed if k in problem.hidden]
        add: dict[str, Any] = {}
        told: list[str] = []
        for key in known:
            item = hidden_item(problem, key)
            if item is not None and item[1] is not None:
                add.update(item[1].add)
                told.append(item[0])
        update = ProblemUpdate(add=add, text=" ".join(told), source="user") if add else None
        answer = UserAnswer(text=text, unnecessary=unnecessary, revealed=known, update=update, user=self.name)
        return UserReply(answer, calls=[call])
