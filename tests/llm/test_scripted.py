"""The scripted backend: lists, per-problem scripts, functions, script files and scripted faults."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path

import pytest

from modulo.errors import ArgumentError, ConfigError, PermanentLLMError
from modulo.llm.base import LLMRequest, LLMResponse, LLMSettings
from modulo.llm.client import build_client
from modulo.llm.tokens import approx_tokens
from modulo.types import Message

from .support import request


def scripted(**args: object) -> LLMSettings:
    return LLMSettings(name="scripted", max_backoff_s=0.0, args=dict(args))


async def test_list_is_consumed_in_call_order_and_usage_is_counted() -> None:
    client = build_client(scripted(replies=["one", "two"]))
    first = await client.call(request("hello world"), "generate")
    second = await client.call(request("hello again"), "reformulate")
    assert (first.reply, second.reply) == ("one", "two")
    assert first.usage.input_tokens == approx_tokens("hello world") and first.usage.output_tokens == 1
    assert first.usage.cost_usd == 0.0 and first.model == "scripted"
    assert client.unpriced_models == {"scripted"}
    with pytest.raises(PermanentLLMError, match=r"ran out of replies.*all 2 were used"):
        await client.call(request(), "generate")


async def test_per_problem_scripts_are_deterministic_under_concurrency() -> None:
    script = {"a": ["a1", "a2", "a3"], "b": ["b1", "b2"], "*": ["d1", "d2"]}
    client = build_client(scripted(replies=script, latency_s=0.0))
    order = [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1), ("c", 0), ("c", 1), ("d", 0)]
    random.Random(4).shuffle(order)

    async def ask(problem: str, delay: int) -> tuple[str, str | None]:
        await asyncio.sleep(delay * 0.001)
        return problem, (await client.call(request(problem, problem=problem), "generate")).reply

    results = await asyncio.gather(*(ask(p, i) for i, (p, _) in enumerate(order)))
    seen: dict[str, list[str | None]] = {}
    for problem, reply in results:
        seen.setdefault(problem, []).append(reply)
    assert seen["a"] == ["a1", "a2", "a3"] and seen["b"] == ["b1", "b2"]
    # each problem without its own entry replays its own copy of "*"
    assert seen["c"] == ["d1", "d2"] and seen["d"] == ["d1"]
    with pytest.raises(PermanentLLMError, match=r"problem 'b'"):
        await client.call(request(problem="b"), "generate")


async def test_no_default_names_the_problem() -> None:
    client = build_client(scripted(replies={"a": ["x"]}))
    with pytest.raises(PermanentLLMError, match=r"no replies for problem 'zz'"):
        await client.call(request(problem="zz"), "generate")


async def test_function_sync_and_async() -> None:
    def echo(req: LLMRequest) -> str:
        return f"{req.tags['stage']}:{req.messages[-1].content}"

    async def shout(req: LLMRequest) -> LLMResponse:
        return LLMResponse(text=req.messages[-1].content.upper(), finish_reason="length")

    sync_client = build_client(scripted(fn=echo))
    async_client = build_client(scripted(fn=shout))
    assert (await sync_client.call(request("hi"), "reformulate")).reply == "reformulate:hi"
    call = await async_client.call(request("hi"), "generate")
    assert call.reply == "HI" and call.finish_reason == "length"


async def test_script_file_from_settings(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"p1": ["x", {"text": "cut", "finish_reason": "length"}]}))
    client = build_client(LLMSettings(name="scripted", script=str(path)))
    assert (await client.call(request(problem="p1"), "generate")).reply == "x"
    call = await client.call(request(problem="p1"), "generate")
    assert call.reply == "cut" and call.finish_reason == "length"


@pytest.mark.parametrize(
    ("content", "message"),
    [("{not json", "cannot read script file"), ('"a string"', "must be a list"), ("[1]", r"\[0\] must be a string")],
)
def test_bad_script_files_are_config_errors(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ConfigError, match=message):
        build_client(LLMSettings(name="scripted", script=str(path)))


async def test_no_script_gives_deterministic_stand_in_replies() -> None:
    schema = {"type": "object", "properties": {"day": {"enum": ["Monday"]}, "n": {"type": "integer", "minimum": 3}}}
    client = build_client(LLMSettings(name="scripted"))
    ask = LLMRequest(
        messages=(Message(role="user", content="plan it"),), structured_output="schema", response_schema=schema
    )
    first = await client.call(ask, "generate")
    again = await client.call(ask, "generate")
    assert first.reply == again.reply and json.loads(first.reply or "") == {"day": "Monday", "n": 3}
    text = await client.call(LLMRequest(messages=(Message(role="user", content="plan it"),)), "generate")
    assert text.reply and not text.reply.startswith("{")
    await client.aclose()


def test_double_or_missing_sources_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"got several"):
        build_client(scripted(replies=["a"], fn=lambda r: "b"))
    with pytest.raises(ConfigError, match=r"does not exist"):
        build_client(LLMSettings(name="scripted", script=str(tmp_path / "absent.json")))
    with pytest.raises(ArgumentError, match=r"'reply'.*did you mean 'replies'"):
        build_client(scripted(reply=["a"]))


async def test_scripted_faults_go_through_the_retry_layer() -> None:
    replies = [{"fault": "rate_limit", "retry_after": 0}, {"fault": "server_error"}, {"text": ""}, "finally"]
    client = build_client(scripted(replies=replies))
    call = await client.call(request(), "generate")
    assert call.reply == "finally"
    assert [f.kind for f in call.faults] == ["rate_limit", "server_error", "empty_reply"]
    assert client.backend_calls == 4


async def test_scripted_permanent_fault_stops_at_once() -> None:
    client = build_client(scripted(replies=[{"fault": "rate_limit"}, {"fault": "auth", "message": "bad key"}, "x"]))
    with pytest.raises(PermanentLLMError, match=r"bad key") as info:
        await client.call(request(), "generate")
    assert info.value.fault == "auth" and client.backend_calls == 2
    assert [f.kind for f in info.value.call.faults] == ["rate_limit", "auth"]  # type: ignore[attr-defined]


async def test_prices_from_settings_apply_to_scripted_calls() -> None:
    settings = LLMSettings(
        name="scripted", price_input_per_mtok=2e6, price_output_per_mtok=1e6, args={"replies": ["abcd"]}
    )
    client = build_client(settings)
    call = await client.call(request("abcdefgh"), "generate")
    assert call.usage.cost_usd == pytest.approx(2 * 2 + 1 * 1)
