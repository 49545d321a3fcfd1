"""A backend that answers from a script: for tests, demos and fault drills. It never touches a network.

Three forms of script:

- a list of replies, consumed in call order by every request;
- a dict ``{problem_id: [replies...], "*": [...]}``: each problem consumes its own list in its own
  call order (keyed by ``request.tags["problem_id"]``), so the answers do not depend on how problems
  interleave under concurrency or on a resume; a problem without its own entry replays its own copy
  of the ``"*"`` list from the start;
- a callable ``fn(request) -> str | LLMResponse`` (sync or async);
- nothing: deterministic stand-in replies (:func:`~modulo.llm.sampling.stand_in_reply`), a JSON
  instance of the requested schema under structured output and a short sentence otherwise, so that
  ``modulo run llm=scripted`` exercises a whole pipeline end to end with no model at all.

From the command line ``llm=scripted llm.script=FILE`` reads a JSON file holding the list or the dict.
A reply is a string, or an object ``{"text": ..., "finish_reason": ...}``, or native tool calls
``{"tool_calls": [{"name": "FlightSearch", "arguments": {...}}, ...]}``, or a scripted failure
``{"fault": "rate_limit" | "server_error" | "timeout" | "connection" | "permanent" | "context_length" | ...,
"message": ..., "retry_after": ...}`` that is raised instead of answering (it consumes its place).
Running out of replies is a :class:`~modulo.errors.PermanentLLMError` naming the problem, unless
``llm.args.repeat_last=true``: then the last reply (of the list, or of the problem's list) is given again.

Tokens are counted roughly (:func:`~modulo.llm.tokens.approx_tokens`) so accounting is exercised;
dollars are zero unless ``llm.price_input_per_mtok`` / ``llm.price_output_per_mtok`` are set.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import (
    ConfigError,
    ContextLengthError,
    LLMError,
    PermanentLLMError,
    RateLimitError,
    TransientLLMError,
)
from ..types import ToolCall, Usage
from .base import Capabilities, LLMRequest, LLMResponse, LLMSettings
from .sampling import stand_in_reply
from .tokens import approx_prompt_tokens, approx_tokens

Reply = str | Mapping[str, Any]
ReplyFn = Callable[[LLMRequest], "str | LLMResponse | Awaitable[str | LLMResponse]"]

DEFAULT_KEY = "*"
_TRANSIENT_FAULTS = {"server_error", "unavailable", "overloaded", "timeout", "connection", "transient"}


def _check_reply(where: str, reply: object) -> Reply:
    if isinstance(reply, str):
        return reply
    if isinstance(reply, Mapping) and ("text" in reply or "fault" in reply or "tool_calls" in reply):
        calls = reply.get("tool_calls", [])
        if not isinstance(calls, list) or not all(
            isinstance(c, Mapping) and isinstance(c.get("name"), str) for c in calls
        ):
            raise ConfigError(f"scripted backend: {where}: 'tool_calls' must be a list of {{'name', 'arguments'}}")
        return reply
    raise ConfigError(
        f"scripted backend: {where} must be a string, {{'text': ...}}, {{'tool_calls': [...]}} or {{'fault': ...}}, "
        f"not {reply!r:.80}"
    )


def load_script(path: str | Path) -> list[Reply] | dict[str, list[Reply]]:
    """Read a script file: a JSON list of replies or a JSON object of per-problem lists."""
    file = Path(path).expanduser()
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"scripted backend: script file {str(file)!r} does not exist") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"scripted backend: cannot read script file {str(file)!r}: {exc}") from None
    return normalise_script(data, source=str(file))


def normalise_script(data: object, *, source: str = "replies") -> list[Reply] | dict[str, list[Reply]]:
    if isinstance(data, list):
        return [_check_reply(f"{source}[{i}]", r) for i, r in enumerate(data)]
    if isinstance(data, Mapping):
        out: dict[str, list[Reply]] = {}
        for key, replies in data.items():
            if not isinstance(replies, list):
                raise ConfigError(f"scripted backend: {source}[{key!r}] must be a list of replies")
            out[str(key)] = [_check_reply(f"{source}[{key!r}][{i}]", r) for i, r in enumerate(replies)]
        return out
    raise ConfigError(
        f"scripted backend: {source} must be a list of replies or a {{problem_id: [replies]}} object, "
        f"not {type(data).__name__}"
    )


def scripted_fault(spec: Mapping[str, Any], problem: str) -> LLMError:
    """The exception a ``{"fault": ...}`` script entry stands for."""
    kind = str(spec["fault"])
    message = str(spec.get("message") or f"scripted {kind} fault for problem {problem!r}")
    retry_after = spec.get("retry_after")
    ra = float(retry_after) if retry_after is not None else None
    if kind == "rate_limit":
        return RateLimitError(message, retry_after=ra)
    if kind in _TRANSIENT_FAULTS:
        return TransientLLMError(message, fault=kind, retry_after=ra)
    if kind == "context_length":
        return ContextLengthError(message)
    error = PermanentLLMError(message)
    error.fault = kind
    return error


class ScriptedBackend:
    """:class:`modulo.llm.base.LLM` answering from a list, a per-problem dict or a function."""

    name = "scripted"
    #: no price-table warning: a script costs nothing unless prices are configured (an instance with a
    #: list or dict script also declares itself not cacheable: see ``__init__``)
    capabilities: Capabilities = Capabilities(free=True)

    def __init__(
        self,
        settings: LLMSettings,
        *,
        replies: Sequence[Reply] | Mapping[str, Sequence[Reply]] | None = None,
        fn: ReplyFn | None = None,
        repeat_last: bool = False,
        latency_s: float = 0.0,
    ) -> None:
        sources = [s for s in (replies is not None, fn is not None, settings.script is not None) if s]
        if len(sources) > 1:
            raise ConfigError(
                "scripted backend takes at most one of: llm.script=FILE (a JSON list or {problem_id: [...]}), "
                "the 'replies' argument, or the 'fn' argument (got several)"
            )
        if fn is not None and not callable(fn):
            raise ConfigError(f"scripted backend: fn must be callable, not {type(fn).__name__}")
        if latency_s < 0:
            raise ConfigError(f"scripted backend: latency_s must be >= 0, not {latency_s}")
        #: no script at all: deterministic stand-in replies (schema-shaped JSON when one is asked for)
        self.stand_in = not sources
        self.settings = settings
        self.fn = fn
        self.repeat_last = repeat_last
        self.latency_s = latency_s
        script: list[Reply] | dict[str, list[Reply]] | None = None
        if replies is not None:
            script = normalise_script(
                list(replies) if not isinstance(replies, Mapping) else {k: list(v) for k, v in replies.items()}
            )
        elif settings.script is not None:
            script = load_script(settings.script)
        self._script = script
        #: a list or dict script answers in call order, so a cache would shift its replies; a function's
        #: or the stand-in's reply depends on the request alone and may be cached
        self.capabilities = Capabilities(
            free=True,
            cacheable=script is None,
            bounded=fn is None and latency_s < settings.timeout_s,  # nothing in it can wait longer
        )
        self._cursor: dict[str, int] = {}
        self._lock = threading.Lock()
        self.calls = 0

    def __repr__(self) -> str:
        form = "stand-in" if self.stand_in else "fn" if self.fn is not None else type(self._script).__name__
        return f"ScriptedBackend({form}, latency_s={self.latency_s})"

    def _next(self, request: LLMRequest) -> Reply:
        problem = request.tags.get("problem_id", "")
        with self._lock:
            if isinstance(self._script, list):
                key, replies = "", self._script
            else:
                assert self._script is not None
                if problem in self._script:
                    key, replies = problem, self._script[problem]
                elif DEFAULT_KEY in self._script:
                    key, replies = problem, self._script[DEFAULT_KEY]
                else:
                    raise PermanentLLMError(
                        f"scripted backend has no replies for problem {problem!r} and no '*' default "
                        f"(scripted problems: {', '.join(sorted(self._script)) or 'none'})"
                    )
            index = self._cursor.get(key, 0)
            if index >= len(replies) and self.repeat_last and replies:
                return replies[-1]
            if index >= len(replies):
                who = f"problem {problem!r}" if key else "the script"
                raise PermanentLLMError(
                    f"scripted backend ran out of replies for {who}: all {len(replies)} were used "
                    f"(request {index + 1}, stage {request.tags.get('stage', '?')!r})"
                )
            self._cursor[key] = index + 1
            return replies[index]

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.calls += 1
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        model = request.model or self.settings.model or "scripted"
        finish: str | None = "stop"
        if self.stand_in:
            schema = request.response_schema if request.structured_output == "schema" else None
            text = stand_in_reply(request.messages, schema, request.structured_output == "json")
        elif self.fn is not None:
            produced = self.fn(request)
            if inspect.isawaitable(produced):
                produced = await produced
            if isinstance(produced, LLMResponse):
                return produced
            if not isinstance(produced, str):
                raise PermanentLLMError(f"scripted fn returned {type(produced).__name__}, expected str")
            text = produced
        else:
            reply = self._next(request)
            if isinstance(reply, str):
                text = reply
            elif "fault" in reply:
                raise scripted_fault(reply, request.tags.get("problem_id", ""))
            else:
                text = str(reply.get("text") or "")
                finish = reply.get("finish_reason", "stop")
                if reply.get("tool_calls"):
                    calls = [
                        ToolCall(
                            id=f"call_{self.calls}_{i}", name=str(c["name"]), arguments=dict(c.get("arguments") or {})
                        )
                        for i, c in enumerate(reply["tool_calls"])
                    ]
                    usage = Usage(
                        input_tokens=approx_prompt_tokens(request.messages),
                        output_tokens=approx_tokens(json.dumps(reply)),
                    )
                    return LLMResponse(
                        text=text, tool_calls=calls, usage=usage, model=model, finish_reason="tool_calls"
                    )
        usage = Usage(input_tokens=approx_prompt_tokens(request.messages), output_tokens=approx_tokens(text))
        return LLMResponse(text=text, usage=usage, model=model, finish_reason=finish)

    async def aclose(self) -> None:
        return None
