"""``generator=tool_agent`` on TravelPlanner: scripted failure modes, the native and ReAct paths through the
real OpenAI and Anthropic SDKs against the fake provider, and LLM-Modulo sending the agent back to its tools."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from critics.travelplanner.benchmark import TravelPlanner
from modulo.build import build_session
from modulo.cli.hydra_app import config_yaml
from modulo.llm.base import LLMRequest, ToolDecl
from modulo.runner import run_session
from modulo.runs import RunDir
from modulo.testing.drills import compose
from modulo.testing.fake_server import FakeProvider
from modulo.types import Message, ProblemResult

PROBLEM = "validation-12"  # St. Petersburg -> Appleton, 3 days, 2022-03-19 .. 2022-03-21
PLAN = [
    {
        "days": d,
        "current_city": city,
        "transportation": "-",
        "breakfast": "-",
        "attraction": "-",
        "lunch": "-",
        "dinner": "-",
        "accommodation": "-",
    }
    for d, city in ((1, "from St. Petersburg to Appleton"), (2, "Appleton"), (3, "from Appleton to St. Petersburg"))
]
PLAN_TEXT = json.dumps(PLAN)


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def run(tmp_path: Path, overrides: list[str], script: Any = None) -> ProblemResult:
    """One problem through the whole loop; the script (if any) goes to the scripted backend."""
    extra = []
    if script is not None:
        path = tmp_path / "script.json"
        path.write_text(json.dumps(script))
        extra = ["llm=scripted", f"llm.script={path}"]
    cfg = compose(
        [
            "benchmark=travelplanner",
            f"benchmark.ids=[{PROBLEM}]",
            "generator=tool_agent",
            "reformulator=parser",
            "run.progress=false",
            "run.report=false",
            *extra,
            *overrides,
        ]
    )
    session = build_session(cfg)
    try:
        result = asyncio.run(run_session(session, RunDir(tmp_path / "run"), config_yaml=config_yaml(cfg)))
    finally:
        asyncio.run(session.aclose())
    (record,) = result.results
    return record


def steps(record: ProblemResult, iteration: int = 0) -> list[dict[str, Any]]:
    tool_use = record.iterations[iteration].tool_use
    assert tool_use is not None
    return list(tool_use["steps"])


@pytest.fixture(autouse=True)
def _data(tp: TravelPlanner) -> Iterator[None]:  # the TravelPlanner fixtures skip without the data
    yield


def test_scripted_agent_plans_from_its_notebook(tmp_path: Path) -> None:
    script = [
        call("FlightSearch", origin="St. Petersburg", destination="Appleton", date="2022-03-19"),
        call("NotebookWrite", description="Flights from St. Petersburg to Appleton"),
        call("Teleport", city="Appleton"),  # an invalid action: the observation lists the valid ones
        call("AccommodationSearch", city="Appleton"),
        call("NotebookWrite", description="Accommodations in Appleton"),
        call("Planner", query="the query"),
        {"text": PLAN_TEXT},
    ]
    record = run(tmp_path, ["metacontroller.max_iterations=1"], script)
    it = record.iterations[0]
    assert it.tool_use is not None and it.tool_use["outcome"] == "planner" and it.tool_use["start"] == "fresh"
    s = steps(record)
    assert [x["state"] for x in s] == [
        "Successful",
        "Successful",
        "invalidAction",
        "Successful",
        "Successful",
        "Successful",
    ]
    assert s[0]["tool"] == "FlightSearch" and s[0]["rows"] > 0 and s[0]["micros"] > 0
    assert s[2]["observation"].startswith("Invalid Action. Valid Actions are FlightSearch[origin, destination, date]")
    assert [e["description"] for e in it.tool_use["notebook"]] == [
        "Flights from St. Petersburg to Appleton",
        "Accommodations in Appleton",
    ]
    planner_prompt = it.calls[-1].messages[0].content
    assert "Accommodations in Appleton" in planner_prompt and "F3" in planner_prompt  # the notebook is the context
    assert it.plan == PLAN and any(c.tool_calls for c in it.calls)


@pytest.mark.parametrize(
    ("script", "overrides", "outcome", "n_steps"),
    [
        ([call("Teleport", city=c) for c in "abcd"], [], "invalid_action", 4),  # the 4th is not carried out
        ([call("CitySearch", state=c) for c in ("Atlantis", "Narnia", "Oz", "Mu")], [], "invalid_action", 4),
        ([call("CitySearch", state="Texas")] * 3, [], "repeated_action", 3),
        (
            [call("CitySearch", state=s) for s in ("Texas", "Ohio", "Iowa")],
            ["generator.args.max_steps=3"],
            "step_limit",
            3,
        ),
    ],
)
def test_failure_modes_are_recorded_outcomes(
    tmp_path: Path, script: list[Any], overrides: list[str], outcome: str, n_steps: int
) -> None:
    record = run(tmp_path, ["metacontroller.max_iterations=1", *overrides], script)
    it = record.iterations[0]
    assert it.tool_use is not None and it.tool_use["outcome"] == outcome
    assert len(steps(record)) == n_steps
    assert it.plan is None and it.raw_reply == ""  # officially a stopped agent delivers no plan
    assert record.outcome.value == "failed"


def test_native_tool_calling_through_both_sdks(tmp_path: Path) -> None:
    script = [
        call("FlightSearch", origin="St. Petersburg", destination="Appleton", date="2022-03-19"),
        call("NotebookWrite", description="Flights"),
        call("Planner", query="q"),
        {"text": PLAN_TEXT},
    ]
    for api in ("openai", "anthropic"):
        with FakeProvider(list(script)) as fake:
            base = fake.openai_base_url if api == "openai" else fake.anthropic_base_url
            overrides = [f"llm={api}", f"llm.base_url={base}", "llm.model=fake-model", "llm.api_key_env=null"]
            overrides += ["metacontroller.max_iterations=1", "cache.mode=off"]
            record = run(tmp_path / api, overrides)
            requests = list(fake.requests)
        assert record.iterations[0].plan == PLAN, api
        assert "FlightSearch" in requests[0].tools and "Planner" in requests[0].tools
        assert requests[1].tool_results and requests[1].tool_results[0].startswith("Flight Number"), api
        assert requests[2].tool_results[-1] == "The information has been recorded in Notebook, and its index is 0."
        assert requests[3].tools == []  # the planner stage offers no tools


def test_react_path_through_the_openai_sdk(tmp_path: Path) -> None:
    script = [
        "Thought 1: flights first.\nAction 1: FlightSearch[St. Petersburg, Appleton, 2022-03-19]",
        "Thought 2: keep them.\nAction 2: NotebookWrite[Flights to Appleton]",
        "Thought 3: hotels.\nAction 3: AccommodationSearch[Appleton]",
        "Thought 4: keep them.\nAction 4: NotebookWrite[Accommodations in Appleton]",
        "Thought 5: done.\nAction 5: Planner[plan the trip]",
        PLAN_TEXT,
    ]
    with FakeProvider(script) as fake:
        overrides = ["llm=openai", f"llm.base_url={fake.openai_base_url}", "llm.model=fake", "llm.api_key_env=null"]
        overrides += ["generator.args.mode=react", "metacontroller.max_iterations=1", "cache.mode=off"]
        record = run(tmp_path, overrides)
        requests = list(fake.requests)
    assert [s["action"] for s in steps(record)][:2] == [
        "FlightSearch[St. Petersburg, Appleton, 2022-03-19]",
        "NotebookWrite[Flights to Appleton]",
    ]
    assert record.iterations[0].plan == PLAN
    assert all(r.tools == [] for r in requests)  # ReAct declares no tools: the actions are text
    third = requests[2].messages[-1]["content"]
    assert "Observation 1: Flight Number" in third and third.endswith("Thought 3:")
    fifth = requests[4].messages[-1]["content"]
    assert "Masked due to limited length" in fifth  # the earlier table is masked once the next one arrives


def test_llm_modulo_backprompt_sends_the_agent_back_to_its_tools(tmp_path: Path) -> None:
    bad = [dict(day) for day in PLAN[:2]]  # two days of a three-day trip: the critics reject it
    script = [
        call("AccommodationSearch", city="Appleton"),
        call("NotebookWrite", description="Accommodations in Appleton"),
        call("Planner", query="q"),
        {"text": json.dumps(bad)},
        # the backprompt: back to the tools
        call("FlightSearch", origin="Appleton", destination="St. Petersburg", date="2022-03-21"),
        call("NotebookWrite", description="Flights back"),
        call("Planner", query="q"),
        {"text": PLAN_TEXT},
    ]
    overrides = ["metacontroller.max_iterations=2", "generator.args.on_backprompt=resume"]
    record = run(tmp_path, overrides, script)
    assert len(record.iterations) == 2
    first, second = (it.tool_use for it in record.iterations)
    assert first is not None and second is not None
    assert first["start"] == "fresh" and second["start"] == "resume"
    assert second["steps"][0]["action"] == "FlightSearch[Appleton, St. Petersburg, 2022-03-21]"
    assert [e["description"] for e in second["notebook"]] == ["Accommodations in Appleton", "Flights back"]
    assert record.iterations[1].plan == PLAN
    # the feedback reached the agent: its first request of iteration 1 carries it
    agent_call = record.iterations[1].calls[0]
    assert agent_call.tool_calls and agent_call.tool_calls[0].name == "FlightSearch"


def test_replan_goes_straight_to_the_planner(tmp_path: Path) -> None:
    bad = [dict(day) for day in PLAN[:2]]
    script = [call("Planner", query="q"), {"text": json.dumps(bad)}, {"text": PLAN_TEXT}]
    record = run(tmp_path, ["metacontroller.max_iterations=2"], script)
    second = record.iterations[1].tool_use
    assert second is not None and second["start"] == "replan" and second["steps"] == []
    assert len(record.iterations[1].calls) == 1 and record.iterations[1].plan == PLAN


def test_the_cache_key_includes_the_tools_offered() -> None:
    base = LLMRequest(messages=(Message(role="user", content="hi"),))
    with_tools = base.model_copy(update={"tools": (ToolDecl(name="FlightSearch", parameters={"type": "object"}),)})
    other = base.model_copy(update={"tools": (ToolDecl(name="CitySearch", parameters={"type": "object"}),)})
    assert len({base.key("openai"), with_tools.key("openai"), other.key("openai")}) == 3
    # a request without tools (and at draw 0) keeps the key it had before tools and draws existed
    legacy = {"backend": "openai", **base.model_dump(mode="json", exclude={"tags", "tools", "turns", "draw"})}
    import hashlib

    from modulo.types import canonical_json

    assert base.key("openai") == hashlib.sha256(canonical_json(legacy).encode()).hexdigest()


def test_example_script_runs(tmp_path: Path) -> None:
    script = Path(__file__).resolve().parents[2] / "experiments" / "scripts" / "tool_agent.json"
    record = run(tmp_path, ["llm=scripted", f"llm.script={script}", "metacontroller.max_iterations=2"])
    assert any(step.get("tool") == "AccommodationSearch" for step in steps(record))


def test_cached_tool_calls_replay_the_same_agent(tmp_path: Path) -> None:
    """A repeat of the same run is answered from the response cache, tool calls included."""
    script = [
        call("AccommodationSearch", city="Appleton"),
        call("NotebookWrite", description="Accommodations in Appleton"),
        call("Planner", query="q"),
        {"text": PLAN_TEXT},
    ]
    results = []
    with FakeProvider(list(script)) as fake:
        overrides = ["llm=openai", f"llm.base_url={fake.openai_base_url}", "llm.model=fake", "llm.api_key_env=null"]
        overrides += ["metacontroller.max_iterations=1", f"cache.dir={tmp_path / 'cache'}"]
        for attempt in ("first", "again"):
            results.append(run(tmp_path / attempt, overrides))
        assert fake.stats().requests == 4  # the second run made no request
    first, again = (r.iterations[0] for r in results)
    assert again.calls and all(c.cached for c in again.calls)
    assert again.tool_use is not None and first.tool_use is not None
    assert [s["action"] for s in again.tool_use["steps"]] == [s["action"] for s in first.tool_use["steps"]]
    assert again.plan == first.plan == PLAN


def test_secrets_are_scrubbed_from_tool_call_arguments() -> None:
    from modulo import redact
    from modulo.llm.base import LLMResponse
    from modulo.llm.client import _scrubbed
    from modulo.types import ToolCall

    secret = "sk-test-0123456789abcdefSECRET"
    redact.register(secret)
    echoed = LLMResponse(
        text="",
        tool_calls=[ToolCall(id="c1", name="CitySearch", arguments={"state": f"Texas {secret}"})],
    )
    clean = _scrubbed(echoed)
    assert secret not in clean.tool_calls[0].model_dump_json()
    assert clean.tool_calls[0].arguments["state"].startswith("Texas ")
