"""llm=local with the real SmolLM2 model: requests, structured output, token counts, context limits.

One server is shared by the module (it starts in a second or two); replies are kept short. It is
started and stopped as a run does it, and its normal end is checked when the module is done: given a
``server_url`` where nothing answers, the backend starts its own server, and after ``async with`` that
server's process is gone (test_local_lifecycle's normal end, without a second server in the fast lane).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import jsonschema
import pytest
import pytest_asyncio

from modulo.errors import ContextLengthError
from modulo.llm.base import LLMRequest, LLMSettings
from modulo.llm.client import build_client
from modulo.llm.local import LocalBackend, free_port
from modulo.types import Message

from .local_support import kill_if_alive, needs_model, process_gone, wait_gone

pytestmark = [*needs_model, pytest.mark.asyncio(loop_scope="module")]

N_CTX = 1024
SLOT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "day": {"type": "string", "enum": ["Monday", "Tuesday", "Wednesday"]},
        # llama.cpp's grammar enforces enum, pattern, types and required keys, not minimum/maximum
        "start_hour": {"type": "integer", "enum": list(range(9, 17))},
    },
    "required": ["day", "start_hour"],
    "additionalProperties": False,
}


def _request(text: str, **kwargs: Any) -> LLMRequest:
    return LLMRequest(messages=(Message(role="user", content=text),), **kwargs)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def backend() -> AsyncIterator[LocalBackend]:
    # a server_url where nothing answers: the backend starts its own server instead
    b = LocalBackend(
        LLMSettings(name="local", max_tokens=48), n_ctx=N_CTX, server_url=f"http://127.0.0.1:{free_port()}"
    )
    pid = None
    try:
        async with b:
            pid = b.server_pid
            assert pid is not None and not process_gone(pid)
            yield b
        assert wait_gone(pid, 5.0), f"the server (pid {pid}) outlived the backend's normal end"
    finally:
        kill_if_alive(pid)


async def test_schema_constrained_reply_is_valid_json(backend: LocalBackend) -> None:
    assert backend.server_pid is not None and not process_gone(backend.server_pid)
    reply = await backend.complete(
        _request(
            "Schedule a one-hour meeting. Answer with the day and the start hour as JSON.",
            structured_output="schema",
            response_schema=SLOT_SCHEMA,
            max_tokens=48,
        )
    )
    plan = json.loads(reply.text)
    jsonschema.validate(plan, SLOT_SCHEMA)
    assert reply.usage.input_tokens > 0
    assert reply.usage.output_tokens > 0


async def test_json_mode_reply_is_a_json_object(backend: LocalBackend) -> None:
    reply = await backend.complete(_request('Reply with {"ok": true} only.', structured_output="json", max_tokens=24))
    assert reply.text.lstrip().startswith("{")


async def test_free_text_reply(backend: LocalBackend) -> None:
    reply = await backend.complete(_request("Say hello.", structured_output="off", max_tokens=8))
    assert reply.text.strip()
    assert reply.usage.output_tokens <= 8


async def test_prompt_count_matches_the_server(backend: LocalBackend) -> None:
    messages = (
        Message(role="system", content="You plan meetings."),
        Message(role="user", content="Alice is free on Monday 9-12; Bob on Monday 10-11. When can they meet?"),
    )
    counted = await backend.count_prompt_tokens(messages)
    reply = await backend.complete(LLMRequest(messages=messages, max_tokens=1))
    assert counted == reply.usage.input_tokens


async def test_too_long_prompt_fails_before_generation(backend: LocalBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    async def must_not_run(request: LLMRequest) -> None:
        raise AssertionError("the request reached the server")

    monkeypatch.setattr(backend._delegate, "complete", must_not_run)
    long_prompt = "Alice is free on Monday morning. " * 200  # ~1400 tokens > 1024
    started = time.monotonic()
    with pytest.raises(ContextLengthError) as err:
        await backend.complete(_request(long_prompt, max_tokens=8))
    assert time.monotonic() - started < 5
    message = str(err.value)
    counted = await backend.count_prompt_tokens((Message(role="user", content=long_prompt),))
    assert f"{counted} tokens" in message
    assert f"context window of {N_CTX} tokens" in message


async def test_existing_server_url_is_reused(backend: LocalBackend) -> None:
    assert backend.url is not None
    guest = LocalBackend(LLMSettings(name="local"), server_url=backend.url)
    try:
        await guest.start()
        assert guest.server_pid is None  # nothing of its own started
        assert guest.url == backend.url
        reply = await guest.complete(_request("Say yes.", max_tokens=4))
        assert reply.text
    finally:
        await guest.aclose()
    assert backend.process is not None and backend.process.running()  # the owner's server is untouched


async def test_through_build_client(backend: LocalBackend) -> None:
    """llm=local as a run builds it: registry name, llm.args bound, wrapped in the client."""
    settings = LLMSettings(name="local", args={"server_url": backend.url, "n_ctx": N_CTX})
    client = build_client(settings)
    assert isinstance(client.backend, LocalBackend)
    try:
        call = await client.call(
            _request("Pick a day.", structured_output="schema", response_schema=SLOT_SCHEMA, max_tokens=48),
            "reformulate",
        )
    finally:
        await client.aclose()
    assert call.reply is not None
    jsonschema.validate(json.loads(call.reply), SLOT_SCHEMA)
    assert call.usage.calls == 1 and call.usage.cost_usd == 0.0
