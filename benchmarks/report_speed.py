"""Speed of ``modulo report``: bootstrap intervals, paired tests, and a whole report over a sweep.

Figures printed:
* one 95% bootstrap interval (10,000 resamples) of a macro rate and of a micro ratio, n = 180 and 1,000;
* one paired test (McNemar + paired bootstrap, 10,000 resamples), n = 1,000;
* a full report over a synthetic sweep (``--runs`` runs x ``--problems`` problems x up to ``--budget``
  iterations, an in-process benchmark whose evaluator is trivial, so this times the report itself),
  first with the budget curves evaluated, then again with them read from the per-run cache.

    python benchmarks/report_speed.py [--runs 8] [--problems 180] [--budget 10]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from modulo import components
from modulo.benchmark import Benchmark, EvalResult
from modulo.reports import ReportOptions, bootstrap_ratio, build_report, paired_test
from modulo.testing.toys import group_metrics
from modulo.types import IterationRecord, Outcome, PlanJSON, Problem, ProblemResult, Usage, Verdict

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import record_format_option, write_record

NAME = "report_speed_toy"
CRITICS = [("c1", "commonsense"), ("c2", "commonsense"), ("c3", "commonsense"), ("h1", "hard"), ("h2", "hard")]
GROUPS = ("commonsense", "hard")


class SpeedToy(Benchmark):
    """A plan is {"ok": [bool per critic]}; the evaluator reads it back."""

    name = NAME
    metrics = group_metrics(GROUPS)
    primary_metric = "final_pass_rate"

    def __init__(self, data_dir: Path | None = None, *, n: int = 180) -> None:
        super().__init__(data_dir)
        self.n = n

    def splits(self) -> list[str]:
        return ["dev"]

    def load(self, split: str) -> list[Problem]:
        levels = ("easy", "medium", "hard")
        return [Problem(id=f"q{i}", benchmark=NAME, query="", metadata={"level": levels[i % 3]}) for i in range(self.n)]

    def critic_names(self) -> list[str]:
        return ["format", *[c for c, _ in CRITICS]]

    def evaluate(self, problems: Sequence[Problem], plans: Sequence[PlanJSON | None]) -> EvalResult:
        rows: list[dict[str, Any]] = []
        for p, plan in zip(problems, plans, strict=True):
            ok = plan["ok"] if plan is not None else [False] * len(CRITICS)
            row: dict[str, Any] = {"problem_id": p.id, "level": p.metadata["level"], "delivered": plan is not None}
            row.update({c: bool(v) for (c, _), v in zip(CRITICS, ok, strict=True)})
            row["passed"] = plan is not None and all(ok)
            rows.append(row)
        n = len(rows) or 1
        metrics = {"delivery_rate": sum(r["delivered"] for r in rows) / n}
        for g in GROUPS:
            names = [c for c, group in CRITICS if group == g]
            metrics[f"{g}_micro"] = sum(r[c] for r in rows for c in names) / (len(names) * n)
            metrics[f"{g}_macro"] = sum(all(r[c] for c in names) for r in rows) / n
        metrics["final_pass_rate"] = sum(r["passed"] for r in rows) / n
        return EvalResult(metrics, rows)


def write_run(path: Path, n: int, budget: int, seed: int, record_format: int = 2) -> None:
    rng = random.Random(seed)
    path.mkdir(parents=True)
    bench = SpeedToy(n=n)
    problems = bench.load("dev")
    info = {
        "format": 1,
        "run_id": path.name,
        "created": "2024-01-01T00:00:00Z",
        "git_revision": None,
        "benchmark": {"name": NAME, "split": "dev", "args": {"n": n}, "data_dir": None},
        "generator": {"name": "llm", "args": {}, "prompt_role": "direct"},
        "reformulator": "llm",
        "llm": {"name": "scripted", "model": f"model-{seed}"},
        "critics": bench.critic_names(),
        "critic_source": "reimplemented",
        "backprompt": {"name": "all", "args": {}},
        "budget": {"max_iterations": budget},
        "labels": {},
        "templates": {},
        "problem_ids": [p.id for p in problems],
    }
    import json

    (path / "run.json").write_text(json.dumps(info))
    finals: list[PlanJSON] = []
    p_fix = 0.15 + 0.05 * seed
    with (path / "records.jsonl").open("w") as out:
        for p in problems:
            ok = [rng.random() < 0.7 for _ in CRITICS]
            its: list[IterationRecord] = []
            best: PlanJSON = None
            best_count = -1
            for i in range(budget):
                plan = {"ok": list(ok)} if rng.random() > 0.05 else None
                if plan is None:
                    verdicts = [Verdict(critic="format", group="format", passed=False, feedback="no plan")]
                else:
                    verdicts = [Verdict(critic="format", group="format", passed=True)] + [
                        Verdict(critic=c, group=g, passed=v, feedback="" if v else f"{c} failed")
                        for (c, g), v in zip(CRITICS, ok, strict=True)
                    ]
                it = IterationRecord(index=i, plan=plan, verdicts=verdicts, backprompt="fix", usage=Usage(calls=2))
                its.append(it)
                if plan is not None and it.passed_count >= best_count:
                    best, best_count = plan, it.passed_count
                if it.all_accept:
                    break
                ok = [v or rng.random() < p_fix for v in ok]
            done = its[-1].all_accept
            finals.append(best)
            rec = ProblemResult(
                problem_id=p.id,
                benchmark=NAME,
                outcome=Outcome.CERTIFIED if done else Outcome.EXHAUSTED,
                stop_reason="all_passed" if done else "iterations",
                best_plan=best,
                iterations=its,
                usage=Usage(calls=2 * len(its)),
            )
            write_record(out, rec, record_format)
    ev = bench.evaluate(problems, finals)
    (path / "evaluation.json").write_text(json.dumps({"metrics": ev.metrics, "per_problem": ev.per_problem}))


def timed(fn: Any, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--problems", type=int, default=180)
    ap.add_argument("--budget", type=int, default=10)
    record_format_option(ap)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    for n in (180, 1000):
        macro = (rng.random(n) < 0.3).astype(float)
        den = rng.integers(1, 6, n).astype(float)
        num = np.minimum(den, rng.integers(0, 6, n)).astype(float)
        t_macro = timed(lambda m=macro: bootstrap_ratio(m, n_resamples=10_000))
        t_micro = timed(lambda a=num, b=den: bootstrap_ratio(a, b, n_resamples=10_000))
        print(
            f"bootstrap CI, 10,000 resamples, n={n}: macro {1000 * t_macro:.1f} ms, micro ratio {1000 * t_micro:.1f} ms"
        )
    a = (rng.random(1000) < 0.3).astype(float)
    b = (rng.random(1000) < 0.35).astype(float)
    print(f"paired test (McNemar + paired bootstrap 10,000), n=1000: {1000 * timed(lambda: paired_test(a, b)):.1f} ms")

    components.benchmarks.register(NAME, SpeedToy, replace=True)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "sweep"
            for i in range(args.runs):
                write_run(root / str(i), args.problems, args.budget, seed=i, record_format=args.record_format)
            size = sum(f.stat().st_size for f in root.rglob("records.jsonl"))
            times = []
            for _ in range(2):
                t0, c0 = time.perf_counter(), time.process_time()
                build_report([root], ReportOptions())
                times.append((time.perf_counter() - t0, time.process_time() - c0))
            print(
                f"report over {args.runs} runs x {args.problems} problems x <= {args.budget} iterations "
                f"({size / 1e6:.1f} MB of records, format {args.record_format}): "
                f"first {times[0][0]:.2f} s wall / {times[0][1]:.2f} s CPU; "
                f"again with cached budget curves {times[1][0]:.2f} s wall / {times[1][1]:.2f} s CPU"
            )
    finally:
        components.benchmarks.unregister(NAME)


if __name__ == "__main__":
    main()
