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
    code, out, err = run_main(
        capsys,
        "run",
        "benchmark=synth/calendar_small",
        "benchmark.n=6",
        "benchmark.unsolvable_fraction=0.5",
        "metacontroller.check_unsolvable=false",
        "user.abstain=true",
        "llm=scripted",
        f"llm.script={ROOT / 'experiments' / 'scripts' / 'abstain_all.json'}",
        "reformulator=parser",
        f"run.dir={run_dir}",
        "run.report=false",
    )
    assert code == 0, out + err
    records = [json.loads(line) for line in (run_dir / "records.jsonl").read_text(encoding="utf-8").splitlines()]
    assert all(r["outcome"] == "abstained" and r["abstention"]["verified"] is False for r in records)
    metrics = _summary(run_dir)
    assert metrics["success"] == 0.0 and metrics["abstention_recall"] == 1.0
    assert metrics["wrongful_abstention"] == 1.0 and metrics["delivery"] == 0.0
    (run_dir / "evaluation.json").unlink()
    run = load_run(run_dir, light=True)
    ensure_evaluation(run)
    assert run.evaluation is not None
    assert {k: run.evaluation["metrics"][k] for k in metrics} == metrics
