"""A synthesized problem's headline scores tell a planner's decline from a problem with no plan read: only a
decline is an abstention, and it counts as a success on an unsolvable problem only when the benchmark did
not refute its reason (Z3's minimal unsat core). The report's re-evaluation scores them as the run did."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modulo.reports.load import ensure_evaluation, load_run
from tests.cli_support import run_main

ROOT = Path(__file__).resolve().parents[2]


def _summary(run_dir: Path) -> dict[str, float]:
    metrics: dict[str, float] = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))["metrics"]
    return metrics


def _abstain_all(capsys: pytest.CaptureFixture[str], run_dir: Path, *extra: str) -> list[dict[str, object]]:
    """The README's abstain_all run (6 calendar problems, half unsolvable, every turn declined) into
    ``run_dir``, with ``extra`` overrides; its records."""
    code, out, err = run_main(
        capsys,
        "run",
        "benchmark=synth/calendar_small",
        "benchmark.n=6",
        "benchmark.unsolvable_fraction=0.5",
        *extra,
        "llm=scripted",
        f"llm.script={ROOT / 'experiments' / 'scripts' / 'abstain_all.json'}",
        "reformulator=parser",
        f"run.dir={run_dir}",
        "run.report=false",
    )
    assert code == 0, out + err
    lines = (run_dir / "records.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def test_a_planner_whose_answers_cannot_be_read_scores_nothing_on_unsolvable_problems(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The scripted model's stand-in replies read as no plan on every turn (outcome failed): not a decline, so
    neither a success nor an abstention (it scored success 100 % and abstention recall 100 % before)."""
    run_dir = tmp_path / "unread"
    code, out, err = run_main(
        capsys,
        "run",
        "benchmark=synth/calendar",
        "benchmark.n=4",
        "benchmark.unsolvable_fraction=1.0",
        "metacontroller.check_unsolvable=false",
        "metacontroller.max_iterations=2",
        "llm=scripted",
        f"run.dir={run_dir}",
        "run.report=false",
    )
    assert code == 0, out + err
    metrics = _summary(run_dir)
    assert metrics["success"] == 0.0 and metrics["abstention_recall"] == 0.0 and metrics["delivery"] == 0.0


def test_declines_with_refuted_reasons_are_abstentions_but_not_successes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """README's abstain_all command: every problem declined at once, every reason refuted by the benchmark's
    check. Recall 100 % (5/5 unsolvable declined), false abstention 100 % (1/1), success 0; a report that
    scores the run again (no evaluation.json) gives the same figures, and Direct equals the final plans."""
    run_dir = tmp_path / "declined"
    records = _abstain_all(capsys, run_dir, "metacontroller.check_unsolvable=false", "user.abstain=true")
    assert all(r["outcome"] == "abstained" and r["abstention"]["verified"] is False for r in records)
    metrics = _summary(run_dir)
    assert metrics["success"] == 0.0 and metrics["abstention_recall"] == 1.0
    assert metrics["wrongful_abstention"] == 1.0 and metrics["delivery"] == 0.0
    from modulo.reports import budget_curve

    run = load_run(run_dir, light=True)
    ensure_evaluation(run)
    values = budget_curve(run, use_cache=False).values  # budgets 1 to the run's 10: a decline at the first turn
    assert values and all(v == 0.0 for v in values)
    (run_dir / "evaluation.json").unlink()
    run = load_run(run_dir, light=True)
    ensure_evaluation(run)
    assert run.evaluation is not None
    assert {k: run.evaluation["metrics"][k] for k in metrics} == metrics


def test_declines_with_confirmed_reasons_are_successes_in_the_run_the_report_and_the_budget_curve(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The benchmark's oracle script: Z3's plan on the solvable problem, a decline naming the unsat core on the
    unsolvable ones (at the first turn). Success 100 % in the run; the report's re-evaluation, its budget
    curve (every budget) and Direct (the first turns) score the declines as the run did."""
    from modulo.reports import budget_curve
    from modulo.reports.tables import first_vs_final

    problems, script, run_dir = tmp_path / "p.jsonl", tmp_path / "s.json", tmp_path / "run"
    synth = ["synth", "calendar", "--n", "6", "--unsolvable-fraction", "0.5", "--out", str(problems)]
    assert run_main(capsys, *synth)[0] == 0
    bench = ["bench", "synth/calendar", "oracle-script", "--problems", str(problems), "--out", str(script)]
    assert run_main(capsys, *bench)[0] == 0
    code, out, err = run_main(
        capsys,
        "run",
        "benchmark=synth/calendar",
        f"benchmark.path={problems}",
        "metacontroller.check_unsolvable=false",
        "user.abstain=true",
        "llm=scripted",
        f"llm.script={script}",
        "reformulator=parser",
        f"run.dir={run_dir}",
        "run.report=false",
    )
    assert code == 0, out + err
    metrics = _summary(run_dir)
    assert metrics["success"] == 1.0 and metrics["abstention_recall"] == 1.0 and metrics["delivery"] < 1.0
    run = load_run(run_dir, light=True)
    ensure_evaluation(run)
    curve = budget_curve(run, use_cache=False)
    assert curve.values and all(v == 1.0 for v in curve.values)
    test = first_vs_final(run, n_resamples=100)
    assert test is not None and test.rate_a == 1.0 and test.rate_b == 1.0
    (run_dir / "evaluation.json").unlink()
    again = load_run(run_dir, light=True)
    ensure_evaluation(again)
    assert again.evaluation is not None and again.evaluation["metrics"]["success"] == 1.0


def test_problems_the_benchmark_proves_unsolvable_are_declines_in_every_score(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """With metacontroller.check_unsolvable on (the default), the loop proves the unsolvable problems so before
    any model call (outcome unsolvable). The headline scored each of them as no plan (abstention recall 0/5,
    success 0/6) while the same report's abstention table, which counts the proof as a decline, said recall
    5/5. Now the run, the report's re-evaluation, the budget curve and Direct all count the proof as a
    verified decline, and the headline recall equals the abstention table's."""
    from modulo.reports import budget_curve
    from modulo.reports.dialogue import abstention_row
    from modulo.reports.tables import first_vs_final

    run_dir = tmp_path / "proved"
    records = _abstain_all(capsys, run_dir)
    outcomes = sorted(str(r["outcome"]) for r in records)
    assert outcomes == ["abstained"] + ["unsolvable"] * 5  # the solvable control declined by the planner
    metrics = _summary(run_dir)
    assert metrics["abstention_recall"] == 1.0 and metrics["wrongful_abstention"] == 1.0
    assert metrics["success"] == pytest.approx(5 / 6)
    run = load_run(run_dir, light=True)
    ensure_evaluation(run)
    table = abstention_row(run, n_resamples=100, seed=0)
    assert table is not None and table.proofs == 5 and table.recall.value == metrics["abstention_recall"]
    curve = budget_curve(run, use_cache=False)
    assert curve.values and all(v == pytest.approx(5 / 6) for v in curve.values)
    test = first_vs_final(run, n_resamples=100)
    assert test is not None and test.rate_a == test.rate_b == pytest.approx(5 / 6)
    (run_dir / "evaluation.json").unlink()
    again = load_run(run_dir, light=True)
    ensure_evaluation(again)
    assert again.evaluation is not None
    assert {k: again.evaluation["metrics"][k] for k in metrics} == metrics
