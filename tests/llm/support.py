"""Helpers shared by the LLM layer tests."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from modulo.llm.base import LLMRequest, LLMSettings
from modulo.testing import FakeProvider
from modulo.types import Message

#: a recognisable fake key: it must never show up in a repr, a log line, an exception or a trace
SECRET = "sk-modulo-test-SECRET-7f3a9c1e5b"

ProviderFactory = Callable[..., FakeProvider]


def _settings(name: str, model: str, base_url: str, overrides: dict[str, Any]) -> LLMSettings:
    values: dict[str, Any] = {"name": name, "model": model, "base_url": base_url, "timeout_s": 5.0}
    return LLMSettings(**{**values, "max_retries": 3, "max_backoff_s": 0.05, **overrides})


def openai_settings(fake: FakeProvider, **overrides: Any) -> LLMSettings:
    return _settings("openai", "gpt-4o-mini", fake.openai_base_url, overrides)


def anthropic_settings(fake: FakeProvider, **overrides: Any) -> LLMSettings:
    return _settings("anthropic", "claude-haiku-4-5-20251001", fake.anthropic_base_url, overrides)


def request(text: str = "Plan a trip to Rome.", *, problem: str | None = None, **fields: Any) -> LLMRequest:
    tags = {"problem_id": problem} if problem is not None else {}
    return LLMRequest(messages=(Message(role="user", content=text),), tags=tags, **fields)


def synth_config(fake: FakeProvider, model: str, *, n: int, max_iterations: int, cache_dir: Any = None) -> Any:
    """A ModuloConfig: ``n`` synth/tasks problems planned in JSON by ``model`` behind the fake provider's
    OpenAI API (the response cache in ``cache_dir``, off without one), no progress bar, no report."""
    from modulo.config import ModuloConfig

    cfg = ModuloConfig()
    cfg.benchmark.name = "synth/tasks"
    cfg.benchmark.args = {"n": n}
    cfg.generator.prompt = "json"
    cfg.reformulator.mode = "none"
    cfg.metacontroller.max_iterations = max_iterations
    cfg.llm.name = "openai"
    cfg.llm.model = model
    cfg.llm.base_url = fake.openai_base_url
    cfg.cache.mode = "read-write" if cache_dir is not None else "off"
    cfg.cache.dir = str(cache_dir) if cache_dir is not None else None
    cfg.run.progress = False
    cfg.run.report = False
    return cfg


#: the registry name of :func:`broken_backprompt`'s strategy
BROKEN_BACKPROMPT = "test_broken"


@contextlib.contextmanager
def broken_backprompt() -> Iterator[str]:
    """A backprompt strategy (its registry name, while in the block) that raises ``ValueError("the strategy
    broke")``: a problem it backprompts ends in error after its first paid call."""
    from modulo import components
    from modulo.backprompt import Backprompt, BackpromptContext, BackpromptStrategy

    class Broken(BackpromptStrategy):
        def build(self, ctx: BackpromptContext) -> Backprompt:
            raise ValueError("the strategy broke")

    components.backprompts.register(BROKEN_BACKPROMPT, Broken, replace=True)
    try:
        yield BROKEN_BACKPROMPT
    finally:
        components.backprompts.unregister(BROKEN_BACKPROMPT)
