"""Fixtures for the LLM layer tests: fake providers on 127.0.0.1, stopped after each test."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from modulo.testing import FakeProvider

from .support import ProviderFactory


@pytest.fixture
def provider() -> Iterator[ProviderFactory]:
    """``provider(replies, **options)`` starts a fake provider that is stopped after the test."""
    started: list[FakeProvider] = []

    def start(replies: Any = None, **options: Any) -> FakeProvider:
        fake = FakeProvider(replies, **options).start()
        started.append(fake)
        return fake

    yield start
    for fake in started:
        fake.stop()
