"""Whole runs with scripted models: the unsolvable rule, the multi-turn episode, labels and readable Chinese."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import ROOT, SCRIPTS, records, run, summary

DECLINE = str(SCRIPTS / "travelbench_decline.json")
NEVER = str(SCRIPTS / "travelbench_never_decline.json")
MULTI = str(ROOT / "critics" / "travelbench" / "scripts" / "multi_turn.json")


@pytest.mark.slow
def test_unsolvable_recall_is_exact_over_all_100(tb_data: Path, tmp_path: Path) -> None:
    declined = run(tmp_path, "decline", ["benchmark=travelbench/unsolvable", "llm=scripted", f"llm.script={DECLINE}"])
    never = run(tmp_path, "never", ["benchmark=travelbench/unsolvable", "llm=scripted", f"llm.script={NEVER}"])
    assert summary(declined)["metrics"]["abstention_recall"] == 1.0
    assert summary(never)["metrics"]["abstention_recall"] == 0.0
    assert summary(declined)["n_problems"] == 100
    assert "100.0 (100/100)" in (declined / "report.md").read_text(encoding="utf-8")
    # only the first assistant message counts: one call per problem, no tool simulated, no judge asked
    assert all(len(r["iterations"][0]["calls"]) == 1 for r in records(declined))


@pytest.mark.slow
def test_controls_put_recall_and_false_abstention_side_by_side(tb_data: Path, tmp_path: Path) -> None:
    base = ["benchmark=travelbench/unsolvable", "benchmark.split=with_controls", "benchmark.limit=6", "llm=scripted"]
    declined = run(tmp_path, "decline", [*base, f"llm.script={DECLINE}"])
    metrics = summary(declined)["metrics"]
    assert (metrics["abstention_recall"], metrics["wrongful_abstention"], metrics["success"]) == (1.0, 1.0, 0.5)
    report = (declined / "report.md").read_text(encoding="utf-8")
    assert "abstention recall (%, k/n) | wrongful abstention (%, k/n)" in report
    assert "100.0 (3/3)" in report
    never = summary(run(tmp_path, "never", [*base, f"llm.script={NEVER}", "run.report=false"]))["metrics"]
    assert (never["abstention_recall"], never["wrongful_abstention"]) == (0.0, 0.0)


def test_a_tool_call_first_is_no_decline(tb_data: Path, tmp_path: Path) -> None:
    script = tmp_path / "tool_first.json"
    call = '<tool_call>{"name": "web_search", "arguments": {"query": "路况"}}</tool_call> [Unsolved]'
    script.write_text(json.dumps({"*": [call]}, ensure_ascii=False), encoding="utf-8")
    out = run(
        tmp_path,
        "run",
        [
            "benchmark=travelbench/unsolvable",
            "benchmark.limit=2",
            "llm=scripted",
            f"llm.script={script}",
            "run.report=false",
        ],
    )
    assert summary(out)["metrics"]["abstention_recall"] == 0.0
    assert [r["best_plan"]["first_called_tools"] for r in records(out)] == [True, True]
    # answering an unsolvable request is never certified: the paper's rule is also a critic
    assert [(r["outcome"], r["best_rejected_by"]) for r in records(out)] == [
        ("exhausted", ["travelbench_unsolved"])
    ] * 2


@pytest.mark.slow
def test_multi_turn_episode_records_every_role_and_labels_the_score(tb_data: Path, tmp_path: Path) -> None:
    out = run(
        tmp_path,
        "multi",
        ["benchmark=travelbench/multi_turn", "benchmark.limit=3", "llm=scripted", f"llm.script={MULTI}"],
    )
    recs = records(out)
    assert len(recs) == 3
    for rec in recs:
        calls = rec["iterations"][0]["calls"]
        assert [c["stage"] for c in calls] == [
            "generate",
            "tool",
            "generate",
            "user",
            "generate",
            "user",
            "judge",
            "judge",
        ]
        plan = rec["best_plan"]
        assert (plan["tool_calls"], plan["tool_errors"], plan["questions"], plan["turns"]) == (2, 1, 1, 2)
        assert plan["ended_by"] == "user_finished" and plan["judge"]["meta"] == 4
        # the hidden intent reaches the user simulator only
        intent_calls = [c["stage"] for c in calls if any("真正想要的是" in m["content"] for m in c["messages"])]
        assert set(intent_calls) == {"user"}
    metrics = summary(out)["metrics"]
    # ratings 4,3,4,3 -> (3.5-1)/4 = 0.625; one of two calls invalid -> x 0.5; meta 4 -> x 0.8
    assert metrics["score_simulated_tools"] == pytest.approx(0.25)
    assert metrics["tool_error_rate"] == 0.5 and metrics["questions"] == 1.0
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "score (simulated tools)" in report
    raw = (out / "records.jsonl").read_text(encoding="utf-8")
    for text in (raw, report, (out / "summary.json").read_text(encoding="utf-8")):
        assert "\\u" not in text
    assert "等我回去完了你找个地方让我修车卡的话" in raw


@pytest.mark.slow
def test_show_prints_the_conversation_readably(tb_data: Path, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from modulo.cli.main import cli

    out = run(
        tmp_path,
        "multi",
        [
            "benchmark=travelbench/multi_turn",
            "benchmark.limit=1",
            "llm=scripted",
            f"llm.script={MULTI}",
            "run.report=false",
        ],
    )
    shown = CliRunner().invoke(cli, ["show", str(out), "multi_turn-1"])
    assert shown.exit_code == 0, shown.output
    assert "\\u" not in shown.output and "请问您想查询哪个城市的情况" in shown.output


def test_single_turn_ends_at_the_first_answer_and_an_unparsed_judge_is_counted(tb_data: Path, tmp_path: Path) -> None:
    script = tmp_path / "single.json"
    script.write_text(
        json.dumps({"*": ["您附近 2 公里有一个充电站。", "我觉得不错。", "还是不错。", "很好。"]}, ensure_ascii=False),
        encoding="utf-8",
    )
    out = run(
        tmp_path,
        "single",
        [
            "benchmark=travelbench/single_turn",
            "benchmark.limit=2",
            "llm=scripted",
            f"llm.script={script}",
            "run.report=false",
        ],
    )
    for rec in records(out):
        stages = [c["stage"] for c in rec["iterations"][0]["calls"]]
        assert stages == ["generate", "judge", "judge", "judge"]  # no user; the judge asked again twice
        assert rec["best_plan"]["judge"]["ratings"] is None
    metrics = summary(out)["metrics"]
    assert metrics["unjudged"] == 2 and "score_simulated_tools" not in metrics


def _split_demo(tmp_path: Path) -> tuple[Path, Path, Path]:
    """The single-turn demo script split by role: the assistant's replies, the tool's, the judge's."""
    replies = json.loads((ROOT / "critics" / "travelbench" / "scripts" / "single_turn.json").read_text("utf-8"))["*"]
    files = []
    for name, part in (("agent", [replies[0], replies[2]]), ("tool", [replies[1]]), ("judge", replies[3:])):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"*": part}, ensure_ascii=False), encoding="utf-8")
        files.append(path)
    return files[0], files[1], files[2]


def test_the_judge_and_the_tool_simulator_on_their_own_clients(tb_data: Path, tmp_path: Path) -> None:
    agent, tool, judge = _split_demo(tmp_path)
    out = run(
        tmp_path,
        "roles",
        [
            "benchmark=travelbench/single_turn",
            "benchmark.limit=2",
            "llm=scripted",
            f"llm.script={agent}",
            f"generator.args.tool_llm={{script: {tool}, model: tool-sim}}",
            f"generator.args.judge_llm={{script: {judge}, model: judge-x}}",
            "run.report=false",
        ],
    )
    for rec in records(out):
        calls = [(c["stage"], c["model"]) for c in rec["iterations"][0]["calls"]]
        assert calls == [
            ("generate", "scripted"),
            ("tool", "tool-sim"),
            ("generate", "scripted"),
            ("judge", "judge-x"),
            ("judge", "judge-x"),
        ]
    # ratings 4,3,4 -> (11/3 - 1)/4 = 2/3; one of two calls invalid -> x 0.5; meta 4 -> x 0.8
    assert summary(out)["metrics"]["score_simulated_tools"] == pytest.approx(2 / 3 * 0.5 * 0.8)


def test_a_question_the_request_already_answered_is_counted(tb_data: Path, tmp_path: Path) -> None:
    script = tmp_path / "ask.json"
    replies = json.loads((ROOT / "critics" / "travelbench" / "scripts" / "multi_turn.json").read_text("utf-8"))["*"]
    asked = ["您要找什么地方？", "[ALREADY STATED] 我一开始就说了，修车卡的地方。", *replies[4:]]
    script.write_text(json.dumps({"*": asked}, ensure_ascii=False), encoding="utf-8")
    out = run(
        tmp_path,
        "ask",
        [
            "benchmark=travelbench/multi_turn",
            "benchmark.limit=1",
            "llm=scripted",
            f"llm.script={script}",
            "run.report=false",
        ],
    )
    plan = records(out)[0]["best_plan"]
    assert (plan["questions"], plan["unnecessary_questions"], plan["tool_calls"]) == (1, 1, 0)
    # the marker is the user's report to the loop, not what the assistant reads
    assert plan["messages"][2] == {
        "role": "user",
        "content": "我一开始就说了，修车卡的地方。",
        "name": None,
        "error": None,
        "tool_calls": None,
    }


def test_a_typo_in_a_role_llm_stops_before_any_call(tb_data: Path, tmp_path: Path) -> None:
    from modulo.cli.hydra_app import run_hydra

    with pytest.raises(SystemExit) as info:
        run_hydra(
            [
                "benchmark=travelbench/single_turn",
                "llm=scripted",
                "generator.args.judge_llm={modle: x}",
                f"run.dir={tmp_path / 'typo'}",
            ]
        )
    assert info.value.code == 2
    assert not (tmp_path / "typo" / "records.jsonl").exists()
