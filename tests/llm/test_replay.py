"""The replay backend answers from a recorded run and never from a live model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modulo.errors import ConfigError, ReplayMissError
from modulo.llm.base import LLMRequest, LLMSettings
from modulo.llm.client import build_client
from modulo.llm.pricing import PRICES
from modulo.types import IterationRecord, LLMCall, Message, Outcome, ProblemResult, Usage

from .support import request


def _call(stage: str, prompt: str, reply: str | None, **extra: object) -> LLMCall:
    return LLMCall(stage=stage, messages=[Message(role="user", content=prompt)], reply=reply, **extra)


def write_run(run: Path) -> Path:
    run.mkdir()
    first = ProblemResult(
        problem_id="p1",
        benchmark="demo",
        outcome=Outcome.CERTIFIED,
        stop_reason="all_passed",
        iterations=[
            IterationRecord(
                index=0,
                calls=[
                    _call(
                        "generate",
                        "plan p1",
                        "raw plan p1",
                        model="gpt-4o",
                        usage=Usage(input_tokens=3, output_tokens=4),
                    ),
                    _call("reformulate", "plan p1", '{"json": 1}', finish_reason="stop"),
                    _call("generate", "failed prompt", None),
                ],
            ),
            IterationRecord(
                index=1,
                calls=[
                    _call("generate", "plan p1 again", "second draw A"),
                    _call("generate", "plan p1 again", "second draw B"),
                ],
            ),
        ],
    )
    second = ProblemResult(problem_id="p2", benchmark="demo", outcome=Outcome.FAILED, stop_reason="iterations")
    (run / "records.jsonl").write_text(first.model_dump_json() + "\n\n" + second.model_dump_json() + "\n")
    return run


async def test_replays_by_messages_and_stage(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    client = build_client(LLMSettings(name="replay", recording=str(run)))
    generated = await client.call(request("plan p1"), "generate")
    reformulated = await client.call(request("plan p1"), "reformulate")
    assert generated.reply == "raw plan p1" and generated.model == "gpt-4o"
    assert (generated.usage.input_tokens, generated.usage.output_tokens) == (3, 4)
    # replayed calls are free and show what they would have cost, like cache hits
    assert generated.cached and generated.usage.cost_usd == 0.0 and generated.usage.cached_calls == 1
    assert generated.usage.cached_cost_usd == pytest.approx(PRICES["gpt-4o"].cost(3, 4))
    assert reformulated.reply == '{"json": 1}'
    # identical requests get the recorded draws in order, then a clear miss
    assert (await client.call(request("plan p1 again"), "generate")).reply == "second draw A"
    assert (await client.call(request("plan p1 again"), "generate")).reply == "second draw B"
    with pytest.raises(ReplayMissError, match=r"holds 2 replies.*all were used"):
        await client.call(request("plan p1 again"), "generate")


async def test_unrecorded_request_is_a_miss_never_a_live_call(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    client = build_client(LLMSettings(name="replay", recording=str(run), max_retries=5))
    with pytest.raises(
        ReplayMissError, match=r"no reply for these messages.*problem 'p3'.*never calls a live model"
    ) as info:
        await client.call(request("something new", problem="p3"), "generate")
    assert client.backend_calls == 1  # not retried
    assert info.value.call.faults[0].kind == "replay_miss"  # type: ignore[attr-defined]
    with pytest.raises(ReplayMissError):  # a failed recorded call has no reply to give
        await client.call(request("failed prompt"), "generate")


async def test_jsonl_of_messages_and_replies(tmp_path: Path) -> None:
    path = tmp_path / "pairs.jsonl"
    lines = [
        {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}], "reply": "r1"},
        {
            "messages": [{"role": "user", "content": "x"}],
            "reply": "rx",
            "stage": "reformulate",
            "finish_reason": "length",
        },
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines))
    client = build_client(LLMSettings(name="replay", args={"recording": str(path)}))
    req = LLMRequest(messages=(Message(role="system", content="s"), Message(role="user", content="u")))
    assert (await client.call(req, "generate")).reply == "r1"
    call = await client.call(request("x"), "generate")  # only a reformulate reply: used for any stage
    assert call.reply == "rx" and call.finish_reason == "length"


@pytest.mark.parametrize(
    ("content", "message"),
    [("not json\n", "is not JSON"), ('{"other": 1}\n', "neither a problem record"), ("[1]\n", "not a JSON object")],
)
def test_bad_recordings_are_config_errors(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(ConfigError, match=message):
        build_client(LLMSettings(name="replay", recording=str(path)))


def test_missing_recording_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"needs a recording"):
        build_client(LLMSettings(name="replay"))
    with pytest.raises(ConfigError, match=r"does not exist"):
        build_client(LLMSettings(name="replay", recording=str(tmp_path / "nope")))
    (tmp_path / "empty_run").mkdir()
    with pytest.raises(ConfigError, match=r"without records.jsonl"):
        build_client(LLMSettings(name="replay", recording=str(tmp_path / "empty_run")))
