"""The Anthropic backend through the real ``anthropic`` SDK against the fake provider on 127.0.0.1."""

from __future__ import annotations

import json
from contextlib import aclosing

import pytest

from modulo.errors import ConfigError, ContextLengthError, PermanentLLMError
from modulo.llm.base import LLMRequest, LLMSettings
from modulo.llm.client import build_client
from modulo.llm.pricing import PRICES
from modulo.llm.tokens import approx_tokens
from modulo.types import Message

from .support import ProviderFactory, anthropic_settings, request

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}


def chat(*turns: tuple[str, str], **fields: object) -> LLMRequest:
    return LLMRequest(messages=tuple(Message(role=r, content=c) for r, c in turns), **fields)


async def test_normal_reply_system_prompt_and_usage(provider: ProviderFactory) -> None:
    fake = provider(["Day 1: Rome."])
    async with aclosing(build_client(anthropic_settings(fake))) as client:
        call = await client.call(chat(("system", "You plan trips."), ("user", "Plan Rome.")), "generate")
    assert call.reply == "Day 1: Rome." and call.finish_reason == "stop"
    body = fake.requests[0].body
    assert body["system"] == "You plan trips."
    assert body["messages"] == [{"role": "user", "content": "Plan Rome."}]
    assert body["max_tokens"] == 4096
    assert "temperature" not in body  # the installed SDK has no temperature parameter
    assert call.usage.input_tokens == approx_tokens("You plan trips.") + approx_tokens("Plan Rome.")
    assert call.usage.output_tokens == approx_tokens("Day 1: Rome.")
    expected = PRICES["claude-haiku-4-5"].cost(call.usage.input_tokens, call.usage.output_tokens)
    assert call.usage.cost_usd == pytest.approx(expected)


async def test_consecutive_turns_are_merged_and_max_tokens_taken(provider: ProviderFactory) -> None:
    fake = provider(["ok"])
    async with aclosing(
        build_client(anthropic_settings(fake, args={"default_max_tokens": 77, "send_temperature": True}))
    ) as client:
        await client.call(chat(("user", "a"), ("user", "b"), temperature=0.5), "generate")
    body = fake.requests[0].body
    assert body["messages"] == [{"role": "user", "content": "a\n\nb"}]
    assert body["max_tokens"] == 77 and body["temperature"] == 0.5


async def test_structured_output_forms(provider: ProviderFactory) -> None:
    fake = provider()
    native = build_client(anthropic_settings(fake))
    tool = build_client(anthropic_settings(fake, args={"schema_mode": "tool"}))
    try:
        first = await native.call(request(response_schema=SCHEMA, structured_output="schema"), "reformulate")
        second = await tool.call(request(response_schema=SCHEMA, structured_output="schema"), "reformulate")
    finally:
        await native.aclose()
        await tool.aclose()
    assert fake.requests[0].body["output_config"] == {"format": {"type": "json_schema", "schema": SCHEMA}}
    assert fake.requests[1].body["tool_choice"] == {"type": "tool", "name": "respond"}
    assert fake.requests[1].body["tools"][0]["input_schema"] == SCHEMA
    for call in (first, second):  # the tool's input comes back as JSON text
        assert call.reply is not None and set(json.loads(call.reply)) == {"city", "days"}


async def test_overloaded_and_rate_limit_are_retried(provider: ProviderFactory) -> None:
    fake = provider(["fine"], faults=["overloaded", "rate_limit", "server_error"], retry_after_s=0.01)
    async with aclosing(build_client(anthropic_settings(fake))) as client:
        call = await client.call(request(), "generate")
    assert call.reply == "fine"
    assert [f.kind for f in call.faults] == ["overloaded", "rate_limit", "server_error"]
    assert fake.stats().requests == 4 and client.backend_calls == 4


async def test_max_tokens_stop_reason_maps_to_length(provider: ProviderFactory) -> None:
    fake = provider(["abcdefgh"], faults=["truncated"])
    async with aclosing(build_client(anthropic_settings(fake))) as client:
        call = await client.call(request(), "generate")
    assert call.finish_reason == "length" and call.reply == "abcd"


async def test_bad_request_and_context_length(provider: ProviderFactory) -> None:
    fake = provider(faults=["bad_request", "context_length"])
    async with aclosing(build_client(anthropic_settings(fake))) as client:
        with pytest.raises(PermanentLLMError) as info:
            await client.call(request(), "generate")
        assert not isinstance(info.value, ContextLengthError)
        with pytest.raises(ContextLengthError):
            await client.call(request(), "generate")
    assert fake.stats().requests == 2


def test_missing_key_for_the_real_api_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigError, match=r"ANTHROPIC_API_KEY"):
        build_client(LLMSettings(name="anthropic", model="claude-sonnet-4-5"))
    with pytest.raises(ConfigError, match=r"schema_mode"):
        build_client(LLMSettings(name="anthropic", base_url="http://127.0.0.1:9", args={"schema_mode": "nope"}))


async def test_a_reply_without_usage_is_a_fault_not_a_crash(provider: ProviderFactory) -> None:
    fake = provider(["Day 1: Rome."], faults=["no_usage"])
    async with aclosing(build_client(anthropic_settings(fake))) as client:
        call = await client.call(request(), "generate")
    assert call.reply == "Day 1: Rome." and call.usage.calls == 1 and call.usage.failed_calls == 0
    assert [f.kind for f in call.faults] == ["no_usage"]


async def test_a_body_that_is_not_json_is_retried_and_named(provider: ProviderFactory) -> None:
    fake = provider(["Day 1: Rome."], faults=["garbled"])
    async with aclosing(build_client(anthropic_settings(fake))) as client:
        call = await client.call(request(), "generate")
    assert call.reply == "Day 1: Rome." and call.usage.failed_calls == 1
    assert [f.kind for f in call.faults] == ["bad_response"]
    assert "Anthropic server sent an unreadable response: not JSON" in call.faults[0].message


async def test_prompt_cache_reads_count_as_input_at_their_own_price(provider: ProviderFactory) -> None:
    prompt = "Plan a trip to Rome. " * 200
    fake = provider([{"text": "Day 1: Rome.", "cached_tokens": 800}])
    async with aclosing(build_client(anthropic_settings(fake))) as client:  # claude-haiku-4-5: $1, a read $0.10
        call = await client.call(request(prompt), "generate")
    n_in, n_out = approx_tokens(prompt), approx_tokens("Day 1: Rome.")
    assert call.usage.input_tokens == n_in and n_in > 800
    assert call.usage.cost_usd == pytest.approx(((n_in - 800) * 1.0 + 800 * 0.10 + n_out * 5.0) / 1e6)


async def test_an_sdk_refusal_to_send_is_not_taken_for_an_unreadable_reply(
    provider: ProviderFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the SDK raises ValueError before sending (a non-streaming request it expects to take too long):
    # a permanent error in modulo's hands, never a retried "unreadable response" from the server
    fake = provider()
    client = build_client(anthropic_settings(fake))

    async def refuses(**kwargs: object) -> object:
        raise ValueError("Streaming is strongly recommended for operations that may take longer than 10 minutes")

    monkeypatch.setattr(client.backend._client.messages, "create", refuses)  # type: ignore[attr-defined]
    async with aclosing(client):
        with pytest.raises(PermanentLLMError, match="Streaming is strongly recommended"):
            await client.call(request(), "generate")
    assert client.backend_calls == 1
