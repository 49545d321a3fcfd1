"""The feedback level as configuration: critic_options.feedback, its record in run.json, per-critic
levels, and the deprecated critic_options.hints."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest

from modulo.build import build_session
from modulo.config import ModuloConfig
from modulo.errors import ConfigError
from modulo.runner import run_session
from modulo.runs import RunDir, read_records


def config(**options: object) -> ModuloConfig:
    cfg = ModuloConfig()
    cfg.benchmark.name = "synth/calendar"
    cfg.benchmark.split = "generated"
    cfg.benchmark.args = {"n": 2}
    cfg.llm.name = "scripted"
    cfg.cache.mode = "off"
    cfg.run.progress = False
    cfg.run.report = False
    cfg.metacontroller.max_iterations = 2
    for key, value in options.items():
        setattr(cfg.critic_options, key, value)
    return cfg


def test_a_run_at_feedback_hint_records_the_level_in_run_json(tmp_path: Path) -> None:
    session = build_session(config(feedback="hint"))
    assert session.feedback == "hint" and {c.feedback for c in session.critics} == {"hint"}
    asyncio.run(run_session(session, RunDir(tmp_path)))
    info = json.loads((tmp_path / "run.json").read_text())
    assert info["feedback"] == "hint" and info["critic_options"]["feedback"] == "hint"
    assert set(info["critic_feedback"].values()) == {"hint"}
    assert read_records(tmp_path)  # the run did run


def test_the_default_level_is_explain_and_a_critic_may_have_its_own() -> None:
    cfg = config()
    cfg.critic_args = {"synth_busy": {"feedback": "binary"}}
    session = build_session(cfg)
    levels = {c.name: c.feedback for c in session.critics}
    assert session.feedback == "explain" and session.info.feedback == "explain"
    assert levels.pop("synth_busy") == "binary" and set(levels.values()) == {"explain"}
    assert session.info.critic_feedback["synth_busy"] == "binary"


def test_an_unknown_level_is_refused_with_the_levels() -> None:
    with pytest.raises(ConfigError, match=r"critic_options\.feedback must be one of binary, explain, hint"):
        build_session(config(feedback="verbose"))


def test_deprecated_hints_true_reads_as_feedback_hint(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="modulo"):
        session = build_session(config(hints=True))
    assert session.feedback == "hint"
    assert "critic_options.hints is deprecated" in caplog.text and "critic_options.feedback=hint" in caplog.text
    with pytest.raises(ConfigError, match=r"contradicts critic_options\.feedback=binary"):
        build_session(config(hints=True, feedback="binary"))


def test_per_critic_hints_argument_points_to_the_feedback_level() -> None:
    cfg = config()
    cfg.critic_args = {"synth_earliest": {"hints": True}}
    with pytest.raises(ConfigError, match=r"critic_args\.synth_earliest\.feedback=hint"):
        build_session(cfg)


def test_feedback_hint_with_a_strategy_that_drops_hints_is_refused() -> None:
    cfg = config(feedback="hint")
    cfg.backprompt.args = {"include_plan": True, "hints": False}
    with pytest.raises(ConfigError, match=r"backprompt\.args\.hints=false"):
        build_session(cfg)
