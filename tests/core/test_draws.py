"""Draws and fixed points: a repeated request is a new draw at temperature > 0, a fixed point at 0;
the best plan is the earliest of the best, and the record says whether it was certified."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Any

import pytest

from modulo.backprompt import Backprompt, BackpromptContext, BackpromptStrategy
from modulo.llm.base import LLMRequest, LLMSettings
from modulo.llm.client import build_client
from modulo.metacontroller import LoopSettings, Metacontroller
from modulo.reformulate import JSONReformulator
from modulo.testing import FakeProvider
from modulo.types import Message, Outcome, canonical_json

from . import toy
from .test_loop import _toy_generator, make_loop, solve

pytestmark = pytest.mark.usefixtures("toy_registered")


def test_temperature_zero_repeat_stops_at_the_fixed_point_without_another_request() -> None:
    loop, model = make_loop({"toy-0": ["[1, 1]"] * 10})
    result = solve(loop)
    # 0: first prompt; 1: feedback on [1, 1]; 2: the same feedback plus the "same plan" notice. The
    # request after 2 is word for word the one sent at 2: at temperature 0 it would get [1, 1] again
    assert result.stop_reason == "fixed_point"
    assert model.calls == 3 == len(result.iterations)
    assert [it.repeat_of for it in result.iterations] == [None, 0, 0]
    assert [it.fixed_point_of for it in result.iterations] == [None, None, 2]
    assert [it.draw for it in result.iterations] == [0, 0, 0]
    assert all(it.temperature == 0.0 for it in result.iterations)
    assert result.outcome is Outcome.EXHAUSTED
    assert result.best_iteration == 0 and not result.best_certified  # ties go to the earliest plan
    assert sorted(result.best_rejected_by) == ["toy_distinct", "toy_sum"]
    dumped = result.model_dump(mode="json")  # what records.jsonl holds
    assert dumped["stop_reason"] == "fixed_point" and dumped["iterations"][2]["fixed_point_of"] == 2


def test_fixed_point_raises_the_temperature_per_schedule_then_stops() -> None:
    loop, model = make_loop(
        {"toy-0": ["[1, 1]"] * 10}, on_fixed_point="temperature", fixed_point_temperatures=(0.5, 0.9)
    )
    result = solve(loop)
    temps = [r.temperature for r in model.requests]
    assert temps == [0.0, 0.0, 0.0, 0.5, 0.9]  # the repeated request is resent as draws 1 and 2
    assert [r.draw for r in model.requests] == [0, 0, 0, 1, 2]
    assert [it.draw for it in result.iterations] == [0, 0, 0, 1, 2]
    assert result.stop_reason == "fixed_point" and len(result.iterations) == 5


def test_fixed_point_varies_the_prompt_then_stops() -> None:
    loop, model = make_loop({"toy-0": ["[1, 1]"] * 10}, on_fixed_point="vary", fixed_point_variations=1)
    result = solve(loop)
    assert [it.variation for it in result.iterations] == [0, 0, 0, 1]
    assert "variation 1" in model.requests[3].messages[-1].content
    assert model.requests[3].messages[:-1] == model.requests[2].messages
    assert result.stop_reason == "fixed_point" and model.calls == 4


def test_a_certified_plan_is_the_best_and_names_no_rejecting_critic() -> None:
    loop, _ = make_loop({"toy-0": ["[1, 1]", "[2, 3]"]})
    result = solve(loop)
    assert result.outcome is Outcome.CERTIFIED and result.best_iteration == 1
    assert result.best_certified and result.best_rejected_by == []


def test_bad_fixed_point_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="on_fixed_point must be one of stop, temperature, vary"):
        LoopSettings(on_fixed_point="retry")  # type: ignore[arg-type]


class Resample(BackpromptStrategy):
    """Ask the first question again, whatever happened: every iteration sends the same request."""

    def build(self, ctx: BackpromptContext) -> Backprompt:
        return Backprompt(messages=list(ctx.first_prompt), text="")


def _run(fake: FakeProvider, cache: Path, temperature: float, price: float | None = None, **loop_settings: Any) -> Any:
    settings = LLMSettings(
        name="openai",
        model="fake-model",
        base_url=fake.openai_base_url,
        api_key_env="MODULO_TEST_KEY",
        temperature=temperature,
        seed=11,
        max_retries=0,
        timeout_s=5.0,
        price_input_per_mtok=price,
        price_output_per_mtok=price,
    )
    client = build_client(settings, cache_mode="read-write", cache_dir=cache)
    bench = toy.Toy()
    from critics.core import format_critic

    gen = _toy_generator(bench)
    gen.prompt_role = "json"  # the fake answers with a seeded instance of the plan schema
    loop = Metacontroller(
        benchmark=bench,
        generator=gen,
        reformulator=JSONReformulator(bench),
        critics=[format_critic(benchmark=bench), toy.toy_sum()],
        strategy=Resample(),
        llm=client,
        settings=LoopSettings(max_iterations=5, **loop_settings),
    )
    problem = bench.load("dev")[0]

    async def go() -> Any:
        try:
            return await loop.solve(problem)
        finally:
            await client.aclose()

    return asyncio.run(go())


def test_repeats_at_temperature_above_zero_are_new_draws_replayed_on_a_rerun(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MODULO_TEST_KEY", "sk-test")
    with FakeProvider(seed=3) as fake:
        first = _run(fake, tmp_path / "cache", 0.7)
        sent = fake.stats().requests
        assert sent == 5 == len(first.iterations)  # the same request five times: five paid draws
        assert [it.draw for it in first.iterations] == [0, 1, 2, 3, 4]
        assert [it.served for it in first.iterations] == ["fresh"] * 5
        assert len({it.raw_reply for it in first.iterations}) > 1  # draws are samples, not replays
        assert [r.body.get("seed") for r in fake.requests] == [11, 12, 13, 14, 15]

        second = _run(fake, tmp_path / "cache", 0.7)
        assert fake.stats().requests == sent  # the re-run makes 0 requests
        assert [it.served for it in second.iterations] == ["cache"] * 5
        assert [it.raw_reply for it in second.iterations] == [it.raw_reply for it in first.iterations]
        assert second.usage.cached_calls == 5 and second.usage.cost_usd == 0.0

        # at temperature 0 the same request is a fixed point: one call, then the loop stops
        zero = _run(fake, tmp_path / "cache-0", 0.0)
        assert fake.stats().requests == sent + 1
        assert zero.stop_reason == "fixed_point" and zero.iterations[0].fixed_point_of == 0


def test_draw_zero_keeps_the_cache_key_of_earlier_versions() -> None:
    request = LLMRequest(messages=(Message(role="user", content="hi"),))
    before_draws = {"backend": "x", **request.model_dump(mode="json", exclude={"tags", "draw", "tools", "turns"})}
    assert request.key("x") == hashlib.sha256(canonical_json(before_draws).encode()).hexdigest()
    assert request.key("x") != request.model_copy(update={"draw": 1}).key("x")
    assert request.key("x") == request.model_copy(update={"tags": {"a": "b"}}).key("x")


def test_a_generator_with_its_own_state_is_never_stopped_at_a_fixed_point() -> None:
    loop, model = make_loop({"toy-0": ["[1, 1]"] * 10}, max_iterations=5)
    loop.generator.stateless = False  # type: ignore[misc]  # e.g. a tool agent's notebook persists
    result = solve(loop)
    assert result.stop_reason == "iterations" and model.calls == 5
    assert [it.draw for it in result.iterations] == [0, 0, 0, 1, 2]  # still numbered as draws


def test_a_problems_dollar_budget_stops_a_rerun_from_the_cache_where_the_first_run_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # cache hits count $0 spent: the budget read only what was paid, so the same configuration run again
    # from the cache went on past the first run's stop (its budget then bought more than its label)
    monkeypatch.setenv("MODULO_TEST_KEY", "sk-test")
    with FakeProvider(seed=3) as fake:
        probe = _run(fake, tmp_path / "probe", 0.7, price=1000.0)
        per_iteration = probe.iterations[0].usage.cost_usd
        budget = 1.5 * per_iteration  # spent after the second iteration
        first = _run(fake, tmp_path / "cache", 0.7, price=1000.0, max_dollars=budget)
        assert first.stop_reason == "dollars" and len(first.iterations) == 2
        second = _run(fake, tmp_path / "cache", 0.7, price=1000.0, max_dollars=budget)
    assert [it.served for it in second.iterations] == ["cache", "cache"]
    assert second.stop_reason == "dollars" and len(second.iterations) == 2
    assert second.usage.cost_usd == 0.0 and second.usage.cached_cost_usd == first.usage.cost_usd
