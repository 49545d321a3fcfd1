"""The three TravelBench files: counts, problems, hidden information, and clear errors on bad rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from critics.travelbench.benchmark import TravelBenchMultiTurn, TravelBenchSingleTurn, TravelBenchUnsolvable
from critics.travelbench.data import parse_row
from critics.travelbench.episode import TravelBenchAgent
from modulo.errors import DataError

GOOD = {
    "trace_id": "7",
    "time": "2025-10-24 10:00",
    "query": "附近有充电的地方吗",
    "primary_intent": "discovery.poi_search",
    "context": "**用户当前位置描述**\n安徽省亳州市",
    "intent": "寻找附近的充电站",
    "missing_tool": False,
    "missing_info": False,
    "no_actionable": False,
    "avg_tool_calls": 2.0,
}


def test_counts_and_problem_ids(tb_data: Path) -> None:
    single = TravelBenchSingleTurn(tb_data).load("all")
    multi = TravelBenchMultiTurn(tb_data).load("all")
    unsolvable = TravelBenchUnsolvable(tb_data)
    assert (len(single), len(multi), len(unsolvable.load("all"))) == (500, 500, 100)
    assert single[0].id == "single_turn-1" and multi[0].id == "multi_turn-1"
    causes = [p.metadata["cause"] for p in unsolvable.load("all")]
    assert (causes.count("missing_tool"), causes.count("missing_info"), causes.count("no_actionable")) == (32, 51, 17)
    mixed = unsolvable.load("with_controls")
    assert len(mixed) == 200 and [p.solvable for p in mixed[:4]] == [False, True, False, True]
    assert all(p.metadata.get("control") for p in mixed[1::2])
    assert all("user_profile" in p.hidden and p.hidden["intent"] for p in multi)


def test_data_check_counts_every_file(tb_data: Path) -> None:
    report = TravelBenchUnsolvable(tb_data).data_check()
    assert report.ok, report.lines
    text = "\n".join(report.lines)
    assert "unsolve.jsonl: 100 rows (ok)" in text and "single_turn.jsonl: 500 rows (ok)" in text
    assert "simulated tools" in text


def test_the_planner_never_sees_the_intent_or_profile(tb_data: Path) -> None:
    bench = TravelBenchMultiTurn(tb_data)
    problem = bench.load("all")[0]
    prompt = "\n".join(m.content for m in TravelBenchAgent(benchmark=bench).first_prompt(problem))
    assert problem.query in prompt and problem.context in prompt
    assert problem.hidden["intent"] not in prompt
    assert problem.hidden["user_profile"][:40] not in prompt
    assert "\\u" not in prompt  # Chinese stays readable in the prompt (tool declarations included)


@pytest.mark.parametrize(
    ("kind", "change", "message"),
    [
        ("single_turn", {"query": ""}, "field 'query' must be a non-empty string"),
        ("single_turn", {"time": "24/10/2025"}, "field 'time' must read"),
        ("single_turn", {"missing_tool": "no"}, "field 'missing_tool' must be true or false"),
        ("single_turn", {"missing_info": True}, "a solvable (single_turn) row has missing_info true"),
        ("single_turn", {"avg_tool_calls": None}, "avg_tool_calls"),
        ("multi_turn", {}, "needs a non-empty string 'user_profile'"),
        ("unsolvable", {}, "exactly one of missing_tool, missing_info, no_actionable true, this one has none"),
        ("unsolvable", {"missing_tool": True, "no_actionable": True}, "this one has missing_tool, no_actionable"),
    ],
)
def test_malformed_rows_name_the_line_and_field(kind: str, change: dict[str, object], message: str) -> None:
    row = {**GOOD, **change}
    with pytest.raises(DataError, match=r"f\.jsonl:3") as info:
        parse_row(kind, json.dumps(row, ensure_ascii=False), "f.jsonl:3")
    assert message in str(info.value)


def test_a_row_that_is_not_json_and_a_repeated_id(tmp_path: Path) -> None:
    folder = tmp_path / "travelbench"
    folder.mkdir()
    (folder / "single_turn.jsonl").write_text(json.dumps(GOOD) + "\n{oops\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"single_turn.jsonl:2: not a JSON object"):
        TravelBenchSingleTurn(tmp_path).load("all")
    (folder / "single_turn.jsonl").write_text(json.dumps(GOOD) + "\n" + json.dumps(GOOD) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"single_turn.jsonl:2: trace_id '7' repeats line 1"):
        TravelBenchSingleTurn(tmp_path).load("all")
    with pytest.raises(DataError, match=r"multi_turn\.jsonl is missing"):
        TravelBenchMultiTurn(tmp_path).load("all")
    assert not TravelBenchMultiTurn(tmp_path).data_check().ok
