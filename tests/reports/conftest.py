"""A tiny in-process benchmark and a writer of synthetic run directories for the report tests.

The toy benchmark: a problem asks for an integer ``x``; its plan is ``{"x": int}``. Critics:
``format`` (a plan with an int ``x``), commonsense ``c_nonneg`` (x >= 0) and ``c_even`` (x even), and
hard ``h_max`` (x <= the problem's ``max``; applicable only when the problem sets one). Its evaluator
follows TravelPlanner's shape: delivery rate, commonsense micro/macro, hard micro/macro, final pass.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from modulo import components
from modulo.benchmark import Benchmark, EvalResult
from modulo.testing.toys import group_metrics
from modulo.types import (
    IterationRecord,
    Message,
    Outcome,
    PlanJSON,
    Problem,
    ProblemResult,
    Usage,
    Verdict,
    plan_fingerprint,
)

TOY = "toy_reports"
LEVELS = ["easy", "easy", "medium", "medium", "hard", "hard"]
#: problem i: max for the hard constraint (None: not asked for)
MAXES: list[int | None] = [None, 10, None, 10, 5, 5]


def toy_problems() -> list[Problem]:
    return [
        Problem(
            id=f"p{i}",
            benchmark=TOY,
            query=f"pick x (problem {i})",
            constraints={"max": MAXES[i]},
            metadata={"level": LEVELS[i]},
        )
        for i in range(6)
    ]


def toy_verdicts(problem: Problem, plan: PlanJSON) -> tuple[list[Verdict], list[str]]:
    """Verdicts of the toy critics (format gates the rest)."""
    fmt_ok = isinstance(plan, dict) and isinstance(plan.get("x"), int)
    if not fmt_ok:
        return [Verdict(critic="format", group="format", passed=False, feedback="no integer x")], [
            "c_nonneg",
            "c_even",
            "h_max",
        ]
    x = plan["x"]
    out = [Verdict(critic="format", group="format", passed=True)]
    out.append(Verdict(critic="c_nonneg", group="commonsense", passed=x >= 0, feedback="" if x >= 0 else f"x={x} < 0"))
    out.append(
        Verdict(critic="c_even", group="commonsense", passed=x % 2 == 0, feedback="" if x % 2 == 0 else f"x={x} is odd")
    )
    m = problem.constraints.get("max")
    if m is None:
        out.append(Verdict(critic="h_max", group="hard", passed=True, applicable=False))
    else:
        out.append(
            Verdict(critic="h_max", group="hard", passed=x <= m, feedback="" if x <= m else f"x={x} is above {m}")
        )
    return out, []


class ToyBench(Benchmark):
    name = TOY
    metrics = group_metrics()
    primary_metric = "final_pass_rate"
    #: how many times evaluate() ran (to check the budget-curve cache)
    calls = 0

    def splits(self) -> list[str]:
        return ["dev"]

    def load(self, split: str) -> list[Problem]:
        return toy_problems()

    def critic_names(self) -> list[str]:
        return ["format", "c_nonneg", "c_even", "h_max"]

    def evaluate(self, problems: Sequence[Problem], plans: Sequence[PlanJSON | None]) -> EvalResult:
        type(self).calls += 1
        rows: list[dict[str, Any]] = []
        for problem, plan in zip(problems, plans, strict=True):
            delivered = plan is not None
            verdicts, _ = toy_verdicts(problem, plan) if delivered else ([], [])
            state = {v.critic: (v.passed if v.applicable else None) for v in verdicts}
            row: dict[str, Any] = {"problem_id": problem.id, "level": problem.metadata["level"], "delivered": delivered}
            for c in ("c_nonneg", "c_even"):
                row[c] = bool(state.get(c, False))
            row["h_max"] = None if problem.constraints.get("max") is None else bool(state.get("h_max", False))
            row["passed"] = delivered and row["c_nonneg"] and row["c_even"] and row["h_max"] is not False
            rows.append(row)
        n = len(rows)
        hard_vals = [r["h_max"] for r in rows if r["h_max"] is not None]
        metrics = {
            "delivery_rate": sum(r["delivered"] for r in rows) / n,
            "commonsense_micro": sum(r["c_nonneg"] + r["c_even"] for r in rows) / (2 * n),
            "commonsense_macro": sum(r["c_nonneg"] and r["c_even"] for r in rows) / n,
            "hard_micro": sum(hard_vals) / len(hard_vals) if hard_vals else 0.0,
            "hard_macro": sum(r["delivered"] and r["h_max"] is not False for r in rows) / n,
            "final_pass_rate": sum(r["passed"] for r in rows) / n,
        }
        return EvalResult(metrics=metrics, per_problem=rows, tables={})


@pytest.fixture
def toy_bench() -> Iterator[type[ToyBench]]:
    components.benchmarks.register(TOY, ToyBench, replace=True)
    ToyBench.calls = 0
    yield ToyBench
    components.benchmarks.unregister(TOY)


def _iterations(problem: Problem, plans: Sequence[PlanJSON]) -> tuple[list[IterationRecord], int | None, bool]:
    its: list[IterationRecord] = []
    best: int | None = None
    best_count = -1
    certified = False
    seen: dict[str, int] = {}
    for i, plan in enumerate(plans):
        verdicts, gated = toy_verdicts(problem, plan)
        failing = [v for v in verdicts if not v.accepts]
        fp = None if plan is None else plan_fingerprint(plan)
        it = IterationRecord(
            index=i,
            prompt=[Message(role="user", content=f"solve {problem.id} (attempt {i})")],
            raw_reply=json.dumps(plan),
            plan=plan,
            plan_sha256=fp,
            format_error=None if plan is not None else "no JSON found",
            verdicts=verdicts,
            gated=gated,
            repeat_of=seen.get(fp) if fp else None,
            backprompt=("Your plan has problems:\n" + "\n".join(f"- {v.feedback}" for v in failing))
            if failing
            else None,
            usage=Usage(
                calls=2,
                cached_calls=1 if i == 0 else 0,
                input_tokens=100,
                output_tokens=20,
                cost_usd=0.01,
                cached_cost_usd=0.01 if i == 0 else 0.0,
            ),
        )
        if fp:
            seen.setdefault(fp, i)
        its.append(it)
        if plan is not None and it.passed_count >= best_count:
            best, best_count = i, it.passed_count
        if it.all_accept:
            certified = True
            break
    return its, best, certified


RunWriter = Callable[..., Path]


def set_outcome(run: Path, line: int, outcome: str) -> dict[str, Any]:
    """Rewrite the record on ``line`` of ``run``'s records.jsonl as a run writes a problem that ended in
    ``error`` (its model call failed for good) or was ``skipped`` (never started: no iteration, no usage);
    the other lines, a torn last one included, stay as they are. Returns the new record."""
    path = run / "records.jsonl"
    lines = path.read_text().split("\n")
    rec = json.loads(lines[line])
    if outcome == "error":
        rec.update(outcome="error", stop_reason="llm_error", error="PermanentLLMError: bad request")
    else:
        rec.update(outcome=outcome, stop_reason="run_budget", iterations=[], best_plan=None, best_iteration=None)
        rec["usage"] = {}
    lines[line] = json.dumps(rec)
    path.write_text("\n".join(lines))
    return rec


@pytest.fixture
def make_run(toy_bench: type[ToyBench]) -> RunWriter:
    """Write a run directory: ``plans`` maps problem id -> the plan proposed at each iteration."""

    def write(
        path: Path,
        plans: dict[str, list[PlanJSON]],
        *,
        critics: Sequence[str] = ("format", "c_nonneg", "c_even", "h_max"),
        model: str = "toy-model",
        max_iterations: int = 4,
        evaluate: bool = True,
        truncate_last: bool = False,
        run_id: str | None = None,
        method: str | None = None,
        info_extra: dict[str, Any] | None = None,
    ) -> Path:
        path.mkdir(parents=True, exist_ok=True)
        problems = {p.id: p for p in toy_problems()}
        ids = list(plans)
        info = {
            "format": 1,
            "run_id": run_id or path.name,
            "created": "2024-05-01T12:00:00Z",
            "modulo_version": "0.1.0",
            "git_revision": "0123456789abcdef",
            "benchmark": {"name": TOY, "split": "dev", "args": {}, "data_dir": None},
            "generator": {"name": "llm", "args": {}, "prompt_role": "direct"},
            "reformulator": "llm",
            "llm": {"name": "scripted", "model": model, "temperature": 0.0},
            "critics": list(critics),
            "critic_options": {"mode": "strict", "hints": False},
            "critic_source": "reimplemented",
            "backprompt": {"name": "all", "args": {}},
            "budget": {"max_iterations": max_iterations, "max_tokens": None, "max_dollars": None, "max_seconds": None},
            "labels": {"method": method} if method else {},
            "templates": {"direct": "toy/direct@1#abc123"},
            "problem_ids": ids,
            **(info_extra or {}),
        }
        (path / "run.json").write_text(json.dumps(info, indent=1))
        lines: list[str] = []
        results: list[ProblemResult] = []
        for pid in ids:
            its, best, certified = _iterations(problems[pid], plans[pid])
            usage = Usage()
            for it in its:
                usage = usage + it.usage
            outcome = Outcome.CERTIFIED if certified else (Outcome.EXHAUSTED if best is not None else Outcome.FAILED)
            res = ProblemResult(
                problem_id=pid,
                benchmark=TOY,
                outcome=outcome,
                stop_reason="all_passed" if certified else "iterations",
                best_plan=None if best is None else its[best].plan,
                best_iteration=best,
                iterations=its,
                usage=usage,
                metadata={"level": problems[pid].metadata["level"]},
            )
            results.append(res)
            lines.append(res.model_dump_json())
        text = "\n".join(lines) + "\n"
        if truncate_last:
            text = text.rstrip("\n")
            text = text[: len(text) - len(lines[-1]) // 2]
        (path / "records.jsonl").write_text(text)
        if evaluate:
            bench = ToyBench()
            ev = bench.evaluate([problems[r.problem_id] for r in results], [r.best_plan for r in results])
            (path / "evaluation.json").write_text(
                json.dumps({"metrics": ev.metrics, "per_problem": ev.per_problem, "tables": ev.tables})
            )
            (path / "summary.json").write_text(json.dumps({"counts": {}, "n_problems": len(ids)}))
            ToyBench.calls = 0
        return path

    return write


# Plans used by several tests. Per problem (max): p0 (None) p1 (10) p2 (None) p3 (10) p4 (5) p5 (5).
# Final plans of RUN_A: p0 x=2 pass; p1 x=3 odd; p2 -> no plan; p3 x=12 hard fail; p4 x=4 pass; p5 x=-2 neg.
RUN_A: dict[str, list[PlanJSON]] = {
    "p0": [{"x": 1}, {"x": 2}],  # certified at iteration 1
    "p1": [{"x": 3}, {"x": 3}, {"x": 3}, {"x": 3}],  # stuck, odd
    "p2": [None, None, None, None],  # never a plan
    "p3": [{"x": 12}, {"x": 11}, {"x": 12}, {"x": 12}],  # even but above max: best = last even one
    "p4": [{"x": 4}],  # certified at once
    "p5": [{"x": -1}, {"x": -2}, {"x": -2}, {"x": -2}],  # negative
}
# RUN_B: same problems, better on p1, p3, p5 and worse on p0.
RUN_B: dict[str, list[PlanJSON]] = {
    "p0": [{"x": 1}, {"x": 1}, {"x": 1}, {"x": 1}],
    "p1": [{"x": 3}, {"x": 4}],
    "p2": [None, None, None, None],
    "p3": [{"x": 12}, {"x": 11}, {"x": 8}],
    "p4": [{"x": 4}],
    "p5": [{"x": -1}, {"x": 0}],
}


#: the scripted model's replies in the end-to-end runs (final plans: p0 x=2 pass, p1 odd, p2 none,
#: p3 x=8 pass, p4 pass, p5 x=-2 negative)
SCRIPT = {
    "p0": ['{"x": 1}', '{"x": 2}'],  # fixed at iteration 1
    "p1": ['{"x": 3}'] * 4,  # odd forever
    "p2": ["no plan here"] * 4,  # never a plan
    "p3": ['{"x": 12}', '{"x": 8}'],  # above max, then fixed
    "p4": ['{"x": 4}'],  # right at once
    "p5": ['{"x": -1}', '{"x": -2}', '{"x": -2}', '{"x": -2}'],  # negative forever
}


def scripted_llm(tmp_path: Path) -> list[str]:
    """The llm overrides of a scripted model that replies :data:`SCRIPT` (written under ``tmp_path``)."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    return ["llm=scripted", f"llm.script={script}"]


def toy_run_args(llm: Sequence[str], *more: str) -> list[str]:
    """``modulo run`` overrides on the toy benchmark with the ``llm`` overrides given, then ``more`` (no
    reformulator, no response cache, no progress bar)."""
    toy = ["benchmark=custom", f"benchmark.name={TOY}", "benchmark.split=dev"]
    return [*toy, *llm, "reformulator=none", "cache.mode=off", "run.progress=false", *more]


def one_run(run_dir: Path, *, iterations: int) -> list[str]:
    """Overrides of a single run into ``run_dir`` with at most ``iterations`` per problem."""
    return [f"metacontroller.max_iterations={iterations}", f"run.dir={run_dir}", f"hydra.run.dir={run_dir}"]


@pytest.fixture
def run_a_plans() -> dict[str, list[PlanJSON]]:
    return RUN_A


@pytest.fixture
def run_b_plans() -> dict[str, list[PlanJSON]]:
    return RUN_B


@pytest.fixture
def invoke() -> Callable[..., tuple[int, str]]:
    """Run the ``modulo`` command line in-process: (exit code, output)."""

    from tests.cli_support import invoke as invoke_cli

    return invoke_cli
