"""A real run (``modulo run`` with a scripted model) read back by ``modulo report`` and ``modulo show``.

This checks the reader against the run writer itself, not against a hand-made directory.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from modulo import components
from modulo.critic import critic
from modulo.types import Problem, Verdict
from tests.reports.conftest import one_run, scripted_llm, toy_run_args

pytestmark = pytest.mark.slow  # the fast lane (-m 'not slow') leaves this module out


@critic("c_nonneg", group="commonsense", description="x is not negative")
def c_nonneg(problem: Problem, plan: Any) -> Verdict:
    return Verdict.ok() if plan["x"] >= 0 else Verdict.fail(f"x={plan['x']} is negative.")


@critic("c_even", group="commonsense", description="x is even")
def c_even(problem: Problem, plan: Any) -> Verdict:
    return Verdict.ok() if plan["x"] % 2 == 0 else Verdict.fail(f"x={plan['x']} is odd.")


@critic("h_max", group="hard", description="x is at most the problem's max")
def h_max(problem: Problem, plan: Any) -> Verdict:
    top = problem.constraints.get("max")
    if top is None:
        return Verdict.not_applicable()
    return Verdict.ok() if plan["x"] <= top else Verdict.fail(f"x={plan['x']} is above {top}.")


@pytest.fixture
def toy_critics(toy_bench: Any) -> Iterator[None]:
    for name, obj in (("c_nonneg", c_nonneg), ("c_even", c_even), ("h_max", h_max)):
        components.critics.register(name, obj, replace=True)
    yield
    for name in ("c_nonneg", "c_even", "h_max"):
        components.critics.unregister(name)


def test_report_and_show_on_a_real_run(tmp_path: Path, toy_critics: None, invoke: Any) -> None:
    run_dir = tmp_path / "run"
    code, out = invoke("run", *toy_run_args(scripted_llm(tmp_path), "critics=all", *one_run(run_dir, iterations=4)))
    assert code == 0, out
    assert (run_dir / "evaluation.json").is_file()

    code, out = invoke("report", str(run_dir), "--resamples", "1000")
    assert code == 0, out
    df = pd.read_csv(run_dir / "table1.csv")
    # final plans: p0 x=2 pass, p1 odd, p2 none, p3 x=8 pass, p4 pass, p5 x=-2 negative
    assert df.loc[0, "final_pass_rate"] == pytest.approx(50.0)
    assert df.loc[0, "delivery_rate"] == pytest.approx(500 / 6)
    assert df.loc[0, "critics"] == "[All]"
    curve = pd.read_csv(run_dir / "budget_curve.csv").sort_values("budget")
    assert curve["budget"].tolist() == [1, 2, 3, 4]  # budget k = at most k plans; k=0 (no plan) is not a point
    assert curve["value_pct"].tolist() == pytest.approx([100 / 6, 300 / 6, 300 / 6, 300 / 6])
    # cache off: every call is fresh, one per iteration; iterations used: p0 2, p1 3, p2 2, p3 2, p4 1,
    # p5 4 (p1 and p2 stop at a fixed point: at temperature 0 their next request would repeat one sent)
    assert curve["cached_calls_per_problem"].max() == 0
    assert curve["fresh_calls_per_problem"].tolist() == pytest.approx([6 / 6, 11 / 6, 13 / 6, 14 / 6])
    firing = pd.read_csv(run_dir / "critic_firing.csv")
    at0 = firing[firing["iteration"] == 0].set_index("critic")["fired"].to_dict()
    assert at0["c_even"] == 3 and at0["format"] == 1 and at0["h_max"] == 1
    assert (run_dir / "critic_firing.png").stat().st_size > 10_000
    md = (run_dir / "report.md").read_text()
    info = json.loads((run_dir / "run.json").read_text())
    for template in info["templates"].values():
        assert template in md  # template versions are printed next to the figures
    if info["git_revision"]:
        assert str(info["git_revision"])[:10] in md

    code, out = invoke("show", str(run_dir), "p3", "--plain")
    assert code == 0, out
    assert "outcome: certified after 2 iteration(s)" in out
    assert "flips since iteration 0: h_max: FAIL -> pass" in out
    assert "x=12 is above 10." in out.split("backprompt built from these verdicts (sent at iteration 1)")[1]
    assert '-  "x": 12\n+  "x": 8' in out


def test_a_run_whose_model_never_answers_looks_failed(tmp_path: Path, toy_critics: None, invoke: Any) -> None:
    """Every problem errors (nothing listens on the port): summary, report and figures say so, and no
    errored iteration is counted as a critic rejection or a plan failure."""
    run_dir = tmp_path / "run"
    nothing_listens = [
        "llm=openai",
        "llm.model=nothing-listens",
        "llm.base_url=http://127.0.0.1:9/v1",
        "llm.max_retries=0",
        "llm.timeout_s=2",
    ]
    code, out = invoke("run", *toy_run_args(nothing_listens, "critics=all", *one_run(run_dir, iterations=3)))
    assert code == 1, out  # errored problems: a non-zero exit
    summary = json.loads((run_dir / "summary.json").read_text())
    assert list(summary)[:2] == ["status", "errors"]  # at the top
    assert summary["status"] == "errors"
    assert summary["errors"]["count"] == 6 and summary["evaluated"] == 0
    assert summary["errors"]["class"] and summary["errors"]["message"]
    evaluation = json.loads((run_dir / "evaluation.json").read_text())
    assert evaluation["per_problem"] == []  # an errored problem is not scored as a failed plan
    assert len(evaluation["excluded"]["problem_ids"]) == 6
    assert "problems ended in error" in out and summary["errors"]["class"] in out

    md = (run_dir / "report.md").read_text()
    head = md.split("\n## ")[0]
    assert "**Status: errors.**" in head and "6 of 6 problems ended in error" in head
    assert summary["errors"]["class"] in head
    assert "errors (6 of 6 problems)" in md and "| complete |" not in md
    firing = pd.read_csv(run_dir / "critic_firing.csv")
    assert firing["fired"].sum() == 0  # no plan was ever produced, so no critic rejected one
    code, out = invoke("show", str(run_dir), "p0", "--plain")
    assert code == 0, out
    assert "no plan: the iteration errored before the critics ran" in out and "format=FAIL" not in out
