"""How fast is the NATURAL PLAN evaluator? All 1,600 stored trip answers, official and valid scores.

    python benchmarks/np_eval_speed.py                 # 5 repeats, prints a table
    python benchmarks/np_eval_speed.py --repeats 3 --json np_eval_speed.json

Times, separately: loading the 1,600 problems (prompt parsing included), evaluating the stored texts
(parse + official score + format + 6 critics each), evaluating the gold plans as JSON (render + official +
critics), and the exhaustive search for every valid plan (how many instances have 1, 2, ... valid
plans). Also times the 100-instance meeting and calendar subsets. Needs $MODULO_DATA_DIR.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import Any

from critics.natural_plan.benchmark import CalendarScheduling, MeetingPlanning, NaturalPlanBenchmark, TripPlanning
from critics.natural_plan.common import read_instances
from critics.natural_plan.trip import solve_trip
from modulo.errors import DataError


def _time(fn: Callable[[], Any], repeats: int) -> tuple[list[float], Any]:
    out: Any = None
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return times, out


def _texts(bench: NaturalPlanBenchmark, split: str) -> dict[str, str]:
    return {k: str(v["pred_5shot_pro"]) for k, v in read_instances(bench.task, split).items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    args = parser.parse_args(argv)
    rows: list[dict[str, Any]] = []

    def record(label: str, n: int, times: list[float], extra: str = "") -> None:
        med = statistics.median(times)
        rows.append({"what": label, "n": n, "median_s": med, "min_s": min(times), "per_item_ms": 1000 * med / n})
        print(f"{label:<44}{n:>6}{med:>10.3f}s{min(times):>10.3f}s{1000 * med / n:>10.3f} ms  {extra}")

    try:
        trip = TripPlanning()
        print(f"{'':<44}{'n':>6}{'median':>11}{'min':>11}{'per item':>13}")
        times, problems = _time(lambda: trip.load("full"), args.repeats)
        record("trip: load full (parse 1600 prompts)", len(problems), times)
        texts = _texts(trip, "full")
        answers = [texts[p.id] for p in problems]
        times, result = _time(lambda: trip.evaluate(problems, answers), args.repeats)
        official = sum(r["official"] for r in result.per_problem)
        valid = sum(r["valid"] for r in result.per_problem)
        record("trip: evaluate 1600 stored texts", len(problems), times, f"official {official}, valid {valid}")
        golds = [p.metadata["gold_plan"] for p in problems]
        times, result = _time(lambda: trip.evaluate(problems, golds), args.repeats)
        record("trip: evaluate 1600 gold plans (JSON)", len(problems), times)
        times, counts = _time(lambda: Counter(len(solve_trip(p.constraints, limit=10)) for p in problems), 1)
        spread = ", ".join(f"{k} plan(s): {v}" for k, v in sorted(counts.items()))
        record("trip: search all plans (up to 10)", len(problems), times, spread)
        for bench in (MeetingPlanning(), CalendarScheduling()):
            subset = bench.load("subset100")
            stored = _texts(bench, "subset100")
            answers = [stored[p.id] for p in subset]
            times, result = _time(partial(bench.evaluate, subset, answers), args.repeats)
            official = sum(r["official"] for r in result.per_problem)
            valid = sum(r["valid"] for r in result.per_problem)
            scores = f"official {official}, valid {valid}"
            record(f"{bench.task}: evaluate 100 stored texts", len(subset), times, scores)
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"repeats": args.repeats, "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
