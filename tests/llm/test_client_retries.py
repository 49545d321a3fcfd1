"""Retries, backoff and accounting of failed attempts, observed at the fake provider."""

from __future__ import annotations

import asyncio
import itertools
import time
from contextlib import aclosing

import pytest

from modulo.errors import PermanentLLMError, RateLimitError, TransientLLMError
from modulo.llm.base import LLMRequest, LLMResponse, LLMSettings
from modulo.llm.client import LLMClient, build_client
from modulo.llm.openai_backend import OpenAIBackend
from modulo.llm.pricing import PRICES
from modulo.llm.tokens import approx_tokens

from .support import ProviderFactory, openai_settings, request


def gaps(arrivals: list[float]) -> list[float]:
    return [b - a for a, b in itertools.pairwise(arrivals)]


async def test_retry_after_is_honoured(provider: ProviderFactory) -> None:
    fake = provider(["done"], faults=["rate_limit"], retry_after_s=0.3)
    # exponential backoff would wait at least 1 s here; the server's Retry-After says 0.3 s
    async with aclosing(build_client(openai_settings(fake, max_backoff_s=5.0))) as client:
        call = await client.call(request(), "generate")
    assert call.reply == "done" and [f.kind for f in call.faults] == ["rate_limit"]
    (gap,) = gaps(fake.stats().arrivals)
    assert 0.28 <= gap < 0.95


async def test_retry_after_is_capped_by_max_backoff(provider: ProviderFactory) -> None:
    fake = provider(["done"], faults=["rate_limit"], retry_after_s=30.0)
    async with aclosing(build_client(openai_settings(fake, max_backoff_s=0.1))) as client:
        await client.call(request(), "generate")
    (gap,) = gaps(fake.stats().arrivals)
    assert gap < 2.0


async def test_rate_limit_without_retry_after_backs_off_exponentially(provider: ProviderFactory) -> None:
    fake = provider(["done"], faults=["rate_limit_bare", "rate_limit_bare"])
    settings = openai_settings(fake, max_backoff_s=2.0)
    async with aclosing(LLMClient(OpenAIBackend(settings), settings, backoff_base_s=0.1)) as client:
        call = await client.call(request(), "generate")
    assert [f.kind for f in call.faults] == ["rate_limit", "rate_limit"]
    first, second = gaps(fake.stats().arrivals)
    assert first >= 0.1 and second >= 0.2  # base * 2**n plus jitter


@pytest.mark.parametrize("faults", [["server_error"], ["unavailable", "server_error"]])
async def test_server_errors_are_retried_then_succeed(provider: ProviderFactory, faults: list[str]) -> None:
    fake = provider(["recovered"], faults=faults)
    async with aclosing(build_client(openai_settings(fake))) as client:
        call = await client.call(request(), "generate")
    assert call.reply == "recovered"
    assert [f.kind for f in call.faults] == ["server_error"] * len(faults)
    assert [f.attempt for f in call.faults] == list(range(1, len(faults) + 1))
    assert fake.stats().requests == len(faults) + 1 == client.backend_calls
    assert call.usage.failed_calls == len(faults) and call.usage.calls == 1


async def test_timeouts_are_retried(provider: ProviderFactory) -> None:
    fake = provider(["in time"], faults=["timeout"], hang_s=20.0)
    started = time.monotonic()
    async with aclosing(build_client(openai_settings(fake, timeout_s=0.3))) as client:
        call = await client.call(request(), "generate")
    assert call.reply == "in time" and [f.kind for f in call.faults] == ["timeout"]
    assert time.monotonic() - started < 5.0
    assert fake.stats().by_fault == {"timeout": 1, "ok": 1}


async def test_connection_reset_is_retried(provider: ProviderFactory) -> None:
    fake = provider(["after reset"], faults=["reset"])
    async with aclosing(build_client(openai_settings(fake))) as client:
        call = await client.call(request(), "generate")
    assert call.reply == "after reset" and [f.kind for f in call.faults] == ["connection"]
    assert fake.stats().requests == 2


async def test_giving_up_raises_with_the_call_attached(provider: ProviderFactory) -> None:
    fake = provider(["never"], faults=["server_error", "rate_limit", "server_error", "ok"], retry_after_s=0.01)
    async with aclosing(build_client(openai_settings(fake, max_retries=2))) as client:
        with pytest.raises(TransientLLMError) as info:
            await client.call(request(problem="p7"), "reformulate")
    call = info.value.call  # type: ignore[attr-defined]
    assert call.reply is None and call.stage == "reformulate"
    assert [f.kind for f in call.faults] == ["server_error", "rate_limit", "server_error"]
    assert all(f.stage == "reformulate" for f in call.faults)
    assert fake.stats().requests == 3 == client.backend_calls
    assert call.usage.calls == 0 and call.usage.failed_calls == 3
    assert client.usage.failed_calls == 3 and client.usage.calls == 0


async def test_permanent_errors_are_not_retried(provider: ProviderFactory) -> None:
    fake = provider(faults=["auth"])
    async with aclosing(build_client(openai_settings(fake))) as client:
        with pytest.raises(PermanentLLMError) as info:
            await client.call(request(), "generate")
    assert info.value.fault == "auth" and fake.stats().requests == 1


async def test_empty_reply_is_retried_and_its_tokens_are_paid(provider: ProviderFactory) -> None:
    fake = provider(["a real answer"], faults=["empty"])
    async with aclosing(build_client(openai_settings(fake))) as client:
        call = await client.call(request("Plan a trip to Rome."), "generate")
    assert call.reply == "a real answer" and [f.kind for f in call.faults] == ["empty_reply"]
    prompt = approx_tokens("Plan a trip to Rome.")
    # the failed attempt was billed for its prompt: both attempts count
    assert call.usage.input_tokens == 2 * prompt
    assert call.usage.output_tokens == approx_tokens("a real answer")
    expected = PRICES["gpt-4o-mini"].cost(2 * prompt, approx_tokens("a real answer"))
    assert call.usage.cost_usd == pytest.approx(expected)
    assert call.usage.failed_calls == 1 and call.usage.calls == 1


async def test_running_totals_add_up(provider: ProviderFactory) -> None:
    fake = provider(["one", "two", "three"], faults=["ok", "empty"])
    async with aclosing(
        build_client(openai_settings(fake, price_input_per_mtok=1_000_000.0, price_output_per_mtok=0.0))
    ) as client:
        calls = [await client.call(request(f"q{i}"), "generate") for i in range(2)]
    total = calls[0].usage + calls[1].usage
    assert client.usage == total
    assert total.calls == 2 and total.failed_calls == 1
    # $1 per input token with the override: three attempts, each with a 1-token prompt
    assert total.cost_usd == pytest.approx(3.0)
    assert client.backend_calls == 3


class _Crashing:
    name = "crashing"

    def __init__(self, exc: BaseException | None = None, hang: bool = False) -> None:
        self.exc, self.hang = exc, hang

    async def complete(self, request: LLMRequest) -> LLMResponse:
        if self.hang:
            await asyncio.sleep(60)
        assert self.exc is not None
        raise self.exc

    async def aclose(self) -> None:
        return None


async def test_backend_bug_becomes_a_permanent_error_with_the_call() -> None:
    settings = LLMSettings(name="crashing", max_retries=3)
    client = LLMClient(_Crashing(ValueError("boom")), settings)
    with pytest.raises(PermanentLLMError, match=r"crashed: ValueError: boom") as info:
        await client.call(request(), "generate")
    assert client.backend_calls == 1
    assert info.value.call.faults[0].kind == "permanent"  # type: ignore[attr-defined]


async def test_scripted_rate_limit_with_retry_after_is_retried() -> None:
    settings = LLMSettings(name="crashing", max_retries=1, max_backoff_s=0.01)
    client = LLMClient(_Crashing(RateLimitError("slow down", retry_after=0.0)), settings)
    with pytest.raises(RateLimitError):
        await client.call(request(), "generate")
    assert client.backend_calls == 2


async def test_a_backend_that_never_answers_is_cut_off() -> None:
    settings = LLMSettings(name="crashing", max_retries=0, timeout_s=0.05)
    client = LLMClient(_Crashing(hang=True), settings)
    with pytest.raises(TransientLLMError) as info:
        await client.call(request(), "generate")
    assert info.value.fault == "timeout"


async def test_a_reply_cut_empty_by_the_token_limit_is_truncated_not_retried(provider: ProviderFactory) -> None:
    # a reasoning model that spends max_tokens thinking answers "" with finish_reason "length": the same
    # request is cut the same way again, so it is not resent (and paid) but returned as truncated
    fake = provider(["", "never asked"], faults=["truncated"])
    async with aclosing(build_client(openai_settings(fake))) as client:
        call = await client.call(request("Plan a trip to Rome."), "generate")
    assert call.reply == "" and call.finish_reason == "length" and not call.faults
    assert fake.stats().requests == 1 and call.usage.calls == 1 and call.usage.failed_calls == 0


class _Refusing:
    """Anthropic's answer when its classifier stops the model at once: no content, stop_reason "refusal"."""

    name = "refusing"

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.calls += 1
        return LLMResponse(text="", finish_reason="refusal", model="m")

    async def aclose(self) -> None:
        return None


async def test_an_empty_refusal_is_the_answer_not_retried() -> None:
    backend = _Refusing()
    client = LLMClient(backend, LLMSettings(name="refusing", max_retries=3, max_backoff_s=0.0))
    call = await client.call(request(), "generate")
    assert backend.calls == 1 and call.reply == "" and call.finish_reason == "refusal"
    assert call.usage.calls == 1 and call.usage.failed_calls == 0 and not call.faults
