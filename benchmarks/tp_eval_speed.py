"""How fast is the TravelPlanner evaluator?

    python benchmarks/tp_eval_speed.py                    # partial flights table, then a 3.8M-row one
    python benchmarks/tp_eval_speed.py --rows 0           # partial table only
    python benchmarks/tp_eval_speed.py --json out.json

Evaluates the 180 plans of ``example_evaluation.jsonl`` (official mode: the 8 commonsense checks on
every delivered plan, the 5 hard ones behind the gate, the aggregation), first with the 3,179-row
partial flights table, then with a synthetic full-size one (benchmarks/tp_synthetic.py: the real rows
plus filler up to 3.8M, so every verdict is the same). Each pass opens a fresh store, so the first pass
pays every database lookup once (cold); the second pass reuses the in-process memo (warm). Store
building is not timed here (benchmarks/tp_store_scale.py measures it).

For comparison, the official scripts take about 38 ms per plan with the partial table and about
0.37 s per plan with the 3.8M-row table (pandas filters a whole DataFrame per lookup). Goal: at least
100 times faster, under 4 ms per plan with the full-size table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import finish
from tp_synthetic import REAL_ROWS, data_root, synthetic_flights

from critics.travelplanner.benchmark import TravelPlanner
from critics.travelplanner.evaluate import evaluate_plan, summarise
from critics.travelplanner.store import Sources, Store
from modulo import settings

OFFICIAL_MS = {"partial": 38.0, "full": 370.0}


def _passes(benchmark: TravelPlanner, flights: Path | None, cache: Path, repeats: int) -> dict[str, Any]:
    sources = Sources.from_database_dir(data_root() / "database", flights=flights)
    Store.open(sources, cache).close()  # build (untimed) if needed
    lines = [json.loads(x) for x in (data_root() / "example_evaluation.jsonl").read_text().splitlines() if x]
    problems = {p.metadata["idx"]: p for p in benchmark.load("validation")}
    queries = {idx: benchmark.query_of(p) for idx, p in problems.items()}
    out: dict[str, Any] = {}
    for run in range(repeats):
        store = Store.open(sources, cache)  # a fresh store: nothing memoised
        for label in ("cold", "warm"):
            wall, cpu = time.perf_counter(), time.process_time()
            evaluations = [
                evaluate_plan(queries[line["idx"]], line["plan"], store, id=str(line["idx"])) for line in lines
            ]
            metrics = summarise(evaluations, split="validation").metrics
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            key = f"{label}_ms_per_plan"
            best = out.get(key + "_wall")
            if best is None or wall / len(lines) * 1e3 < best:
                out[key + "_wall"] = wall / len(lines) * 1e3
                out[key + "_cpu"] = cpu / len(lines) * 1e3
                out[f"{label}_plans_per_second_wall"] = len(lines) / wall
            out["metrics"] = metrics
        store.close()
        del run
    out["flights_rows"] = Store.open(sources, cache).counts["flights"]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=REAL_ROWS, help="synthetic flights rows (0: skip)")
    parser.add_argument("--repeats", type=int, default=3, help="passes per table (the best is kept)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    benchmark = TravelPlanner()
    cache = settings.cache_dir()
    results: dict[str, Any] = {"load_average_1min": os.getloadavg()[0], "cpus": os.cpu_count()}
    results["partial"] = _passes(benchmark, None, cache, args.repeats)
    if args.rows:
        flights = synthetic_flights(args.rows)
        results["full"] = _passes(benchmark, flights, settings.cache_dir() / "travelplanner" / "scale", args.repeats)
        same = results["full"]["metrics"] == results["partial"]["metrics"]
        results["same_figures_with_full_table"] = same
    for table in ("partial", "full"):
        if table not in results:
            continue
        r = results[table]
        speedup = OFFICIAL_MS[table] / r["cold_ms_per_plan_wall"]
        r["speedup_vs_official_cold"] = speedup
        print(
            f"{table:>7} table ({r['flights_rows']:,} flights): cold {r['cold_ms_per_plan_wall']:.3f} ms/plan "
            f"({r['cold_plans_per_second_wall']:,.0f} plans/s; CPU {r['cold_ms_per_plan_cpu']:.3f} ms), "
            f"warm {r['warm_ms_per_plan_wall']:.3f} ms/plan ({r['warm_plans_per_second_wall']:,.0f} plans/s); "
            f"official ~{OFFICIAL_MS[table]:g} ms/plan -> {speedup:,.0f}x"
        )
    ok = True  # no target without the full-size table
    if "full" in results:
        ok = results["full"]["cold_ms_per_plan_wall"] < 4 and results["full"]["speedup_vs_official_cold"] >= 100
        print(f"{'met' if ok else 'MISSED'}: < 4 ms/plan and >= 100x with the full-size table")
        print(f"same six figures with the full-size table: {results['same_figures_with_full_table']}")
    print(f"(load average {results['load_average_1min']:.1f} on {results['cpus']} CPUs)")
    return finish(results, args.json, ok)


if __name__ == "__main__":
    raise SystemExit(main())
