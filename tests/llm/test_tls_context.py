"""The SDK backends share one TLS context per process (the CA files are loaded once, not per client),
built as httpx builds it by default, and a changed ``$SSL_CERT_FILE`` gets a context of its own."""

from __future__ import annotations

import ssl
from typing import Any

import certifi
import httpcore2
import pytest

from modulo.llm.anthropic_backend import AnthropicBackend
from modulo.llm.base import LLMSettings
from modulo.llm.keys import sdk_tls_context
from modulo.llm.openai_backend import OpenAIBackend


def transport_context(backend: OpenAIBackend | AnthropicBackend) -> Any:
    """The TLS context the SDK client's connection pool opens its connections with."""
    return backend._client._client._transport._pool._ssl_context


def backends() -> tuple[OpenAIBackend, AnthropicBackend]:
    return (
        OpenAIBackend(LLMSettings(name="openai", base_url="http://127.0.0.1:9/v1", timeout_s=7.0)),
        AnthropicBackend(LLMSettings(name="anthropic", base_url="http://127.0.0.1:9", timeout_s=7.0)),
    )


def test_every_sdk_client_uses_the_process_context_which_still_verifies() -> None:
    ctx = sdk_tls_context()
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert ctx.cert_store_stats()["x509_ca"] == httpcore2.default_ssl_context().cert_store_stats()["x509_ca"] > 0
    for backend in (*backends(), *backends()):
        assert transport_context(backend) is ctx
        assert backend._client.timeout == 7.0 and backend._client._client.timeout.read == 7.0


def test_another_ca_file_gets_its_own_context(monkeypatch: pytest.MonkeyPatch) -> None:
    before = sdk_tls_context()
    monkeypatch.setenv("SSL_CERT_FILE", certifi.where())
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    after = sdk_tls_context()
    assert after is not before and sdk_tls_context() is after
    assert all(transport_context(backend) is after for backend in backends())
