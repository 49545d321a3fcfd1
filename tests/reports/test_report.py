"""Table 1, Table 4, usage, figures, budget curves, comparisons and loading, on synthetic runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from critics.travelplanner.checks import COMMONSENSE_KEYS as CS_KEYS
from critics.travelplanner.checks import HARD_KEYS
from modulo.errors import RunError
from modulo.reports import (
    ReportOptions,
    budget_curve,
    build_report,
    compare_runs,
    constraint_rows,
    critics_label,
    ensure_evaluation,
    find_runs,
    firing_counts,
    headline_rows,
    load_run,
    load_runs,
    usage_row,
)
from modulo.reports.budget import plan_at_budget
from tests.cli_support import modulo
from tests.reports.conftest import set_outcome

FAST = ReportOptions(n_resamples=2_000)


def test_table1_numbers(tmp_path: Path, make_run: Any, run_a_plans: Any) -> None:
    make_run(tmp_path / "a", run_a_plans)
    runs = load_runs([tmp_path / "a"])
    (row,) = headline_rows(runs, n_resamples=2_000)
    got = {k: iv.value for k, iv in row.values.items()}
    assert got == pytest.approx(
        {
            "delivery_rate": 5 / 6,
            "commonsense_micro": 8 / 12,
            "commonsense_macro": 3 / 6,
            "hard_micro": 3 / 4,
            "hard_macro": 4 / 6,
            "final_pass_rate": 2 / 6,
        }
    )
    # every metric was reproduced from the per-problem rows, so every one has an interval around it
    for key, iv in row.values.items():
        assert iv.low <= iv.value <= iv.high, key
        assert not row.rules[key].startswith("no interval"), (key, row.rules[key])
    assert "applicable" in row.rules["hard_micro"]


def test_table1_csv_and_printed_table(tmp_path: Path, make_run: Any, run_a_plans: Any) -> None:
    make_run(tmp_path / "a", run_a_plans, critics=("format", "c_nonneg", "c_even"), method="LLM-Modulo")
    shown = modulo("report", tmp_path / "a", "--resamples", "500", "--no-budget-curve", "--no-figures")
    assert shown.exit_code == 0
    printed = shown.stdout
    # every rate with the counts behind it, then its interval
    assert "83.3 (5/6) [" in printed and "33.3 (2/6) [" in printed and "[Common]" in printed
    df = pd.read_csv(tmp_path / "a" / "table1.csv")
    assert df.loc[0, "final_pass_rate"] == pytest.approx(100 / 3)
    assert df.loc[0, "commonsense_micro"] == pytest.approx(200 / 3)
    assert df.loc[0, "critics"] == "[Common]" and df.loc[0, "model"] == "toy-model"
    assert df.loc[0, "final_pass_rate_ci_low"] <= df.loc[0, "final_pass_rate"] <= df.loc[0, "final_pass_rate_ci_high"]
    md = (tmp_path / "a" / "report.md").read_text()
    # the user's label stands beside the label derived from what ran, never instead of it
    assert "| LLM-Modulo: llm/direct, reformulator llm; critics [Common]; backprompt all; feedback explain; " in md
    assert "critic source" in md.lower() or "source: reimplemented" in md
    assert "0123456789" in md


@pytest.mark.parametrize(
    ("critics", "label"),
    [
        (("format", "c_nonneg", "c_even", "h_max"), "[All]"),
        (("format", "c_nonneg", "c_even"), "[Common]"),
        (("format", "h_max"), "[Hard]"),
        (("format",), "[Json]"),
        (("format", "c_even"), "format+c_even"),
    ],
)
def test_critic_preset_labels(tmp_path: Path, make_run: Any, run_a_plans: Any, critics: Any, label: str) -> None:
    run = load_run(make_run(tmp_path / "r", run_a_plans, critics=critics))
    assert critics_label(run) == label


def test_table4_numbers(tmp_path: Path, make_run: Any, run_a_plans: Any) -> None:
    run = load_run(make_run(tmp_path / "a", run_a_plans))
    table = constraint_rows(run)
    assert table is not None
    assert table.levels == ["easy", "medium", "hard"]
    got = {name: {lv: (c.passed, c.applicable) for lv, c in cells.items()} for name, _, cells in table.rows}
    assert got == {
        "c_nonneg": {"easy": (2, 2), "medium": (1, 2), "hard": (1, 2), "all": (4, 6)},
        "c_even": {"easy": (1, 2), "medium": (1, 2), "hard": (2, 2), "all": (4, 6)},
        "h_max": {"easy": (1, 1), "medium": (0, 1), "hard": (2, 2), "all": (3, 4)},
    }
    assert [g for _, g, _ in table.rows] == ["commonsense", "commonsense", "hard"]


def test_usage_counts_cache_hits_apart(tmp_path: Path, make_run: Any, run_a_plans: Any) -> None:
    run = load_run(make_run(tmp_path / "a", run_a_plans))
    u = usage_row(run)
    n_iterations = 2 + 4 + 4 + 4 + 1 + 4
    assert u.usage.calls == 2 * n_iterations
    assert u.usage.cached_calls == 6  # the first iteration of each problem was a cache hit
    assert u.certified == 2
    assert u.usage.cost_usd == pytest.approx(0.01 * n_iterations)
    assert u.per(u.usage.cost_usd, u.certified) == pytest.approx(0.01 * n_iterations / 2)


def test_critic_firing_counts(tmp_path: Path, make_run: Any, run_a_plans: Any) -> None:
    run = load_run(make_run(tmp_path / "a", run_a_plans))
    f = firing_counts(run)
    assert f.active == [6, 5, 4, 4]
    # iteration 0: p0 x=1 odd, p1 odd, p2 no plan, p3 above max, p5 x=-1 negative and odd
    assert f.counts["format"] == [1, 1, 1, 1]
    assert f.counts["c_even"] == [3, 2, 1, 1]
    assert f.counts["c_nonneg"] == [1, 1, 1, 1]
    assert f.counts["h_max"] == [1, 1, 1, 1]


def test_critic_firing_counts_questions_and_declines_as_no_error(
    tmp_path: Path, make_run: Any, run_a_plans: Any
) -> None:
    """A turn that asked the user or declined (no plan, no verdict) was counted as an iteration that
    'errored before the critics ran': a run with a user in the loop whose 6 problems asked first and
    1 errored had its figure say 'errored iterations (not counted): 8'. They are neither errors nor
    critiqued plans."""
    path = make_run(tmp_path / "a", run_a_plans)
    lines = (path / "records.jsonl").read_text().splitlines()
    for i, act in ((2, "question"), (5, "abstain")):
        rec = json.loads(lines[i])
        rec["iterations"][0].update(act=act, plan=None, verdicts=[], gated=[], format_error=None)
        lines[i] = json.dumps(rec)
    (path / "records.jsonl").write_text("\n".join(lines) + "\n")
    f = firing_counts(load_run(path))
    assert f.errored == [0, 0, 0, 0]
    assert f.active == [4, 5, 4, 4]
    assert f.counts["format"] == [0, 1, 1, 1]  # p2's reply at iteration 0 was its question


def test_plan_at_budget_best_so_far(tmp_path: Path, make_run: Any, run_a_plans: Any) -> None:
    run = load_run(make_run(tmp_path / "a", run_a_plans))
    p3 = run.records["p3"]
    assert plan_at_budget(p3, 0) is None
    assert plan_at_budget(p3, 1) == {"x": 12}
    assert plan_at_budget(p3, 2) == {"x": 12}  # x=11 passes fewer critics
    # ties go to the earliest iteration: iterations 0, 2, 3 all pass 3 critics
    from modulo.reports.budget import best_iteration_at

    assert best_iteration_at(p3, 4) == 0
    assert plan_at_budget(run.records["p2"], 4) is None


def test_budget_curve_values_and_cache(tmp_path: Path, make_run: Any, run_a_plans: Any, toy_bench: Any) -> None:
    path = make_run(tmp_path / "a", run_a_plans)
    run = load_runs([path])[0]
    curve = budget_curve(run)
    assert curve.values == pytest.approx([1 / 6, 2 / 6, 2 / 6, 2 / 6])  # budgets 1..4
    assert curve.method == "pairs" and toy_bench.calls == 1
    assert (path / "report_cache" / "budget_curve.json").is_file()
    again = budget_curve(load_runs([path])[0])
    assert again.method == "cached" and again.values == curve.values and toy_bench.calls == 1


def test_pngs_exist_and_show_something(tmp_path: Path, make_run: Any, run_a_plans: Any, run_b_plans: Any) -> None:
    import matplotlib.image as mpimg

    make_run(tmp_path / "sweep" / "a", run_a_plans)
    make_run(tmp_path / "sweep" / "b", run_b_plans)
    result = build_report([tmp_path / "sweep"], FAST)
    for name in ("critic_firing.png", "budget_curve.png"):
        png = tmp_path / "sweep" / name
        assert png in result.files
        assert png.stat().st_size > 10_000
        pixels = mpimg.imread(png)
        assert pixels.shape[0] > 200 and pixels.shape[1] > 300
        assert float(np.std(pixels[..., :3])) > 0.05  # not a blank canvas
    curve = pd.read_csv(tmp_path / "sweep" / "budget_curve.csv")
    b = curve[curve["run"] == "b"].sort_values("budget")["value_pct"].tolist()
    # b: iteration 0 certifies p4; iteration 1 fixes p1 and p5; iteration 2 fixes p3
    assert b == pytest.approx([100 / 6, 300 / 6, 400 / 6, 400 / 6])  # budgets 1..4
    assert "![critic firing per iteration](critic_firing.png)" in result.markdown


def test_comparison_between_runs(tmp_path: Path, make_run: Any, run_a_plans: Any, run_b_plans: Any) -> None:
    from scipy import stats

    runs = load_runs([make_run(tmp_path / "a", run_a_plans), make_run(tmp_path / "b", run_b_plans)])
    comp = compare_runs(runs[0], runs[1], n_resamples=2_000)
    assert comp is not None
    t = comp.test
    assert (t.n, t.only_a, t.only_b) == (6, 1, 3)
    assert t.mcnemar_p == pytest.approx(stats.binomtest(1, 4, 0.5).pvalue) == pytest.approx(10 / 16)
    assert t.difference.value == pytest.approx(2 / 6)
    result = build_report(
        [tmp_path / "a", tmp_path / "b"], ReportOptions(out=tmp_path / "out", n_resamples=500, figures=False)
    )
    df = pd.read_csv(tmp_path / "out" / "comparisons.csv")
    assert list(df["a"]) == ["a"] and list(df["b"]) == ["b"]
    assert df.loc[0, "mcnemar_p"] == pytest.approx(0.625)
    assert "McNemar" in result.text


def test_compare_flag_uses_shared_problems(tmp_path: Path, make_run: Any, run_a_plans: Any, run_b_plans: Any) -> None:
    make_run(tmp_path / "a", run_a_plans)
    make_run(tmp_path / "b", {k: v for k, v in run_b_plans.items() if k != "p2"})
    # by default runs over different problem sets are not compared
    build_report([tmp_path], ReportOptions(out=tmp_path / "o1", n_resamples=200, budget_curves=False, figures=False))
    assert not (tmp_path / "o1" / "comparisons.csv").exists()
    build_report(
        [tmp_path],
        ReportOptions(out=tmp_path / "o2", compare=True, n_resamples=200, budget_curves=False, figures=False),
    )
    df = pd.read_csv(tmp_path / "o2" / "comparisons.csv")
    assert df.loc[0, "n"] == 5 and "5 problems" in df.loc[0, "note"]


def test_sweep_discovery_natural_order(tmp_path: Path, make_run: Any, run_a_plans: Any) -> None:
    root = tmp_path / "multirun" / "2024-05-01" / "12-00-00"
    for job in (0, 2, 10):
        make_run(root / str(job), run_a_plans, run_id=str(job))
    (root / "multirun.yaml").write_text("x: 1\n")
    found = find_runs([tmp_path / "multirun"])
    assert [p.name for p in found] == ["0", "2", "10"]
    (tmp_path / "other" / "deeper").mkdir(parents=True)
    with pytest.raises(RunError, match="no run directories"):
        find_runs([tmp_path / "other"])


def test_usage_per_problem_leaves_out_problems_never_started(tmp_path: Path, make_run: Any, run_a_plans: Any) -> None:
    """Problems recorded 'skipped' (run.max_dollars spent before they started) counted among the usage
    table's problems, so calls, tokens and dollars per problem were divided by problems that made no call."""
    path = make_run(tmp_path / "a", run_a_plans)
    for line in (1, 2):
        set_outcome(path, line, "skipped")
    u = usage_row(load_run(path))
    n_iterations = 2 + 4 + 1 + 4  # p0, p3, p4, p5
    assert u.n_problems == 4 and u.usage.calls == 2 * n_iterations
    build_report([path], ReportOptions(out=tmp_path / "out", n_resamples=100, budget_curves=False, figures=False))
    row = pd.read_csv(tmp_path / "out" / "usage.csv").iloc[0]
    assert row["problems"] == 4 and row["calls_per_problem"] == pytest.approx(2 * n_iterations / 4)


def test_killed_run_is_reevaluated(tmp_path: Path, make_run: Any, run_a_plans: Any) -> None:
    path = make_run(tmp_path / "k", run_a_plans, evaluate=False, truncate_last=True)
    run = load_run(path)
    assert sorted(run.records) == ["p0", "p1", "p2", "p3", "p4"]  # p5's line was cut in half
    assert any("truncated last line" in n for n in run.notes)
    ensure_evaluation(run)
    assert run.evaluation_status == "re-evaluated"
    (row,) = headline_rows([run], n_resamples=200)
    assert row.values["final_pass_rate"].value == pytest.approx(2 / 5)
    result = build_report([path], ReportOptions(n_resamples=200, figures=False))
    assert "killed (5/6), re-evaluated" in result.text
    assert "re-evaluated by the benchmark" in result.markdown


def test_killed_run_with_an_error_says_both(tmp_path: Path, make_run: Any, run_a_plans: Any) -> None:
    """A killed run that also had an errored problem reads as both: its status said only 'errors (1 of 6
    problems)', as if the other five had been scored, when only four of them had finished."""
    path = make_run(tmp_path / "k", run_a_plans, evaluate=False, truncate_last=True)
    set_outcome(path, 1, "error")
    result = build_report([path], ReportOptions(n_resamples=200, budget_curves=False, figures=False))
    status = "errors (1 of 6 problems); killed (5/6), re-evaluated"
    assert status in result.text and f"| {status} |" in result.markdown


def test_an_evaluation_the_records_outgrew_is_not_used(tmp_path: Path, make_run: Any, run_a_plans: Any) -> None:
    """A run resumed and killed before it wrote its end keeps the evaluation.json of its earlier process,
    which lacks the problems finished since: the report read it as the run's, 'complete' with n = 5 of 6
    and p4's pass left out of every rate. The finished problems are re-evaluated (or, re-evaluation off,
    the metrics left out), with a note."""
    path = make_run(tmp_path / "k", run_a_plans)
    evaluation = json.loads((path / "evaluation.json").read_text())
    evaluation["per_problem"] = [row for row in evaluation["per_problem"] if row["problem_id"] != "p4"]
    (path / "evaluation.json").write_text(json.dumps(evaluation))
    result = build_report([path], ReportOptions(n_resamples=200, budget_curves=False, figures=False))
    (row,) = pd.read_csv(result.out_dir / "table1.csv").to_dict("records")
    assert row["n"] == 6 and row["final_pass_rate_k"] == 2 and "killed (6/6), re-evaluated" in row["status"]
    assert "evaluation.json did not score 1 finished problem(s)" in result.text
    off = build_report(
        [path],
        ReportOptions(out=tmp_path / "off", n_resamples=200, reevaluate=False, budget_curves=False, figures=False),
    )
    assert "incomplete (6/6, not evaluated)" in off.text and "does not score 1 finished problem(s)" in off.text


def test_killed_run_reported_incomplete_without_reevaluation(tmp_path: Path, make_run: Any, run_a_plans: Any) -> None:
    path = make_run(tmp_path / "k", run_a_plans, evaluate=False, truncate_last=True)
    result = build_report([path], ReportOptions(n_resamples=200, reevaluate=False, budget_curves=False, figures=False))
    assert "incomplete (5/6, not evaluated)" in result.text
    df = pd.read_csv(path / "table1.csv")
    assert df["final_pass_rate"].isna().all()


def test_unknown_benchmark_is_reported_incomplete(tmp_path: Path, make_run: Any, run_a_plans: Any) -> None:
    path = make_run(tmp_path / "u", run_a_plans, evaluate=False)
    info = json.loads((path / "run.json").read_text())
    info["benchmark"]["name"] = "no_such_benchmark"
    (path / "run.json").write_text(json.dumps(info))
    result = build_report([path], ReportOptions(n_resamples=100, figures=False))
    assert "not evaluated" in result.text
    assert "no_such_benchmark" in result.markdown and "u: no budget curve" in result.markdown


def test_report_errors_are_clear(tmp_path: Path) -> None:
    nowhere = modulo("report", tmp_path / "nowhere")
    assert nowhere.exit_code == 2 and "no such file or directory" in nowhere.stderr
    (tmp_path / "empty").mkdir()
    empty = modulo("report", tmp_path / "empty")
    assert empty.exit_code == 2 and "no run directories found" in empty.stderr
    negative = modulo("report", tmp_path / "empty", "--resamples", "-1")
    assert negative.exit_code == 2 and "--resamples" in negative.stderr


def _tp_row(pid: str, level: str, cs: dict[str, Any] | None, hard: dict[str, Any] | None) -> dict[str, Any]:
    cs_vals = {k: (None if cs is None else cs.get(k, True)) for k in CS_KEYS}
    hard_vals = {k: (None if hard is None else hard.get(k)) for k in HARD_KEYS}
    cs_pass = cs is not None and all(v is not False for v in cs_vals.values())
    hard_pass = hard is not None and all(v is not False for v in hard_vals.values())
    return {
        "problem_id": pid,
        "passed": cs_pass and hard_pass,
        **cs_vals,
        **hard_vals,
        "delivered": cs is not None,
        "hard_evaluated": hard is not None,
        "commonsense_pass": cs_pass,
        "hard_pass": hard_pass,
        "level": level,
        "days": 3,
        "reasons": {},
    }


def test_travelplanner_shaped_evaluation(tmp_path: Path, make_run: Any, run_a_plans: Any) -> None:
    """Rows shaped like the TravelPlanner evaluator's: official keys, roll-up flags, a per_constraint table."""
    path = make_run(tmp_path / "tp", {k: run_a_plans[k] for k in ("p0", "p1", "p2", "p3")})
    rows = [
        _tp_row("p0", "easy", {}, {"valid_cost": True}),
        _tp_row("p1", "easy", {"is_not_absent": False}, None),  # hard gate closed
        _tp_row("p2", "medium", None, None),  # nothing delivered
        _tp_row("p3", "medium", {}, {"valid_cost": False, "valid_cuisine": True}),
    ]
    metrics = {
        "delivery_rate": 3 / 4,
        "commonsense_micro": 23 / 32,
        "commonsense_macro": 2 / 4,
        "hard_micro": 2 / 9,  # a denominator from the queries, not from the rows
        "hard_macro": 1 / 4,
        "final_pass_rate": 1 / 4,
    }
    per_constraint = [
        {"constraint": k, "name": k.replace("_", " ").title(), "group": "commonsense"} for k in CS_KEYS
    ] + [{"constraint": k, "name": k.title(), "group": "hard"} for k in HARD_KEYS]
    evaluation = {"metrics": metrics, "per_problem": rows, "tables": {"per_constraint": per_constraint}}
    (path / "evaluation.json").write_text(json.dumps(evaluation))
    run = load_run(path)
    (row,) = headline_rows([run], n_resamples=500)
    assert {k: iv.value for k, iv in row.values.items()} == pytest.approx(metrics)
    assert row.rules["delivery_rate"] == "per-problem 'delivered'"
    assert row.rules["commonsense_micro"] == "commonsense constraints passed / all 8, per problem"
    assert row.rules["commonsense_macro"] == "per-problem 'commonsense_pass'"
    assert row.rules["hard_macro"] == "per-problem 'hard_pass'"
    assert row.rules["final_pass_rate"] == "per-problem 'passed'"
    assert row.rules["hard_micro"].startswith("no interval")  # honest: not reproducible from the rows
    assert np.isnan(row.values["hard_micro"].low)
    table = constraint_rows(run)
    assert table is not None
    assert [name for name, _, _ in table.rows] == [*CS_KEYS, *HARD_KEYS]  # no roll-up flags among them
    cells = {name: cells for name, _, cells in table.rows}
    assert (cells["is_not_absent"]["easy"].passed, cells["is_not_absent"]["easy"].applicable) == (1, 2)
    assert (cells["valid_cost"]["medium"].passed, cells["valid_cost"]["medium"].applicable) == (0, 1)
    assert cells["valid_room_rule"]["all"].applicable == 0
    assert table.names["valid_cost"] == "Valid_Cost"


def test_runs_of_two_benchmarks_get_a_table_each(
    tmp_path: Path, make_run: Any, run_a_plans: Any, toy_bench: Any
) -> None:
    from modulo import components
    from modulo.benchmark import EvalResult, MetricSpec

    class Other(toy_bench):  # type: ignore[misc,valid-type]
        name = "toy_reports_other"
        metrics = (MetricSpec("solved", "Solved"), MetricSpec("mean_x", "Mean x", kind="value"))
        primary_metric = "solved"

        def evaluate(self, problems: Any, plans: Any) -> EvalResult:
            rows = [
                {"problem_id": p.id, "passed": plan is not None and plan["x"] == 2}
                for p, plan in zip(problems, plans, strict=True)
            ]
            xs = [plan["x"] for plan in plans if plan is not None]
            return EvalResult({"solved": sum(r["passed"] for r in rows) / len(rows), "mean_x": sum(xs) / len(xs)}, rows)

    components.benchmarks.register(Other.name, Other, replace=True)
    try:
        make_run(tmp_path / "one", run_a_plans)
        other = make_run(tmp_path / "two", run_a_plans, evaluate=False)
        info = json.loads((other / "run.json").read_text())
        info["benchmark"]["name"] = Other.name
        (other / "run.json").write_text(json.dumps(info))
        result = build_report([tmp_path], ReportOptions(n_resamples=200, figures=False))
    finally:
        components.benchmarks.unregister(Other.name)
    assert "## toy_reports (dev)" in result.markdown and "## toy_reports_other (dev)" in result.markdown
    df = pd.read_csv(tmp_path / "table1_toy_reports_other.csv")
    assert list(df["run"]) == ["two"]
    assert df.loc[0, "solved"] == pytest.approx(100 / 6)  # re-evaluated: only p0 ends with x=2
    assert df.loc[0, "mean_x"] == pytest.approx((2 + 3 + 12 + 4 - 2) / 5)
    assert "Mean x" in result.markdown and "Solved (%, k/n)" in result.markdown
    assert (tmp_path / "table1_toy_reports.csv").is_file()
    assert (tmp_path / "budget_curve_toy_reports_other.csv").is_file()


def test_a_run_with_no_finished_problem(tmp_path: Path, make_run: Any, run_a_plans: Any) -> None:
    path = make_run(tmp_path / "new", run_a_plans, evaluate=False)
    (path / "records.jsonl").write_text("")
    result = build_report([path], ReportOptions(n_resamples=100))
    assert "incomplete (0/6, not evaluated)" in result.text
    assert "no finished problem" in result.markdown
    assert not (path / "critic_firing.png").exists()


def test_first_vs_final_scores_only_the_first_plans_that_are_not_delivered(
    tmp_path: Path, make_run: Any, toy_bench: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Direct against LLM-Modulo: a problem whose first plan is its delivered plan keeps the run's
    evaluation of it (no second scoring); only the first plans of the others are scored, and the test
    equals the one computed by scoring every first plan."""
    from modulo.reports.load import ensure_evaluation, evaluate_plans, load_run
    from modulo.reports.stats import paired_test
    from modulo.reports.tables import first_vs_final, passed_vector

    same = {"p0": [{"x": 2}], "p1": [{"x": 3}, {"x": 3}], "p3": [{"x": 12}, {"x": 12}], "p4": [{"x": 4}]}
    run = load_run(make_run(tmp_path / "same", same), light=True)
    ensure_evaluation(run)
    toy_bench.calls = 0
    test = first_vs_final(run, n_resamples=200)
    assert toy_bench.calls == 0 and test is not None
    ids = run.scored_ids
    firsts = evaluate_plans(run.benchmark(), run.problems(ids), [plan_at_budget(run.records[i], 1) for i in ids])
    first = passed_vector(firsts.per_problem, ids)
    final = passed_vector(run.evaluation["per_problem"], ids)  # type: ignore[index]
    assert first is not None and final is not None
    assert test == paired_test(first, final, n_resamples=200)

    improved = {**same, "p1": [{"x": 3}, {"x": 4}], "p3": [{"x": 12}, {"x": 8}]}
    run = load_run(make_run(tmp_path / "improved", improved), light=True)
    ensure_evaluation(run)
    scored: list[list[str]] = []
    evaluate = type(run.benchmark()).evaluate

    def counted(self: Any, problems: Any, plans: Any) -> Any:
        scored.append([p.id for p in problems])
        return evaluate(self, problems, plans)

    monkeypatch.setattr(type(run.benchmark()), "evaluate", counted)
    test = first_vs_final(run, n_resamples=200)
    assert scored == [["p1", "p3"]]
    ids = run.scored_ids
    firsts = evaluate_plans(run.benchmark(), run.problems(ids), [plan_at_budget(run.records[i], 1) for i in ids])
    first = passed_vector(firsts.per_problem, ids)
    final = passed_vector(run.evaluation["per_problem"], ids)  # type: ignore[index]
    assert first is not None and final is not None and (first != final).any()
    assert repr(test) == repr(paired_test(first, final, n_resamples=200))  # NaN (the bootstrap p) reads the same
