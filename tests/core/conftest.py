from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest

from modulo import components
from modulo.llm.base import LLMRequest, LLMSettings
from modulo.types import LLMCall, Usage

from . import toy


class FakeClient:
    """Stands in for modulo.llm.client.LLMClient: per-problem scripted replies, counts calls."""

    def __init__(self, replies: dict[str, list[str]]) -> None:
        self.replies = replies
        self.settings = LLMSettings(name="fake", model="fake-1")
        self.used: dict[str, int] = defaultdict(int)
        self.requests: list[LLMRequest] = []
        self.backend_calls = 0

    async def call(self, request: LLMRequest, stage: str) -> LLMCall:
        pid = request.tags.get("problem_id", "*")
        script = self.replies.get(pid, self.replies.get("*", []))
        i = self.used[pid]
        self.used[pid] += 1
        self.requests.append(request)
        self.backend_calls += 1
        reply = script[min(i, len(script) - 1)]
        usage = Usage(calls=1, input_tokens=10, output_tokens=5, cost_usd=0.01)
        return LLMCall(stage=stage, messages=list(request.messages), reply=reply, usage=usage)  # type: ignore[arg-type]

    async def aclose(self) -> None:
        pass


@pytest.fixture
def toy_registered() -> Iterator[None]:
    components.benchmarks.register("toy", toy.Toy, replace=True)
    for name, obj in (("toy_sum", toy.toy_sum), ("toy_distinct", toy.toy_distinct), ("toy_crash", toy.toy_crash)):
        components.critics.register(name, obj, replace=True)
    yield
    components.benchmarks.unregister("toy")
    for name in ("toy_sum", "toy_distinct", "toy_crash"):
        components.critics.unregister(name)


@pytest.fixture
def fake_client() -> Any:
    return FakeClient
