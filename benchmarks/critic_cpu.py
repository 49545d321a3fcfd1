"""The TravelPlanner critics' CPU per iteration, by themselves, steady enough to compare two checkouts on a
loaded machine.

The same calls ``iteration_cpu.py`` times (the executor's ``call_on_copy``: the format critic, then the 13
strict critics on one copy of the plan, as a batch runs them), on the same kind of plans (each problem's
greedy plan, one breakfast changed per iteration, ``iteration_cpu.wrong_plans``), without the loop around
them: each problem's plans in order, ``--repeat`` passes over the same plans, the critics' memos (per day,
by fields) emptied before each pass. Per plan the least CPU (thread time) over the passes counts: that
drops the time other work on the machine took from this process, and the first pass's loading of the rows
of the database (a run pays it once per city; passes after the first find them loaded). The figure is thus
lower than ``iteration_cpu.py``'s, which includes the loading, the garbage collections the loop's own
objects cause, and a cache shared with the loop; use it to compare changes to the critics, and
``iteration_cpu.py`` for the issue's target.

    python benchmarks/critic_cpu.py --limit 180        # PYTHONPATH=/other/checkout measures that checkout
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from iteration_cpu import wrong_plans

from critics.travelplanner.benchmark import TravelPlanner
from critics.travelplanner.critics import ALL_CRITICS
from modulo.binding import bind_critics
from modulo.executor import FrozenPlan, call_on_copy


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=180, help="validation problems (of 180)")
    ap.add_argument("--budget", type=int, default=10, help="plans per problem")
    ap.add_argument("--repeat", type=int, default=7, help="passes over the same plans")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    bench = TravelPlanner()
    problems = {p.id: p for p in bench.load("validation")[: args.limit]}
    critics = bind_critics(["format", *ALL_CRITICS], bench, {"mode": "strict"})
    stages = (critics[:1], critics[1:])  # the format critic gates the others, as in the loop
    script, _ = wrong_plans(args.limit, args.budget, offset=args.budget)
    plans = [(pid, bench.validate_plan(json.loads(reply))) for pid, replies in script.items() for reply in replies]
    best: list[float] = [float("inf")] * len(plans)
    per_critic: list[dict[str, float]] = [{} for _ in plans]
    for _ in range(args.repeat):
        for name in ("day_memo", "field_memo"):  # what the critics keep between plans (where the checkout has it)
            memo = getattr(bench.store, name, None)
            if memo is not None:
                memo.clear()
        for n, (pid, plan) in enumerate(plans):
            problem = problems[pid]
            frozen = FrozenPlan.of(plan)
            spent: dict[str, float] = {}
            for stage in stages:
                copy = frozen.copy()
                outcomes: list[Any] = []
                for critic in stage:
                    t0 = time.thread_time()
                    outcome, copy = call_on_copy(critic, problem, frozen, copy)
                    spent[critic.name] = time.thread_time() - t0
                    outcomes.append(outcome)
                if not all(getattr(o, "accepts", False) for o in outcomes):
                    break
            total = sum(spent.values())
            if total < best[n]:
                best[n], per_critic[n] = total, spent
    iterations = len(plans)
    by_critic: dict[str, float] = {}
    for spent in per_critic:
        for name, seconds in spent.items():
            by_critic[name] = by_critic.get(name, 0.0) + seconds
    out = {
        "problems": len(problems),
        "iterations": iterations,
        "repeat": args.repeat,
        "critics_ms_per_iteration": round(sum(best) * 1000 / iterations, 4),
        "us_per_iteration_by_critic": {
            k: round(v * 1e6 / iterations, 1) for k, v in sorted(by_critic.items(), key=lambda kv: -kv[1])
        },
    }
    print(
        f"{out['problems']} TravelPlanner validation problems, {args.budget} plans each, strict critics: "
        f"{out['critics_ms_per_iteration']:.3f} ms of CPU per iteration in the critics "
        f"(per plan the least over {args.repeat} passes)"
    )
    for name, us in out["us_per_iteration_by_critic"].items():
        print(f"  {name:<32} {us:7.1f} us")
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
