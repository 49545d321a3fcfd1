"""Hostile and broken inputs get clear errors or recorded outcomes: never a traceback, never lost work.

- answers that are empty, huge, binary, degenerate, too deeply nested, hold numbers too long to
  convert or lone surrogates, or plans with wrong types and missing keys: each becomes a recorded
  format failure (or, for an empty answer the client retried, a recorded LLM error), with a short
  reason, through every reformulator;
- a critic plugin that raises while checking: recorded as a critic error and the run goes on
  (``metacontroller.on_critic_error=record``), or the run stops cleanly with every problem recorded
  (``stop``);
- a critic plugin whose constructor raises: a PluginLoadError before any call.

Broken data and configuration typos, through the command line, are in test_cli_errors.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner

from modulo import components
from modulo.cli.main import cli
from modulo.critic import Critic, critic
from modulo.reformulate import MAX_REASON_CHARS
from modulo.testing.drills import records, run_in_process
from modulo.types import Outcome, Problem, Verdict

from .conftest import DrillFactory

WITNESS = {"task": "x" * 40, "start": "9:00", "end": "10:00"}
HOSTILE: dict[str, str] = {
    "empty": "",
    "blank": "   \n\t  ",
    "degenerate_brackets": "[" * 1_000_000,
    "huge_json_of_the_wrong_shape": json.dumps([WITNESS] * 20_000),
    "binary": bytes(range(256)).decode("latin-1") * 64,
    "number_too_long": "Here: [1" + "0" * 6000 + "]",
    "nested_too_deep": "[" * 150 + "]" * 150,
    "nested_past_the_recursion_limit": "[" * 3000 + "]" * 3000,
    "nan_and_infinity": '{"schedule": [{"task": NaN, "start": Infinity, "end": -1e999}]}',
    "lone_surrogate_escape": '{"schedule": [{"task": "\\ud800", "start": "9:00", "end": "10:00"}]}',
    "lone_surrogate_text": "My plan \ud83d is this.",
    "wrong_types": '{"schedule": [{"task": 5, "start": [9], "end": null}]}',
    "missing_keys": '{"schedule": [{"task": "x"}]}',
    "wrong_top_level": "[1, 2, 3]",
    "extra_keys": '{"schedule": [], "hack": {"__proto__": 1}}',
}


@pytest.mark.slow
@pytest.mark.parametrize("reformulator", ["none", "parser", "llm"])
def test_hostile_answers_are_recorded_format_failures(drill: DrillFactory, reformulator: str) -> None:
    d = drill()
    d.model.stages = 2 if reformulator == "llm" else 1
    overrides = d.overrides(
        f"hostile-{reformulator}", n=len(HOSTILE), reformulator=reformulator, max_retries=1, max_iterations=2
    )
    if reformulator == "parser":  # the parser reads the benchmark's text format, from the direct prompt
        overrides = [o for o in overrides if not o.startswith("generator.prompt")] + ["generator.prompt=direct"]
    session_problems = _problems(overrides)
    d.model.answers = {p.id: [text] for p, text in zip(session_problems, HOSTILE.values(), strict=True)}
    name_of = {p.id: name for p, name in zip(session_problems, HOSTILE, strict=True)}

    result = run_in_process(overrides)
    by_name = {name_of[r.problem_id]: r for r in result.results}
    assert set(by_name) == set(HOSTILE)  # nothing lost
    assert len(records(d.tmp / f"hostile-{reformulator}")) == len(HOSTILE)
    for name, r in by_name.items():
        if name in ("empty", "blank"):  # retried as a transient fault, then recorded as the LLM error it is
            assert r.outcome is Outcome.ERROR and r.stop_reason == "llm_error"
            assert "EmptyReplyError" in (r.error or "")
            continue
        assert r.outcome is Outcome.FAILED, (name, r.outcome, r.error)
        for it in r.iterations:
            assert it.format_error, name
            assert len(it.format_error) <= MAX_REASON_CHARS + 60, (name, len(it.format_error))
            assert it.verdicts[0].critic == "format" and not it.verdicts[0].passed
            assert len(it.backprompt or "") < 40_000, (name, len(it.backprompt or ""))
    if reformulator == "none":  # the reasons say what is wrong, and where
        assert "nested more than" in (by_name["nested_too_deep"].iterations[0].format_error or "")
        assert "schedule/0/task" in (by_name["wrong_types"].iterations[0].format_error or "")
        assert "'start' is a required property" in (by_name["missing_keys"].iterations[0].format_error or "")
        assert "not valid Unicode" in (by_name["lone_surrogate_escape"].iterations[0].format_error or "")
    # a reply with a lone surrogate is kept (with U+FFFD), so it could be cached and recorded
    raw = by_name["lone_surrogate_text"].iterations[0].raw_reply or ""
    assert "\ufffd" in raw and "\ud83d" not in raw


def _problems(overrides: list[str]) -> list[Problem]:
    from modulo.build import build_session
    from modulo.testing.drills import compose

    return build_session(compose(overrides)).problems


# -- critics that raise -------------------------------------------------------------------------------
@critic("reliability_flaky", group="hard", description="crashes on odd-numbered problems")
def flaky(problem: Problem, plan: Any) -> Verdict:
    if int(problem.metadata["index"]) % 2:
        raise RuntimeError(f"rules file missing for {problem.id}")
    return Verdict.ok()


class BrokenAtStart(Critic):
    name = "reliability_broken"

    def __init__(self) -> None:
        raise OSError("cannot open rules.yaml")

    def check(self, problem: Problem, plan: Any) -> Verdict:
        return Verdict.ok()


@pytest.fixture
def plugin_critics() -> Iterator[None]:
    components.critics.register("reliability_flaky", flaky, replace=True)
    components.critics.register("reliability_broken", BrokenAtStart, replace=True)
    yield
    components.critics.unregister("reliability_flaky")
    components.critics.unregister("reliability_broken")


CRITICS = "[format,synth_task_coverage,reliability_flaky]"


@pytest.mark.usefixtures("plugin_critics")
def test_a_critic_that_raises_is_recorded_and_the_run_goes_on(drill: DrillFactory) -> None:
    d = drill()
    overrides = d.overrides("record", n=8, critics=CRITICS, extra=["metacontroller.on_critic_error=record"])
    d.script(overrides)
    result = run_in_process(overrides)
    assert result.aborted is None and len(result.results) == 8
    for r in result.results:
        errored = [v for it in r.iterations for v in it.verdicts if v.error is not None]
        index = int(r.metadata["index"])
        if index % 2 and any(it.plan is not None for it in r.iterations):
            assert errored and all(v.critic == "reliability_flaky" for v in errored)
            assert "RuntimeError: rules file missing" in (errored[0].error or "")
            assert r.outcome is not Outcome.CERTIFIED  # a crashed check never certifies a plan
        if index % 2 == 0:
            assert not errored
    assert any(r.outcome is Outcome.CERTIFIED for r in result.results)


@pytest.mark.usefixtures("plugin_critics")
def test_a_critic_that_raises_stops_the_run_cleanly_when_asked(drill: DrillFactory) -> None:
    d = drill()
    overrides = d.overrides("stop", n=12, concurrency=2, critics=CRITICS, extra=["metacontroller.on_critic_error=stop"])
    d.script(overrides)
    out = CliRunner().invoke(cli, ["run", *overrides])
    assert out.exit_code == 3, out.output
    assert "Traceback" not in out.output
    assert "run stopped" in out.output and "reliability_flaky" in out.output
    by_id = records(d.tmp / "stop")
    assert len(by_id) == 12  # every problem recorded: finished, stopped, or never started
    errors = [r for r in by_id.values() if r.outcome is Outcome.ERROR]
    assert errors and all("reliability_flaky" in (r.error or "") for r in errors)
    assert all(r.stop_reason == "critic_error" for r in errors)
    skipped = [r for r in by_id.values() if r.outcome is Outcome.SKIPPED]
    assert skipped and all(r.stop_reason == "run_aborted" and not r.iterations for r in skipped)


@pytest.mark.usefixtures("plugin_critics")
def test_a_critic_that_fails_to_start_stops_the_run_before_any_call(drill: DrillFactory) -> None:
    d = drill()
    overrides = d.overrides("broken", n=2, critics="[format,reliability_broken]")
    out = CliRunner().invoke(cli, ["run", *overrides])
    assert out.exit_code == 2 and "Traceback" not in out.output
    assert "PluginLoadError" in out.output and "reliability_broken" in out.output and "rules.yaml" in out.output
    assert d.fake.stats().requests == 0
    assert not (d.tmp / "broken" / "records.jsonl").exists()
