from __future__ import annotations

from collections.abc import Iterator

import pytest

from modulo import components

from . import toy


@pytest.fixture
def toy_registered() -> Iterator[None]:
    components.benchmarks.register("toy", toy.Toy, replace=True)
    for name, obj in (("toy_sum", toy.toy_sum), ("toy_distinct", toy.toy_distinct), ("toy_crash", toy.toy_crash)):
        components.critics.register(name, obj, replace=True)
    yield
    components.benchmarks.unregister("toy")
    for name in ("toy_sum", "toy_distinct", "toy_crash"):
        components.critics.unregister(name)
