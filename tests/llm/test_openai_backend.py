"""The OpenAI backend through the real ``openai`` SDK against the fake provider on 127.0.0.1."""

from __future__ import annotations

from contextlib import aclosing

import pytest

from modulo.errors import ArgumentError, ConfigError, ContextLengthError, PermanentLLMError, TransientLLMError
from modulo.llm.base import LLMSettings
from modulo.llm.client import build_client
from modulo.llm.openai_backend import OpenAIBackend
from modulo.llm.pricing import PRICES
from modulo.llm.tokens import approx_tokens

from .support import ProviderFactory, openai_settings, request

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city", "days"],
    "additionalProperties": False,
}


async def test_normal_reply_and_usage_mapping(provider: ProviderFactory) -> None:
    fake = provider(["Visit the Colosseum on day one."])
    async with aclosing(build_client(openai_settings(fake))) as client:
        call = await client.call(request("Plan a trip to Rome."), "generate")
    assert call.reply == "Visit the Colosseum on day one."
    assert call.stage == "generate"
    assert call.model == "gpt-4o-mini"
    assert call.finish_reason == "stop"
    assert not call.faults and not call.cached
    # the fake reports ceil(len/4) tokens; the backend maps prompt/completion tokens onto Usage
    assert call.usage.input_tokens == approx_tokens("Plan a trip to Rome.")
    assert call.usage.output_tokens == approx_tokens("Visit the Colosseum on day one.")
    price = PRICES["gpt-4o-mini"]
    assert call.usage.cost_usd == pytest.approx(price.cost(call.usage.input_tokens, call.usage.output_tokens))
    assert call.usage.calls == 1 and call.usage.failed_calls == 0
    sent = fake.requests[0]
    assert sent.api == "openai" and sent.model == "gpt-4o-mini"
    assert sent.messages == [{"role": "user", "content": "Plan a trip to Rome."}]
    assert client.backend_calls == 1 and client.usage == call.usage


async def test_decoding_parameters_are_sent(provider: ProviderFactory) -> None:
    fake = provider(["ok"])
    async with aclosing(build_client(openai_settings(fake, max_tokens=321, seed=7))) as client:
        await client.call(request(temperature=0.3, stop=("END",)), "generate")
    body = fake.requests[0].body
    assert body["temperature"] == 0.3
    assert body["max_tokens"] == 321  # a custom base_url gets the widely supported parameter name
    assert body["seed"] == 7
    assert body["stop"] == ["END"]
    assert "response_format" not in body


def test_official_api_uses_max_completion_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-only")
    backend = OpenAIBackend(LLMSettings(name="openai", model="gpt-4o", max_tokens=50))
    kwargs = backend.request_kwargs(request())
    assert kwargs["max_completion_tokens"] == 50 and "max_tokens" not in kwargs


async def test_structured_output_standard_form(provider: ProviderFactory) -> None:
    fake = provider()
    async with aclosing(build_client(openai_settings(fake))) as client:
        call = await client.call(request(response_schema=SCHEMA, structured_output="schema"), "reformulate")
    fmt = fake.requests[0].body["response_format"]
    assert fmt == {"type": "json_schema", "json_schema": {"name": "response", "schema": SCHEMA, "strict": True}}
    assert call.reply is not None and set(__import__("json").loads(call.reply)) == {"city", "days"}


async def test_structured_output_llamacpp_form_and_json_mode(provider: ProviderFactory) -> None:
    fake = provider()
    async with aclosing(
        build_client(openai_settings(fake, args={"schema_format": "llamacpp", "strict": False}))
    ) as client:
        await client.call(request(response_schema=SCHEMA, structured_output="schema"), "reformulate")
        await client.call(request("json please", structured_output="json"), "reformulate")
    assert fake.requests[0].body["response_format"] == {"type": "json_object", "schema": SCHEMA}
    assert fake.requests[1].body["response_format"] == {"type": "json_object"}


def test_unknown_backend_argument_fails_before_any_call() -> None:
    with pytest.raises(ArgumentError, match=r"schema_fromat.*did you mean 'schema_format'"):
        build_client(LLMSettings(name="openai", base_url="http://127.0.0.1:9/v1", args={"schema_fromat": "x"}))
    with pytest.raises(ConfigError, match=r"schema_format"):
        build_client(LLMSettings(name="openai", base_url="http://127.0.0.1:9/v1", args={"schema_format": "xml"}))


async def test_truncated_reply_is_recorded_not_raised(provider: ProviderFactory) -> None:
    fake = provider(["a fairly long reply that will be cut"], faults=["truncated"])
    async with aclosing(build_client(openai_settings(fake))) as client:
        call = await client.call(request(), "generate")
    assert call.finish_reason == "length"
    assert call.reply == "a fairly long reply that will be cut"[:18]
    assert not call.faults and fake.stats().requests == 1


async def test_refusal_under_schema_comes_back_as_text(provider: ProviderFactory) -> None:
    fake = provider(faults=["refusal"])
    async with aclosing(build_client(openai_settings(fake))) as client:
        call = await client.call(request(response_schema=SCHEMA, structured_output="schema"), "reformulate")
    assert call.finish_reason == "refusal"
    assert call.reply is not None and "can't help" in call.reply


async def test_bad_request_is_not_retried(provider: ProviderFactory) -> None:
    fake = provider(["never sent"], faults=["bad_request"])
    async with aclosing(build_client(openai_settings(fake))) as client:
        with pytest.raises(PermanentLLMError, match=r"HTTP 400") as info:
            await client.call(request(problem="p1"), "generate")
    assert fake.stats().requests == 1
    call = info.value.call  # type: ignore[attr-defined]
    assert call.reply is None and [f.kind for f in call.faults] == ["bad_request"]
    assert call.usage.failed_calls == 1 and call.usage.calls == 0


async def test_context_length_is_its_own_error(provider: ProviderFactory) -> None:
    fake = provider(faults=["context_length"])
    async with aclosing(build_client(openai_settings(fake))) as client:
        with pytest.raises(ContextLengthError):
            await client.call(request(), "generate")
    assert fake.stats().requests == 1


def test_missing_key_for_the_real_api_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("MY_KEY_VAR", raising=False)
    with pytest.raises(ConfigError, match=r"OPENAI_API_KEY"):
        build_client(LLMSettings(name="openai", model="gpt-4o"))
    with pytest.raises(ConfigError, match=r"MY_KEY_VAR"):
        build_client(LLMSettings(name="openai", model="gpt-4o", api_key_env="MY_KEY_VAR"))
    # a local OpenAI-compatible server needs no key
    client = build_client(LLMSettings(name="openai", base_url="http://127.0.0.1:9/v1"))
    assert client.backend_name == "openai"


async def test_key_from_the_named_environment_variable(
    provider: ProviderFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_KEY_VAR", "sk-from-my-var")
    fake = provider(["ok"])
    async with aclosing(build_client(openai_settings(fake, api_key_env="MY_KEY_VAR"))) as client:
        await client.call(request(), "generate")
    assert fake.requests[0].api_key == "sk-from-my-var"


async def test_tag_headers_route_per_problem_scripts(provider: ProviderFactory) -> None:
    fake = provider({"a": ["a1", "a2"], "b": ["b1"]})
    async with aclosing(build_client(openai_settings(fake, args={"tag_headers": True}))) as client:
        replies = [(await client.call(request("x", problem=p), "generate")).reply for p in ("b", "a", "a")]
    assert replies == ["b1", "a1", "a2"]
    assert fake.requests[0].headers["x-modulo-problem-id"] == "b"
    assert fake.requests[0].headers["x-modulo-stage"] == "generate"


async def test_a_reply_without_usage_is_a_fault_not_zero_tokens(provider: ProviderFactory) -> None:
    fake = provider(["a plan"], faults=["no_usage"])
    async with aclosing(build_client(openai_settings(fake))) as client:
        call = await client.call(request(), "generate")
    assert call.reply == "a plan" and call.usage.calls == 1
    assert [f.kind for f in call.faults] == ["no_usage"] and "not counted" in call.faults[0].message


async def test_a_body_that_is_not_json_is_retried_and_named(provider: ProviderFactory) -> None:
    fake = provider(["a plan"], faults=["garbled"])
    async with aclosing(build_client(openai_settings(fake))) as client:
        call = await client.call(request(), "generate")
    assert call.reply == "a plan" and call.usage.failed_calls == 1 and fake.stats().requests == 2
    assert [f.kind for f in call.faults] == ["bad_response"]
    assert "unreadable response: not JSON" in call.faults[0].message


async def test_a_body_handed_back_as_text_is_named(provider: ProviderFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = provider()
    backend = OpenAIBackend(openai_settings(fake))

    async def page(**kwargs: object) -> str:  # what the SDK returns for a 200 that is not labelled JSON
        return "<html><body>502 Bad Gateway</body></html>"

    monkeypatch.setattr(backend._client.chat.completions, "create", page)
    with pytest.raises(TransientLLMError, match=r"unreadable response: str instead of a response object.*502") as info:
        await backend.complete(request())
    assert info.value.fault == "bad_response"
    await backend.aclose()


async def test_prompt_tokens_read_from_the_prompt_cache_cost_the_cached_price(provider: ProviderFactory) -> None:
    prompt = "Plan a trip to Rome. " * 200
    fake = provider([{"text": "Day 1: Rome.", "cached_tokens": 800}])
    async with aclosing(build_client(openai_settings(fake))) as client:  # gpt-4o-mini: $0.15, cached $0.075
        call = await client.call(request(prompt), "generate")
    n_in, n_out = approx_tokens(prompt), approx_tokens("Day 1: Rome.")
    assert call.usage.input_tokens == n_in and n_in > 800  # the cached tokens are input tokens too
    assert call.usage.cost_usd == pytest.approx(((n_in - 800) * 0.15 + 800 * 0.075 + n_out * 0.60) / 1e6)
