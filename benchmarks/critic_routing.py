"""Critic routing: the CPU one iteration spends getting a plan to its critics and their verdicts back.

The TravelPlanner loop is built as ``benchmarks/iteration_cpu.py`` builds it (all 14 critics, strict),
then each bound critic is replaced by a stand-in with the same name, group, priority and declarations
(``inline``, ``heavy``) whose check returns a fixed, labelled verdict: what ``Metacontroller._critique``
then costs is the routing alone (the format gate, the executor's split, the plan's copy and the check
that each critic left it unchanged, deadlines, hand-offs to worker threads and back), not the critics'
own work. CPU of the whole process (every thread: a hand-off costs on both sides), per iteration, the
median of five rounds; steadier on a loaded machine than the whole loop's figures.

    python benchmarks/critic_routing.py                  # 20,000 iterations
    python benchmarks/critic_routing.py --no-inline      # metacontroller.inline_critics=false
    python benchmarks/critic_routing.py --heavy          # the 13 TravelPlanner critics in a worker process

With ``--heavy`` the 13 TravelPlanner critics run for real in one worker process (``metacontroller.heavy``,
started before the clock) on the plans ``loop_overhead.py --benchmark travelplanner`` sends: every
problem's 10 plans, problem after problem (each problem sent to the worker once, then named by its key;
each new verdict parsed, a repeated one named by its number). The figure is then the CPU of the event
loop's process alone per iteration: the request's encoding and send, the replies' reads and parsing, the
format critic (a stand-in) and the loop's bookkeeping; the critics' own work is the worker's, whose CPU per
plan is given too (read from /proc, Linux).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from modulo.build import build_session
from modulo.critic import Critic
from modulo.executor import FrozenPlan, ThreadExecutor
from modulo.types import PlanJSON, Problem, Verdict, canonical_json

sys.path.insert(0, str(Path(__file__).resolve().parent))
from iteration_cpu import config, wrong_plans  # the same loop and plans


def stand_in(critic: Critic) -> Critic:
    """A critic declared as ``critic`` is, whose check returns a fixed verdict labelled as its own."""
    verdict = Verdict(critic=critic.name, group=critic.group, passed=True)

    def check(self: Critic, problem: Problem, plan: PlanJSON) -> Verdict:
        return verdict

    attrs: dict[str, Any] = {
        "name": critic.name,
        "group": critic.group,
        "priority": critic.priority,
        "inline": getattr(critic, "inline", False),  # the bound instance's (format: its benchmark's say)
        "heavy": getattr(critic, "heavy", False),
        "check": check,
    }
    made: Critic = type(f"StandIn_{critic.name}", (Critic,), attrs)()
    return made


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iterations", type=int, default=20_000)
    ap.add_argument("--no-inline", action="store_true", help="every critic in the worker thread")
    ap.add_argument("--heavy", action="store_true", help="the TravelPlanner critics in a worker process")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.heavy:
        return heavy(args.json)

    script, _ = wrong_plans(1, 1)
    with tempfile.TemporaryDirectory(prefix="modulo-critic-routing-") as tmp:
        session = build_session(config(script, 1, 1, Path(tmp) / "run"))
    loop = session.loop
    if args.no_inline:
        loop.executor = ThreadExecutor(inline=False)
    loop.critics = [stand_in(c) for c in loop.critics]
    problem = next(p for p in loop.benchmark.load("validation") if p.id in script)
    view = problem.planner_view()
    text = canonical_json(json.loads(script[problem.id][0]))
    rounds = 5
    per_round = max(1, args.iterations // rounds)

    async def run() -> list[float]:
        for _ in range(200):  # warm: the routes remembered, the worker thread started
            await loop._critique(view, FrozenPlan(text), None)
        out = []
        for _ in range(rounds):
            t0 = time.process_time()
            for _ in range(per_round):
                verdicts, gated = await loop._critique(view, FrozenPlan(text), None)
            out.append((time.process_time() - t0) / per_round * 1e6)
        assert len(verdicts) == len(loop.critics) and not gated and all(v.passed for v in verdicts)
        return out

    try:
        samples = asyncio.run(run())
    finally:
        loop.executor.close()
    executor = loop.executor
    inline = [c.name for c in loop.critics if isinstance(executor, ThreadExecutor) and executor.runs_inline(c)]
    out = {
        "critics": len(loop.critics),
        "inline": inline,
        "iterations": per_round * rounds,
        "us_per_iteration_median": round(statistics.median(samples), 2),
        "us_per_iteration_min": round(min(samples), 2),
    }
    print(f"TravelPlanner's {out['critics']} critics as stand-ins, {out['iterations']:,} iterations")
    print(f"  on the event loop's thread: {', '.join(inline) or 'none'}")
    print(
        f"  routing CPU per iteration (whole process): {out['us_per_iteration_median']:.1f} us "
        f"(median of {rounds} rounds; least {out['us_per_iteration_min']:.1f} us)"
    )
    if args.json:
        print(json.dumps(out))
    return 0


def heavy(as_json: bool, budget: int = 10) -> int:
    """The routing of a plan's critics to a worker process and back: the event loop's process CPU per plan."""
    from critics.travelplanner.critics import ALL_CRITICS

    script, n = wrong_plans(None, budget)
    with tempfile.TemporaryDirectory(prefix="modulo-critic-routing-") as tmp:
        cfg = config(script, n, budget, Path(tmp) / "run")
        cfg.metacontroller.heavy = list(ALL_CRITICS)
        cfg.metacontroller.heavy_workers = 1
        session = build_session(cfg)
    loop = session.loop
    executor: Any = loop.executor
    loop.critics = [c if executor.aside(c) else stand_in(c) for c in loop.critics]
    problems = [p.planner_view() for p in loop.benchmark.load("validation") if p.id in script]
    plans = [(p, canonical_json(json.loads(reply))) for p in problems for reply in script[p.id]]

    async def run() -> tuple[float, float, float | None]:
        executor.warm(1)
        await loop._critique(problems[0], FrozenPlan(plans[0][1]), None)
        pids = [w.proc.pid for w in executor._pool._idle]  # the started worker (a benchmark may look inside)
        k0, t0, w0 = _cpu_of(pids), time.process_time(), time.perf_counter()
        for problem, text in plans:
            verdicts, gated = await loop._critique(problem, FrozenPlan(text), None)
            assert len(verdicts) == len(loop.critics) and not gated
            assert not any(v.error for v in verdicts), [v.error for v in verdicts if v.error]
        cpu, wall, k1 = time.process_time() - t0, time.perf_counter() - w0, _cpu_of(pids)
        worker = (k1 - k0) / len(plans) * 1e6 if k0 is not None and k1 is not None else None
        return cpu / len(plans) * 1e6, wall / len(plans) * 1e6, worker

    try:
        cpu, wall, worker = asyncio.run(run())
    finally:
        executor.close()
    out = {
        "plans": len(plans),
        "main_process_cpu_us_per_plan": round(cpu, 1),
        "worker_cpu_us_per_plan": round(worker, 1) if worker is not None else None,
        "wall_us_per_plan": round(wall, 1),
    }
    print(f"TravelPlanner's critics in one worker process, {len(plans):,} plans ({n} problems, {budget} each)")
    print(f"  the event loop's process CPU per plan: {cpu:.0f} us")
    if worker is not None:
        print(f"  the worker's CPU per plan (the critics and its side of the routing): {worker:.0f} us")
    print(f"  wall per plan (the worker's work in it): {wall:.0f} us")
    if as_json:
        print(json.dumps(out))
    return 0


def _cpu_of(pids: list[int]) -> float | None:
    """The CPU seconds the processes ``pids`` have used so far (Linux /proc; None where it cannot be read)."""
    import os

    total = 0.0
    try:
        for pid in pids:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
    except (OSError, ValueError, IndexError):
        return None
    return total


if __name__ == "__main__":
    sys.exit(main())
