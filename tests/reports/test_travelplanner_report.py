"""The report on a run over real TravelPlanner problems, scored by the real TravelPlanner evaluator.

The run is synthetic (no LLM): for each of nine train queries, iteration 0 proposes a mutated plan from
the golden corpus (which the official checks reject) and, for six of them, iteration 1 proposes the
annotated plan (which passes).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from modulo import components, settings
from modulo.errors import ModuloError
from modulo.reports import (
    budget_curve,
    constraint_rows,
    critics_label,
    ensure_evaluation,
    headline_rows,
    load_run,
    load_runs,
)
from modulo.types import IterationRecord, Outcome, ProblemResult, Verdict

GOLDEN = "travelplanner/golden/plans.jsonl"
QUERIES = [1, 2, 3, 16, 17, 18, 31, 32, 33]  # three per level
FIXED = {1, 2, 16, 17, 31, 32}  # iteration 1 proposes the annotated plan


@pytest.fixture(scope="module")
def tp() -> Any:
    data = settings.data_dir()
    if not (data / GOLDEN).is_file():
        pytest.skip(f"TravelPlanner data not found under {data} (set MODULO_DATA_DIR)")
    try:
        bench = components.benchmarks.get("travelplanner")()
        problems = {p.metadata["idx"]: p for p in bench.load("train")}
    except ModuloError as exc:
        pytest.skip(f"travelplanner benchmark unavailable: {exc}")
    golden = [json.loads(line) for line in (data / GOLDEN).open()]
    annotated = {int(g["query_idx"]): g["plan"] for g in golden if g["source"] == "train_annotated_plan"}
    mutated: dict[int, Any] = {}  # per query, the first mutated plan that the official checks reject
    for g in golden:
        idx = int(g["query_idx"])
        if idx in QUERIES and idx not in mutated and g["split"] == "train" and g["source"] == "mutation":
            if (
                str(g["query_mutated"]) == "False"
                and not bench.evaluate([problems[idx]], [g["plan"]]).per_problem[0]["passed"]
            ):
                mutated[idx] = g["plan"]
    assert set(mutated) == set(QUERIES)
    return bench, problems, annotated, mutated


def _write_run(path: Path, tp: Any, critics: list[str], *, evaluate: bool = True) -> list[Any]:
    bench, problems, annotated, mutated = tp
    path.mkdir(parents=True)
    ids = [problems[i].id for i in QUERIES]
    info = {
        "format": 1,
        "run_id": path.name,
        "created": "2024-05-01T12:00:00Z",
        "git_revision": None,
        "benchmark": {"name": "travelplanner", "split": "train", "args": {}, "data_dir": None},
        "generator": {"name": "llm", "args": {}, "prompt_role": "direct"},
        "reformulator": "parser",
        "llm": {"name": "scripted", "model": "scripted"},
        "critics": critics,
        "critic_source": "oracle",
        "backprompt": {"name": "all", "args": {}},
        "budget": {"max_iterations": 3},
        "labels": {},
        "templates": {},
        "problem_ids": ids,
    }
    (path / "run.json").write_text(json.dumps(info))
    finals = []
    with (path / "records.jsonl").open("w") as out:
        for i in QUERIES:
            bad = [
                Verdict(critic="format", group="format", passed=True),
                Verdict(critic="budget", group="hard", passed=False, feedback="over"),
            ]
            good = [
                Verdict(critic="format", group="format", passed=True),
                Verdict(critic="budget", group="hard", passed=True),
            ]
            its = [IterationRecord(index=0, plan=mutated[i], verdicts=bad, backprompt="fix it")]
            if i in FIXED:
                its.append(IterationRecord(index=1, plan=annotated[i], verdicts=good))
            final = its[-1].plan
            finals.append(final)
            rec = ProblemResult(
                problem_id=problems[i].id,
                benchmark="travelplanner",
                outcome=Outcome.CERTIFIED if i in FIXED else Outcome.EXHAUSTED,
                stop_reason="all_passed" if i in FIXED else "iterations",
                best_plan=final,
                best_iteration=len(its) - 1,
                iterations=its,
            )
            out.write(rec.model_dump_json() + "\n")
    if evaluate:
        ev = bench.evaluate([problems[i] for i in QUERIES], finals)
        (path / "evaluation.json").write_text(
            json.dumps({"metrics": ev.metrics, "per_problem": ev.per_problem, "tables": ev.tables}, default=str)
        )
    return finals


def test_travelplanner_table1_table4_and_budget_curve(tmp_path: Path, tp: Any) -> None:
    bench, problems, _, _ = tp
    finals = _write_run(tmp_path / "run", tp, bench.critic_names())
    run = load_runs([tmp_path / "run"])[0]
    assert critics_label(run) == "[All]"
    (row,) = headline_rows([run], n_resamples=1_000)
    expected = bench.evaluate([problems[i] for i in QUERIES], finals).metrics
    assert expected["final_pass_rate"] == pytest.approx(6 / 9)  # the six annotated plans pass
    assert {k: iv.value for k, iv in row.values.items()} == pytest.approx(expected)
    for key in ("delivery_rate", "commonsense_micro", "commonsense_macro", "hard_macro", "final_pass_rate"):
        assert not row.rules[key].startswith("no interval"), (key, row.rules[key])
        assert row.values[key].low <= row.values[key].value <= row.values[key].high
    table = constraint_rows(run)
    assert table is not None and table.levels == ["easy", "medium", "hard"]
    names = [name for name, _, _ in table.rows]
    assert names[0] == "is_reasonable_visiting_city" and "valid_cost" in names and "hard_pass" not in names
    assert table.names["is_valid_information_in_sandbox"] == "Within Sandbox"
    curve = budget_curve(run, use_cache=False)
    assert curve.values == pytest.approx([0.0, 6 / 9, 6 / 9])  # budgets 1..3


def test_travelplanner_killed_run_reevaluated_and_common_label(tmp_path: Path, tp: Any) -> None:
    bench, problems, _, _ = tp
    common = ["format", *[c for c in bench.critic_names() if _group(c) == "commonsense"]]
    finals = _write_run(tmp_path / "killed", tp, common, evaluate=False)
    run = load_run(tmp_path / "killed")
    assert critics_label(run) == "[Common]"
    ensure_evaluation(run)
    assert run.evaluation_status == "re-evaluated"
    expected = bench.evaluate([problems[i] for i in QUERIES], finals).metrics
    assert run.evaluation is not None and run.evaluation["metrics"] == pytest.approx(expected)


def _group(name: str) -> str:
    from modulo.critic import critic_meta

    return str(critic_meta(components.critics.get(name))["group"])
