"""Values that used to be accepted silently (issue 14 item 7) are refused with the key's name, or
recorded as a fault."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from modulo import components
from modulo.build import build_session
from modulo.errors import ConfigError, DataError
from modulo.llm.base import LLMResponse
from modulo.llm.client import _sane_usage
from modulo.runner import run_session
from modulo.runs import RunDir
from modulo.types import Problem, Usage

from . import toy
from .test_runner import config

pytestmark = pytest.mark.usefixtures("toy_registered")


@pytest.mark.parametrize("critics", [[], None, ""])
def test_an_empty_critic_list_is_refused(critics: Any) -> None:
    cfg = config("toy", 2, {"*": ["[2, 3]"]})
    cfg.critics = critics
    with pytest.raises(ConfigError, match="critics=none"):
        build_session(cfg)


def test_critics_none_runs_with_no_checks_and_says_so(tmp_path: Path) -> None:
    cfg = config("toy", 2, {"*": ["[2, 3]"]})
    cfg.critics = "none"
    session = build_session(cfg)
    assert session.critics == [] and session.info.critics == [] and session.info.critic_source == "none"
    asyncio.run(run_session(session, RunDir(tmp_path)))


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [
        ("metacontroller", "max_dollars", -1.0),
        ("metacontroller", "max_tokens", -5),
        ("metacontroller", "max_seconds", -1.0),
        ("metacontroller", "stop_after_repeats", -1),
        ("run", "concurrency", 0),
        ("run", "max_dollars", -40000.0),
        ("llm", "price_input_per_mtok", -1.0),
        ("llm", "concurrency", 0),
        ("benchmark", "limit", -1),
    ],
)
def test_negative_budgets_prices_limits_and_zero_concurrency_are_refused(section: str, key: str, value: Any) -> None:
    cfg = config("toy", 2, {"*": ["[2, 3]"]})
    setattr(getattr(cfg, section), key, value)
    with pytest.raises(ConfigError, match=f"{section}.{key}"):
        build_session(cfg)


class DupToy(toy.Toy):
    name = "toy_dup"

    def load(self, split: str) -> list[Problem]:
        problems = super().load(split)
        return [*problems, problems[0]]

    def critic_names(self) -> list[str]:
        return ["format"]


def test_duplicate_problem_ids_are_refused() -> None:
    components.benchmarks.register("toy_dup", DupToy, replace=True)
    try:
        with pytest.raises(DataError, match=r"duplicate problem ids.*toy-0"):
            build_session(config("toy_dup", 3, {"*": ["[2, 3]"]}))
    finally:
        components.benchmarks.unregister("toy_dup")


@pytest.mark.parametrize(("tokens_in", "tokens_out"), [(-40_000_000, 5), (10, 10**30)])
def test_impossible_usage_is_a_fault_and_is_not_counted(tokens_in: int, tokens_out: int) -> None:
    response = LLMResponse(text="x", usage=Usage(input_tokens=tokens_in, output_tokens=tokens_out))
    fixed, why = _sane_usage(response)
    assert fixed.usage == Usage() and why is not None and "impossible usage" in why
    ok = LLMResponse(text="x", usage=Usage(input_tokens=10, output_tokens=5))
    assert _sane_usage(ok) == (ok, None)
