"""A run with a sandboxed plugin critic that sleeps forever: recorded critic errors, the run completes."""

from __future__ import annotations

import json
import time

import pytest

from modulo.build import build_session
from modulo.errors import ConfigError
from modulo.testing.drills import compose, run_in_process
from modulo.types import Outcome

from ..reliability.conftest import DrillFactory, drill  # noqa: F401 - the drill fixture
from . import hostile_plugin  # noqa: F401 - registers the test plugin's critics

pytestmark = pytest.mark.slow  # whole runs with sandbox worker processes

CRITICS = "[format,synth_task_coverage,sandbox_sleep]"


def test_a_sandboxed_critic_that_sleeps_forever_is_a_recorded_error_and_the_run_completes(
    drill: DrillFactory,  # noqa: F811
) -> None:
    d = drill()
    extra = [
        "metacontroller.sandbox=plugins",
        "++metacontroller.critic_timeouts.sandbox_sleep=1",
        "metacontroller.on_critic_error=record",
    ]
    overrides = d.overrides("sleep", n=2, max_iterations=1, concurrency=2, critics=CRITICS, extra=extra)
    d.script(overrides)
    started = time.monotonic()
    result = run_in_process(overrides)
    assert time.monotonic() - started < 60  # two worker starts (seconds each on a loaded machine) + 1 s each
    assert result.aborted is None and len(result.results) == 2
    info = json.loads((d.tmp / "sleep" / "run.json").read_text())
    assert info["sandbox"]["critics"] == ["sandbox_sleep"]  # plugins: the built-ins stay in-process
    judged = [r for r in result.results if any(it.plan is not None for it in r.iterations)]
    assert judged  # the drill's first problem proposes its known plan at once
    for r in result.results:
        assert r.outcome is not Outcome.ERROR
    for r in judged:
        assert r.outcome is not Outcome.CERTIFIED  # a critic that never answered never passes a plan
        verdicts = {v.critic: v for it in r.iterations for v in it.verdicts}
        sleep = verdicts["sandbox_sleep"]
        assert not sleep.passed and "did not finish within 1 s (sandbox worker killed)" in (sleep.error or "")
        assert verdicts["synth_task_coverage"].error is None  # the other critics ran and judged


def test_a_sandbox_list_naming_an_inactive_critic_is_a_config_error(drill: DrillFactory) -> None:  # noqa: F811
    d = drill()
    overrides = d.overrides("typo", n=1, critics=CRITICS, extra=["metacontroller.sandbox=[sandbox_slep]"])
    with pytest.raises(ConfigError, match="sandbox_slep"):
        build_session(compose(overrides))


def test_a_built_in_critic_sandboxed_gives_the_same_records_as_in_process(drill: DrillFactory) -> None:  # noqa: F811
    from modulo.testing.drills import comparable

    d = drill()
    critics = "[format,synth_task_coverage,synth_no_overlap]"
    common = {"n": 4, "max_iterations": 2, "concurrency": 2, "critics": critics}
    feedback = ["critic_options.feedback=hint"]
    plain = d.overrides("plain", **common, extra=feedback)
    boxed = d.overrides("boxed", **common, extra=[*feedback, "metacontroller.sandbox=[synth_no_overlap]"])
    d.script(plain)
    run_in_process(plain)
    run_in_process(boxed)
    info = json.loads((d.tmp / "boxed" / "run.json").read_text())
    assert info["sandbox"]["critics"] == ["synth_no_overlap"]
    assert json.loads((d.tmp / "plain" / "run.json").read_text())["sandbox"] is None  # run.json version 2: null
    assert comparable(d.tmp / "boxed") == comparable(d.tmp / "plain")
