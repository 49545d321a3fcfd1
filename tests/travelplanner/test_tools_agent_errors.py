"""``generator=tool_agent``: a tool that raises instead of answering, and the cost of the agent's own tools."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from critics.travelplanner.tools import TravelPlannerTools
from modulo import tools as tools_module
from tests.travelplanner.test_tool_agent import PLAN_TEXT, _data, call, run, steps

__all__ = ["_data"]  # the autouse fixture: the TravelPlanner data, else a skip


@pytest.fixture
def locked_store(monkeypatch: pytest.MonkeyPatch) -> None:
    """GoogleDistanceMatrix's lookup raises, as a store another process holds locked would."""

    def locked(self: TravelPlannerTools, arguments: dict[str, Any]) -> Any:
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(TravelPlannerTools, "_distance", locked)


@pytest.mark.usefixtures("locked_store")
def test_a_tool_that_raises_is_a_recorded_failed_step_fed_back_to_the_agent(tmp_path: Path) -> None:
    script = [
        call("GoogleDistanceMatrix", origin="St. Petersburg", destination="Appleton", mode="taxi"),
        call("AccommodationSearch", city="Appleton"),
        call("NotebookWrite", description="Accommodations in Appleton"),
        call("Planner", query="the query"),
        {"text": PLAN_TEXT},
    ]
    record = run(tmp_path, ["metacontroller.max_iterations=1"], script)
    assert record.error is None
    it = record.iterations[0]
    assert it.tool_use is not None and it.tool_use["outcome"] == "planner"
    failed, *rest = steps(record)
    assert failed["state"] == "Tool error" and failed["tool"] == "GoogleDistanceMatrix"
    assert failed["observation"].startswith("GoogleDistanceMatrix failed: OperationalError: database is locked")
    assert failed["arguments"] == {"origin": "St. Petersburg", "destination": "Appleton", "mode": "taxi"}
    assert [s["state"] for s in rest] == ["Successful"] * 3 and it.plan is not None


def test_a_tool_that_keeps_raising_stops_the_agent_after_max_retries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: TravelPlannerTools, arguments: dict[str, Any]) -> Any:
        raise RuntimeError("broken")

    monkeypatch.setattr(TravelPlannerTools, "_city_search", broken)
    script = [call("CitySearch", state=s) for s in ("Texas", "Ohio", "Iowa", "Utah")]
    record = run(tmp_path, ["metacontroller.max_iterations=1"], script)
    it = record.iterations[0]
    assert record.error is None and it.tool_use is not None and it.tool_use["outcome"] == "invalid_action"
    assert [s["state"] for s in steps(record)][:3] == ["Tool error"] * 3 and it.plan is None


@pytest.mark.usefixtures("locked_store")
def test_in_react_mode_the_agent_reads_the_tools_error_as_its_observation(tmp_path: Path) -> None:
    script = [
        "Thought 1: how far is it?\nAction 1: GoogleDistanceMatrix[St. Petersburg, Appleton, taxi]",
        "Thought 2: enough.\nAction 2: Planner[the query]",
        PLAN_TEXT,
    ]
    record = run(tmp_path, ["metacontroller.max_iterations=1", "generator.args.mode=react"], script)
    it = record.iterations[0]
    assert record.error is None and it.tool_use is not None and it.tool_use["outcome"] == "planner"
    assert steps(record)[0]["state"] == "Tool error"
    second_prompt = it.calls[1].messages[0].content
    assert "Observation 1: GoogleDistanceMatrix failed: OperationalError: database is locked" in second_prompt


def test_notebook_writes_do_not_grow_the_validator_cache(tmp_path: Path) -> None:
    # validators are cached by the schema's identity: NotebookWrite's spec, made anew at each call, added one
    # (about 1.5 KB, and a schema check) per call for the life of the process
    script = [
        call("AccommodationSearch", city="Appleton"),
        *[call("NotebookWrite", description=f"Accommodations in Appleton, copy {i}") for i in range(3)],
        call("Planner", query="the query"),
        {"text": PLAN_TEXT},
    ]
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    run(tmp_path / "first", ["metacontroller.max_iterations=1"], script)
    cached = len(tools_module._VALIDATORS)
    record = run(tmp_path / "second", ["metacontroller.max_iterations=1"], script)
    assert [s["state"] for s in steps(record)] == ["Successful"] * 5
    assert len(tools_module._VALIDATORS) == cached


def test_a_tool_out_of_memory_still_stops_the_problem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def exhausted(self: TravelPlannerTools, arguments: dict[str, Any]) -> Any:
        raise MemoryError

    monkeypatch.setattr(TravelPlannerTools, "_city_search", exhausted)
    record = run(tmp_path, ["metacontroller.max_iterations=1"], [call("CitySearch", state="Texas")])
    assert record.error is not None and record.error.startswith("MemoryError") and record.stop_reason == "memory"


def test_a_model_call_that_fails_for_good_keeps_the_agents_earlier_steps_and_their_cost(tmp_path: Path) -> None:
    """Two tool steps, then the model fails for good (the scripted backend runs out of replies): the record
    held only the failed call, no tool use and none of the two paid steps' tokens or dollars."""
    script = [
        call("AccommodationSearch", city="Appleton"),
        call("NotebookWrite", description="Accommodations in Appleton"),
    ]
    prices = ["llm.price_input_per_mtok=1000", "llm.price_output_per_mtok=1000"]
    record = run(tmp_path, ["metacontroller.max_iterations=1", *prices], script)
    assert record.error is not None and "ran out of replies" in record.error
    it = record.iterations[0]
    assert len(it.calls) == 3 and it.calls[-1].usage.failed_calls == 1
    assert it.tool_use is not None and it.tool_use["outcome"] == "llm_error"
    assert [s["action"].split("[")[0] for s in steps(record)] == ["AccommodationSearch", "NotebookWrite"]
    paid = sum(c.usage.input_tokens for c in it.calls[:2])
    assert paid > 0 and it.usage.input_tokens >= paid and record.usage.cost_usd >= it.calls[0].usage.cost_usd > 0
