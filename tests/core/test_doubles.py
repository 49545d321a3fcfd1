"""The public test doubles (modulo.testing): a function-backed and a scripted model, in process and over HTTP,
and a generator built with no template file."""

from __future__ import annotations

import asyncio

import pytest

from modulo.errors import PermanentLLMError, RateLimitError
from modulo.generators import LLMGenerator
from modulo.llm.base import LLMRequest, LLMSettings
from modulo.llm.client import build_client
from modulo.testing import FakeProvider, FunctionModel, ScriptedModel
from modulo.types import Message

from . import toy


def _request(text: str, **tags: str) -> LLMRequest:
    return LLMRequest(messages=(Message(role="user", content=text),), tags=tags)


def test_a_scripted_model_answers_each_problem_from_its_own_list_and_records_the_requests() -> None:
    model = ScriptedModel({"a": ["a1", "a2"], "*": ["other"]})
    client = model.client()

    async def go() -> list[str | None]:
        calls = [await client.call(_request("q", problem_id=p), "generate") for p in ("a", "b", "a")]
        return [c.reply for c in calls]

    assert asyncio.run(go()) == ["a1", "other", "a2"]
    assert model.calls == 3 and [r.tags["problem_id"] for r in model.requests] == ["a", "b", "a"]
    with pytest.raises(PermanentLLMError, match="ran out of replies for problem 'a'"):
        asyncio.run(client.call(_request("q", problem_id="a"), "generate"))


def test_repeat_last_keeps_giving_the_last_reply() -> None:
    model = ScriptedModel(["first", "last"], repeat_last=True)
    replies = [asyncio.run(model.complete(_request("q"))).text for _ in range(4)]
    assert replies == ["first", "last", "last", "last"]


def test_a_function_model_is_asked_with_the_request_and_its_settings_reach_the_client() -> None:
    model = FunctionModel(lambda r: r.messages[-1].content.upper(), model="m-1", price_input_per_mtok=1e6)
    call = asyncio.run(model.client().call(_request("plan please", problem_id="p"), "generate"))
    assert call.reply == "PLAN PLEASE" and call.model == "m-1"
    assert call.usage.cost_usd > 0  # priced through the client's accounting, as in a run


def test_a_scripted_fault_is_raised_in_process_and_served_as_that_fault_over_http() -> None:
    model = ScriptedModel([{"fault": "rate_limit", "retry_after": 0}, "after the 429"])
    with pytest.raises(RateLimitError):
        asyncio.run(model.complete(_request("q")))

    served = ScriptedModel([{"fault": "rate_limit"}, "after the 429"])
    with FakeProvider(served, retry_after_s=0.0) as fake:
        settings = LLMSettings(
            name="openai", base_url=fake.openai_base_url, model="fake", max_retries=2, max_backoff_s=0.0, api_key_env=""
        )
        call = asyncio.run(build_client(settings).call(_request("q"), "generate"))
    assert call.reply == "after the 429" and [f.kind for f in call.faults] == ["rate_limit"]
    assert fake.stats().by_fault["rate_limit"] == 1


def test_the_fake_provider_passes_the_request_tags_to_a_model_it_serves() -> None:
    model = FunctionModel(lambda r: f"{r.tags.get('problem_id')}/{r.tags.get('stage')}")
    with FakeProvider(model) as fake:
        settings = LLMSettings(
            name="openai", base_url=fake.openai_base_url, model="fake", api_key_env="", args={"tag_headers": True}
        )
        call = asyncio.run(build_client(settings).call(_request("q", problem_id="p7", stage="generate"), "generate"))
    assert call.reply == "p7/generate"
    assert model.requests[0].messages[-1].content == "q"


def test_a_generator_needs_no_template_file() -> None:
    bench = toy.Toy()
    gen = LLMGenerator(benchmark=bench, template="Solve: {{ problem.query }}")
    problem = bench.load("dev")[0]
    assert gen.first_prompt(problem)[0].content == f"Solve: {problem.query}\n"
    assert gen.templates()["direct"].startswith("custom/direct@1#")
