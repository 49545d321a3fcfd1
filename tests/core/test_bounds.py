"""Bounded memory against hostile replies (issue 14 item 3): reply and plan size limits, capped feedback."""

from __future__ import annotations

import time

import pytest

from modulo.metacontroller import RECORDED_REPLY_CHARS, LoopSettings, count_values
from modulo.types import Outcome, Problem

from .test_loop import make_loop, solve

pytestmark = pytest.mark.usefixtures("toy_registered")


def test_a_reply_over_the_limit_is_a_recorded_format_error_and_is_stored_clipped() -> None:
    huge = "[" + ", ".join(["1"] * 100_000) + "]"
    loop, model = make_loop({"toy-0": [huge]}, max_iterations=1, max_reply_chars=50_000)
    result = solve(loop)
    it = result.iterations[0]
    assert it.plan is None and it.format_error and "over this benchmark's limit of 50,000" in it.format_error
    assert result.outcome is Outcome.FAILED
    assert model.calls == 1  # not reformulated
    assert it.raw_reply is not None and len(it.raw_reply) < RECORDED_REPLY_CHARS + 100
    assert f"{len(huge):,} characters in all" in it.raw_reply
    assert all(len(c.reply or "") < RECORDED_REPLY_CHARS + 100 for c in it.calls)
    assert [v.critic for v in it.verdicts] == ["format"]


def test_the_benchmarks_own_bound_applies_by_default() -> None:
    loop, _ = make_loop({"toy-0": ["[2, 3]" + " " * 300_000]}, max_iterations=1)
    assert loop.benchmark.max_reply_chars == 200_000
    it = solve(loop).iterations[0]
    assert it.format_error and "200,000" in it.format_error


def test_a_plan_over_the_item_limit_is_a_format_error_not_criticised() -> None:
    loop, _ = make_loop({"toy-0": ["[" + ", ".join(["1"] * 50) + "]"]}, max_iterations=1, max_plan_items=20)
    it = solve(loop).iterations[0]
    assert it.plan is None and it.format_error and "more than 20 values" in it.format_error
    assert [v.critic for v in it.verdicts] == ["format"]


def test_limits_are_validated() -> None:
    with pytest.raises(ValueError, match="max_reply_chars"):
        LoopSettings(max_reply_chars=0)


def test_count_values_stops_past_the_limit() -> None:
    assert count_values({"a": [1, 2, {"b": None}]}, 100) == 6
    assert count_values(list(range(10**6)), 10) == 11


def test_no_overlap_feedback_is_capped_at_construction() -> None:
    """150,000 identical items once made the no-overlap critic build every O(n^2) clash string."""
    from critics.synth.critics import synth_no_overlap
    from critics.synth.tasks import SHOWN

    spec = {
        "family": "tasks",
        "actions": ["write"],
        "constraints": [
            {"id": "c0", "kind": "no_overlap"},
            {"id": "c1", "kind": "horizon", "start": 540, "end": 600},
        ],
    }
    problem = Problem(id="p", benchmark="synth/tasks", query="q", constraints=spec)
    plan = {"schedule": [{"task": "write", "start": "09:00", "end": "10:00"}] * 150_000}
    started = time.perf_counter()
    verdict = synth_no_overlap()(problem, plan)
    assert time.perf_counter() - started < 30  # linear work, not quadratic
    assert not verdict.passed and verdict.feedback.count("overlaps") == SHOWN


def test_the_memory_guard_ends_the_problem_with_a_recorded_error() -> None:
    loop, model = make_loop({"toy-0": ["[2, 3]"]}, max_iterations=3, max_rss_mb=1)
    result = solve(loop)
    assert result.outcome is Outcome.ERROR and result.stop_reason == "memory"
    assert result.error and "max_rss_mb=1" in result.error and model.calls == 0


def test_a_memory_error_inside_a_problem_is_a_recorded_error_not_the_end_of_the_process() -> None:
    loop, _ = make_loop({"toy-0": ["[2, 3]"]}, max_iterations=3)

    async def explode(*args: object, **kwargs: object) -> None:
        raise MemoryError

    loop._iterate = explode  # type: ignore[method-assign]
    result = solve(loop)
    assert result.outcome is Outcome.ERROR and result.stop_reason == "memory" and "MemoryError" in (result.error or "")
