"""The Anthropic messages backend (``llm=anthropic llm.model=claude-...``).

The key comes from ``$ANTHROPIC_API_KEY`` (or the variable named by ``llm.api_key_env``); system
messages are sent as the ``system`` parameter; the SDK's own retries are off.

Backend arguments (``llm.args``):

- ``default_max_tokens``: ``max_tokens`` when neither the request nor the settings give one (4096).
- ``schema_mode``: how a JSON-Schema request is sent. ``"output_config"`` (default) uses the API's
  structured outputs (``output_config.format``); ``"tool"`` forces a single tool whose input schema is
  the response schema and returns the tool input as JSON text (for models without structured
  outputs); ``"off"`` sends no schema (the prompt alone asks for JSON).
- ``send_temperature``: send ``temperature`` in the request body (the installed SDK has no such
  parameter; turn this on for servers and API versions that still take it). Off by default.
- ``tag_headers``, ``extra_body``, ``extra_headers``: as for the OpenAI backend.
"""

from __future__ import annotations

import json
from typing import Any, Literal, get_args

import anthropic
from anthropic.types import Message

from ..errors import ConfigError, LLMError
from ..types import ToolCall, Usage
from .base import LLMRequest, LLMResponse, LLMSettings
from .faults import translate_sdk_error, unreadable_body
from .keys import SDKBackend

SchemaMode = Literal["output_config", "tool", "off"]

_OFFICIAL_HOSTS = ("api.anthropic.com",)
_SERVER = "Anthropic server"
_STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
}


class AnthropicBackend(SDKBackend):
    """:class:`modulo.llm.base.LLM` over ``anthropic.AsyncAnthropic`` messages."""

    name = "anthropic"
    provider = "Anthropic"
    official_hosts = _OFFICIAL_HOSTS
    http_client_type = anthropic.DefaultAsyncHttpxClient

    def __init__(
        self,
        settings: LLMSettings,
        *,
        default_max_tokens: int = 4096,
        schema_mode: SchemaMode = "output_config",
        tool_name: str = "respond",
        send_temperature: bool = False,
        tag_headers: bool = False,
        extra_body: dict[str, Any] | None = None,
        extra_headers: dict[str, str] | None = None,
    ) -> None:
        if schema_mode not in get_args(SchemaMode):
            raise ConfigError(
                f"anthropic backend: schema_mode={schema_mode!r} is not one of {', '.join(get_args(SchemaMode))}"
            )
        if default_max_tokens < 1:
            raise ConfigError(f"anthropic backend: default_max_tokens must be positive, not {default_max_tokens}")
        self.default_max_tokens = default_max_tokens
        self.schema_mode = schema_mode
        self.tool_name = tool_name
        self.send_temperature = send_temperature
        self._client = anthropic.AsyncAnthropic(**self._sdk_options(settings, tag_headers, extra_body, extra_headers))

    def request_kwargs(self, request: LLMRequest) -> dict[str, Any]:
        """The keyword arguments of ``messages.create`` for ``request`` (no transport options)."""
        system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        turns: list[dict[str, Any]] = []
        for m in request.messages:
            if m.role == "system":
                continue
            if turns and turns[-1]["role"] == m.role:  # the API wants alternating turns
                turns[-1] = {"role": m.role, "content": turns[-1]["content"] + "\n\n" + m.content}
            else:
                turns.append({"role": m.role, "content": m.content})
        for turn in request.turns:  # a tool-calling conversation: tool_use blocks, then their tool_result blocks
            blocks: list[dict[str, Any]] = [{"type": "text", "text": turn.text}] if turn.text else []
            blocks += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in turn.calls]
            if blocks:
                turns.append({"role": "assistant", "content": blocks})
            results: list[dict[str, Any]] = [
                {"type": "tool_result", "tool_use_id": c.id, "content": r}
                for c, r in zip(turn.calls, turn.results, strict=True)
            ]
            if turn.feedback:
                results.append({"type": "text", "text": turn.feedback})
            if results:
                if turns and turns[-1]["role"] == "user":  # keep the turns alternating
                    previous = turns[-1]["content"]
                    head = [{"type": "text", "text": previous}] if isinstance(previous, str) else list(previous)
                    turns[-1] = {"role": "user", "content": head + results}
                else:
                    turns.append({"role": "user", "content": results})
        max_tokens = request.max_tokens or self.settings.max_tokens or self.default_max_tokens
        kwargs: dict[str, Any] = {
            "model": request.model or self.settings.model,
            "max_tokens": max_tokens,
            "messages": turns,
        }
        if system:
            kwargs["system"] = system
        if request.stop:
            kwargs["stop_sequences"] = list(request.stop)
        schema = request.response_schema if request.structured_output == "schema" else None
        if schema is not None and self.schema_mode == "output_config":
            kwargs["output_config"] = {"format": {"type": "json_schema", "schema": schema}}
        if request.tools:
            kwargs["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in request.tools
            ]
        elif schema is not None and self.schema_mode == "tool":
            kwargs["tools"] = [
                {"name": self.tool_name, "description": "Give the answer in this structure.", "input_schema": schema}
            ]
            kwargs["tool_choice"] = {"type": "tool", "name": self.tool_name}
        return kwargs

    def extra_body_for(self, request: LLMRequest) -> dict[str, Any]:
        body = dict(self.extra_body)
        if self.send_temperature:  # the current SDK has no temperature parameter; older APIs take one
            body.setdefault("temperature", request.temperature)
        return body

    async def complete(self, request: LLMRequest) -> LLMResponse:
        kwargs = self.request_kwargs(request)
        try:
            message = await self._client.messages.create(**kwargs, **self.send_options(request))
        except anthropic.AnthropicError as exc:
            raise self._translate(exc) from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:  # a 200 whose body is not JSON
            raise unreadable_body(_SERVER, exc, None, (self._key.reveal(),)) from None
        if not isinstance(message, Message):  # a body of another type (text/html) comes back as text
            raise unreadable_body(_SERVER, None, message, (self._key.reveal(),))
        parts: list[str] = []
        calls: list[ToolCall] = []
        for block in message.content:
            if block.type == "text":
                parts.append(block.text)
            elif block.type == "tool_use" and request.tools:
                arguments = block.input if isinstance(block.input, dict) else {}
                raw = None if isinstance(block.input, dict) else json.dumps(block.input)
                calls.append(ToolCall(id=block.id, name=block.name, arguments=arguments, raw_arguments=raw))
            elif block.type == "tool_use":  # the forced answer tool of schema_mode="tool"
                parts.append(json.dumps(block.input, ensure_ascii=False))
        u = message.usage
        usage = Usage()
        read = written = 0
        if u is not None:  # input_tokens leaves out the prompt-cache reads and writes: all three are input
            read, written = u.cache_read_input_tokens or 0, u.cache_creation_input_tokens or 0
            usage = Usage(input_tokens=(u.input_tokens or 0) + written + read, output_tokens=u.output_tokens or 0)
        reason = message.stop_reason
        finish = _STOP_REASONS.get(reason, reason) if reason else None
        return LLMResponse(
            text="".join(parts),
            tool_calls=calls,
            usage=usage,
            usage_reported=u is not None,
            cached_input_tokens=read,
            cache_write_tokens=written,
            model=message.model or "",
            finish_reason=finish,
        )

    def _translate(self, exc: anthropic.AnthropicError) -> LLMError:
        return translate_sdk_error(exc, anthropic, provider="Anthropic", server=_SERVER, secrets=(self._key.reveal(),))

    async def aclose(self) -> None:
        await self._client.close()
