"""The price table: exact and prefix matches, overrides, unknown models, retry-after parsing."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import pytest

from modulo.errors import ContextLengthError, PermanentLLMError, RateLimitError, TransientLLMError
from modulo.llm.base import LLMSettings
from modulo.llm.client import build_client
from modulo.llm.faults import error_for_status, parse_retry_after, redact
from modulo.llm.pricing import PRICES, Price, lookup_price

from .support import ProviderFactory, openai_settings, request, synth_config


def test_exact_and_longest_prefix_matches() -> None:
    assert lookup_price("gpt-4o") == PRICES["gpt-4o"]
    assert lookup_price("gpt-4o-mini-2024-07-18") == PRICES["gpt-4o-mini"]
    assert lookup_price("gpt-4o-2024-08-06") == PRICES["gpt-4o"]
    assert lookup_price("claude-3-5-sonnet-20241022") == PRICES["claude-3-5-sonnet"]
    assert lookup_price("claude-opus-4-5-20251101") == PRICES["claude-opus-4-5"]
    assert lookup_price("llama-3-8b-instruct") is None
    assert Price(2.0, 8.0).cost(1_000_000, 500_000) == pytest.approx(6.0)


def test_another_model_that_shares_a_prefix_has_no_price() -> None:
    # each of these costs several times the family whose name starts it: never priced as that family
    for model in ("o1-pro", "o3-pro-2025-06-10", "gpt-5-pro", "gpt-4-32k", "gpt-4-1106-preview", "gpt-3.5-turbo-16k"):
        assert lookup_price(model) is None, model
    assert lookup_price("gpt-3.5-turbo-0125") == PRICES["gpt-3.5-turbo"]
    assert lookup_price("claude-3-5-sonnet-latest") == PRICES["claude-3-5-sonnet"]
    assert lookup_price("o3-mini-2025-01-31") == PRICES["o3-mini"]
    assert lookup_price("gpt-4o-2024-05-13") == Price(5.0, 15.0)  # a snapshot priced apart from its family


def test_prompt_cache_reads_and_writes_have_their_own_price() -> None:
    sonnet = PRICES["claude-sonnet-4-5"]  # $3 input, a cache read $0.30, a write $3.75, $15 output
    assert sonnet.cost(1000, 100, cached_tokens=600, written_tokens=300) == pytest.approx(
        (100 * 3 + 600 * 0.30 + 300 * 3.75 + 100 * 15) / 1e6
    )
    assert sonnet.cost(100, 0, cached_tokens=500) == pytest.approx(100 * 0.30 / 1e6)  # no more than the input
    assert PRICES["gpt-4"].cost(1000, 0, cached_tokens=600) == pytest.approx(1000 * 30 / 1e6)  # no discount there
    assert lookup_price("gpt-4o", LLMSettings(price_input_per_mtok=1.0)) == Price(1.0, 10.0)


def test_settings_override_the_table() -> None:
    both = LLMSettings(model="gpt-4o", price_input_per_mtok=1.0, price_output_per_mtok=2.0)
    assert lookup_price("gpt-4o", both) == Price(1.0, 2.0)
    half = LLMSettings(price_output_per_mtok=9.0)
    assert lookup_price("gpt-4o", half) == replace(PRICES["gpt-4o"], output_per_mtok=9.0)
    assert lookup_price("my-local-model", half) == Price(0.0, 9.0)


async def test_unknown_model_costs_zero_and_warns_once(
    provider: ProviderFactory, caplog: pytest.LogCaptureFixture
) -> None:
    fake = provider(["a", "b"])
    client = build_client(openai_settings(fake, model="mystery-model-xyz"))
    with caplog.at_level(logging.WARNING, logger="modulo.llm"):
        try:
            calls = [await client.call(request(f"q{i}"), "generate") for i in range(2)]
        finally:
            await client.aclose()
    assert all(c.usage.cost_usd == 0.0 and c.usage.input_tokens > 0 for c in calls)
    assert client.unpriced_models == {"mystery-model-xyz"}
    warnings = [r for r in caplog.records if "no price known" in r.getMessage()]
    assert len(warnings) == 1 and "mystery-model-xyz" in warnings[0].getMessage()


def test_retry_after_parsing() -> None:
    assert parse_retry_after({"Retry-After": "3"}) == 3.0
    assert parse_retry_after({"retry-after": "0.5"}) == 0.5
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, now=1445412470.0) == 10.0
    assert parse_retry_after({"Retry-After": "soon"}) is None
    assert parse_retry_after({}) is None and parse_retry_after(None) is None


@pytest.mark.parametrize(
    ("status", "message", "code", "kind", "fault"),
    [
        (429, "slow down", None, RateLimitError, "rate_limit"),
        (429, "You exceeded your current quota", "insufficient_quota", PermanentLLMError, "permanent"),
        (500, "oops", None, TransientLLMError, "server_error"),
        (503, "later", None, TransientLLMError, "server_error"),
        (529, "overloaded", None, TransientLLMError, "overloaded"),
        (408, "request timeout", None, TransientLLMError, "timeout"),
        (400, "prompt is too long: 300000 tokens > 200000 maximum", None, ContextLengthError, "context_length"),
        (400, "bad field", None, PermanentLLMError, "bad_request"),
        (401, "bad key", None, PermanentLLMError, "auth"),
        (404, "no such model", None, PermanentLLMError, "not_found"),
    ],
)
def test_status_mapping(status: int, message: str, code: str | None, kind: type, fault: str) -> None:
    error = error_for_status(status, message, provider="X", code=code, headers={"retry-after": "2"})
    assert type(error) is kind and error.fault == fault
    assert f"HTTP {status}" in str(error)
    if isinstance(error, TransientLLMError):
        assert error.retry_after == 2.0


def test_redact() -> None:
    assert redact("key sk-abcdef used", ["sk-abcdef", None, ""]) == "key [redacted] used"
    assert redact("short abc", ["abc"]) == "short abc"  # too short to be a key; never mangles text


def test_a_client_names_the_models_whose_dollars_it_cannot_count(provider: ProviderFactory) -> None:
    """A paid backend's model with no price (called, or only configured: a resumed run that makes no call)
    is named; a priced or overridden model, and a free backend (the scripted one) whose model has no price,
    are not."""
    from modulo.llm.scripted import ScriptedBackend  # noqa: F401  # registers llm=scripted

    fake = provider(["a"])
    assert build_client(openai_settings(fake, model="mystery-model-xyz")).unknown_cost_models() == ["mystery-model-xyz"]
    assert build_client(openai_settings(fake)).unknown_cost_models() == []  # gpt-4o-mini has a list price
    priced = openai_settings(fake, model="mystery-model-xyz", price_input_per_mtok=1.0, price_output_per_mtok=2.0)
    assert build_client(priced).unknown_cost_models() == []
    scripted = build_client(LLMSettings(name="scripted", args={"replies": ["x"]}))
    assert scripted.unknown_cost_models() == []


def test_a_run_with_an_unpriced_model_says_its_cost_is_unknown_not_zero(
    provider: ProviderFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """summary.json names the model, the console says the cost is unknown (at least what was counted), and
    the report's usage table writes the dollar figures as lower bounds with a note saying why."""
    import asyncio
    import json

    from modulo.build import build_session
    from modulo.cli.console import print_result
    from modulo.reports import ReportOptions, build_report
    from modulo.runner import run_session
    from modulo.runs import RunDir

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-only")
    fake = provider([json.dumps({"schedule": []})] * 4)
    session = build_session(synth_config(fake, "mystery-model-xyz", n=2, max_iterations=1))
    result = asyncio.run(run_session(session, RunDir(tmp_path / "run")))
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["unpriced_models"] == ["mystery-model-xyz"] and summary["usage"]["calls"] == 2
    print_result(session, result)
    out = capsys.readouterr().out
    assert "cost unknown (at least $0.0000)" in out and "no price known for 'mystery-model-xyz'" in out
    build_report([tmp_path / "run"], ReportOptions(out=tmp_path / "report"))
    text = (tmp_path / "report" / "report.md").read_text()
    assert "| >=0.0000 |" in text and "No price was known for the models of" in text
    assert "mystery-model-xyz" in (tmp_path / "report" / "usage.csv").read_text()
