"""The OpenAI chat-completions backend, also for any OpenAI-compatible server (vLLM, llama.cpp, Ollama).

``llm=openai llm.model=gpt-4o-mini`` talks to OpenAI with the key in ``$OPENAI_API_KEY`` (or the
variable named by ``llm.api_key_env``); ``llm.base_url=http://127.0.0.1:8000/v1`` talks to a local
server, which needs no key. The SDK's own retries are off: :mod:`modulo.llm.client` retries.

Backend arguments (``llm.args``):

- ``schema_format``: how a JSON-Schema request is sent. ``"openai"`` (default) sends
  ``{"type": "json_schema", "json_schema": {"name", "schema", "strict"}}``; ``"llamacpp"`` sends
  ``{"type": "json_object", "schema": ...}`` (llama-cpp-python 0.3.x answers 500 to the standard form).
- ``strict``: the ``strict`` flag of the standard form (default true).
- ``schema_name``: the schema's name in the standard form.
- ``max_tokens_param``: ``"max_tokens"``, ``"max_completion_tokens"`` or ``"auto"`` (the latter for
  OpenAI itself, the former for a custom ``base_url``).
- ``tag_headers``: send the request's tags as ``X-Modulo-*`` headers (the fake provider reads
  ``X-Modulo-Problem-Id``); off by default.
- ``extra_body`` / ``extra_headers``: passed through to every request.
"""

from __future__ import annotations

import json
from typing import Any, Literal, get_args

import openai
from openai.types.chat import ChatCompletion

from ..errors import ConfigError, LLMError
from ..types import ToolCall, Usage
from .base import LLMRequest, LLMResponse, LLMSettings
from .faults import EmptyReplyError, translate_sdk_error, unreadable_body
from .keys import SDKBackend, is_official

SchemaFormat = Literal["openai", "llamacpp"]
MaxTokensParam = Literal["auto", "max_tokens", "max_completion_tokens"]

_OFFICIAL_HOSTS = ("api.openai.com", "openai.azure.com")
_SERVER = "OpenAI-compatible server"


def _choice(name: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ConfigError(f"openai backend: {name}={value!r} is not one of {', '.join(allowed)}")
    return value


def _tool_call(call: Any) -> ToolCall:
    """A ToolCall from the SDK's function tool call (arguments are JSON text; kept raw when not an object)."""
    raw = call.function.arguments or ""
    try:
        parsed = json.loads(raw) if raw else {}
    except json.JSONDecodeError:
        parsed = None
    if isinstance(parsed, dict):
        return ToolCall(id=call.id, name=call.function.name, arguments=parsed)
    return ToolCall(id=call.id, name=call.function.name, raw_arguments=raw)


class OpenAIBackend(SDKBackend):
    """:class:`modulo.llm.base.LLM` over ``openai.AsyncOpenAI`` chat completions."""

    name = "openai"
    provider = "OpenAI"
    official_hosts = _OFFICIAL_HOSTS
    http_client_type = openai.DefaultAsyncHttpxClient

    def __init__(
        self,
        settings: LLMSettings,
        *,
        schema_format: SchemaFormat = "openai",
        strict: bool = True,
        schema_name: str = "response",
        max_tokens_param: MaxTokensParam = "auto",
        tag_headers: bool = False,
        extra_body: dict[str, Any] | None = None,
        extra_headers: dict[str, str] | None = None,
    ) -> None:
        self.schema_format = _choice("schema_format", schema_format, get_args(SchemaFormat))
        self.strict = strict
        self.schema_name = schema_name
        param = _choice("max_tokens_param", max_tokens_param, get_args(MaxTokensParam))
        if param == "auto":
            param = "max_completion_tokens" if is_official(settings.base_url, _OFFICIAL_HOSTS) else "max_tokens"
        self.max_tokens_param = param
        self._client = openai.AsyncOpenAI(**self._sdk_options(settings, tag_headers, extra_body, extra_headers))

    def request_kwargs(self, request: LLMRequest) -> dict[str, Any]:
        """The keyword arguments of ``chat.completions.create`` for ``request`` (no transport options)."""
        kwargs: dict[str, Any] = {
            "model": request.model or self.settings.model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "temperature": request.temperature,
        }
        for turn in request.turns:  # a tool-calling conversation: the assistant's calls, then one tool message each
            if not turn.calls:
                if turn.text:
                    kwargs["messages"].append({"role": "assistant", "content": turn.text})
                if turn.feedback:
                    kwargs["messages"].append({"role": "user", "content": turn.feedback})
                continue
            kwargs["messages"].append(
                {
                    "role": "assistant",
                    "content": turn.text or None,
                    "tool_calls": [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": c.raw_arguments or json.dumps(c.arguments)},
                        }
                        for c in turn.calls
                    ],
                }
            )
            for c, result in zip(turn.calls, turn.results, strict=True):
                kwargs["messages"].append({"role": "tool", "tool_call_id": c.id, "content": result})
            if turn.feedback:
                kwargs["messages"].append({"role": "user", "content": turn.feedback})
        if request.tools:
            kwargs["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
                }
                for t in request.tools
            ]
        max_tokens = request.max_tokens if request.max_tokens is not None else self.settings.max_tokens
        if max_tokens is not None:
            kwargs[self.max_tokens_param] = max_tokens
        seed = request.seed if request.seed is not None else self.settings.seed
        if seed is not None:
            kwargs["seed"] = seed
        if request.stop:
            kwargs["stop"] = list(request.stop)
        response_format = self.response_format(request)
        if response_format is not None:
            kwargs["response_format"] = response_format
        return kwargs

    def response_format(self, request: LLMRequest) -> dict[str, Any] | None:
        if request.structured_output == "json" or (
            request.structured_output == "schema" and request.response_schema is None
        ):
            return {"type": "json_object"}
        if request.structured_output == "schema" and request.response_schema is not None:
            if self.schema_format == "llamacpp":
                return {"type": "json_object", "schema": request.response_schema}
            return {
                "type": "json_schema",
                "json_schema": {"name": self.schema_name, "schema": request.response_schema, "strict": self.strict},
            }
        return None

    async def complete(self, request: LLMRequest) -> LLMResponse:
        kwargs = self.request_kwargs(request)
        try:
            response = await self._client.chat.completions.create(**kwargs, **self.send_options(request))
        except openai.OpenAIError as exc:
            raise self._translate(exc) from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:  # a 200 whose body is not JSON
            raise unreadable_body(_SERVER, exc, None, (self._key.reveal(),)) from None
        if not isinstance(response, ChatCompletion):  # a body of another type (text/html) comes back as text
            raise unreadable_body(_SERVER, None, response, (self._key.reveal(),))
        usage = Usage()
        cached = 0
        if response.usage is not None:
            usage = Usage(
                input_tokens=response.usage.prompt_tokens or 0,
                output_tokens=response.usage.completion_tokens or 0,
            )
            details = response.usage.prompt_tokens_details  # of the prompt tokens, those read from the prompt cache
            cached = (details.cached_tokens or 0) if details is not None else 0
        if not response.choices:
            raise EmptyReplyError(f"{_SERVER} returned no choices", usage=usage, model=response.model)
        choice = response.choices[0]
        text = choice.message.content
        finish: str | None = choice.finish_reason
        refusal = getattr(choice.message, "refusal", None)
        if not text and refusal:
            text, finish = str(refusal), "refusal"
        calls = [_tool_call(c) for c in choice.message.tool_calls or [] if getattr(c, "function", None) is not None]
        return LLMResponse(
            text=text or "",
            tool_calls=calls,
            usage=usage,
            usage_reported=response.usage is not None,
            cached_input_tokens=cached,
            model=response.model or "",
            finish_reason=finish,
        )

    def _translate(self, exc: openai.OpenAIError) -> LLMError:
        return translate_sdk_error(exc, openai, provider="OpenAI", server=_SERVER, secrets=(self._key.reveal(),))

    async def aclose(self) -> None:
        await self._client.close()
