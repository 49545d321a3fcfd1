"""Test doubles for LLM backends: a function-backed model and a scripted model.

Both are real :class:`modulo.llm.base.LLM` backends (they are the ``scripted`` backend, given a
function or a script in Python instead of a file), so they go wherever a backend goes: wrapped in an
:class:`~modulo.llm.client.LLMClient` by :meth:`client` (retries, accounting, budgets as in a run),
or served over HTTP by :class:`~modulo.testing.FakeProvider` to exercise the real SDK clients.
Each remembers the requests it answered (``requests``) and counts them (``calls``)::

    model = ScriptedModel({"p1": ["[1, 2]", "[2, 3]"], "*": ["no plan"]})
    client = model.client()                    # hand it to a Metacontroller or a generator
    ...
    assert model.calls == 2 and model.requests[1].tags["iteration"] == "1"

    echo = FunctionModel(lambda request: request.messages[-1].content.upper())
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..llm.base import LLMRequest, LLMResponse, LLMSettings
from ..llm.client import LLMClient
from ..llm.scripted import Reply, ReplyFn, ScriptedBackend


def _settings(settings: LLMSettings | None, fields: Mapping[str, Any]) -> LLMSettings:
    if settings is not None and fields:
        raise TypeError("give either settings=LLMSettings(...) or settings fields as keywords, not both")
    if settings is not None:
        return settings
    return LLMSettings(**{"name": "scripted", "model": "scripted-model", **fields})


class _RecordingModel(ScriptedBackend):
    """The scripted backend, remembering every request it answered (or failed with a scripted fault),
    in arrival order, in ``requests``."""

    requests: list[LLMRequest]

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(request)
        return await super().complete(request)

    def client(self, *, backoff_base_s: float = 0.0) -> LLMClient:
        """This model behind an :class:`LLMClient` (no response cache), as a run would call it."""
        return LLMClient(self, self.settings, backend_name=self.settings.name, backoff_base_s=backoff_base_s)


class FunctionModel(_RecordingModel):
    """A model whose reply is ``fn(request)``: a string, or an :class:`~modulo.llm.base.LLMResponse`
    (sync or async). The request's ``tags`` say which problem, iteration and stage asks.

    ``settings`` (or its fields as keywords, e.g. ``price_input_per_mtok=1.0``) are the LLM settings
    the client uses; by default model ``scripted-model``, no price (dollars count as zero).
    """

    def __init__(
        self, fn: ReplyFn, *, settings: LLMSettings | None = None, latency_s: float = 0.0, **fields: Any
    ) -> None:
        super().__init__(_settings(settings, fields), fn=fn, latency_s=latency_s)
        self.requests = []


class ScriptedModel(_RecordingModel):
    """A model answering from a script: a list of replies in call order, or a dict
    ``{problem_id: [replies], "*": [...]}`` where each problem consumes its own list.

    A reply is a string, ``{"text": ..., "finish_reason": ...}``, ``{"tool_calls": [...]}`` or a
    scripted failure ``{"fault": "rate_limit" | "server_error" | ...}`` (see :mod:`modulo.llm.scripted`).
    Running out of replies is a permanent LLM error, unless ``repeat_last=True``: then the last reply
    is given again and again.
    """

    def __init__(
        self,
        replies: Sequence[Reply] | Mapping[str, Sequence[Reply]],
        *,
        repeat_last: bool = False,
        settings: LLMSettings | None = None,
        latency_s: float = 0.0,
        **fields: Any,
    ) -> None:
        super().__init__(_settings(settings, fields), replies=replies, repeat_last=repeat_last, latency_s=latency_s)
        self.requests = []
