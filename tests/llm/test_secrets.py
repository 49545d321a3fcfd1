"""API keys never appear in a repr, a log line, an exception, a trace or a recorded call."""

from __future__ import annotations

import logging
import traceback

import pytest

from modulo.errors import LLMError
from modulo.llm.client import build_client
from modulo.llm.keys import Secret

from .support import SECRET, ProviderFactory, anthropic_settings, openai_settings, request


@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_key_never_leaks(
    api: str, provider: ProviderFactory, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    caplog.set_level(logging.DEBUG)  # every logger, the SDKs' and httpx's included
    # the 'auth' fault echoes the key it received, as a careless server might
    fake = provider(["fine"], faults=["server_error", "reset", "ok", "auth"])
    settings = (openai_settings if api == "openai" else anthropic_settings)(fake, max_retries=2)
    client = build_client(settings)
    texts: list[str] = [repr(client), repr(client.backend), str(vars(client.backend)), repr(settings)]
    try:
        call = await client.call(request(), "generate")
        texts.append(call.model_dump_json())
        with pytest.raises(LLMError) as info:
            await client.call(request("again"), "generate")
    finally:
        await client.aclose()
    assert fake.requests[0].api_key == SECRET  # the key was really sent...
    exc = info.value
    assert exc.fault == "auth" and "[redacted]" in str(exc)
    texts += [str(exc), repr(exc), "".join(traceback.format_exception(exc))]
    texts.append(exc.call.model_dump_json())  # type: ignore[attr-defined]
    texts.append(caplog.text)
    assert len(caplog.records) > 0
    for text in texts:  # ...and shows up nowhere else
        assert SECRET not in text
        assert SECRET[-12:] not in text


def test_secret_wrapper_hides_its_value() -> None:
    secret = Secret(SECRET)
    shown = [repr(secret), str(secret), f"{secret}", f"{secret!r}", repr([secret]), repr({"k": secret})]
    assert all(SECRET not in s for s in shown)
    assert secret.reveal() == SECRET
    with pytest.raises(TypeError):
        __import__("pickle").dumps(secret)
