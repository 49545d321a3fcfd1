"""modulo.analysis: the four grains, typed columns, labels across runs, streaming reads that note what they skip."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import modulo.analysis as a
from modulo.analysis import iter_records
from tests.reports.conftest import set_outcome


def test_problem_and_iteration_frames_match_the_records(tmp_path: Path, make_run: Any, run_a_plans: Any) -> None:
    run = make_run(tmp_path / "a", run_a_plans)
    r = a.load(run)
    lines = [json.loads(x) for x in (run / "records.jsonl").read_text().splitlines()]
    problems, iterations = r.problems(), r.iterations()
    assert len(problems) == len(lines) == 6
    assert len(iterations) == sum(len(x["iterations"]) for x in lines) == 2 + 4 + 4 + 4 + 1 + 4
    p = problems.set_index("problem_id")
    assert p.loc["p0", "outcome"] == "certified" and bool(p.loc["p0", "certified"])
    assert p.loc["p0", "best_iteration"] == 1 and p.loc["p0", "iterations"] == 2
    assert pd.isna(p.loc["p2", "best_iteration"])  # never a plan: a missing value, not 0
    assert p.loc["p2", "outcome"] == "failed"
    assert bool(p.loc["p0", "eval.passed"]) and not bool(p.loc["p1", "eval.passed"])
    assert pd.isna(p.loc["p0", "eval.h_max"])  # not applicable stays missing
    assert p.loc["p0", "input_tokens"] == 200 and p.loc["p0", "cached_calls"] == 1
    assert p.loc["p0", "meta.level"] == "easy"
    # typed columns
    assert problems["outcome"].dtype == "category"
    assert problems["best_iteration"].dtype == "Int64"
    assert problems["eval.h_max"].dtype == "boolean"
    assert problems["critics"].dtype == "category" and set(problems["critics"]) == {"[All]"}
    assert problems["max_iterations"].dtype == "Int64"

    it = iterations.set_index(["problem_id", "iteration"])
    # p3 (max 10): x=12 (h_max fails), 11 (odd too), 12, 12: c_even flips to fail, then back
    assert it.loc[("p3", 0), "critic.h_max"] == "fail" and it.loc[("p3", 1), "critic.c_even"] == "fail"
    assert it.loc[("p3", 1), "flips"] == 1 and it.loc[("p3", 2), "flips"] == 1 and it.loc[("p3", 3), "flips"] == 0
    assert pd.isna(it.loc[("p3", 0), "flips"])
    assert it.loc[("p3", 2), "repeat_of"] == 0
    assert it.loc[("p2", 0), "critic.c_even"] == "gated" and it.loc[("p2", 0), "n_gated"] == 3
    assert it.loc[("p0", 0), "critic.h_max"] == "n/a"
    assert list(iterations["critic.format"].cat.categories) == list(a.STATUSES)


def test_flips_skip_question_turns(tmp_path: Path, make_run: Any, run_a_plans: Any) -> None:
    """A question turn between two plans (no critic state) made the next plan's flips 0, hiding that
    c_even flipped; flips compare each plan with the last plan before it, and a question has none."""
    run = make_run(tmp_path / "a", run_a_plans)
    lines = (run / "records.jsonl").read_text().splitlines()
    rec = json.loads(lines[0])  # p0: x=1 (odd: c_even fails), then x=2 (passes)
    first, second = rec["iterations"]
    question = {**first, "act": "question", "question": "odd or even?", "plan": None, "verdicts": [], "gated": []}
    rec["iterations"] = [first, {**question, "index": 1}, {**second, "index": 2}]
    lines[0] = json.dumps(rec)
    (run / "records.jsonl").write_text("\n".join(lines) + "\n")
    it = a.load(run).iterations().set_index(["problem_id", "iteration"])
    assert pd.isna(it.loc[("p0", 0), "flips"]) and pd.isna(it.loc[("p0", 1), "flips"])
    assert it.loc[("p0", 2), "flips"] == 1


def test_runs_frame_counts_a_killed_runs_records(tmp_path: Path, make_run: Any, run_a_plans: Any) -> None:
    """A run killed before its summary.json had no outcome counts in the runs frame (finished, n_error:
    missing), so a filter on n_error > 0 passed over its errored problem; they are counted from its records."""
    run = make_run(tmp_path / "a", run_a_plans, evaluate=False, truncate_last=True)  # p5's line cut in half
    set_outcome(run, 1, "error")
    results = a.load(run)
    row = results.runs().iloc[0]
    assert (row["problems"], row["finished"], row["n_error"], row["n_certified"]) == (6, 5, 1, 2)
    assert row["n_failed"] + row["n_exhausted"] == 2 and row["n_skipped"] == 0
    assert any("no summary.json" in n for n in results.notes)


def test_verdicts_and_calls_frames(tmp_path: Path, make_run: Any, run_a_plans: Any) -> None:
    r = a.load(make_run(tmp_path / "a", run_a_plans))
    v = r.verdicts()
    iterations = r.iterations()
    # four critics per iteration, gated ones included with status "gated"
    assert len(v) == 4 * len(iterations)
    row = v[(v.problem_id == "p1") & (v.iteration == 0) & (v.critic == "c_even")].iloc[0]
    assert row["status"] == "fail" and row["group"] == "commonsense" and row["feedback"] == "x=3 is odd"
    assert (v[v.status == "gated"].critic.isin(["c_nonneg", "c_even", "h_max"])).all()
    assert v["passed"].dtype == "boolean" and v["status"].dtype == "category"
    assert r.calls().empty  # the synthetic records hold usage but no call entries


def test_a_sweep_gets_label_and_config_columns_for_groupby(
    tmp_path: Path, make_run: Any, run_a_plans: Any, run_b_plans: Any
) -> None:
    make_run(tmp_path / "sweep" / "0", run_a_plans, critics=("format", "c_nonneg", "c_even", "h_max"))
    make_run(tmp_path / "sweep" / "1", run_b_plans, critics=("format",), max_iterations=2)
    r = a.load(tmp_path / "sweep")
    df = r.problems()
    assert set(df["run"]) == {"0", "1"}
    assert set(df["critics"]) == {"[All]", "[Json]"}
    assert "cfg.budget.max_iterations" in df.columns and "cfg.critics" in df.columns
    assert "cfg.llm.model" not in df.columns  # the same in both runs: not a varied key
    rates = df.groupby("critics", observed=True)["eval.passed"].mean()
    assert rates["[All]"] == pytest.approx(2 / 6) and rates["[Json]"] == pytest.approx(4 / 6)
    runs = r.runs()
    assert list(runs["problems"]) == [6, 6] and runs["cfg.budget.max_iterations"].tolist() == [4, 2]
    # a list of run directories works the same
    both = a.load([tmp_path / "sweep" / "0", tmp_path / "sweep" / "1"])
    assert len(both.iterations()) == len(r.iterations())


def test_streaming_reads_keep_the_last_record_and_note_torn_lines(
    tmp_path: Path, make_run: Any, run_a_plans: Any
) -> None:
    run = make_run(tmp_path / "a", run_a_plans, truncate_last=True)
    notes: list[str] = []
    ids = [rec["problem_id"] for rec in iter_records(run, notes)]
    assert ids == ["p0", "p1", "p2", "p3", "p4"]
    assert any("truncated last line" in n for n in notes)
    # a resumed run re-recorded p1: the last record counts, in the order the file holds it
    lines = (run / "records.jsonl").read_text().split("\n")
    p1 = json.loads(lines[1])
    p1["outcome"] = "error"
    text = "\n".join(lines[:5]) + "\n" + json.dumps(p1) + "\n"
    (run / "records.jsonl").write_text(text)
    notes = []
    records = list(iter_records(run, notes))
    assert [x["problem_id"] for x in records] == ["p0", "p2", "p3", "p4", "p1"]
    assert records[-1]["outcome"] == "error"
    assert any("p1 recorded more than once" in n for n in notes)
    r = a.load(run)
    assert len(r.problems()) == 5
    assert any("p1 recorded more than once" in n for n in r.notes)


def test_a_run_without_evaluation_says_so(tmp_path: Path, make_run: Any, run_a_plans: Any) -> None:
    r = a.load(make_run(tmp_path / "a", run_a_plans, evaluate=False))
    df = r.problems()
    assert set(df["evaluation"]) == {"missing"}
    assert not any(c.startswith("eval.") for c in df.columns)
    assert any("no evaluation.json" in n for n in r.notes)


def test_load_needs_a_run(tmp_path: Path) -> None:
    from modulo.errors import RunError

    with pytest.raises(RunError, match="no run directories found"):
        a.load(tmp_path)
    with pytest.raises(TypeError):
        a.load()
