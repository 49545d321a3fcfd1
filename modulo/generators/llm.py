"""The LLM generator: renders the benchmark's planner prompt and asks the model for a plan."""

from __future__ import annotations

from typing import Any

from ..benchmark import Benchmark
from ..errors import ConfigError
from ..llm.base import LLMRequest
from ..prompts import Template
from ..types import Message, Problem
from .base import Generation, GenerationContext, Generator

PROMPT_ROLES = ("direct", "cot", "json")


class LLMGenerator(Generator):
    """Ask an LLM for a plan. ``prompt`` picks the benchmark's template: direct, cot or json.

    ``template`` (Jinja text, or a :class:`Template`) replaces the benchmark's template for that role,
    so a generator can be built with no template file at all; a text is recorded as
    ``custom/<role>@1#<sha>``.
    """

    needs_llm = True

    def __init__(
        self,
        *,
        benchmark: Benchmark,
        prompt: str = "direct",
        sample_index: int = 0,
        template: str | Template | None = None,
    ) -> None:
        if prompt not in PROMPT_ROLES:
            raise ConfigError(f"generator.prompt must be one of {', '.join(PROMPT_ROLES)}, not {prompt!r}")
        self.benchmark = benchmark
        self.prompt_role = prompt
        self.sample_index = sample_index
        if isinstance(template, str):
            template = Template.from_text(f"custom/{prompt}", template)
        self.template: Template = template if template is not None else benchmark.template(prompt)

    def templates(self) -> dict[str, str]:
        return {self.prompt_role: self.template.label}

    def first_prompt(self, problem: Problem) -> list[Message]:
        variables: dict[str, Any] = {**self.benchmark.prompt_variables(problem), "problem": problem}
        return [Message(role="user", content=self.template.render(**variables))]

    async def generate(self, problem: Problem, messages: list[Message], ctx: GenerationContext) -> Generation:
        if ctx.llm is None:
            raise ConfigError("the llm generator needs an llm backend")
        settings = ctx.llm.settings
        wants_json = self.prompt_role == "json" and ctx.response_schema is not None
        # draw d of a seeded sampler sends seed + d: the same seed would give the same sample again
        seed = settings.seed + ctx.draw if settings.seed is not None else None
        request = LLMRequest(
            messages=tuple(messages),
            model=settings.model,
            temperature=settings.temperature if ctx.temperature is None else ctx.temperature,
            max_tokens=settings.max_tokens,
            seed=seed,
            response_schema=ctx.response_schema if wants_json else None,
            structured_output=settings.structured_output if wants_json else "off",
            sample_index=self.sample_index,
            draw=ctx.draw,
            tags={"problem_id": problem.id, "iteration": str(ctx.iteration), "stage": "generate"},
        )
        call = await ctx.llm.call(request, "generate")
        gen = Generation(text=call.reply, calls=[call], finish_reason=call.finish_reason)
        act, payload = self.benchmark.classify_reply(call.reply or "")
        if act == "question":
            gen.question = payload
        elif act == "abstain":
            gen.abstain = payload or "(no reason given)"
        return gen
