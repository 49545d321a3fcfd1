"""A whole run with a user and updates: evaluation against the final request, run.json, report tables."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from modulo.build import build_session
from modulo.cli.console import user_line
from modulo.errors import ConfigError, UnknownComponentError
from modulo.reports.load import load_runs
from modulo.reports.report import ReportOptions, build_report
from modulo.reports.show import build_story, render_plain
from modulo.runner import run_session
from modulo.runs import RunDir, read_records
from modulo.types import Outcome
from modulo.view.data import problem_detail

from .test_runner import config

pytestmark = pytest.mark.usefixtures("toy_registered")


def test_a_run_with_updates_is_evaluated_against_the_final_request(tmp_path: Path) -> None:
    # toy-0 must sum to 5 and toy-1 to 6; after turn 0 both must sum to 9: [2, 3] is certified, then not;
    # toy-0 recovers with [4, 5], toy-1 keeps proposing [2, 4]
    replies = {"toy-0": ["[2, 3]", "[4, 5]"], "toy-1": ["[2, 4]", "[2, 4]"]}
    cfg = config("toy", 2, replies)
    cfg.user.updates = [{"after": 0, "add": {"target": 9}, "text": "They must sum to 9 now."}]
    cfg.metacontroller.max_iterations = 2
    session = build_session(cfg)
    assert session.info.user.updates == cfg.user.updates
    assert session.info.user.name is None
    assert user_line(session) == "none; 1 update(s) after turn(s) 0"  # what modulo check shows
    result = asyncio.run(run_session(session, RunDir(tmp_path)))
    by_id = {r.problem_id: r for r in read_records(tmp_path)}
    assert by_id["toy-0"].outcome is Outcome.CERTIFIED and by_id["toy-0"].best_plan == [4, 5]
    assert by_id["toy-1"].outcome is Outcome.EXHAUSTED and not by_id["toy-1"].best_certified
    # the evaluator scores the final plans against the request as it ended (sum 9), not as loaded
    assert result.evaluation is not None
    assert [row["passed"] for row in result.evaluation["per_problem"]] == [True, False]
    # reports re-create the final request from the recorded updates
    (run,) = load_runs([tmp_path])
    assert [p.constraints["target"] for p in run.problems()] == [9, 9]
    report = build_report([tmp_path], ReportOptions(out=tmp_path / "report", n_resamples=50, figures=False))
    assert "### User in the loop" in report.markdown
    section = report.markdown.split("### User in the loop")[1]
    row = next(line for line in section.splitlines() if line.startswith(f"| {run.name} | 2 |"))
    assert "| 2 | 1/2 |" in row  # both requests changed, one certified after the change
    story = render_plain(build_story(run, "toy-0"))
    assert "updates applied after turn 0" in story and "no longer certified" in story
    # the viewer's page data: the update, the plan judged again, the problem's multi-turn facts
    page = problem_detail(run.records["toy-0"], run.critics, run.benchmark())
    turn = page["iterations"][0]["turn"]
    assert turn["act"] == "plan" and "They must sum to 9 now." in turn["updates"][0]
    assert turn["rejudged"]["certified"] is False and page["iterations"][1]["turn"] is None
    assert page["dialogue"]["updates"] == "1 applied" and page["dialogue"]["user"] == "none"


def test_user_config_errors_are_clear() -> None:
    cfg = config("toy", 1, {"*": ["[2, 3]"]})
    cfg.user.updates = [{"after": 1, "ad": {"target": 9}}]
    with pytest.raises(ConfigError, match=r"user.updates\[0\]: unknown key"):
        build_session(cfg)
    cfg = config("toy", 1, {"*": ["[2, 3]"]})
    cfg.user.file = "x.yaml"
    with pytest.raises(ConfigError, match="need a user"):
        build_session(cfg)
    cfg.user.name = "scriptd"
    with pytest.raises(UnknownComponentError, match=r"Did you mean 'scripted'"):
        build_session(cfg)
    cfg.user.name, cfg.user.file = "scripted", "/nonexistent/user.yaml"
    with pytest.raises(ConfigError, match="does not exist"):
        build_session(cfg)
    cfg = config("toy", 1, {"*": ["[2, 3]"]})
    cfg.user.question_costs_iteration = False
    with pytest.raises(ConfigError, match="max_questions"):
        build_session(cfg)


def test_an_llm_user_answers_through_the_runs_model_or_its_own(tmp_path: Path) -> None:
    replies = {"toy-0": ["QUESTION: Any digit you dislike?", "I dislike 1. [REVEALED: none]", "[2, 3]"]}
    cfg = config("toy", 1, replies)
    cfg.user.name = "llm"
    session = build_session(cfg)
    assert session.loop.user_llm is session.llm and session.info.user.name == "llm"
    asyncio.run(run_session(session, RunDir(tmp_path / "same")))
    (record,) = read_records(tmp_path / "same")
    question = record.iterations[0]
    assert [c.stage for c in question.calls] == ["generate", "user"]
    assert question.answer is not None and question.answer.text == "I dislike 1." and question.answer.user == "llm"
    assert record.outcome is Outcome.CERTIFIED and record.templates["user"].startswith("core/user@1")
    # a simulator on a model of its own (user.llm overrides the run's llm settings): a second client
    cfg = config("toy", 1, {"toy-0": ["QUESTION: Any digit you dislike?", "[2, 3]"]})
    cfg.user.name = "llm"
    cfg.user.llm = {"model": "user-model", "args": {"replies": ["No. [REVEALED: none]"]}}
    session = build_session(cfg)
    assert session.loop.user_llm is not session.llm and session.info.user.llm_model == "user-model"
    asyncio.run(run_session(session, RunDir(tmp_path / "own")))
    (record,) = read_records(tmp_path / "own")
    user_call = record.iterations[0].calls[1]
    assert user_call.stage == "user" and user_call.model == "user-model" and record.outcome is Outcome.CERTIFIED
    cfg.user.llm = {"modle": "x"}
    with pytest.raises(ConfigError, match=r"user.llm: unknown key\(s\) modle"):
        build_session(cfg)


def test_the_problems_frame_has_the_multi_turn_columns(tmp_path: Path) -> None:
    from modulo.analysis import load

    replies = {"toy-0": ["QUESTION: Any digit you dislike?", "[2, 3]"]}
    cfg = config("toy", 1, replies)
    # due after turn 5, the update meets the plan certified at turn 1 at once; text only, it still holds
    cfg.user.name, cfg.user.updates = "scripted", [{"after": 5, "text": "Any time is fine."}]
    cfg.user.args = {"script": {"answers": [{"match": "dislike", "answer": "Said so already.", "unnecessary": True}]}}
    asyncio.run(run_session(build_session(cfg), RunDir(tmp_path)))
    results = load(tmp_path)
    problems = results.problems()
    row = problems.iloc[0]
    assert (row["questions"], row["unnecessary_questions"], row["updates"]) == (1, 1, 1)
    assert not row["abstained"] and bool(row["certified"])
    iterations = results.iterations()
    assert list(iterations["act"]) == ["question", "plan"]
